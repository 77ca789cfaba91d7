"""A Llama-style decoder built from the course's parts: RMSNorm, grouped-query attention
with rotary positions, a SwiGLU MLP; a sliding-window cache with attention sinks.

Shape legend: ``B`` batch, ``T`` positions, ``Q`` queries, ``K`` keys/values, ``E``
model width, ``H`` query heads, ``Hkv`` key/value heads, ``d = E / H`` head width,
``F`` MLP width, ``V`` vocabulary, ``L`` layers, ``W`` window, ``S`` sink tokens.
``P`` padding slots of each row of a left-padded batch (``(B,)``).

The model computes what transformers' ``LlamaForCausalLM`` and ``MistralForCausalLM``
compute (5.23), including their float32 steps: RMSNorm normalises in float32 and the
RoPE angles are float32, whatever the model's dtype. Which keys a query sees is decided
from absolute positions only: key ``j`` is visible to query ``i`` when ``j <= i`` and,
with a window ``W``, ``j > i - W`` (Mistral's rule: ``W`` keys, itself included), or
``j < S`` (the first ``S`` tokens kept as attention sinks, StreamingLLM). So one full
forward pass, chunked prefill and cached decoding share one mask rule.

A batch of prompts of different lengths is left-padded, as transformers does it: an
``attention_mask (B, K)`` (1 = real token, 0 = padding) whose zeros all come first in a
row. Row ``b``'s ``P_b`` padding slots are never seen as keys, its real tokens are at
positions ``0, 1, ...`` (``position_ids = cumsum(mask) - 1``), and its sinks are its
first ``S`` real tokens; the rule above, on the slots of the padded rows, does the rest
(the window and causality are the same on slots and positions: a row's padding shifts
all its tokens equally).
"""

from __future__ import annotations

import copy
import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import check_count, check_size, shape_or_type
from .cache import KVCache
from .multihead import GroupedQueryAttention
from .rotary import LAYOUTS, RotaryEmbedding, apply_rope

__all__ = [
    "LlamaConfig",
    "RMSNorm",
    "SwiGLU",
    "RotaryAttention",
    "WindowKVCache",
    "LlamaBlock",
    "LlamaModel",
    "visible_keys",
]


# LlamaConfig's fields under transformers' names (the rest -- rope_theta and
# rope_scaling in rope_parameters, tie_embeddings, sliding_window -- need more
# than a name)
HF_NAMES = {
    "vocab_size": "vocab_size",
    "num_hiddens": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "num_kv_heads": "num_key_value_heads",
    "ffn_hiddens": "intermediate_size",
    "rms_eps": "rms_norm_eps",
}


