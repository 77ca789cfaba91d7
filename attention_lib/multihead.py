"""Multi-head and grouped-query attention, with the small pure helpers they are made of.

Shape legend: ``B`` batch, ``Q`` queries, ``K`` keys/values, ``E`` model width
(``num_hiddens``), ``H`` query heads, ``Hkv`` key/value heads, ``d = E / H`` head width.

:class:`GroupedQueryAttention` has one ``forward`` with two paths, chosen by
``need_weights`` (nanoGPT's ``forward`` also holds a readable and a fused path, chosen
by whether PyTorch has the fused kernel):

* readable (``need_weights=True``): scores, :func:`~attention_lib.masked_softmax`,
  weights @ values; the weights ``(B, H, Q, K)`` are kept (detached) in
  ``.attention_weights`` for heatmaps;
* fused (``need_weights=False``): ``F.scaled_dot_product_attention`` (with
  ``enable_gqa`` for GQA, so the shared key/value heads are never copied; for one new
  query each group's ``g`` query heads are ``g`` rows of one query matrix, so that each
  cached head is read once); no weights are kept.

Both paths give the same output (to float32 round-off). The arguments of ``forward``:

* ``queries (B, Q, E)``, ``keys (B, K, E)``, ``values (B, K, E)``;
* ``valid_lens`` ``(B,)`` or ``(B, Q)``; ``mask`` a bool keep-mask ``(Q, K)`` or 4-D,
  broadcastable to ``(B, H, Q, K)`` (a 3-D mask is refused: ``(B, Q, K)`` would
  silently be read as ``(H, Q, K)``); ``is_causal`` masks every key after its query,
  aligned bottom-right (:func:`~attention_lib.causal_mask`), and on the fused path runs
  SDPA's own causal kernel when that is exact (``Q == K``, no other mask). All three
  combine by logical and; ``K`` counts the cached positions too;
* ``kv_cache``: a :class:`~attention_lib.KVCache`. The call's projected keys and values
  ``(B, Hkv, K, d)`` are appended to it and the queries attend over everything cached.
  Every input is checked before the cache is written, and a call that raises anyway
  leaves the cache as it was (``_cache_unchanged_if_it_fails``).

The constructor is ``GroupedQueryAttention(num_hiddens, num_heads, num_kv_heads,
dropout=0.0, bias=False, rotary=None)``: ``E``, ``H`` (must divide ``E``) and ``Hkv``
(must divide ``H``); ``dropout`` on the attention weights while training; ``bias`` for
the four projections. ``rotary(q, k, start) -> (q, k)``, if given, is applied to the
projected heads ``q (B, H, Q, d)`` and ``k (B, Hkv, K, d)`` of each call before
attention (and before ``k`` is cached); ``start`` is the position of the call's first
token (the cache's length, 0 without a cache). This is where a Llama-style layer applies
rotary position embeddings (RoPE); an ``nn.Module`` is registered as a submodule.

The tricks that shave microseconds off a decode step (one fused key/value matmul, one
copy into the cache) live apart, in :class:`~attention_lib.FastGroupedQueryAttention`
(``fast_decode.py``; timed against this class by ``bench/bench_decode_packed.py``).
"""

from __future__ import annotations

import copy
import functools
import numbers

import torch
from torch import nn

from ._checks import check_dropout, check_last_dim, check_qkv, check_rank, check_size
from .cache import KVCache
from .masking import _broadcast_mask, _check_valid_lens
from .scoring import dot_product_attention, fused_attention

__all__ = [
    "split_heads",
    "merge_heads",
    "repeat_kv",
    "kv_cache_bytes",
    "GroupedQueryAttention",
    "MultiHeadAttention",
    "convert_to_gqa",
]


