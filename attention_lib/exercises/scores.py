"""Exercises 1.1 (attention pooling), 2.1 (Nadaraya-Watson), 4.1 (additive scores) and
5.1 (scaled dot-product attention with lengths)."""

from __future__ import annotations

import math

import torch

from ..kernels import gaussian, nadaraya_watson
from ..scoring import dot_product_attention
from .families import MASK, SCALE, SCALED, SOFTMAX, length_mask, mistakes, scale_factor
from .families import weights as _weights
from .spec import Case, Exercise, Mistake, choice, in_float32, integer, randn, uniform

# -- 1.1 attention pooling --


def attention_pooling(queries, keys, values):
    """``queries (Q, D)``, ``keys (K, D)``, ``values (K, Dv)`` -> ``(Q, Dv)``: each
    query's softmax-weighted average of the values, weighted by its dot products with
    the keys."""
    return torch.softmax(queries @ keys.T, dim=-1) @ values


def _pooling(Q=None, K=None, scale=None):
    def make(g):
        q, k = Q or integer(g, 1, 6), K or integer(g, 1, 7)
        D, Dv = integer(g, 1, 6), integer(g, 1, 4)
        s = scale if scale is not None else choice(g, (0.5, 1.0, 2.0))
        return (s * randn(g, q, D), s * randn(g, k, D), randn(g, k, Dv)), {}

    return make


def _pooling_wrong(scale="none", **options):
    def wrong(q, k, v):
        s = q @ k.T * scale_factor(scale, q.shape[-1])
        return _weights(s, **options) @ v

    return wrong


EX_1_1 = Exercise(
    "1.1",
    "attention_pooling",
    "attention_pooling(queries, keys, values)",
    attention_pooling,
    (
        Case("random sizes", _pooling(), 16),
        Case("float32", in_float32(_pooling()), 8),
        Case("one query or one key", _pooling(Q=1), 3),
        Case("one query or one key", _pooling(K=1), 3),
        Case("large scores (exp overflows)", _pooling(scale=30.0), 4),
        Case("large scores, float32", in_float32(_pooling(scale=8.0)), 4),
    ),
    mistakes(_pooling_wrong, SOFTMAX, SCALED)
    + (
        Mistake(
            "pooled-keys",
            "the weights average the keys; attention pooling averages the values",
            lambda q, k, v: torch.softmax(q @ k.T, dim=-1) @ k,
        ),
        Mistake(
            "distance-score",
            "the scores are minus the squared distances, -|q - k|^2 / 2 (chapter 2's "
            "Gaussian kernel): this exercise's score is the dot product q . k",
            lambda q, k, v: torch.softmax(-(torch.cdist(q, k) ** 2) / 2, dim=-1) @ v,
        ),
    ),
)


# -- 2.1 Nadaraya-Watson --


def nw_reference(x_train, y_train, x_query, bandwidth):
    """``x_train, y_train (K,)``, ``x_query (Q,)``, ``bandwidth`` -> ``(Q,)``: the
    Gaussian-kernel Nadaraya-Watson estimate."""
    return nadaraya_watson(x_train, y_train, x_query, gaussian, bandwidth)[0]


def _nw_inputs(K=None, outside=False, far=False):
    def make(g):
        k, q = K or integer(g, 2, 20), integer(g, 1, 8)
        h = uniform(g, 0.3, 3.0)
        x = torch.rand(k, generator=g, dtype=torch.float64) * 5
        y = torch.sin(x) + 0.3 * randn(g, k)
        lo, hi = (-2.0 * h, 5 + 2.0 * h) if outside else (0.0, 5.0)
        if far:  # exp(-u^2 / 2) underflows to 0 for every training point
            lo, hi = 5 + 45.0 * h, 5 + 60.0 * h
        queries = lo + (hi - lo) * torch.rand(q, generator=g, dtype=torch.float64)
        return (x, y, queries, h), {}

    return make


def _nw(
    x,
    y,
    q,
    h,
    *,
    divide="h",
    kernel="half",
    axis=-1,
    normalise=True,
    data=None,
    shift=True,
):
    d = q[:, None] - x[None, :]  # (Q, K)
    if divide == "none":
        u2 = d**2
    elif divide == "times":
        u2 = (d * h) ** 2
    elif divide == "h-squared":
        u2 = (d / h**2) ** 2
    elif divide == "outside":
        u2 = d**2 / h
    else:
        u2 = (d / h) ** 2
    a = {"half": -u2 / 2, "no-half": -u2, "abs": -u2.sqrt() / 2}[kernel]
    if normalise == "density":
        return (torch.exp(a) / math.sqrt(2 * math.pi)) @ (y if data is None else x)
    if shift and normalise:  # as torch.softmax does: exp never underflows everywhere
        a = a - a.amax(axis, keepdim=True)
    w = torch.exp(a)
    if normalise:
        w = w / w.sum(axis, keepdim=True)
    return w @ (y if data is None else x)


