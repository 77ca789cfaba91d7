"""Exercises 7.1 and 7.2 (splitting and merging heads), 7.3 (the whole multi-head
layer from its weight matrices), 8.1 (the core of grouped-query attention) and 8.2 (a
decode step with a KV cache)."""

from __future__ import annotations

import math

import torch

from ..multihead import merge_heads, repeat_kv, split_heads
from ..scoring import dot_product_attention
from .families import CACHE, HEADS, SCALE, SOFTMAX, causal_keep, mistakes, scale_factor
from .families import weights as _weights
from .spec import Case, Exercise, Mistake, in_float32, integer, randn

# -- 7.1 / 7.2 split and merge heads --


def _split_inputs(n=None, H=None):
    def make(g):
        B, heads, d = integer(g, 1, 3), H or integer(g, 2, 4), integer(g, 1, 4)
        return (randn(g, B, n or integer(g, 1, 5), heads * d), heads), {}

    return make


EX_7_1 = Exercise(
    "7.1",
    "split_heads",
    "split_heads(X, num_heads)",
    split_heads,
    (
        Case("random sizes", _split_inputs(), 10),
        Case("one token", _split_inputs(n=1), 2),
        Case("one head", _split_inputs(H=1), 2),
        Case("float32", in_float32(_split_inputs()), 3),
    ),
    (
        Mistake(
            "reshape-without-transpose",
            "X was reshaped straight to (B, H, n, d): that mixes tokens between heads. "
            "Reshape to (B, n, H, d) first, then swap the n and H axes (transpose(1, "
            "2))",
            lambda X, H: X.reshape(X.shape[0], H, X.shape[1], X.shape[2] // H),
        ),
        Mistake(
            "interleaved-heads",
            "the features are dealt to the heads in turn (feature j to head j mod H): "
            "head h owns the contiguous block of features h*d .. h*d + d - 1",
            lambda X, H: X.reshape(X.shape[0], X.shape[1], X.shape[2] // H, H).permute(
                0, 3, 1, 2
            ),
        ),
        Mistake(
            "no-transpose",
            "the result is (B, n, H, d); the heads axis comes second: (B, H, n, d)",
            lambda X, H: X.reshape(X.shape[0], X.shape[1], H, X.shape[2] // H),
        ),
        Mistake(
            "transpose-then-reshape",
            "X was transposed to (B, E, n) before the reshape: that mixes tokens and "
            "features. Reshape (B, n, E) to (B, n, H, d) first, then swap the n and H "
            "axes",
            lambda X, H: X.transpose(1, 2).reshape(
                X.shape[0], H, X.shape[1], X.shape[2] // H
            ),
        ),
        Mistake(
            "tokens-split",
            "the tokens are shared out among the heads (chunk along dim 1): every head "
            "sees every token, and gets its own block of d features of the last axis",
            lambda X, H: torch.stack(X.chunk(H, dim=1), dim=1),
        ),
    ),
)


def _merge_inputs(n=None):
    def make(g):
        B, H, d = integer(g, 1, 3), integer(g, 2, 4), integer(g, 1, 4)
        return (randn(g, B, H, n or integer(g, 1, 5), d),), {}

    return make


EX_7_2 = Exercise(
    "7.2",
    "merge_heads",
    "merge_heads(X)",
    merge_heads,
    (
        Case("random sizes", _merge_inputs(), 10),
        Case("one token", _merge_inputs(n=1), 2),
        Case("float32", in_float32(_merge_inputs()), 3),
    ),
    (
        Mistake(
            "reshape-without-transpose",
            "X (B, H, n, d) was reshaped straight to (B, n, H*d): that mixes tokens. "
            "Swap to (B, n, H, d) first (transpose(1, 2)), then reshape",
            lambda X: X.reshape(X.shape[0], X.shape[2], X.shape[1] * X.shape[3]),
        ),
        Mistake(
            "interleaved",
            "the heads' features are interleaved (feature j of every head side by "
            "side); head h's d features must stay one contiguous block",
            lambda X: X.permute(0, 2, 3, 1).reshape(
                X.shape[0], X.shape[2], X.shape[1] * X.shape[3]
            ),
        ),
        Mistake(
            "not-merged",
            "the heads are moved next to the tokens but not merged: reshape the (B, n, "
            "H, d) result to (B, n, H*d)",
            lambda X: X.transpose(1, 2),
        ),
        Mistake(
            "wrong-axes-swapped",
            "the n and d axes were swapped (transpose(2, 3)); swap the heads and the "
            "tokens, transpose(1, 2), to get (B, n, H, d), then reshape",
            lambda X: X.transpose(2, 3).reshape(
                X.shape[0], X.shape[2], X.shape[1] * X.shape[3]
            ),
        ),
        Mistake(
            "tokens-merged-too",
            "the tokens were flattened with the heads (flatten(1)): only the last two "
            "axes of (B, n, H, d) are merged, flatten(2), giving (B, n, H*d)",
            lambda X: X.transpose(1, 2).flatten(1),
        ),
        Mistake(
            "view-not-contiguous",
            ".view was called on the transposed tensor: after transpose(1, 2) its "
            "memory is not in (B, n, H, d) order, so view fails when H > 1 and n > 1; "
            "use .reshape (or .contiguous().view)",
            lambda X: X.transpose(1, 2).view(
                X.shape[0], X.shape[2], X.shape[1] * X.shape[3]
            ),
        ),
    ),
)


# -- 7.3 the whole multi-head layer, from its four weight matrices --


def mha_reference(queries, keys, values, W_q, W_k, W_v, W_o, num_heads):
    """``queries (B, Q, E)``, ``keys`` and ``values (B, K, E)``, ``W_q, W_k, W_v, W_o
    (E, E)`` in ``nn.Linear``'s layout ``(out, in)`` -> ``(B, Q, E)``: project, split
    into ``H`` heads of width ``d = E / H``, scaled dot-product attention in each head,
    merge, project with ``W_o`` (no bias, no mask)."""
    q = split_heads(queries @ W_q.T, num_heads)  # (B, Q, E) -> (B, H, Q, d)
    k = split_heads(keys @ W_k.T, num_heads)  # (B, K, E) -> (B, H, K, d)
    v = split_heads(values @ W_v.T, num_heads)  # (B, K, E) -> (B, H, K, d)
    out = dot_product_attention(q, k, v)[0]  # (B, H, Q, d)
    return merge_heads(out) @ W_o.T  # (B, H, Q, d) -> (B, Q, E) -> (B, Q, E)


def _mha_inputs(H=None, d=None, n=None, self_attention=False):
    def make(g):
        B, heads = integer(g, 1, 2), H or integer(g, 2, 4)
        width = d or integer(g, 2, 4)
        Q, K = n or integer(g, 1, 4), n or integer(g, 2, 5)
        E = heads * width
        queries = randn(g, B, Q, E)
        keys = queries if self_attention else randn(g, B, K, E)
        values = queries if self_attention else randn(g, B, K, E)
        # nn.Linear's scale (entries of size 1/sqrt(E)): the projections stay of size
        # 1, so the softmax is not saturated and a wrong scale shows
        W = [randn(g, E, E) / math.sqrt(E) for _ in range(4)]
        return (queries, keys, values, *W, heads), {}

    return make


def _split(X, H, how):
    """``(B, n, E)`` -> ``(B, H, n, d)``, right or as a mistake splits it."""
    B, n, E = X.shape
    if how == "reshape":  # straight to (B, H, n, d): tokens dealt to the heads
        return X.reshape(B, H, n, E // H)
    if how == "interleave":  # feature j to head j mod H
        return X.reshape(B, n, E // H, H).permute(0, 3, 1, 2)
    return X.reshape(B, n, H, E // H).transpose(1, 2)


def _merge(X, how):
    """``(B, H, n, d)`` -> ``(B, n, H d)``, right or as a mistake merges it."""
    B, H, n, d = X.shape
    if how == "reshape":
        return X.reshape(B, n, H * d)
    if how == "interleave":
        return X.permute(0, 2, 3, 1).reshape(B, n, H * d)
    return X.transpose(1, 2).reshape(B, n, H * d)


def mha(
    queries,
    keys,
    values,
    W_q,
    W_k,
    W_v,
    W_o,
    H,
    *,
    split="right",
    merge="right",
    transposed=True,
    output=True,
    scale="sqrt",
    dim=-1,
    **options,
):
    """The multi-head layer of 7.3 with a mistake switched on: ``split`` / ``merge``
    ("reshape", "interleave"), ``transposed=False`` (``X @ W``), ``output=False`` (no
    ``W_o``), ``scale`` (:func:`scale_factor`), ``dim`` (the softmax's axis)."""

    def project(X, W):
        return X @ (W.T if transposed else W)

    q = _split(project(queries, W_q), H, split)  # (B, H, Q, d)
    k = _split(project(keys, W_k), H, split)  # (B, H, K, d)
    v = _split(project(values, W_v), H, split)  # (B, H, K, d)
    d = q.shape[-1]
    s = q @ k.transpose(-1, -2) * scale_factor(scale, d, heads=H)  # (B, H, Q, K)
    out = _merge(_weights(s, None, dim=dim, **options) @ v, merge)  # (B, Q, E)
    return project(out, W_o) if output else out


EX_7_3 = Exercise(
    "7.3",
    "multi_head_attention",
    "multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o, num_heads)",
    mha_reference,
    (
        Case("random sizes", _mha_inputs(), 12),
        Case(
            "self-attention: queries, keys and values are one tensor",
            _mha_inputs(self_attention=True),
            2,
        ),
        Case("one head", _mha_inputs(H=1), 2),
        Case("one query and one key", _mha_inputs(n=1), 2),
        Case("float32", in_float32(_mha_inputs()), 4),
    ),
    (
        Mistake(
            "heads-split-without-transpose",
            "the projections (B, n, E) were reshaped straight to (B, H, n, d), and "
            "the heads back the same way: that deals tokens, not features, to the "
            "heads. Reshape to (B, n, H, d) and swap the n and H axes (transpose(1, "
            "2)); to merge, swap them back before the reshape to (B, n, E)",
            lambda *a: mha(*a, split="reshape", merge="reshape"),
        ),
        Mistake(
            "split-without-transpose",
            "the projections (B, n, E) were reshaped straight to (B, H, n, d): that "
            "deals tokens, not features, to the heads. Reshape to (B, n, H, d) first, "
            "then swap the n and H axes (transpose(1, 2))",
            lambda *a: mha(*a, split="reshape"),
        ),
        Mistake(
            "merge-without-transpose",
            "the heads (B, H, n, d) were reshaped straight to (B, n, H*d): that mixes "
            "tokens. Swap to (B, n, H, d) first (transpose(1, 2)), then reshape",
            lambda *a: mha(*a, merge="reshape"),
        ),
        Mistake(
            "interleaved-heads",
            "the features are dealt to the heads in turn (feature j to head j mod H): "
            "head h owns the contiguous block of features h*d .. h*d + d - 1 of each "
            "projection",
            lambda *a: mha(*a, split="interleave", merge="interleave"),
        ),
        Mistake(
            "no-output-projection",
            "the merged heads are returned as they are: the layer ends with the output "
            "projection, concat @ W_o.T",
            lambda *a: mha(*a, output=False),
        ),
        Mistake(
            "weights-not-transposed",
            "the inputs were multiplied by the weights as they are (X @ W): the "
            "weights are in nn.Linear's layout (out, in), so a projection is X @ W.T",
            lambda *a: mha(*a, transposed=False),
        ),
        Mistake(
            "softmax-over-heads",
            "the softmax runs over the heads (dim=1 of the (B, H, Q, K) scores): each "
            "query's weights must sum to 1 over the keys, the last axis (dim=-1)",
            lambda *a: mha(*a, dim=1),
        ),
    )
    + mistakes(
        lambda **o: lambda *a: mha(*a, **o),
        HEADS,
        SCALE,
        SOFTMAX,
        only=(
            "scale-by-model-width",
            "no-scale",
            "divide-by-width",
            "times-sqrt-width",
            "softmax-over-queries",
        ),
    ),
)


# -- 8.1 grouped-query attention core, 8.2 a cached decode step --


def gqa_reference(queries, keys, values):
    """``queries (B, H, Q, d)``, ``keys`` and ``values (B, Hkv, K, d)`` -> ``(B, H, Q,
    d)``: query head ``h`` uses key/value head ``h // (H / Hkv)``; causal is off."""
    n_rep = queries.shape[1] // keys.shape[1]
    return dot_product_attention(
        queries, repeat_kv(keys, n_rep), repeat_kv(values, n_rep)
    )[0]


def _gqa_inputs(Hkv=None, g_=None):
    def make(g):
        B, hkv, group = (
            integer(g, 1, 2),
            Hkv or integer(g, 1, 3),
            g_ or integer(g, 2, 3),
        )
        Q, K, d = integer(g, 1, 4), integer(g, 1, 5), integer(g, 1, 6)
        H = hkv * group
        return (
            randn(g, B, H, Q, d),
            randn(g, B, hkv, K, d),
            randn(g, B, hkv, K, d),
        ), {}

    return make


def gqa(q, k, v, *, share="interleave", scale="sqrt", causal="none", **options):
    """Grouped-query attention with a mistake switched on (``share``: how key/value
    heads are shared)."""
    H, Hkv = q.shape[1], k.shape[1]
    n_rep = H // Hkv
    if share == "mean-query":
        grouped = q.reshape(q.shape[0], Hkv, n_rep, *q.shape[2:]).mean(2)
        out = gqa(grouped, k, v, scale=scale, causal=causal, **options)
        return out.repeat_interleave(n_rep, dim=1)
    if share == "repeat":
        k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
    elif share == "expand":  # right for one key/value head (or H), raises otherwise
        k = k.expand(k.shape[0], H, *k.shape[2:])
        v = v.expand(v.shape[0], H, *v.shape[2:])
    elif share == "divisor":
        index = (torch.arange(H) // Hkv).clamp(max=Hkv - 1)
        k, v = k[:, index], v[:, index]
    else:
        k, v = k.repeat_interleave(n_rep, 1), v.repeat_interleave(n_rep, 1)
    s = q @ k.transpose(-1, -2) * scale_factor(scale, q.shape[-1], heads=H)
    keep = causal_keep(q.shape[-2], k.shape[-2], causal)
    return _weights(s, keep, **options) @ v


EX_8_1 = Exercise(
    "8.1",
    "grouped_query_attention",
    "grouped_query_attention(queries, keys, values)",
    gqa_reference,
    (
        Case("random sizes, 2 or 3 query heads per key/value head", _gqa_inputs(), 14),
        Case("MQA: one key/value head", _gqa_inputs(Hkv=1), 4),
        Case("MHA: as many key/value heads as query heads", _gqa_inputs(g_=1), 2),
        Case("float32", in_float32(_gqa_inputs()), 6),
    ),
    mistakes(
        lambda **o: lambda q, k, v: gqa(q, k, v, **o),
        HEADS,
        SCALE,
        SOFTMAX,
        only=(
            "repeat-not-interleave",
            "group-index-divisor",
            "expand-one-head",
            "shared-query",
            "scale-by-model-width",
            "no-scale",
            "divide-by-width",
            "times-sqrt-width",
            "softmax-over-queries",
        ),
    ),
)


def decode_step_reference(q_new, k_new, v_new, cache_k, cache_v):
    """One decode step with a KV cache: ``q_new (B, H, 1, d)``, ``k_new, v_new (B, Hkv,
    1, d)``, ``cache_k, cache_v (B, Hkv, T, d)`` -> ``(out (B, H, 1, d), keys (B, Hkv, T
    + 1, d), values (B, Hkv, T + 1, d))``: append, then attend over all T + 1."""
    keys = torch.cat([cache_k, k_new], dim=2)
    values = torch.cat([cache_v, v_new], dim=2)
    return gqa_reference(q_new, keys, values), keys, values


def _decode_inputs(T=None, group=None):
    def make(g):
        B, Hkv, n_rep = integer(g, 1, 2), integer(g, 1, 2), group or integer(g, 1, 3)
        t, d = integer(g, 1, 6) if T is None else T, integer(g, 1, 5)
        H = Hkv * n_rep
        return (
            randn(g, B, H, 1, d),
            randn(g, B, Hkv, 1, d),
            randn(g, B, Hkv, 1, d),
            randn(g, B, Hkv, t, d),
            randn(g, B, Hkv, t, d),
        ), {}

    return make


def _decode_wrong(order="append-first", returned="new", **options):
    def wrong(q, k, v, ck, cv):
        keys, values = torch.cat([ck, k], 2), torch.cat([cv, v], 2)
        if order == "prepend":
            keys, values = torch.cat([k, ck], 2), torch.cat([v, cv], 2)
        if order == "attend-first":
            if ck.shape[2]:
                out = gqa(q, ck, cv, **options)
            else:
                out = torch.zeros_like(q)
        else:
            out = gqa(q, keys, values, **options)
        if returned == "old":
            return out, ck, cv
        if returned == "expanded":
            n_rep = q.shape[1] // k.shape[1]
            return out, repeat_kv(keys, n_rep), repeat_kv(values, n_rep)
        return out, keys, values

    return wrong


EX_8_2 = Exercise(
    "8.2",
    "decode_step",
    "decode_step(q_new, k_new, v_new, cache_k, cache_v)",
    decode_step_reference,
    (
        Case("random sizes, 1 to 6 cached tokens", _decode_inputs(), 14),
        Case("an empty cache (the first token)", _decode_inputs(T=0), 3),
        Case("two query heads per key/value head", _decode_inputs(group=2), 3),
        Case("float32", in_float32(_decode_inputs(group=2)), 6),
    ),
    (
        Mistake(
            "attend-before-append",
            "the new token's key and value are appended after attending: the new "
            "query must see its own key too (append first, then attend over T + 1)",
            _decode_wrong(order="attend-first"),
        ),
        Mistake(
            "prepended",
            "the new key and value went to the front of the cache; they belong at the "
            "end (position T), so that the cache stays in token order",
            _decode_wrong(order="prepend"),
        ),
        Mistake(
            "cache-not-returned",
            "the cache returned is the old one: return the keys and values with the "
            "new token appended, for the next step",
            _decode_wrong(returned="old"),
        ),
        Mistake(
            "expanded-cache",
            "the cache returned has one key/value head per query head: keep the cache "
            "at Hkv heads (its whole point is to be small) and repeat the heads only "
            "for the attention",
            _decode_wrong(returned="expanded"),
        ),
    )
    + mistakes(
        _decode_wrong,
        CACHE,
        HEADS,
        SCALE,
        only=(
            "is-causal-over-cache",
            "repeat-not-interleave",
            "shared-query",
            "no-scale",
            "divide-by-width",
            "times-sqrt-width",
            "scale-by-model-width",
        ),
    ),
)