def split_heads(X: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, n, H * d)`` -> ``(B, H, n, d)``: head ``h`` takes columns ``h*d .. (h+1)*d
    - 1``.

    Equals ``X.reshape(B, n, H, d).transpose(1, 2)`` (a view, no copy).
    """
    check_rank("X", X, (3,), "(B, n, H * d)")
    B, n, width = X.shape
    if num_heads <= 0 or width % num_heads:
        raise ValueError(
            f"split_heads: expected num_heads to divide the width {width}, got "
            f"num_heads={num_heads}"
        )
    return X.reshape(B, n, num_heads, width // num_heads).transpose(
        1, 2
    )  # (B, H, n, d)


def merge_heads(X: torch.Tensor) -> torch.Tensor:
    """``(B, H, n, d)`` -> ``(B, n, H * d)``, the inverse of :func:`split_heads`
    (concatenates the heads)."""
    check_rank("X", X, (4,), "(B, H, n, d)")
    B, H, n, d = X.shape
    return X.transpose(1, 2).reshape(B, n, H * d)  # (B, n, H, d) -> (B, n, H*d)


def repeat_kv(X: torch.Tensor, n_rep: int) -> torch.Tensor:
    """``(B, Hkv, n, d)`` -> ``(B, Hkv * n_rep, n, d)``, each key/value head repeated
    ``n_rep`` times in a row.

    Equals ``torch.repeat_interleave(X, n_rep, dim=1)``: query heads ``0 .. n_rep-1``
    share kv head 0, the next ``n_rep`` share kv head 1, and so on -- the grouping of
    ``F.scaled_dot_product_attention(enable_gqa=True)``. (``X.repeat(1, n_rep, 1, 1)``
    would interleave the groups instead: a different model.)
    """
    check_rank("X", X, (4,), "(B, Hkv, n, d)")
    if n_rep <= 0:
        raise ValueError(f"repeat_kv: expected n_rep >= 1, got {n_rep}")
    if n_rep == 1:
        return X
    B, Hkv, n, d = X.shape
    return X[:, :, None, :, :].expand(B, Hkv, n_rep, n, d).reshape(B, Hkv * n_rep, n, d)


def kv_cache_bytes(
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    seq_len: int,
    batch_size: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes a KV cache takes: ``2 (K and V) * layers * Hkv * d * seq_len * batch *
    bytes_per_element``.

    ``bytes_per_element`` is 2 for float16/bfloat16, 4 for float32, 1 for an 8-bit
    cache. Every argument must be a non-negative integer (a float such as ``4096.0`` is
    refused rather than turned into a float result).
    """
    for name, value in (
        ("num_layers", num_layers),
        ("num_kv_heads", num_kv_heads),
        ("head_dim", head_dim),
        ("seq_len", seq_len),
        ("batch_size", batch_size),
        ("bytes_per_element", bytes_per_element),
    ):
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Integral)
            or value < 0
        ):
            raise ValueError(
                f"kv_cache_bytes: expected {name} to be a non-negative integer, got "
                f"{value!r}"
            )
    return int(
        2
        * num_layers
        * num_kv_heads
        * head_dim
        * seq_len
        * batch_size
        * bytes_per_element
    )


def _cache_unchanged_if_it_fails(forward):
    """Wrap a layer's ``forward`` so that a call that raises leaves its ``kv_cache`` as
    it was. The inputs are checked before the cache is written; this is the belt and
    braces for anything that still fails after the append (a kernel, an interrupt)."""

    @functools.wraps(forward)
    def guarded(self, *args, **kwargs):
        # forward(queries, keys, values, valid_lens, mask, need_weights, is_causal,
        # kv_cache): kv_cache is the 8th argument after self
        kv_cache = args[7] if len(args) > 7 else kwargs.get("kv_cache")
        if not isinstance(kv_cache, KVCache):
            return forward(self, *args, **kwargs)
        state = kv_cache._state()
        try:
            return forward(self, *args, **kwargs)
        except BaseException:
            kv_cache._restore(state)
            raise

    return guarded


