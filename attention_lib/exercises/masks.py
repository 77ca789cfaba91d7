"""Exercises 3.1 (the masked softmax) and 6.1 (causal attention when the queries are the
last of the positions)."""

from __future__ import annotations

import torch

from ..masking import masked_softmax
from ..scoring import dot_product_attention
from .families import (
    CAUSAL,
    MASK,
    SCALE,
    SOFTMAX,
    causal_keep,
    length_mask,
    mistakes,
    scale_factor,
)
from .families import weights as _weights
from .spec import Case, Exercise, in_float32, integer, randn

# -- 3.1 masked softmax --


def masked_softmax_reference(X, valid_lens):
    """``X (B, Q, K)``, ``valid_lens (B,)`` or ``(B, Q)`` -> weights ``(B, Q, K)``."""
    return masked_softmax(X, valid_lens)


def _ms_inputs(per_query=False, empty=False, K=None):
    def make(g):
        B, Q, k = integer(g, 1, 4), integer(g, 1, 4), K or integer(g, 1, 7)
        shape = (B, Q) if per_query else (B,)
        lens = torch.randint(0 if empty else 1, k + 1, shape, generator=g)
        if empty:
            lens.view(-1)[0] = 0  # one example (or query) with no valid key
        return (randn(g, B, Q, k) * 2, lens), {}

    return make


def _ms_wrong(keep="right", **options):
    def wrong(X, valid_lens):
        keep_ = length_mask(valid_lens, X.shape[-1], keep, X.shape[-2])
        return _weights(X, keep_, **options)

    return wrong


EX_3_1 = Exercise(
    "3.1",
    "masked_softmax",
    "masked_softmax(X, valid_lens)",
    masked_softmax_reference,
    (
        Case("lengths per example", _ms_inputs(), 14),
        Case("lengths per query", _ms_inputs(per_query=True), 12),
        Case("float32", in_float32(_ms_inputs(per_query=True)), 6),
        Case("a length of 0: a fully masked row", _ms_inputs(empty=True), 4),
        Case("a length of 0: a fully masked row", _ms_inputs(True, True), 4),
        Case("one key", _ms_inputs(K=1, empty=True), 2),
    ),
    mistakes(_ms_wrong, MASK)
    + mistakes(_ms_wrong, SOFTMAX, only=("softmax-over-queries", "divide-by-sum")),
)


# -- 6.1 causal attention, queries at the end --


def causal_attention(queries, keys, values):
    """``queries (B, Q, D)`` are the *last* ``Q`` of ``K`` positions (``Q <= K``),
    ``keys (B, K, D)``, ``values (B, K, Dv)`` -> ``(B, Q, Dv)``: query ``i`` (position
    ``K - Q + i``) sees the keys up to its own position, scaled dot-product scores."""
    return dot_product_attention(queries, keys, values, is_causal=True)[0]


def _causal_inputs(Q=None, square=False):
    def make(g):
        B, k = integer(g, 1, 3), integer(g, 1, 8)
        q = k if square else (Q or integer(g, 1, k))
        D, Dv = integer(g, 1, 6), integer(g, 1, 4)
        return (randn(g, B, q, D), randn(g, B, k, D), randn(g, B, k, Dv)), {}

    return make


def _causal_wrong(causal="bottom-right", scale="sqrt", **options):
    def wrong(q, k, v):
        s = q @ k.transpose(-1, -2) * scale_factor(scale, q.shape[-1], v.shape[-1])
        return _weights(s, causal_keep(q.shape[-2], k.shape[-2], causal), **options) @ v

    return wrong


#: 6.1's own: the diagonal one step too low with a large negative fill (d2l's -1e6,
#: -1e9, finfo.min), which is right for a causal mask except where a row keeps no key.
CAUSAL_LARGE_FILL = (
    (
        "excludes-itself-large-fill",
        "each query is masked from its own position (tril(K - Q - 1), the diagonal one "
        "step too low): a token attends to itself too, tril(K - Q). With a large "
        "negative fill (-1e9) the first query, which then sees no key, gets uniform "
        "weights over all the keys",
        {"causal": "strict", "fill": -1e6},
    ),
)

EX_6_1 = Exercise(
    "6.1",
    "causal_attention",
    "causal_attention(queries, keys, values)",
    causal_attention,
    (
        Case("the last Q of K positions", _causal_inputs(), 14),
        Case("self-attention: Q = K", _causal_inputs(square=True), 5),
        Case("one new query after the cached keys", _causal_inputs(Q=1), 5),
        Case("float32", in_float32(_causal_inputs()), 6),
    ),
    mistakes(_causal_wrong, CAUSAL, SCALE)
    + mistakes(_causal_wrong, MASK, only=("fill-zero", "mask-after-softmax"))
    + mistakes(_causal_wrong, SOFTMAX, only=("softmax-over-queries",))
    + mistakes(_causal_wrong, CAUSAL_LARGE_FILL),
)