@dataclasses.dataclass
class LlamaConfig:
    """The numbers that define a Llama-style model (transformers' names in brackets).

    ``vocab_size`` V (vocab_size), ``num_hiddens`` E (hidden_size), ``num_layers`` L
    (num_hidden_layers), ``num_heads`` H (num_attention_heads), ``num_kv_heads`` Hkv
    (num_key_value_heads), ``ffn_hiddens`` F (intermediate_size), ``rope_theta``
    (rope_parameters["rope_theta"]), ``rope_scaling`` (the rest of rope_parameters, or
    None), ``rms_eps`` (rms_norm_eps), ``tie_embeddings`` (tie_word_embeddings),
    ``sliding_window`` W or None (Mistral), ``num_sinks`` S (0: none),
    ``rope_layout`` "half" (transformers) or "interleaved" (GGUF files).
    """

    vocab_size: int
    num_hiddens: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    ffn_hiddens: int
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    rms_eps: float = 1e-6
    tie_embeddings: bool = False
    sliding_window: int | None = None
    num_sinks: int = 0
    rope_layout: str = "half"

    def __post_init__(self):
        check_size(
            "LlamaConfig",
            **{
                name: getattr(self, name)
                for name in (
                    "vocab_size",
                    "num_hiddens",
                    "num_layers",
                    "num_heads",
                    "num_kv_heads",
                    "ffn_hiddens",
                )
            },
        )
        if (
            self.num_hiddens % self.num_heads
            or (self.num_hiddens // self.num_heads) % 2
        ):
            raise ValueError(
                "LlamaConfig: expected num_heads to divide num_hiddens into an even "
                "head "
                f"width, got num_hiddens={self.num_hiddens}, num_heads={self.num_heads}"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                "LlamaConfig: expected num_kv_heads to divide num_heads, got "
                f"num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}"
            )
        _check_window(self.sliding_window, self.num_sinks)
        if self.rope_layout not in LAYOUTS:
            raise ValueError(
                "LlamaConfig: expected rope_layout 'half' or 'interleaved', got "
                f"{self.rope_layout!r}"
            )

    @property
    def head_dim(self) -> int:
        return self.num_hiddens // self.num_heads

    def to_hf(self, **extra):
        """The same model as a transformers config (5.x): a ``LlamaConfig``, or a
        ``MistralConfig`` with a sliding window; the inverse of
        :meth:`~attention_lib.LlamaModel.config_from_hf`. ``extra``: transformers' own
        keys (e.g. ``max_position_embeddings``). transformers rotates in the "half"
        layout, so an "interleaved" model's q/k rows are permuted when its weights are
        copied across (:func:`~attention_lib.rope_layout_permutation`); it has no
        attention sinks."""
        import transformers

        if self.num_sinks:
            raise ValueError(
                "to_hf: transformers' Llama and Mistral have no attention sinks, got "
                f"num_sinks={self.num_sinks}"
            )
        rope = dict(self.rope_scaling or {"rope_type": "default"})
        rope["rope_theta"] = self.rope_theta
        keys = {theirs: getattr(self, ours) for ours, theirs in HF_NAMES.items()}
        keys.update(rope_parameters=rope, tie_word_embeddings=self.tie_embeddings)
        if self.sliding_window is None:
            return transformers.LlamaConfig(**keys, **extra)
        return transformers.MistralConfig(
            **keys, sliding_window=self.sliding_window, **extra
        )


def _check_window(window, sinks) -> None:
    if window is not None:
        check_size("sliding window", sliding_window=window)
    check_count("attention sinks", num_sinks=sinks)


def visible_keys(
    query_positions: torch.Tensor,
    key_positions: torch.Tensor,
    window: int | None = None,
    sinks: int = 0,
    padding: torch.Tensor | None = None,
) -> torch.Tensor:
    """Keep-mask ``(Q, K)``: key at ``j`` visible to the query at ``i`` when ``j <= i``
    and (no window, or ``j > i - W``, or ``j < S``).

    With ``window=W`` a query sees ``W`` keys, itself included (Mistral, transformers
    5.23); ``sinks=S`` keeps the first ``S`` positions visible to every later query
    (StreamingLLM's attention sinks).

    ``padding (B,)``: a left-padded batch, whose row ``b`` holds padding in its first
    ``P_b`` slots (``i``, ``j`` are then slots of the padded rows) -> ``(B, Q, K)``:
    the rule above, no padding key visible (``j >= P_b``), and the sinks are the row's
    first ``S`` real tokens (``j < P_b + S``). A padding query sees itself only (its
    output is never used, but a row of nothing but masked keys would make NaNs).
    """
    _check_window(window, sinks)
    i = query_positions[:, None]  # (Q, 1)
    j = key_positions[None, :]  # (1, K)
    keep = j <= i  # (Q, K)
    if padding is None:
        if window is not None:
            keep = keep & ((j > i - window) | (j < sinks))
        return keep
    p = padding[:, None, None]  # (B, 1, 1)
    keep = keep & (j >= p)  # (B, Q, K)
    if window is not None:
        keep = keep & ((j > i - window) | (j < p + sinks))
    return keep | ((i < p) & (j == i))  # (B, Q, K)


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last dimension ``E``.

    Like transformers, the normalisation runs in float32 and is cast back to ``x``'s
    dtype before the gain multiplies it (``float32_norm=False``: all in ``x``'s dtype).
    """

    def __init__(self, num_hiddens: int, eps: float = 1e-6, float32_norm: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num_hiddens))  # (E,)
        self.eps, self.float32_norm = eps, float32_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x (..., E)`` -> ``(..., E)``."""
        h = x.float() if self.float32_norm else x
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class SwiGLU(nn.Module):
    """The gated MLP of Llama: ``down(silu(gate(x)) * up(x))``, ``E -> F -> E``."""

    def __init__(self, num_hiddens: int, ffn_hiddens: int):
        super().__init__()
        self.gate = nn.Linear(num_hiddens, ffn_hiddens, bias=False)
        self.up = nn.Linear(num_hiddens, ffn_hiddens, bias=False)
        self.down = nn.Linear(ffn_hiddens, num_hiddens, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, E)`` -> ``(B, T, E)``."""
        return self.down(F.silu(self.gate(x)) * self.up(x))


class WindowKVCache:
    """The cache of one layer under a sliding window ``W`` with ``S`` attention sinks.

    Keys are cached already rotated to their absolute positions, so which positions
    are kept is all that matters: after each call it keeps the first ``S`` positions
    and the last ``W - 1`` (all the next query can see), never more than ``S + W - 1``
    (transformers keeps the same ``W - 1`` for Mistral).

    ``update(keys (B, Hkv, n, d), values (B, Hkv, n, dv), padding=None)`` ->
    ``(keys, values, positions)``: everything this call's queries may need (the kept
    positions and the new ones) with their positions ``(K,)``. Keys and values of
    another batch size, head count, width, dtype or device than those cached raise
    ``ValueError`` and leave the cache as it was. ``padding (B,)``: the left-padding
    slots ``P`` of each row (:class:`LlamaModel` passes them for an
    ``attention_mask``); a row's sinks are then its first ``S`` real tokens, so the
    first ``max(P) + S`` slots are kept (a row's extra slots are masked by
    :func:`visible_keys`).
    """

    def __init__(self, window: int, sinks: int = 0):
        if window is None:
            raise ValueError(
                "WindowKVCache: expected a window (a positive int), got None"
            )
        _check_window(window, sinks)
        self.window, self.sinks = window, sinks
        self.keys = self.values = self.positions = None
        self._length = 0  # positions seen so far (the next one is at _length)

    def __len__(self) -> int:
        """Positions seen so far (not all of them are kept)."""
        return self._length

    def __repr__(self) -> str:
        kept = 0 if self.positions is None else len(self.positions)
        return (
            f"WindowKVCache(window={self.window}, sinks={self.sinks}, "
            f"seen={self._length}, kept={kept})"
        )

    def update(self, keys: torch.Tensor, values: torch.Tensor, padding=None):
        if not (
            isinstance(keys, torch.Tensor)
            and keys.dim() == 4
            and isinstance(values, torch.Tensor)
            and values.dim() == 4
        ):
            raise ValueError(
                "WindowKVCache.update: expected keys (B, Hkv, n, d) and values (B, "
                "Hkv, n, dv)"
            )
        if keys.shape[:3] != values.shape[:3]:
            raise ValueError(
                f"keys and values must share (B, Hkv, n): got {tuple(keys.shape)} and "
                f"{tuple(values.shape)}"
            )
        if self.keys is not None and (
            keys.shape[:2] != self.keys.shape[:2]
            or keys.shape[3] != self.keys.shape[3]
            or values.shape[3] != self.values.shape[3]
        ):
            raise ValueError(
                "WindowKVCache.update: expected keys (B, Hkv, n, d) = "
                f"{tuple(self.keys.shape[:2])} + (n, {self.keys.shape[3]}) and values "
                f"(.., {self.values.shape[3]}), got {tuple(keys.shape)} and "
                f"{tuple(values.shape)} (one cache per layer and batch)"
            )
        for name, new, held in (
            ("keys", keys, self.keys),
            ("values", values, self.values),
        ):
            if held is not None and (
                new.dtype != held.dtype or new.device != held.device
            ):
                raise ValueError(
                    f"WindowKVCache.update: expected {name} of dtype {held.dtype} on "
                    f"{held.device}, got {new.dtype} on {new.device}"
                )
        sinks = self.sinks
        if padding is not None and sinks:  # each row's first S real tokens
            sinks += int(padding.max())
        n = keys.shape[2]
        new_pos = torch.arange(self._length, self._length + n, device=keys.device)
        if self.keys is None:
            k, v, pos = keys, values, new_pos
        else:
            k = torch.cat([self.keys, keys], 2)  # (B, Hkv, kept + n, d)
            v = torch.cat([self.values, values], 2)
            pos = torch.cat([self.positions, new_pos])  # (kept + n,)
        self._length += n
        # the next query (at _length) sees j > _length - W, and the sinks
        keep = (pos > self._length - self.window) | (pos < sinks)
        self.keys, self.values, self.positions = k[:, :, keep], v[:, :, keep], pos[keep]
        return k, v, pos


class RotaryAttention(GroupedQueryAttention):
    """:class:`~attention_lib.GroupedQueryAttention` with rotary positions and a
    position-based mask (causal, optionally a window ``W`` and ``S`` sinks).

    The projections are the parent's ``W_q, W_k, W_v, W_o`` (no biases). Queries and
    keys are rotated at their absolute positions before attention; the cache holds
    rotated keys, so a decode step rotates only the new query and key.

    ``forward(x (B, T, E), kv_cache=None, need_weights=False, cos_sin=None,
    padding=None)`` -> ``(B, T, E)``. The positions of ``x`` start at ``len(kv_cache)``
    (0 without a cache); ``padding (B,)``: a left-padded batch (see
    :func:`visible_keys`), whose queries and keys then have a ``(B, T, K)`` mask.
    With ``need_weights=True`` the weights ``(B, H, T, K)`` are computed step by step
    (softmax in float32, as transformers' eager path) and kept in
    ``.attention_weights``; otherwise one SDPA call (with padding: one call with the
    ``(B, T, K)`` mask). A first chunk that is plainly
    causal (positions ``0 .. T - 1``, no window that hides a key) goes to SDPA's own
    causal kernel with ``enable_gqa``. Every other call (a decode step, a chunk after
    a cache, a window that hides keys) stacks each group's ``g`` query heads as
    ``g * T`` rows of one query, so the ``Hkv`` key/value heads are read once and
    never repeated.
    """

    def __init__(
        self,
        num_hiddens: int,
        num_heads: int,
        num_kv_heads: int,
        rope: RotaryEmbedding,
        window: int | None = None,
        sinks: int = 0,
    ):
        super().__init__(num_hiddens, num_heads, num_kv_heads, bias=False)
        if rope.dim != self.head_dim:
            raise ValueError(
                "RotaryAttention: expected a RotaryEmbedding of width "
                f"d={self.head_dim}, got {rope.dim}"
            )
        _check_window(window, sinks)
        self.rope, self.window, self.sinks = rope, window, sinks

    def forward(
        self, x, kv_cache=None, need_weights: bool = False, cos_sin=None, padding=None
    ):
        """``x (B, T, E)`` -> ``(B, T, E)`` (see the class docstring).

        ``cos_sin``: the rotation's ``(cos, sin)`` at this call's positions, each
        ``(T, d/2)`` or, one row per sequence, ``(B, T, d/2)``, when the caller computed
        them once for every layer (:class:`LlamaModel` does); None: computed here (with
        ``padding``, row ``b``'s slot ``t`` at position ``t - P_b``).
        ``padding``: ``(B,)`` integer tensor, the padding slots ``P`` at the start of
        each row, or None (no padding).
        """
        if (
            not isinstance(x, torch.Tensor)
            or x.dim() != 3
            or x.shape[-1] != self.num_hiddens
        ):
            shape = shape_or_type(x)
            raise ValueError(
                f"x: expected (B, T, E) with E={self.num_hiddens}, got {shape}"
            )
        if kv_cache is not None and not isinstance(kv_cache, (KVCache, WindowKVCache)):
            raise ValueError(
                "kv_cache: expected a KVCache, a WindowKVCache or None, got "
                f"{type(kv_cache).__name__}"
            )
        H, Hkv, d = self.num_heads, self.num_kv_heads, self.head_dim
        B, T, E = x.shape
        if padding is not None and (
            not isinstance(padding, torch.Tensor)
            or padding.shape != (B,)
            or padding.is_floating_point()
            or padding.is_complex()
        ):
            shape = shape_or_type(padding)
            raise ValueError(
                f"padding: expected an integer tensor (B,) with B={B}, got {shape}"
            )
        start = 0 if kv_cache is None else len(kv_cache)
        positions = torch.arange(start, start + T, device=x.device)  # (T,)
        q = self.W_q(x).view(B, T, H, d).transpose(1, 2)  # (B, H, T, d)
        k = self.W_k(x).view(B, T, Hkv, d).transpose(1, 2)  # (B, Hkv, T, d)
        v = self.W_v(x).view(B, T, Hkv, d).transpose(1, 2)  # (B, Hkv, T, d)
        if cos_sin is None:
            rope_positions = (
                positions
                if padding is None
                else (positions - padding[:, None]).clamp(min=0)  # (B, T)
            )
            cos_sin = self.rope.cos_sin(rope_positions, x.dtype)  # (.., T, d/2) each
        cos, sin = cos_sin
        q = _rotate(self.rope, q, cos, sin)
        k = _rotate(self.rope, k, cos, sin)
        if kv_cache is None:
            key_positions = positions
        elif isinstance(kv_cache, WindowKVCache):
            # (B, Hkv, K, d), (K,)
            k, v, key_positions = kv_cache.update(k, v, padding)
        else:
            k, v = kv_cache.update(k, v)  # (B, Hkv, start + T, d)
            key_positions = None  # 0 .. start + T - 1, built only if needed
        if padding is not None:  # a left-padded batch: one mask per row
            if key_positions is None:
                key_positions = torch.arange(start + T, device=x.device)
            keep = visible_keys(
                positions, key_positions, self.window, self.sinks, padding
            )  # (B, T, K)
            if need_weights:
                out = self._readable(q, k, v, keep[:, None])  # (B, H, T, d)
            else:
                self.attention_weights = None
                out = self._padded(q, k, v, keep)  # (B, H, T, d)
        elif need_weights:
            if key_positions is None:
                key_positions = torch.arange(start + T, device=x.device)
            keep = visible_keys(positions, key_positions, self.window, self.sinks)
            out = self._readable(q, k, v, keep)  # (B, H, T, d)
        else:
            self.attention_weights = None
            out = self._fused(q, k, v, positions, key_positions, start)  # (B, H, T, d)
        out = out.transpose(1, 2).reshape(B, T, E)  # (B, T, H, d) -> (B, T, E)
        return self.W_o(out)

    def _readable(self, q, k, v, keep):
        g = self.num_heads // self.num_kv_heads
        k = k.repeat_interleave(g, dim=1)  # (B, H, K, d): head h uses kv head h // g
        v = v.repeat_interleave(g, dim=1)
        scores = q @ k.transpose(-2, -1) * self.head_dim**-0.5  # (B, H, T, K)
        scores = scores.masked_fill(~keep, float("-inf"))
        weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        self.attention_weights = weights.detach()  # (B, H, T, K)
        return weights @ v  # (B, H, T, d)

    def _padded(self, q, k, v, keep):
        """One SDPA call with a per-row keep-mask ``keep (B, T, K)``, the ``g``
        query heads of a group stacked as ``g * T`` rows (as :meth:`_fused`)."""
        B, H, T, d = q.shape
        Hkv = self.num_kv_heads
        g = H // Hkv
        mask = keep.repeat(1, g, 1)[:, None]  # (B, 1, g * T, K)
        q = q.reshape(B, Hkv, g * T, d)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=d**-0.5)
        return out.reshape(B, H, T, d)  # (B, Hkv, g * T, d) -> (B, H, T, d)

    def _fused(self, q, k, v, positions, key_positions, start):
        """One SDPA call. Without a window, the mask is not built where the rule needs
        none: one query sees every key (a decode step), and a first chunk (positions
        ``0 .. T - 1`` against themselves) is plain causal. Otherwise the
        :func:`visible_keys` mask, repeated for the ``g`` stacked heads."""
        B, H, T, d = q.shape
        Hkv = self.num_kv_heads
        g = H // Hkv
        K = k.shape[2]
        plain = self.window is None or (
            key_positions is not None and K <= self.window  # the window hides nothing
        )
        if plain and start == 0 and T == K and T > 1:  # causal over 0 .. T - 1
            return F.scaled_dot_product_attention(
                q, k, v, is_causal=True, scale=d**-0.5, enable_gqa=g > 1
            )  # (B, H, T, d)
        if plain and T == 1:  # the newest position sees every key
            mask = None
        else:
            if key_positions is None:
                key_positions = torch.arange(K, device=q.device)
            keep = visible_keys(positions, key_positions, self.window, self.sinks)
            mask = None if bool(keep.all()) else keep.repeat(g, 1)  # (g * T, K)
        q = q.reshape(B, Hkv, g * T, d)  # the g heads of a group as g * T rows
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=d**-0.5)
        # (B, Hkv, g * T, d) -> (B, H, T, d); a copy where SDPA returned another
        # layout (CUDA), a view otherwise
        return out.reshape(B, H, T, d)


def _rotate(rope, x, cos, sin):
    return apply_rope(x, cos, sin, rope.layout)


# the dtypes an attention_mask may have (transformers passes long, bool or float masks)
_MASK_DTYPES = (
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
)


def _padding_and_positions(
    attention_mask, position_ids, B, start, T, device, empty_rows=False
):
    """Check a left-padding ``attention_mask (B, start + T)`` and ``position_ids (B,
    T)`` (either may be None) -> ``(padding (B,) or None, position_ids (B, T) or
    None)``; ``padding`` is the count of leading zeros of each row, None when the
    mask has none (then the unpadded paths run). ``empty_rows``: a row may be all
    padding so far (a chunk of a cached prefill; its real tokens come later)."""
    padding = None
    if attention_mask is not None:
        if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != (
            B,
            start + T,
        ):
            shape = shape_or_type(attention_mask)
            raise ValueError(
                f"attention_mask: expected shape (B, K) = ({B}, {start + T}) (the "
                f"{start} cached positions and this call's {T}), got {shape}"
            )
        if (
            attention_mask.dtype not in _MASK_DTYPES
            or attention_mask.layout != torch.strided
        ):
            raise ValueError(
                "attention_mask: expected a dense integer, bool or float tensor of 1 "
                "(real token) and 0 (padding), got dtype "
                f"{attention_mask.dtype}, layout {attention_mask.layout}"
            )
        wrong = ~((attention_mask == 0) | (attention_mask == 1))  # NaN is wrong too
        if bool(wrong.any()):
            values = attention_mask[wrong].unique()[:6].tolist()
            raise ValueError(
                "attention_mask: expected 1 (real token) or 0 (padding) everywhere, "
                f"got values {values}"
            )
        real = attention_mask.to(device=device, dtype=torch.long)  # (B, K) of 0/1
        if bool((real[:, 1:] < real[:, :-1]).any()):
            row = int((real[:, 1:] < real[:, :-1]).any(1).nonzero()[0, 0])
            raise ValueError(
                "attention_mask: expected left padding (each row's zeros before its "
                f"ones), got row {row} = {real[row].tolist()} (right padding or a "
                "hole)"
            )
        if not empty_rows and not bool(real[:, -1].all()):
            row = int((real[:, -1] == 0).nonzero()[0, 0])
            raise ValueError(
                f"attention_mask: expected at least one real token in every row, got "
                f"row {row} all padding (with kv_caches, a chunk may be all padding "
                "for a row whose real tokens come in a later chunk)"
            )
        pads = (real.shape[1] - real.sum(1)).to(device)  # (B,)
        if bool(pads.any()):
            padding = pads
            if position_ids is None:
                # transformers' generate: cumsum(mask) - 1, 0 at padding
                position_ids = (real.cumsum(1) - 1).clamp(min=0)[:, start:]  # (B, T)
    if position_ids is not None and (
        not isinstance(position_ids, torch.Tensor)
        or position_ids.shape != (B, T)
        or position_ids.is_floating_point()
        or position_ids.is_complex()
        or position_ids.dtype == torch.bool
    ):
        shape = (
            f"{position_ids.dtype} {tuple(position_ids.shape)}"
            if isinstance(position_ids, torch.Tensor)
            else type(position_ids).__name__
        )
        raise ValueError(
            f"position_ids: expected an integer tensor (B, T) = ({B}, {T}), got {shape}"
        )
    return padding, position_ids


class LlamaBlock(nn.Module):
    """Pre-norm decoder block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, config: LlamaConfig, rope: RotaryEmbedding):
        super().__init__()
        c = config
        self.attention_norm = RMSNorm(c.num_hiddens, c.rms_eps)
        self.attention = RotaryAttention(
            c.num_hiddens,
            c.num_heads,
            c.num_kv_heads,
            rope,
            c.sliding_window,
            c.num_sinks,
        )
        self.mlp_norm = RMSNorm(c.num_hiddens, c.rms_eps)
        self.mlp = SwiGLU(c.num_hiddens, c.ffn_hiddens)

    def forward(
        self, x, kv_cache=None, need_weights: bool = False, cos_sin=None, padding=None
    ):
        """``(B, T, E)`` -> ``(B, T, E)`` (``cos_sin``, ``padding``: see
        :meth:`RotaryAttention.forward`)."""
        h = self.attention(
            self.attention_norm(x), kv_cache, need_weights, cos_sin, padding
        )
        x = x + h
        return x + self.mlp(self.mlp_norm(x))


class LlamaModel(nn.Module):
    """A Llama-style decoder-only language model (Mistral's with a window).

    ``forward(tokens (B, T), kv_caches=None, need_weights=False, last_only=False,
    attention_mask=None, position_ids=None)`` -> logits ``(B, T, V)`` (``(B, 1, V)``,
    the last position's, with ``last_only=True``); with ``kv_caches`` (one per layer,
    from :meth:`new_caches`) the tokens continue what the caches hold. ``generate``
    decodes greedily.

    Prompts of different lengths run as one left-padded batch, with transformers' names
    and meaning: ``attention_mask (B, K)``, 1 = real token, 0 = padding, for every slot
    the keys will cover (``K = len(cache) + T``: the cached slots, then this call's),
    its zeros first in each row; ``position_ids (B, T)`` default to ``cumsum(mask) -
    1`` (0 at padding), as transformers' ``generate`` computes them. The logits at
    real tokens are then those of each prompt run alone; at padding they mean nothing.
    A cached prefill may be cut into chunks anywhere, even where a chunk is all
    padding for a row. ``generate(prompt, n, attention_mask=mask)`` extends the mask
    by itself; with ``eos_id`` a finished row emits ``pad_id``, as transformers'.

    The model keeps its own copy of the config (``model.config``), which
    :meth:`set_window` and :func:`~attention_lib.convert_to_gqa` keep up to date.

    Weights: :meth:`load_hf_state_dict` (a transformers ``LlamaForCausalLM`` /
    ``MistralForCausalLM`` state dict) or :meth:`attention_lib.GGUFFile.model`.
    """

    def __init__(self, config: LlamaConfig):
        super().__init__()
        if not isinstance(config, LlamaConfig):
            raise ValueError(
                f"LlamaModel: expected a LlamaConfig, got {type(config).__name__}"
            )
        # its own copy: set_window must not change another model built from `config`
        self.config = c = copy.deepcopy(config)
        self.rope = RotaryEmbedding(
            c.head_dim, c.rope_theta, c.rope_scaling, c.rope_layout
        )
        self.embedding = nn.Embedding(c.vocab_size, c.num_hiddens)
        self.blocks = nn.ModuleList(
            LlamaBlock(c, self.rope) for _ in range(c.num_layers)
        )
        self.norm = RMSNorm(c.num_hiddens, c.rms_eps)
        self.lm_head = (
            None
            if c.tie_embeddings
            else nn.Linear(c.num_hiddens, c.vocab_size, bias=False)
        )

    def new_caches(self, window: int | None = None, sinks: int | None = None) -> list:
        """One empty cache per layer: a :class:`~attention_lib.KVCache` (all positions)
        or, when the model has a window, a :class:`WindowKVCache` of that window.

        ``window``, ``sinks``: if given, they must be the model's own (what its
        attention applies); a cache that evicts keys the attention still reads would
        give other logits than the full pass, so another window raises ``ValueError``:
        call :meth:`set_window` first."""
        c = self.config
        for name, want, got in (
            ("window", c.sliding_window, window),
            ("sinks", c.num_sinks, sinks),
        ):
            if got is not None and got != want:
                raise ValueError(
                    f"new_caches: expected {name}={want} (the model attends with "
                    f"window={c.sliding_window}, sinks={c.num_sinks}), got "
                    f"{name}={got}; call set_window(window, sinks) first to change "
                    "what the attention applies"
                )
        if c.sliding_window is None:
            return [KVCache() for _ in self.blocks]
        return [WindowKVCache(c.sliding_window, c.num_sinks) for _ in self.blocks]

    def set_window(self, window: int | None, sinks: int = 0) -> None:
        """Use a sliding window ``W`` (None: none) and ``S`` sinks in every layer;
        ``model.config`` (the model's own copy) says so afterwards."""
        _check_window(window, sinks)
        self.config = dataclasses.replace(
            self.config, sliding_window=window, num_sinks=sinks
        )
        for block in self.blocks:
            block.attention.window, block.attention.sinks = window, sinks

    def _gqa_converted(self) -> None:
        """Called by :func:`~attention_lib.convert_to_gqa` on the converted copy: the
        config follows the layers' new ``Hkv``."""
        (kv_heads,) = {block.attention.num_kv_heads for block in self.blocks}
        self.config = dataclasses.replace(self.config, num_kv_heads=kv_heads)

    def forward(
        self,
        tokens,
        kv_caches=None,
        need_weights: bool = False,
        last_only=False,
        attention_mask=None,
        position_ids=None,
    ):
        """``tokens (B, T)`` -> logits ``(B, T, V)`` (see the class docstring);
        ``last_only=True``: the last position's logits only, ``(B, 1, V)`` (what
        greedy decoding needs: a prompt's other rows would cost ``2 T E V`` FLOPs).

        ``attention_mask``: None (every token real) or ``(B, K)`` with ``K =
        len(cache) + T`` (integer, bool or float), 1 = real token, 0 = padding, left
        padding only (a row's zeros come first): anything else raises ``ValueError``
        and leaves the caches as they were. A mask of ones is no mask. Without
        ``kv_caches`` every row needs a real token. With them, a prefill may be
        chunked anywhere: a chunk may be all padding for a row whose real tokens come
        in a later chunk (its cache then holds padding slots, never seen as keys). The
        logits at padding slots mean nothing.

        ``position_ids``: None or an integer ``(B, T)``, the RoPE positions of this
        call's tokens (default: ``cumsum(mask) - 1`` over the mask's row, 0 at
        padding; without a mask ``len(cache) .. len(cache) + T - 1``). That default is
        what transformers' ``generate`` passes; its ``forward`` alone defaults to the
        slots, so pass the same ``position_ids`` to compare one pass. RoPE scores see
        only offsets, so moving all of a row's positions by one amount changes its
        logits by round-off only: the padding mask is what makes a row equal its
        prompt alone (positions would matter to absolute position embeddings).
        """
        if (
            not isinstance(tokens, torch.Tensor)
            or tokens.dim() != 2
            or tokens.is_floating_point()
        ):
            shape = shape_or_type(tokens)
            raise ValueError(f"tokens: expected an integer tensor (B, T), got {shape}")
        if tokens.numel() and (
            int(tokens.min()) < 0 or int(tokens.max()) >= self.config.vocab_size
        ):
            raise ValueError(
                f"tokens: expected ids in 0 .. {self.config.vocab_size - 1}, got "
                f"{int(tokens.min())} .. {int(tokens.max())}"
            )
        if kv_caches is not None and len(kv_caches) != len(self.blocks):
            raise ValueError(
                f"kv_caches: expected one cache per layer ({len(self.blocks)}), got "
                f"{len(kv_caches)}"
            )
        B, T = tokens.shape
        caches = [] if kv_caches is None else list(kv_caches)
        ok = all(isinstance(c, (KVCache, WindowKVCache)) for c in caches)
        starts = {len(c) for c in caches} if ok else set()
        padding = None
        if attention_mask is not None or position_ids is not None:
            if len(starts) > 1 or not ok:
                raise ValueError(
                    "kv_caches: expected caches (KVCache or WindowKVCache) that all "
                    f"hold the same number of positions, got lengths {sorted(starts)}"
                    if ok
                    else "kv_caches: expected KVCache or WindowKVCache objects, got "
                    f"{sorted({type(c).__name__ for c in caches})}"
                )
            start = next(iter(starts), 0)
            padding, position_ids = _padding_and_positions(
                attention_mask, position_ids, B, start, T, tokens.device,
                empty_rows=kv_caches is not None,
            )  # fmt: skip
        x = self.embedding(tokens)  # (B, T, E)
        cos_sin = None  # every layer rotates at the same positions: compute once
        if position_ids is not None:
            cos_sin = self.rope.cos_sin(position_ids, x.dtype)  # (B, T, d/2) each
        elif kv_caches is None or len(starts) == 1:
            start = starts.pop() if starts else 0
            positions = torch.arange(start, start + T, device=tokens.device)
            cos_sin = self.rope.cos_sin(positions, x.dtype)  # (T, d/2) each
        for i, block in enumerate(self.blocks):
            cache = None if kv_caches is None else kv_caches[i]
            x = block(x, cache, need_weights, cos_sin, padding)
        if last_only:
            x = x[:, -1:]  # (B, 1, E)
        x = self.norm(x)
        weight = self.embedding.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, weight)  # (B, T, V)

    def attention_weights(self) -> list:
        """The last ``need_weights=True`` call's weights, one ``(B, H, T, K)`` per "
        "layer."""
        return [block.attention.attention_weights for block in self.blocks]

    @torch.no_grad()
    def generate(
        self,
        prompt,
        max_new_tokens: int,
        use_cache: bool = True,
        eos_id=None,
        attention_mask=None,
        pad_id=None,
    ):
        """Greedy decoding: ``prompt (B, T)`` -> ``(B, T + n)``, with
        ``n <= max_new_tokens``.

        ``eos_id``: a row that has produced this token is finished: its later tokens
        are ``pad_id`` (default ``eos_id``, as transformers when no pad token is set),
        and decoding stops when every row is finished. ``attention_mask (B, T)``:
        prompts of different lengths, left-padded (1 = real token, 0 = padding; see
        :meth:`forward`). Each row's new tokens are those of its prompt alone (up to
        its ``eos_id``, then ``pad_id``), as transformers' ``generate`` with the same
        padding, ``eos_token_id`` and ``pad_token_id``. Rows never see each other, so
        a finished row changes nothing in the others; like transformers, it is still
        fed (its pads, as real tokens) until the batch stops."""
        if (
            isinstance(max_new_tokens, bool)
            or not isinstance(max_new_tokens, int)
            or max_new_tokens < 0
        ):
            raise ValueError(
                f"expected max_new_tokens to be an int >= 0, got {max_new_tokens!r}"
            )
        if (
            not isinstance(prompt, torch.Tensor)
            or prompt.dim() != 2
            or prompt.shape[1] == 0
        ):
            shape = shape_or_type(prompt)
            raise ValueError(
                f"prompt: expected a non-empty integer tensor (B, T), got {shape}"
            )
        V = self.config.vocab_size
        for name, value in (("eos_id", eos_id), ("pad_id", pad_id)):
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 0 <= value < V
            ):
                raise ValueError(
                    f"{name}: expected None or a token id in 0 .. {V - 1}, got "
                    f"{value!r}"
                )
        pad = eos_id if pad_id is None else pad_id
        mask = None
        if attention_mask is not None:
            B, T = prompt.shape
            padding, _ = _padding_and_positions(
                attention_mask, None, B, 0, T, prompt.device
            )
            if padding is not None:  # a mask of ones is no mask
                mask = attention_mask
        tokens = prompt
        caches = self.new_caches() if use_cache else None
        new = prompt
        done = torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device)
        for _ in range(max_new_tokens):
            logits = self(
                new if use_cache else tokens, caches, last_only=True,
                attention_mask=mask,
            )  # fmt: skip
            nxt = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
            if eos_id is not None:  # a finished row emits padding
                nxt = nxt.masked_fill(done[:, None], pad)
                done = done | (nxt[:, 0] == eos_id)
            tokens = torch.cat([tokens, nxt], 1)
            new = nxt
            if mask is not None:  # (B, K + 1): the new token is real
                mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], 1)
            if eos_id is not None and bool(done.all()):
                break
        return tokens

    # ---- weights from transformers -------------------------------------------------
    _HF_LAYER = {
        "input_layernorm.weight": "attention_norm.weight",
        "self_attn.q_proj.weight": "attention.W_q.weight",
        "self_attn.k_proj.weight": "attention.W_k.weight",
        "self_attn.v_proj.weight": "attention.W_v.weight",
        "self_attn.o_proj.weight": "attention.W_o.weight",
        "post_attention_layernorm.weight": "mlp_norm.weight",
        "mlp.gate_proj.weight": "mlp.gate.weight",
        "mlp.up_proj.weight": "mlp.up.weight",
        "mlp.down_proj.weight": "mlp.down.weight",
    }

    @torch.no_grad()
    def load_hf_state_dict(self, state_dict: dict) -> None:
        """Copy a transformers ``LlamaForCausalLM`` / ``MistralForCausalLM`` state dict.

        Raises ``ValueError`` naming the missing or unexpected keys, or a shape that
        does not fit, before anything is copied. A rotate-half checkpoint loads into a
        ``rope_layout="half"`` model only. A tied model (``tie_embeddings=True``)
        accepts an ``lm_head.weight`` only if it equals the embedding (transformers
        lists the tied tensor under both names); an untied one raises, since this
        model could not use it.
        """
        if self.config.rope_layout != "half":
            raise ValueError(
                "load_hf_state_dict: transformers' weights use the 'half' RoPE layout; "
                f"this model is configured with {self.config.rope_layout!r}"
            )
        mine = self.state_dict()
        plan = {
            "model.embed_tokens.weight": "embedding.weight",
            "model.norm.weight": "norm.weight",
        }
        if self.lm_head is not None:
            plan["lm_head.weight"] = "lm_head.weight"
        for i in range(len(self.blocks)):
            for hf, ours in self._HF_LAYER.items():
                plan[f"model.layers.{i}.{hf}"] = f"blocks.{i}.{ours}"
        ignored = {"lm_head.weight"} if self.lm_head is None else set()
        missing = sorted(set(plan) - set(state_dict))
        unexpected = sorted(set(state_dict) - set(plan) - ignored)
        if missing or unexpected:
            raise ValueError(
                "load_hf_state_dict: missing keys "
                f"{missing[:5]}{'...' if len(missing) > 5 else ''}, "
                "unexpected keys "
                f"{unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
            )
        head = state_dict.get("lm_head.weight")
        embedding = state_dict["model.embed_tokens.weight"]
        if (
            self.lm_head is None
            and head is not None
            and not (head.shape == embedding.shape and torch.equal(head, embedding))
        ):
            raise ValueError(
                "load_hf_state_dict: this model ties its output layer to the embedding "
                "(tie_embeddings=True), but the state dict's lm_head.weight is not "
                "model.embed_tokens.weight; build the model with tie_embeddings=False"
            )
        for hf, ours in plan.items():
            if state_dict[hf].shape != mine[ours].shape:
                raise ValueError(
                    f"load_hf_state_dict: {hf} has shape "
                    f"{tuple(state_dict[hf].shape)}, "
                    f"expected {tuple(mine[ours].shape)} for {ours}"
                )
        for hf, ours in plan.items():
            mine[ours].copy_(state_dict[hf])

    @staticmethod
    def config_from_hf(hf_config) -> LlamaConfig:
        """A :class:`LlamaConfig` from a transformers Llama or Mistral config (5.x).

        What this model does not implement raises ``ValueError``: another
        ``hidden_act`` than SiLU, biases in the projections (``attention_bias``,
        ``mlp_bias``), a ``head_dim`` other than ``hidden_size / num_attention_heads``.
        """
        c = hf_config
        act = getattr(c, "hidden_act", "silu")
        if act not in ("silu", "swish"):  # the same function in transformers' ACT2FN
            raise ValueError(
                "config_from_hf: expected hidden_act 'silu' (the SwiGLU MLP this model "
                f"implements), got {act!r}"
            )
        for flag in ("attention_bias", "mlp_bias"):
            if getattr(c, flag, False):
                raise ValueError(
                    f"config_from_hf: expected {flag}=False (this model's projections "
                    f"have no bias), got {flag}={getattr(c, flag)!r}"
                )
        params = dict(getattr(c, "rope_parameters", None) or {})
        theta = params.pop("rope_theta", getattr(c, "rope_theta", 10000.0))
        scaling = params if params.get("rope_type", "default") != "default" else None
        head_dim = (
            getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        )
        if head_dim * c.num_attention_heads != c.hidden_size:
            raise ValueError(
                "config_from_hf: expected head_dim = hidden_size / "
                f"num_attention_heads, got head_dim={head_dim}"
            )
        return LlamaConfig(
            **{ours: getattr(c, theirs) for ours, theirs in HF_NAMES.items()},
            rope_theta=float(theta),
            rope_scaling=scaling,
            tie_embeddings=bool(getattr(c, "tie_word_embeddings", False)),
            sliding_window=getattr(c, "sliding_window", None),
        )