class GroupedQueryAttention(nn.Module):
    """Grouped-query attention (Ainslie et al., 2023): ``H`` query heads share ``Hkv``
    key/value heads; query head ``h`` reads key/value head ``h // (H // Hkv)``.

    ``GroupedQueryAttention(E, H, Hkv)`` has ``W_q: E -> E``, ``W_k, W_v: E -> Hkv * d``
    and ``W_o: E -> E``. ``Hkv == H`` is multi-head attention, ``Hkv == 1`` multi-query.
    ``forward(queries (B, Q, E), keys (B, K, E), values (B, K, E))`` -> ``(B, Q, E)``;
    masks, ``is_causal``, ``kv_cache`` and ``rotary`` are described in the module
    docstring (``help(attention_lib.multihead)``).
    """

    def __init__(
        self,
        num_hiddens: int,
        num_heads: int,
        num_kv_heads: int,
        dropout: float = 0.0,
        bias: bool = False,
        rotary=None,
    ):
        super().__init__()
        _check_sizes(type(self).__name__, num_hiddens, num_heads, num_kv_heads, dropout)
        _check_rotary(rotary)
        self.num_hiddens, self.num_heads = num_hiddens, num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = d = num_hiddens // num_heads
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)  # H query heads
        self.W_k = nn.Linear(num_hiddens, num_kv_heads * d, bias=bias)  # Hkv heads
        self.W_v = nn.Linear(num_hiddens, num_kv_heads * d, bias=bias)  # Hkv heads
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.rotary = rotary  # e.g. rotary position embeddings (chapter 11)
        self.attention_weights: torch.Tensor | None = None

    @_cache_unchanged_if_it_fails
    def forward(
        self,
        queries,
        keys,
        values,
        valid_lens=None,
        mask=None,
        need_weights: bool = True,
        is_causal: bool = False,
        kv_cache: KVCache | None = None,
    ):
        _check_inputs(self, queries, keys, values, valid_lens, mask, kv_cache)
        H, Hkv = self.num_heads, self.num_kv_heads
        q = split_heads(self.W_q(queries), H)  # (B, Q, E) -> (B, H, Q, d)
        k = split_heads(self.W_k(keys), Hkv)  # (B, K, Hkv*d) -> (B, Hkv, K, d)
        v = split_heads(self.W_v(values), Hkv)  # (B, K, Hkv*d) -> (B, Hkv, K, d)
        if self.rotary is not None:  # positions start after the cached ones
            q, k = self.rotary(q, k, 0 if kv_cache is None else len(kv_cache))
        if kv_cache is not None:  # append; attend over every cached position
            k, v = kv_cache.update(k, v)  # (B, Hkv, T + K, d)
        p = self.dropout.p if self.training else 0.0
        if need_weights:  # readable path: keep the weights, for heatmaps
            k, v = repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)  # (B, H, K, d)
            out, weights = dot_product_attention(
                q, k, v, valid_lens, mask, dropout_p=p, is_causal=is_causal
            )  # (B, H, Q, d), (B, H, Q, K)
            self.attention_weights = weights.detach()
        else:  # fused path: SDPA reads the Hkv heads without copying them
            out = fused_attention(
                q, k, v, valid_lens, mask, dropout_p=p, enable_gqa=Hkv != H,
                is_causal=is_causal,
            )  # fmt: skip
            self.attention_weights = None
        return self.W_o(merge_heads(out))  # (B, H, Q, d) -> (B, Q, E) -> (B, Q, E)


def _check_rotary(rotary) -> None:
    if rotary is not None and not callable(rotary):
        raise ValueError(
            f"rotary: expected a callable (q, k, start) or None, got {rotary!r}"
        )


def _check_sizes(name, num_hiddens, num_heads, num_kv_heads, dropout) -> None:
    check_size(
        name, num_hiddens=num_hiddens, num_heads=num_heads, num_kv_heads=num_kv_heads
    )
    if num_hiddens % num_heads:
        raise ValueError(
            f"num_heads must divide num_hiddens: got num_hiddens={num_hiddens}, "
            f"num_heads={num_heads}"
        )
    if num_heads % num_kv_heads:
        raise ValueError(
            "num_kv_heads must be positive and divide num_heads: got "
            f"num_heads={num_heads}, num_kv_heads={num_kv_heads}"
        )
    check_dropout(dropout)


