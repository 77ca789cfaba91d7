"""Multi-head latent attention (MLA, DeepSeek-V2/V3): every head's keys and values are
rebuilt from one small latent vector per token, which is all the cache keeps.

Shape legend: ``B`` batch, ``n`` tokens in this call, ``T`` cached tokens (this call's
included), ``E`` model width, ``H`` query heads, ``r`` latent width
(``kv_lora_rank``), ``dn`` the width of a head's query/key part without position
(``qk_nope_head_dim``), ``dr`` the width of its rotary part (``qk_rope_head_dim``),
``dv`` a head's value width (``v_head_dim``), ``rq`` the query latent width
(``q_lora_rank``).

Per token, the layer computes (DeepSeek-AI, 2024, https://arxiv.org/abs/2405.04434,
section 2.1; the projection names are the paper's)::

    [c, k_rope] = W_dkv x             c: (r,)  k_rope: (dr,)  one per token
    c = RMSNorm(c)                    the latent: the cache holds c and RoPE(k_rope)
    [k_nope_h, v_h] = W_ukv c         (dn,), (dv,) for every head h
    [q_nope_h, q_rope_h] = W_uq RMSNorm(W_dq x)   (or W_q x without a query latent)
    k_h = [k_nope_h, RoPE(k_rope)]    the rotary key is shared by all heads
    q_h = [q_nope_h, RoPE(q_rope_h)]
    o_h = softmax(q_h k_h^T * scale) v_h,  out = W_o [o_1 .. o_H]

Only ``c`` and the rotated ``k_rope`` are cached: ``r + dr`` numbers a token and layer,
whatever ``H`` is. Two ways to attend give the same output:

* naive: rebuild ``k_nope`` and ``v`` of every cached token (``W_ukv c``), then
  ordinary multi-head attention;
* absorbed (``absorb=True``): ``q_nope_h . (W_uk_h c) = (W_uk_h^T q_nope_h) . c``,
  so ``W_uk`` is folded into the query, and ``sum_j a_j W_uv_h c_j = W_uv_h (sum_j
  a_j c_j)`` folds ``W_uv`` into the output: the heads attend to the cached latents
  directly, as multi-query attention with keys ``[c, k_rope]`` (``r + dr`` wide) and
  values ``c``.

The conventions are transformers' ``DeepseekV3Attention`` (5.23): RoPE only on the
``dr`` rotary part, interleaved pairs by default, and under YaRN scaling the softmax
scale ``(dn + dr) ** -0.5`` multiplied by ``yarn_mscale(factor, mscale_all_dim) ** 2``.
One difference: the norms here are ``torch.nn.RMSNorm``, which normalises in the
module's dtype, while transformers' ``DeepseekV3RMSNorm`` normalises in float32 and
casts back. In float32 and float64 (what the tests compare) that is the same; in
bfloat16 the two norms differ by one bfloat16 rounding step in about a quarter of the
features, so logits agree to bfloat16 precision, not bit for bit.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import (
    check_count,
    check_dropout,
    check_last_dim,
    check_rank,
    check_size,
)
from .cache import KVCache
from .decoder import TinyDecoder
from .masking import _broadcast_mask, _check_valid_lens
from .multihead import merge_heads
from .rotary import RotaryEmbedding, yarn_mscale
from .scoring import dot_product_attention, fused_attention

__all__ = [
    "mla_cache_bytes",
    "LatentCache",
    "MultiHeadLatentAttention",
    "LatentDecoder",
    "TinyLatentDecoder",
    "from_hf_deepseek",
]


def mla_cache_bytes(
    num_layers: int,
    kv_lora_rank: int,
    qk_rope_head_dim: int,
    seq_len: int,
    batch_size: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes an MLA cache takes: ``layers * (r + dr) * seq_len * batch *
    bytes_per_element`` -- one latent ``c`` (``r = kv_lora_rank``) and one rotary key
    (``dr = qk_rope_head_dim``) per token and layer, whatever the number of heads.

    The sibling of :func:`~attention_lib.kv_cache_bytes` (``2 * layers * Hkv * d *
    ...``): an MLA cache is as big as a GQA cache with ``Hkv = (r + dr) / (2 d)`` heads.
    Every argument must be a non-negative integer.
    """
    check_count(
        "mla_cache_bytes",
        num_layers=num_layers,
        kv_lora_rank=kv_lora_rank,
        qk_rope_head_dim=qk_rope_head_dim,
        seq_len=seq_len,
        batch_size=batch_size,
        bytes_per_element=bytes_per_element,
    )
    return int(
        num_layers
        * (kv_lora_rank + qk_rope_head_dim)
        * seq_len
        * batch_size
        * bytes_per_element
    )