def _nw_mistake(name, diagnosis, **options):
    return Mistake(name, diagnosis, lambda x, y, q, h: _nw(x, y, q, h, **options))


EX_2_1 = Exercise(
    "2.1",
    "nadaraya_watson",
    "nadaraya_watson(x_train, y_train, x_query, bandwidth)",
    nw_reference,
    (
        Case("random data and bandwidths", _nw_inputs(), 16),
        Case("float32", in_float32(_nw_inputs()), 8),
        Case("one training point", _nw_inputs(K=1), 3),
        Case("queries outside the data", _nw_inputs(outside=True), 4),
        Case("queries far from every training point", _nw_inputs(far=True), 3),
    ),
    (
        _nw_mistake(
            "no-bandwidth",
            "the distances are not divided by the bandwidth h: the kernel is "
            "K((x_query - x_i) / h)",
            divide="none",
        ),
        _nw_mistake(
            "times-bandwidth",
            "the distances are multiplied by the bandwidth; divide by it: a larger h "
            "must average more widely",
            divide="times",
        ),
        _nw_mistake(
            "bandwidth-squared",
            "the distances are divided by h**2; the kernel's argument is (x_query - "
            "x_i) / h",
            divide="h-squared",
        ),
        _nw_mistake(
            "squared-distance-over-h",
            "the squared distance is divided by h, not by h**2: u = (x_query - x_i) / "
            "h, and the kernel is exp(-u**2 / 2)",
            divide="outside",
        ),
        _nw_mistake(
            "normalised-over-queries",
            "the weights are normalised over the queries; each query's weights must "
            "sum to 1 over the training points",
            axis=0,
        ),
        _nw_mistake(
            "kernel-without-half",
            "the Gaussian kernel here is exp(-u**2 / 2): the 1/2 is missing (that is a "
            "different bandwidth)",
            kernel="no-half",
        ),
        _nw_mistake(
            "not-normalised",
            "the kernel values are not normalised: divide each query's weights by "
            "their sum over the training points, so that they sum to 1",
            normalise=False,
        ),
        _nw_mistake(
            "averages-x",
            "the weights average the training inputs x_train; the estimate averages "
            "their labels y_train",
            data="x",
        ),
        _nw_mistake(
            "kernel-underflows",
            "exp(-u**2 / 2) is divided by its sum as it is: for a query far from every "
            "training point every exp underflows to 0, and 0 / 0 = NaN. Subtract each "
            "query's largest -u**2 / 2 first (torch.softmax does it, section 2.1)",
            shift=False,
        ),
        _nw_mistake(
            "absolute-distance",
            "the kernel uses |u| (exp(-|u| / 2), a Laplace kernel): the Gaussian "
            "kernel is exp(-u**2 / 2)",
            kernel="abs",
        ),
        _nw_mistake(
            "density-not-normalised",
            "the weights are the Gaussian density's values, exp(-u**2 / 2) / "
            "sqrt(2 pi), not normalised: divide each query's kernel values by their "
            "sum over the training points",
            normalise="density",
        ),
    ),
)


# -- 4.1 additive attention scores --


def additive_scores(queries, keys, W_q, W_k, w_v):
    """``queries (B, Q, Dq)``, ``keys (B, K, Dk)``, ``W_q (h, Dq)``, ``W_k (h, Dk)``,
    ``w_v (h,)`` -> scores ``(B, Q, K)``: ``w_v . tanh(W_q q + W_k k)``."""
    features = (queries @ W_q.T)[:, :, None, :] + (keys @ W_k.T)[:, None, :, :]
    return torch.tanh(features) @ w_v  # (B, Q, K, h) @ (h,) -> (B, Q, K)


def _add_inputs(square=False, Q=None):
    def make(g):
        B, q, k = integer(g, 1, 3), Q or integer(g, 1, 4), integer(g, 1, 5)
        Dq, Dk, h = integer(g, 1, 5), integer(g, 1, 5), integer(g, 1, 6)
        if square:
            Dk = h = Dq
        return (
            randn(g, B, q, Dq),
            randn(g, B, k, Dk),
            randn(g, h, Dq),
            randn(g, h, Dk),
            randn(g, h),
        ), {}

    return make