def _check_inputs(layer, queries, keys, values, valid_lens, mask, kv_cache) -> None:
    """Raise ``ValueError`` naming expected vs actual for a bad call of ``layer``. One
    decode step costs ~0.3 ms, so the common case is one cheap comparison; the detailed
    checks run only when it fails."""
    E = layer.num_hiddens
    if not (
        isinstance(queries, torch.Tensor)
        and isinstance(keys, torch.Tensor)
        and isinstance(values, torch.Tensor)
        and queries.dim() == keys.dim() == values.dim() == 3
        and queries.shape[2] == keys.shape[2] == values.shape[2] == E
        and queries.shape[0] == keys.shape[0]
        and keys.shape[:2] == values.shape[:2]
    ):
        for name, t in (("queries", queries), ("keys", keys), ("values", values)):
            check_rank(name, t, (3,), "(B, n, E)")
            check_last_dim(name, t, E, f"num_hiddens E of this {type(layer).__name__}")
        check_qkv(queries, keys, values, same_width=True)
    if isinstance(mask, torch.Tensor) and mask.dim() == 3:
        # Broadcasting aligns from the right, so (B, Q, K) against (B, H, Q, K) scores
        # would be read as (H, Q, K): when B == H it runs and gives head h of every
        # example the mask of example h (chapter 7).
        raise ValueError(
            "mask: expected a 2-D (Q, K) or 4-D (B|1, H|1, Q|1, K) mask, got 3-D "
            f"{tuple(mask.shape)}: against scores (B, H, Q, K) a 3-D mask is "
            "ambiguous; pass mask[:, None] for (B, 1, Q, K)"
        )
    if kv_cache is not None and not isinstance(kv_cache, KVCache):
        raise ValueError(
            "kv_cache: expected an attention_lib.KVCache or None, got "
            f"{type(kv_cache).__name__}"
        )
    if valid_lens is None and mask is None:
        return
    # The masks are checked here, before the cache is written: scores are
    # (B, H, Q, K) with K counting the cached positions too.
    B, num_queries = queries.shape[:2]
    num_keys = keys.shape[1] + (0 if kv_cache is None else len(kv_cache))
    if valid_lens is not None:
        _check_valid_lens(valid_lens, B, num_queries)
    if mask is not None:
        scores_shape = torch.Size((B, layer.num_heads, num_queries, num_keys))
        _broadcast_mask(mask, scores_shape)


class MultiHeadAttention(GroupedQueryAttention):
    """Multi-head attention (Vaswani et al., 2017): grouped-query attention with one
    key/value head per query head.

    ``MultiHeadAttention(E, H)`` is ``GroupedQueryAttention(E, H, num_kv_heads=H)``: the
    same layers ``W_q``, ``W_k``, ``W_v``, ``W_o`` (all ``E -> E``) and the same
    ``forward``.
    """

    def __init__(
        self, num_hiddens: int, num_heads: int, dropout: float = 0.0, bias: bool = False
    ):
        super().__init__(num_hiddens, num_heads, num_heads, dropout=dropout, bias=bias)