class LatentCache(KVCache):
    """The cache of one :class:`MultiHeadLatentAttention` layer: the normalised latents
    ``c`` and the rotated rotary keys, nothing per head.

    A :class:`~attention_lib.KVCache` whose "keys" are the latents ``(B, 1, T, r)`` and
    whose "values" are the rotary keys ``(B, 1, T, dr)``; :attr:`latent` and
    :attr:`rope_keys` name them. ``crop``, ``reset`` and the growth rules are
    ``KVCache``'s.
    """

    @property
    def latent(self) -> torch.Tensor | None:
        """The cached latents ``c`` ``(B, T, r)`` (a view), or None while empty."""
        return None if self._keys is None else self.keys[:, 0]

    @property
    def rope_keys(self) -> torch.Tensor | None:
        """The cached rotated keys ``(B, T, dr)`` (a view), or None while empty."""
        return None if self._values is None else self.values[:, 0]

    def __repr__(self) -> str:
        shapes = (
            None
            if self._keys is None
            else (tuple(self.latent.shape), tuple(self.rope_keys.shape))
        )
        return f"LatentCache(length={len(self)}, latent, rope_keys={shapes})"


class MultiHeadLatentAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2/V3), a self-attention layer.

    Args:
        num_hiddens: ``E``.
        num_heads: ``H``.
        kv_lora_rank: ``r``, the width of the cached latent.
        qk_nope_head_dim: ``dn``, each head's query/key width without position.
        qk_rope_head_dim: ``dr`` (even), the rotary query/key width; one rotary key
            per token is shared by all heads.
        v_head_dim: ``dv``.
        q_lora_rank: ``rq``, or None for a full-rank query projection ``W_q``.
        rope_theta: the RoPE base.
        rope_scaling: None, or a transformers ``rope_parameters``-style dict for
            :func:`~attention_lib.rope_frequencies` (``{"rope_type": "yarn", "factor":
            40, "original_max_position_embeddings": 4096, "mscale": 1.0,
            "mscale_all_dim": 1.0, ...}``). With a scaling whose ``mscale_all_dim`` is
            set, the softmax scale is multiplied by ``yarn_mscale(factor,
            mscale_all_dim) ** 2``.
        rope_layout: ``"interleaved"`` (DeepSeek's default) or ``"half"``.
        rope_dtype: dtype the RoPE angles are computed in (float32, as transformers).
        norm_eps: epsilon of the two RMSNorms.
        dropout: on the attention weights while training.
        bias: biases on ``W_dq``, ``W_dkv`` and ``W_o`` (transformers'
            ``attention_bias``); ``W_q``, ``W_uq`` and ``W_ukv`` never have one.

    Layers (the paper's names): ``W_dq: E -> rq``, ``q_norm``, ``W_uq: rq -> H (dn +
    dr)`` (or ``W_q: E -> H (dn + dr)``); ``W_dkv: E -> r + dr`` (the latent and the
    rotary key, in one matrix), ``kv_norm`` (on the latent only), ``W_ukv: r -> H (dn
    + dv)`` (head ``h``'s rows: ``dn`` for ``W_uk``, then ``dv`` for ``W_uv``),
    ``W_o: H dv -> E``.

    ``forward(X (B, n, E), valid_lens=None, mask=None, need_weights=True,
    is_causal=False, kv_cache=None, absorb=False)`` -> ``(B, n, E)``. Token ``i`` of
    ``X`` is at position ``T0 + i``, ``T0`` the cached length (0 without a cache).
    ``valid_lens``, ``mask``, ``is_causal`` and ``need_weights`` mean what they mean for
    :class:`~attention_lib.GroupedQueryAttention` (True = keep, causal bottom-right,
    weights ``(B, H, n, T)`` in ``.attention_weights``). ``kv_cache`` is a
    :class:`LatentCache`; ``absorb=True`` takes the absorbed route (same output). A
    call that raises leaves the cache as it was.
    """

    def __init__(
        self,
        num_hiddens: int,
        num_heads: int,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        q_lora_rank: int | None = None,
        rope_theta: float = 10000.0,
        rope_scaling: dict | None = None,
        rope_layout: str = "interleaved",
        rope_dtype: torch.dtype = torch.float32,
        norm_eps: float = 1e-6,
        dropout: float = 0.0,
        bias: bool = False,
    ):
        super().__init__()
        owner = type(self).__name__
        check_size(
            owner,
            num_hiddens=num_hiddens,
            num_heads=num_heads,
            kv_lora_rank=kv_lora_rank,
            qk_nope_head_dim=qk_nope_head_dim,
            qk_rope_head_dim=qk_rope_head_dim,
            v_head_dim=v_head_dim,
        )
        if q_lora_rank is not None:
            check_size(owner, q_lora_rank=q_lora_rank)
        if qk_rope_head_dim % 2:
            raise ValueError(
                f"{owner}: expected an even qk_rope_head_dim (RoPE turns pairs), got "
                f"{qk_rope_head_dim}"
            )
        check_dropout(dropout)
        E, H, r = num_hiddens, num_heads, kv_lora_rank
        dn, dr, dv = qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        self.num_hiddens, self.num_heads, self.kv_lora_rank = E, H, r
        self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim = dn, dr, dv
        self.q_lora_rank = q_lora_rank
        if q_lora_rank is None:
            self.W_q = nn.Linear(E, H * (dn + dr), bias=False)
        else:
            self.W_dq = nn.Linear(E, q_lora_rank, bias=bias)
            self.q_norm = nn.RMSNorm(q_lora_rank, eps=norm_eps)
            self.W_uq = nn.Linear(q_lora_rank, H * (dn + dr), bias=False)
        self.W_dkv = nn.Linear(E, r + dr, bias=bias)
        self.kv_norm = nn.RMSNorm(r, eps=norm_eps)
        self.W_ukv = nn.Linear(r, H * (dn + dv), bias=False)
        self.W_o = nn.Linear(H * dv, E, bias=bias)
        self.rope = RotaryEmbedding(
            dr, rope_theta, rope_scaling, rope_layout, compute_dtype=rope_dtype
        )
        scale = (dn + dr) ** -0.5
        if rope_scaling is not None and rope_scaling.get("mscale_all_dim"):
            m = yarn_mscale(
                float(rope_scaling["factor"]), rope_scaling["mscale_all_dim"]
            )
            scale = scale * m * m
        self.softmax_scale = scale
        self.dropout = nn.Dropout(dropout)
        self.attention_weights: torch.Tensor | None = None

    def extra_repr(self) -> str:
        return (
            f"H={self.num_heads}, r={self.kv_lora_rank}, dn={self.qk_nope_head_dim}, "
            f"dr={self.qk_rope_head_dim}, dv={self.v_head_dim}, "
            f"rq={self.q_lora_rank}, scale={self.softmax_scale:.4g}"
        )

    # -- the pieces, each a few lines ------------------------------------------------

    def queries(self, X: torch.Tensor, positions: torch.Tensor):
        """``(q_nope (B, H, n, dn), q_rope (B, H, n, dr))``, the rotary part rotated
        to ``positions`` ``(n,)``."""
        B, n, _ = X.shape
        H, dn, dr = self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim
        if self.q_lora_rank is None:
            q = self.W_q(X)  # (B, n, H * (dn + dr))
        else:
            q = self.W_uq(self.q_norm(self.W_dq(X)))  # (B, n, rq) -> (B, n, H (dn+dr))
        q = q.view(B, n, H, dn + dr).transpose(1, 2)  # (B, H, n, dn + dr)
        q_nope, q_rope = q.split([dn, dr], dim=-1)  # (B, H, n, dn), (B, H, n, dr)
        return q_nope, self.rope(q_rope, positions)

    def latents(self, X: torch.Tensor, positions: torch.Tensor):
        """What a token puts in the cache: ``(c (B, n, r), k_rope (B, n, dr))``, the
        normalised latent and the rotated rotary key."""
        r = self.kv_lora_rank
        ckv = self.W_dkv(X)  # (B, n, r + dr)
        c, k_rope = ckv.split([r, self.qk_rope_head_dim], dim=-1)
        c = self.kv_norm(c)  # (B, n, r)
        k_rope = self.rope(k_rope[:, None], positions)[:, 0]  # (B, n, dr)
        return c, k_rope

    def up_projections(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(W_uk (H, dn, r), W_uv (H, dv, r))``, views of ``W_ukv.weight``: head
        ``h``'s ``k_nope = W_uk[h] @ c`` and ``v = W_uv[h] @ c``."""
        H, dn, r = self.num_heads, self.qk_nope_head_dim, self.kv_lora_rank
        W = self.W_ukv.weight.view(H, dn + self.v_head_dim, r)  # (H, dn + dv, r)
        return W[:, :dn], W[:, dn:]

    # -- forward -----------------------------------------------------------------------

    def forward(
        self,
        X,
        valid_lens=None,
        mask=None,
        need_weights: bool = True,
        is_causal: bool = False,
        kv_cache: LatentCache | None = None,
        absorb: bool = False,
    ):
        """``X (B, n, E)`` -> ``(B, n, E)``; see the class docstring for the
        arguments. With ``kv_cache`` this call's latents and rotary keys are appended
        and the queries attend over everything cached."""
        self._check_inputs(X, valid_lens, mask, kv_cache)
        if kv_cache is None:
            return self._attend(
                X, valid_lens, mask, need_weights, is_causal, None, absorb
            )
        state = kv_cache._state()
        try:
            return self._attend(
                X, valid_lens, mask, need_weights, is_causal, kv_cache, absorb
            )
        except BaseException:
            kv_cache._restore(state)
            raise

    def _attend(self, X, valid_lens, mask, need_weights, is_causal, kv_cache, absorb):
        B, n, _ = X.shape
        H, dn, dv = self.num_heads, self.qk_nope_head_dim, self.v_head_dim
        start = 0 if kv_cache is None else len(kv_cache)
        positions = torch.arange(start, start + n, device=X.device)  # (n,)
        q_nope, q_rope = self.queries(X, positions)  # (B, H, n, dn), (B, H, n, dr)
        c, k_rope = self.latents(X, positions)  # (B, n, r), (B, n, dr)
        if kv_cache is not None:
            # (B, 1, T, r), (B, 1, T, dr): every cached token, this call's last
            c, k_rope = kv_cache.update(c[:, None], k_rope[:, None])
            c, k_rope = c[:, 0], k_rope[:, 0]  # (B, T, r), (B, T, dr)
        T = c.shape[1]
        if absorb:
            W_uk, W_uv = self.up_projections()  # (H, dn, r), (H, dv, r)
            q_latent = q_nope @ W_uk  # (B, H, n, dn) @ (H, dn, r) -> (B, H, n, r)
            q = torch.cat([q_latent, q_rope], dim=-1)  # (B, H, n, r + dr)
            k = torch.cat([c, k_rope], dim=-1)[:, None]  # (B, 1, T, r + dr)
            out = self._heads(
                q, k, c[:, None], valid_lens, mask, need_weights, is_causal
            )
            # (B, H, n, r) @ (H, r, dv) -> (B, H, n, dv)
            out = out @ W_uv.transpose(1, 2)
        else:
            kv = self.W_ukv(c).view(B, T, H, dn + dv)  # (B, T, H, dn + dv)
            kv = kv.transpose(1, 2)  # (B, H, T, dn + dv)
            k_nope, v = kv.split([dn, dv], dim=-1)  # (B, H, T, dn), (B, H, T, dv)
            k_rope = k_rope[:, None].expand(B, H, T, self.qk_rope_head_dim)
            q = torch.cat([q_nope, q_rope], dim=-1)  # (B, H, n, dn + dr)
            k = torch.cat([k_nope, k_rope], dim=-1)  # (B, H, T, dn + dr)
            out = self._heads(q, k, v, valid_lens, mask, need_weights, is_causal)
        return self.W_o(merge_heads(out))  # (B, H, n, dv) -> (B, n, H dv) -> (B, n, E)

    def _heads(self, q, k, v, valid_lens, mask, need_weights, is_causal):
        """Attention of ``q (B, H, n, D)`` over ``k (B, H|1, T, D)``, ``v (B, H|1, T,
        Dv)`` with this layer's scale -> ``(B, H, n, Dv)``."""
        H = self.num_heads
        p = self.dropout.p if self.training else 0.0
        if need_weights:
            k = k.expand(-1, H, -1, -1)  # views: one shared head read by all H
            v = v.expand(-1, H, -1, -1)
            out, weights = dot_product_attention(
                q,
                k,
                v,
                valid_lens,
                mask,
                dropout_p=p,
                scale=self.softmax_scale,
                is_causal=is_causal,
            )
            self.attention_weights = weights.detach()  # (B, H, n, T)
            return out
        self.attention_weights = None
        return fused_attention(
            q,
            k,
            v,
            valid_lens,
            mask,
            dropout_p=p,
            scale=self.softmax_scale,
            enable_gqa=k.shape[1] != H,
            is_causal=is_causal,
        )

    def _check_inputs(self, X, valid_lens, mask, kv_cache) -> None:
        """``ValueError`` naming expected vs actual, before anything is written."""
        check_rank("X", X, (3,), "(B, n, E)")
        check_last_dim(
            "X", X, self.num_hiddens, f"num_hiddens E of this {type(self).__name__}"
        )
        if X.shape[1] == 0:
            raise ValueError(
                f"X: expected at least one token, got shape {tuple(X.shape)}"
            )
        if kv_cache is not None and not isinstance(kv_cache, KVCache):
            raise ValueError(
                "kv_cache: expected an attention_lib.LatentCache or None, got "
                f"{type(kv_cache).__name__}"
            )
        B, n = X.shape[:2]
        if kv_cache is not None and kv_cache.keys is not None:
            cached = kv_cache.keys.shape  # (B, 1, T, r)
            want = (B, 1, self.kv_lora_rank)
            got = (cached[0], cached[1], cached[3])
            if got != want or kv_cache.values.shape[3] != self.qk_rope_head_dim:
                raise ValueError(
                    f"kv_cache: expected a LatentCache of latents (B, 1, T, r) = "
                    f"({B}, 1, T, {self.kv_lora_rank}) and rotary keys (B, 1, T, dr) "
                    f"with dr = {self.qk_rope_head_dim}, got "
                    f"{tuple(kv_cache.keys.shape)} and {tuple(kv_cache.values.shape)}"
                )
        if isinstance(mask, torch.Tensor) and mask.dim() == 3:
            raise ValueError(
                "mask: expected a 2-D (Q, K) or 4-D (B|1, H|1, Q|1, K) mask, got 3-D "
                f"{tuple(mask.shape)}: pass mask[:, None] for (B, 1, Q, K)"
            )
        num_keys = n + (0 if kv_cache is None else len(kv_cache))
        if valid_lens is not None:
            _check_valid_lens(valid_lens, B, n)
        if mask is not None:
            _broadcast_mask(mask, torch.Size((B, self.num_heads, n, num_keys)))


class _BlockLatentAttention(MultiHeadLatentAttention):
    """MLA called as :class:`~attention_lib.DecoderBlock` calls its attention,
    ``(queries, keys, values, ...)``: self-attention only, so ``keys`` and ``values``
    must be ``queries`` itself."""

    def forward(self, queries, keys, values, *args, **kwargs):
        if keys is not queries or values is not queries:
            raise ValueError(
                "keys, values: expected the queries tensor itself (multi-head latent "
                "attention is self-attention), got other tensors"
            )
        return super().forward(queries, *args, **kwargs)


class TinyLatentDecoder(TinyDecoder):
    """:class:`~attention_lib.TinyDecoder` with multi-head latent attention in every
    block instead of grouped-query attention; everything else (embedding, sinusoidal
    positions, LayerNorms, MLP, head, ``forward``, ``generate``) is ``TinyDecoder``'s.

    Args: ``vocab_size``, ``num_hiddens``, ``num_heads``, ``num_layers``, ``max_len``,
    ``mlp_ratio`` and ``dropout`` as for ``TinyDecoder``; ``kv_lora_rank``,
    ``qk_nope_head_dim``, ``qk_rope_head_dim`` and ``v_head_dim`` as for
    :class:`MultiHeadLatentAttention` (full-rank queries, no biases). A block's cache
    holds ``kv_lora_rank + qk_rope_head_dim`` numbers a token (the caches that
    ``forward`` takes and ``generate`` makes hold the latents as keys and the rotary
    keys as values; a :class:`LatentCache` names them).

    The model is built as ``TinyDecoder(..., num_kv_heads=1, ...)`` and then each
    block's attention is replaced: after the same ``torch.manual_seed``, the embedding,
    norms, MLPs and head start equal to those of the multi-query ``TinyDecoder``.
    """

    def __init__(
        self,
        vocab_size: int,
        num_hiddens: int,
        num_heads: int,
        num_layers: int,
        max_len: int,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        mlp_ratio: int = 4,
        dropout: float = 0.0,
    ):
        mla_sizes = {
            "kv_lora_rank": kv_lora_rank,
            "qk_nope_head_dim": qk_nope_head_dim,
            "qk_rope_head_dim": qk_rope_head_dim,
            "v_head_dim": v_head_dim,
        }
        check_size(type(self).__name__, **mla_sizes)
        if qk_rope_head_dim % 2:
            raise ValueError(
                f"{type(self).__name__}: expected an even qk_rope_head_dim (RoPE turns "
                f"pairs), got {qk_rope_head_dim}"
            )
        super().__init__(
            vocab_size, num_hiddens, num_heads, 1, num_layers, max_len, mlp_ratio,
            dropout,
        )  # fmt: skip
        for block in self.blocks:
            block.attention = _BlockLatentAttention(
                num_hiddens, num_heads, dropout=dropout, **mla_sizes
            )


class _SwiGLU(nn.Module):
    """``W_down(silu(W_gate x) * W_up x)``: ``(B, n, E) -> (B, n, E)``."""

    def __init__(self, num_hiddens: int, intermediate_size: int):
        super().__init__()
        self.W_gate = nn.Linear(num_hiddens, intermediate_size, bias=False)
        self.W_up = nn.Linear(num_hiddens, intermediate_size, bias=False)
        self.W_down = nn.Linear(intermediate_size, num_hiddens, bias=False)

    def forward(self, X):
        return self.W_down(F.silu(self.W_gate(X)) * self.W_up(X))


class _LatentBlock(nn.Module):
    """``X' = X + MLA(RMSNorm(X))`` (causal), then ``X' + SwiGLU(RMSNorm(X'))``."""

    def __init__(self, num_hiddens, intermediate_size, norm_eps, attention_kwargs):
        super().__init__()
        self.norm1 = nn.RMSNorm(num_hiddens, eps=norm_eps)
        self.attention = MultiHeadLatentAttention(
            num_hiddens, norm_eps=norm_eps, **attention_kwargs
        )
        self.norm2 = nn.RMSNorm(num_hiddens, eps=norm_eps)
        self.mlp = _SwiGLU(num_hiddens, intermediate_size)

    def forward(self, X, kv_cache, need_weights, absorb):
        Y = self.norm1(X)  # (B, n, E)
        X = X + self.attention(
            Y,
            is_causal=True,
            kv_cache=kv_cache,
            need_weights=need_weights,
            absorb=absorb,
        )
        return X + self.mlp(self.norm2(X))


class LatentDecoder(nn.Module):
    """A dense DeepSeek-V3-style decoder (no mixture of experts): embedding,
    ``num_layers`` pre-RMSNorm blocks of :class:`MultiHeadLatentAttention` and a
    SwiGLU MLP, a final RMSNorm and an untied linear head. Positions come from RoPE
    inside the attention layers.

    Args:
        vocab_size: ``V``.
        num_hiddens: ``E``.
        num_layers: number of blocks.
        intermediate_size: the MLP's hidden width.
        norm_eps: epsilon of every RMSNorm.
        **attention_kwargs: :class:`MultiHeadLatentAttention`'s other arguments
            (``num_heads``, ``kv_lora_rank``, ``qk_nope_head_dim``, ...).

    ``forward(tokens (B, n), kv_caches=None, need_weights=False, absorb=False)`` ->
    logits ``(B, n, V)``; with ``kv_caches`` (one :class:`LatentCache` per block) the
    tokens continue the cached sequence. :meth:`generate` decodes greedily.
    """

    def __init__(
        self,
        vocab_size: int,
        num_hiddens: int,
        num_layers: int,
        intermediate_size: int,
        norm_eps: float = 1e-6,
        **attention_kwargs,
    ):
        super().__init__()
        check_size(
            type(self).__name__,
            vocab_size=vocab_size,
            num_hiddens=num_hiddens,
            num_layers=num_layers,
            intermediate_size=intermediate_size,
        )
        self.vocab_size, self.num_layers = vocab_size, num_layers
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.blocks = nn.ModuleList(
            _LatentBlock(num_hiddens, intermediate_size, norm_eps, attention_kwargs)
            for _ in range(num_layers)
        )
        self.norm = nn.RMSNorm(num_hiddens, eps=norm_eps)
        self.head = nn.Linear(num_hiddens, vocab_size, bias=False)

    def forward(
        self,
        tokens,
        kv_caches: list[LatentCache] | None = None,
        need_weights: bool = False,
        absorb: bool = False,
    ):
        """``tokens (B, n)`` -> logits ``(B, n, V)``; with ``kv_caches`` the tokens
        continue the cached sequence."""
        if (
            not isinstance(tokens, torch.Tensor)
            or tokens.dim() != 2
            or (tokens.is_floating_point())
        ):
            shape = (
                tuple(tokens.shape)
                if isinstance(tokens, torch.Tensor)
                else type(tokens)
            )
            raise ValueError(f"tokens: expected an integer tensor (B, n), got {shape}")
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(
                f"tokens: expected ids in 0..{self.vocab_size - 1}, got "
                f"{int(tokens.min())}..{int(tokens.max())}"
            )
        if kv_caches is not None and len(kv_caches) != self.num_layers:
            raise ValueError(
                f"kv_caches: expected one LatentCache per block ({self.num_layers}), "
                f"got {len(kv_caches)}"
            )
        X = self.embedding(tokens)  # (B, n, E)
        for i, block in enumerate(self.blocks):
            cache = None if kv_caches is None else kv_caches[i]
            X = block(X, cache, need_weights, absorb)
        return self.head(self.norm(X))  # (B, n, V)

    @torch.no_grad()
    def generate(self, prompt, max_new_tokens: int, absorb: bool = False):
        """Greedy decoding with one :class:`LatentCache` per block: ``prompt (B, n0)``
        -> ``(B, n0 + max_new_tokens)``."""
        check_count("generate", max_new_tokens=max_new_tokens)
        caches = [LatentCache() for _ in self.blocks]
        tokens, new = prompt, prompt
        for _ in range(max_new_tokens):
            logits = self(new, caches, absorb=absorb)  # (B, n, V)
            new = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
            tokens = torch.cat([tokens, new], dim=1)
        return tokens


_HF_NAMES = {
    "q_proj": "W_q",
    "q_a_proj": "W_dq",
    "q_a_layernorm": "q_norm",
    "q_b_proj": "W_uq",
    "kv_a_proj_with_mqa": "W_dkv",
    "kv_a_layernorm": "kv_norm",
    "kv_b_proj": "W_ukv",
    "o_proj": "W_o",
    "input_layernorm": "norm1",
    "post_attention_layernorm": "norm2",
    "self_attn": "attention",
    "gate_proj": "W_gate",
    "up_proj": "W_up",
    "down_proj": "W_down",
}


def from_hf_deepseek(state_dict: dict) -> dict:
    """A transformers ``DeepseekV3ForCausalLM`` state dict (dense layers) renamed for
    :class:`LatentDecoder`: ``model.layers.0.self_attn.kv_b_proj.weight`` ->
    ``blocks.0.attention.W_ukv.weight``, and so on; the tensors are not copied."""
    out = {}
    for name, tensor in state_dict.items():
        parts = name.split(".")
        if parts[0] == "model":
            parts = parts[1:]
        if parts[0] == "embed_tokens":
            parts[0] = "embedding"
        elif parts[0] == "lm_head":
            parts[0] = "head"
        elif parts[0] == "layers":
            parts[0] = "blocks"
        out[".".join(_HF_NAMES.get(p, p) for p in parts)] = tensor
    return out