def _additive(q, k, Wq, Wk, wv, *, combine="sum", tanh="inside", weigh="w_v"):
    a, b = (q @ Wq.T)[:, :, None, :], (k @ Wk.T)[:, None, :, :]
    f = a + b if combine == "sum" else a * b
    if tanh == "inside":
        f = torch.tanh(f)
    s = f @ wv if weigh == "w_v" else f.sum(-1)
    return torch.tanh(s) if tanh == "after" else s


EX_4_1 = Exercise(
    "4.1",
    "additive_scores",
    "additive_scores(queries, keys, W_q, W_k, w_v)",
    additive_scores,
    (
        Case("random sizes (D_q, D_k and h differ)", _add_inputs(), 14),
        Case("float32", in_float32(_add_inputs()), 6),
        Case("one query", _add_inputs(Q=1), 3),
        Case("D_q = D_k = h", _add_inputs(square=True), 4),
    ),
    (
        Mistake(
            "no-tanh",
            "the tanh is missing: without it the score is linear in q and k and "
            "w_v . (W_q q + W_k k) splits into a query part plus a key part",
            lambda q, k, Wq, Wk, wv: _additive(q, k, Wq, Wk, wv, tanh="none"),
        ),
        Mistake(
            "tanh-after-wv",
            "tanh is applied after w_v; it belongs inside: w_v . tanh(W_q q + W_k k)",
            lambda q, k, Wq, Wk, wv: _additive(q, k, Wq, Wk, wv, tanh="after"),
        ),
        Mistake(
            "same-projection",
            "the keys are projected with W_q too: W_q projects the queries, W_k the "
            "keys",
            lambda q, k, Wq, Wk, wv: _additive(q, k, Wq, Wq, wv),
        ),
        Mistake(
            "product-not-sum",
            "the projected query and key are multiplied; additive attention adds them "
            "before the tanh",
            lambda q, k, Wq, Wk, wv: _additive(q, k, Wq, Wk, wv, combine="product"),
        ),
        Mistake(
            "no-w_v",
            "the tanh features are summed over h instead of weighted by w_v: the score "
            "is w_v . tanh(...), a weighted sum",
            lambda q, k, Wq, Wk, wv: _additive(q, k, Wq, Wk, wv, weigh="sum"),
        ),
        Mistake(
            "projection-not-transposed",
            "the projections are applied untransposed (queries @ W_q): W_q is (h, "
            "D_q), so W_q q is queries @ W_q.T",
            lambda q, k, Wq, Wk, wv: (
                torch.tanh((q @ Wq)[:, :, None, :] + (k @ Wk)[:, None, :, :]) @ wv
            ),
        ),
        Mistake(
            "tanh-on-each",
            "the tanh is applied to the projected query and key separately: it is "
            "applied to their sum, tanh(W_q q + W_k k)",
            lambda q, k, Wq, Wk, wv: (
                (
                    torch.tanh(q @ Wq.T)[:, :, None, :]
                    + torch.tanh(k @ Wk.T)[:, None, :, :]
                )
                @ wv
            ),
        ),
        Mistake(
            "scaled",
            "the scores are divided by sqrt(h): additive attention has no scale (the "
            "1/sqrt(d) of chapter 5 belongs to dot products)",
            lambda q, k, Wq, Wk, wv: (
                additive_scores(q, k, Wq, Wk, wv) / math.sqrt(wv.shape[0])
            ),
        ),
        Mistake(
            "softmax-applied",
            "the result is the softmax of the scores: this function returns the raw "
            "scores (B, Q, K); the softmax (and its mask) come after it",
            lambda q, k, Wq, Wk, wv: torch.softmax(
                additive_scores(q, k, Wq, Wk, wv), dim=-1
            ),
        ),
        Mistake(
            "keys-by-queries",
            "the result is (B, K, Q), one row per key: it is (B, Q, K), one row per "
            "query",
            lambda q, k, Wq, Wk, wv: additive_scores(q, k, Wq, Wk, wv).transpose(1, 2),
        ),
    ),
)


# -- 5.1 scaled dot-product attention --


def sdpa_reference(queries, keys, values, valid_lens):
    """``queries (B, Q, D)``, ``keys (B, K, D)``, ``values (B, K, Dv)``, ``valid_lens
    (B,)`` -> ``(B, Q, Dv)``."""
    return dot_product_attention(queries, keys, values, valid_lens)[0]