def convert_to_gqa(
    module: nn.Module, num_kv_heads: int, method: str = "mean"
) -> nn.Module:
    """Multi-head -> grouped-query attention by pooling key/value heads (Ainslie et al.,
    2023, section 2.1).

    Query head ``h`` of a GQA layer with ``Hkv`` key/value heads reads kv head ``h // (H
    // Hkv)``, so the ``H // Hkv`` consecutive heads of each group are pooled into one:
    ``method="mean"`` averages their rows of ``W_k`` and ``W_v`` (and biases) -- the
    paper's recipe --, ``method="first"`` keeps the group's first head (the paper's
    ablation). ``W_q`` and ``W_o`` are copied unchanged. The converted model usually
    needs a little continued training ("uptraining"); chapter 9 shows how much.

    Args:
        module: a :class:`GroupedQueryAttention` (or :class:`MultiHeadAttention`), or
            any module containing them.
        num_kv_heads: the new ``Hkv``; it must divide each layer's current ``Hkv``.
        method: ``"mean"`` or ``"first"``.

    Returns:
        A new module; ``module`` is not modified. Given one attention layer, a copy
        of it with the pooled ``W_k`` and ``W_v`` (of its own class, a subclass
        included; a :class:`MultiHeadAttention` becomes a
        :class:`GroupedQueryAttention`); given any other module, a deep copy with every
        attention layer inside converted (submodules the layers share, such as a
        :class:`~attention_lib.LlamaModel`'s rotary embedding, stay shared, and a
        ``LlamaModel``'s ``config.num_kv_heads`` follows).
    """
    if method not in ("mean", "first"):
        raise ValueError(
            f"convert_to_gqa: expected method 'mean' or 'first', got {method!r}"
        )
    check_size("convert_to_gqa", num_kv_heads=num_kv_heads)
    if isinstance(module, GroupedQueryAttention):
        return _convert_layer(module, num_kv_heads, method)
    if not isinstance(module, nn.Module):
        raise ValueError(
            f"convert_to_gqa: expected an nn.Module, got {type(module).__name__}"
        )
    converted = copy.deepcopy(module)
    # remove_duplicate=False: a layer registered under two names (tied) is listed
    # under both, so every registration is replaced -- by the same new layer, which
    # keeps the tie.
    layers = [
        (name, m)
        for name, m in converted.named_modules(remove_duplicate=False)
        if isinstance(m, GroupedQueryAttention)
    ]
    if not layers:
        raise ValueError(
            f"convert_to_gqa: {type(module).__name__} contains no "
            "GroupedQueryAttention layer"
        )
    # The layers of our own copy are converted in place: what they share with the rest
    # of the model (LlamaModel's one rotary embedding, say) stays shared, and a layer
    # registered under two names is converted once. A bad num_kv_heads raises in the
    # copy, which is dropped.
    done: set[int] = set()
    for _, layer in layers:
        if id(layer) not in done:
            done.add(id(layer))
            _convert_layer(layer, num_kv_heads, method, in_place=True)
    for m in converted.modules():
        if hasattr(m, "_gqa_converted"):  # a model whose config names Hkv (LlamaModel)
            m._gqa_converted()
    return converted


def _convert_layer(
    layer: GroupedQueryAttention, num_kv_heads: int, method: str, in_place=False
) -> GroupedQueryAttention:
    H, old_Hkv, d, E = (
        layer.num_heads,
        layer.num_kv_heads,
        layer.head_dim,
        layer.num_hiddens,
    )
    if old_Hkv % num_kv_heads:
        raise ValueError(
            "convert_to_gqa: expected num_kv_heads to divide the layer's current "
            f"{old_Hkv} key/value heads, got {num_kv_heads}"
        )
    # A copy of the layer (its class -- a subclass with a rotary embedding, say --,
    # W_q, W_o, dropout, device, dtype, training mode) with new, pooled W_k and W_v;
    # in_place: the layer itself (one already in convert_to_gqa's copy of a model).
    new = layer if in_place else copy.deepcopy(layer)
    old_W = {name: getattr(layer, name) for name in ("W_k", "W_v")}
    new.num_kv_heads = num_kv_heads
    new.attention_weights = None
    if type(new) is MultiHeadAttention and num_kv_heads != H:
        new.__class__ = GroupedQueryAttention  # the same layer, fewer kv heads
    group = old_Hkv // num_kv_heads  # old kv heads pooled into one new head

    def pool(t: torch.Tensor) -> torch.Tensor:
        """``(old_Hkv * d, ...)`` -> ``(num_kv_heads * d, ...)``."""
        heads = t.reshape(num_kv_heads, group, d, *t.shape[1:])  # (Hkv, group, d, ...)
        pooled = heads.mean(dim=1) if method == "mean" else heads[:, 0]
        return pooled.reshape(num_kv_heads * d, *t.shape[1:])

    with torch.no_grad():
        for name in ("W_k", "W_v"):
            old = old_W[name]
            fresh = nn.Linear(
                E, num_kv_heads * d, bias=old.bias is not None,
                device=old.weight.device, dtype=old.weight.dtype,
            )  # fmt: skip
            fresh.weight.copy_(pool(old.weight))  # (Hkv*d, E)
            if old.bias is not None:
                fresh.bias.copy_(pool(old.bias))  # (Hkv*d,)
            setattr(new, name, fresh)
    if hasattr(new, "_pack_kv"):  # FastGroupedQueryAttention: W_k, W_v side by side
        new._pack_kv()
    return new