def _sdpa_inputs(D=None, K=None, empty=False):
    def make(g):
        B, Q, k = integer(g, 1, 3), integer(g, 1, 4), K or integer(g, 1, 7)
        d, dv = D or integer(g, 1, 8), integer(g, 1, 5)
        lens = torch.randint(1, k + 1, (B,), generator=g)
        if empty:
            lens[integer(g, 0, B - 1)] = 0  # an example with no valid key: output 0
        return (randn(g, B, Q, d), randn(g, B, k, d), randn(g, B, k, dv), lens), {}

    return make


def _sdpa_wrong(scale="sqrt", keep="right", **options):
    def wrong(q, k, v, lens):
        if scale == "key-count":  # 1/sqrt(K), K = keys.shape[1]: the number of keys
            factor = 1 / math.sqrt(k.shape[-2])
        else:
            factor = scale_factor(scale, q.shape[-1], v.shape[-1])
        keep_ = length_mask(lens, k.shape[-2], keep, q.shape[-2])
        return _weights(q @ k.transpose(-1, -2) * factor, keep_, **options) @ v

    return wrong


#: A large negative fill (d2l's -1e6, -1e9, finfo.min) is right except for a length of
#: 0, where it gives uniform weights: these are 5.1's mistakes made with such a fill.
_LARGE_FILL = (
    "; and a query with no valid key (a length of 0) gets uniform weights over the "
    "padding (a large negative fill such as -1e9 does this): it must get all-zero "
    "weights"
)

#: 5.1's own mistakes: the scale from the wrong axis, the softmax over the queries
#: when its masked columns give NaN, and the scale and axis mistakes made with a large
#: negative fill (that fill alone is MASK's d2l-uniform).
SDPA_MISTAKES = (
    (
        "scale-by-key-count",
        "the scores are divided by sqrt(K), the number of keys (keys.shape[1]); the "
        "scale is 1/sqrt(D), D the width of the queries and keys (keys.shape[-1])",
        {"scale": "key-count"},
    ),
    (
        "softmax-over-queries-nan",
        "the softmax runs over the queries (dim=1): each query's weights must sum to 1 "
        "over the keys, the last axis (dim=-1). Over the queries, a padded key's "
        "column is all -inf, so its weights are NaN, and the NaN spreads to every "
        "output",
        {"dim": -2, "empty": "nan"},
    ),
    (
        "no-scale-large-fill",
        "two slips: the scores are not divided by sqrt(d), the square root of the "
        "query/key width (chapter 5)" + _LARGE_FILL,
        {"scale": "none", "fill": -1e6},
    ),
    (
        "scale-by-key-count-large-fill",
        "two slips: the scores are divided by sqrt(K), the number of keys; the scale "
        "is 1/sqrt(D), D the width of the queries and keys" + _LARGE_FILL,
        {"scale": "key-count", "fill": -1e6},
    ),
    (
        "softmax-over-queries-large-fill",
        "the softmax runs over the queries (dim=1): each query's weights must sum to 1 "
        "over the keys, the last axis (dim=-1). Over the queries, a padded key's "
        "column filled with a large negative number gives it weight 1/Q from every "
        "query",
        {"dim": -2, "fill": -1e6},
    ),
)


EX_5_1 = Exercise(
    "5.1",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention(queries, keys, values, valid_lens)",
    sdpa_reference,
    (
        Case("random sizes and lengths", _sdpa_inputs(), 16),
        Case("float32", in_float32(_sdpa_inputs()), 8),
        Case("wide keys, D = 48", _sdpa_inputs(D=48), 4),
        Case("one key", _sdpa_inputs(K=1), 2),
        Case("a length of 0: no valid key, output 0", _sdpa_inputs(empty=True), 4),
    ),
    mistakes(_sdpa_wrong, SCALE)
    + mistakes(
        _sdpa_wrong,
        MASK,
        only=(
            "inverted-mask",
            "fill-zero",
            "off-by-one",
            "no-mask",
            "mask-after-softmax",
            "first-length",
            "nan-row",
            "d2l-uniform",
        ),
    )
    + (
        Mistake(
            "masks-queries",
            "the (B, K) mask was unsqueezed on the last axis, (B, K, 1), so it masks "
            "the queries (rows), not the keys: it must be (B, 1, K)",
            lambda q, k, v, lens: (
                torch.nan_to_num(
                    torch.softmax(
                        (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(
                            ~(torch.arange(k.shape[-2])[None, :] < lens[:, None])[
                                :, :, None
                            ],
                            -math.inf,
                        ),
                        dim=-1,
                    )
                )
                @ v
            ),
        ),
    )
    + mistakes(_sdpa_wrong, SOFTMAX, only=("softmax-over-queries", "no-softmax"))
    + mistakes(_sdpa_wrong, SDPA_MISTAKES),
)
