"""The "write it yourself" exercises, as data: for each, the signature the learner
fills in, the library's answer (the oracle), the cases it is checked on, and the
mistakes learners make, each written as the wrong implementation that makes it (a mutant
of the solution) with its diagnosis. :func:`attention_lib.exercises.check` runs them.

Every input is float64 (so a mistake shows as a difference far above round-off) and
drawn from the check's own ``torch.Generator``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .exercises import Case, Exercise, Mistake
from .kernels import gaussian, nadaraya_watson
from .linear import delta_rule, elu_feature_map, linear_attention
from .masking import causal_mask, masked_softmax
from .multihead import merge_heads, repeat_kv, split_heads
from .rotary import apply_rope, rope_cos_sin, rope_frequencies
from .scoring import dot_product_attention
from .tasks import MQAR_IGNORE
from .tiled import merge_attention


def _randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def _case(description: str, make) -> Case:
    return Case(description, make)


# -- 1.1 attention pooling ------------------------------------------------------------


def attention_pooling(queries, keys, values):
    """``queries (Q, D)``, ``keys (K, D)``, ``values (K, Dv)`` -> ``(Q, Dv)``: each
    query's softmax-weighted average of the values, weighted by its dot products with
    the keys."""
    weights = torch.softmax(queries @ keys.T, dim=-1)  # (Q, K)
    return weights @ values


def _pooling_inputs(Q, K, D, Dv, scale=1.0):
    def make(g):
        return (scale * _randn(g, Q, D), scale * _randn(g, K, D), _randn(g, K, Dv)), {}

    return make


EX_1_1 = Exercise(
    "1.1",
    "attention_pooling",
    "attention_pooling(queries, keys, values)",
    attention_pooling,
    (
        _case("3 queries, 5 keys", _pooling_inputs(3, 5, 4, 2)),
        _case("one query, one key", _pooling_inputs(1, 1, 4, 3)),
        _case("large scores", _pooling_inputs(2, 6, 4, 2, scale=6.0)),
    ),
    (
        Mistake(
            "no-softmax",
            "the weights are the raw scores: turn them into weights that are positive "
            "and sum to 1 over the keys with a softmax",
            lambda q, k, v: (q @ k.T) @ v,
        ),
        Mistake(
            "softmax-over-queries",
            "the softmax runs over the queries (dim=0): each query's weights must sum "
            "to 1 over the keys, the last axis (dim=-1)",
            lambda q, k, v: torch.softmax(q @ k.T, dim=0) @ v,
        ),
        Mistake(
            "divide-by-sum",
            "the scores are divided by their sum instead of exponentiated first "
            "(softmax is exp(s) / sum exp(s))",
            lambda q, k, v: ((q @ k.T) / (q @ k.T).sum(-1, keepdim=True)) @ v,
        ),
        Mistake(
            "pooled-keys",
            "the weights average the keys; attention pooling averages the values",
            lambda q, k, v: torch.softmax(q @ k.T, dim=-1) @ k[:, : v.shape[1]],
        ),
    ),
)


# -- 2.1 Nadaraya-Watson --------------------------------------------------------------


def nw_reference(x_train, y_train, x_query, bandwidth):
    return nadaraya_watson(x_train, y_train, x_query, gaussian, bandwidth)[0]


def _nw_inputs(K, Q, h):
    def make(g):
        x = torch.rand(K, generator=g, dtype=torch.float64) * 5
        y = torch.sin(x) + 0.3 * _randn(g, K)
        return (x, y, torch.linspace(0, 5, Q, dtype=torch.float64), h), {}

    return make


def _nw(x, y, q, h, kernel=lambda u: torch.exp(-(u**2) / 2), axis=-1, scale=None):
    d = (q[:, None] - x[None, :]) / (h if scale is None else scale)  # (Q, K)
    w = kernel(d)
    return (w / w.sum(axis, keepdim=True)) @ y


EX_2_1 = Exercise(
    "2.1",
    "nadaraya_watson",
    "nadaraya_watson(x_train, y_train, x_query, bandwidth)",
    nw_reference,
    (
        _case("bandwidth 0.5", _nw_inputs(20, 7, 0.5)),
        _case("bandwidth 2", _nw_inputs(12, 5, 2.0)),
        _case("one training point", _nw_inputs(1, 4, 0.7)),
    ),
    (
        Mistake(
            "no-bandwidth",
            "the distances are not divided by the bandwidth h: the kernel is "
            "K((x_query - x_i) / h)",
            lambda x, y, q, h: _nw(x, y, q, h, scale=1.0),
        ),
        Mistake(
            "times-bandwidth",
            "the distances are multiplied by the bandwidth; divide by it: a larger h "
            "must average more widely",
            lambda x, y, q, h: _nw(x, y, q, h, scale=1 / h),
        ),
        Mistake(
            "normalised-over-queries",
            "the weights are normalised over the queries; each query's weights must "
            "sum to 1 over the training points",
            lambda x, y, q, h: _nw(x, y, q, h, axis=0),
        ),
        Mistake(
            "kernel-without-half",
            "the Gaussian kernel here is exp(-u**2 / 2): the 1/2 is missing (that is a "
            "different bandwidth)",
            lambda x, y, q, h: _nw(x, y, q, h, kernel=lambda u: torch.exp(-(u**2))),
        ),
    ),
)


# -- 3.1 masked softmax ---------------------------------------------------------------


def masked_softmax_reference(X, valid_lens):
    return masked_softmax(X, valid_lens)


def _ms_inputs(B, Q, K, lens):
    def make(g):
        return (_randn(g, B, Q, K), torch.tensor(lens)), {}

    return make


def _ms(X, valid_lens, fill=-math.inf, keep=lambda pos, lens: pos < lens, dim=-1):
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]  # (B, Q|1)
    pos = torch.arange(X.shape[-1])
    mask = keep(pos[None, None, :], lens[:, :, None])  # (B, Q|1, K)
    out = torch.softmax(X.masked_fill(~mask, fill), dim=dim)
    return out


EX_3_1 = Exercise(
    "3.1",
    "masked_softmax",
    "masked_softmax(X, valid_lens)",
    masked_softmax_reference,
    (
        _case("lengths per example", _ms_inputs(2, 3, 5, [2, 4])),
        _case("lengths per query", _ms_inputs(2, 2, 4, [[1, 3], [4, 2]])),
        _case("a length of 0: a fully masked example", _ms_inputs(2, 2, 3, [0, 3])),
    ),
    (
        Mistake(
            "inverted-mask",
            "the mask is inverted: the positions < valid_len are the ones to keep "
            "(True = keep), the ones after them are padding",
            lambda X, lens: _ms(X, lens, keep=lambda p, n: p >= n),
        ),
        Mistake(
            "fill-zero",
            "masked scores are set to 0, and exp(0) = 1 still gives padding weight: "
            "fill them with -inf (or the dtype's most negative value) before the "
            "softmax",
            lambda X, lens: _ms(X, lens, fill=0.0),
        ),
        Mistake(
            "off-by-one",
            "one key too many is kept: valid_len = n keeps positions 0 .. n-1 "
            "(pos < n, not pos <= n)",
            lambda X, lens: _ms(X, lens, keep=lambda p, n: p <= n),
        ),
        Mistake(
            "wrong-axis",
            "the softmax runs over the queries; it must run over the keys, the last "
            "axis",
            lambda X, lens: _ms(X, lens, dim=-2),
        ),
        Mistake(
            "no-mask",
            "valid_lens is ignored: the keys at positions >= valid_len must get zero "
            "weight",
            lambda X, lens: torch.softmax(X, dim=-1),
        ),
        Mistake(
            "nan-row",
            "a query with no valid key gets NaN (softmax of all -inf): give it "
            "all-zero weights instead (e.g. torch.nan_to_num, or set masked "
            "weights to 0 after the softmax)",
            lambda X, lens: _ms(X, lens),
        ),
        Mistake(
            "d2l-uniform",
            "a fully masked row gets uniform weights over the padding (d2l's -1e6 "
            "fill does this): such a row must get all-zero weights",
            lambda X, lens: _ms(X, lens, fill=-1e6),
        ),
    ),
)


# -- 4.1 additive attention scores ----------------------------------------------------


def additive_scores(queries, keys, W_q, W_k, w_v):
    """``queries (B, Q, Dq)``, ``keys (B, K, Dk)``, ``W_q (h, Dq)``, ``W_k (h, Dk)``,
    ``w_v (h,)`` -> scores ``(B, Q, K)``: ``w_v . tanh(W_q q + W_k k)``."""
    features = (queries @ W_q.T)[:, :, None, :] + (keys @ W_k.T)[:, None, :, :]
    return torch.tanh(features) @ w_v  # (B, Q, K, h) @ (h,) -> (B, Q, K)


def _add_inputs(B, Q, K, Dq, Dk, h):
    def make(g):
        return (
            _randn(g, B, Q, Dq),
            _randn(g, B, K, Dk),
            _randn(g, h, Dq),
            _randn(g, h, Dk),
            _randn(g, h),
        ), {}

    return make


EX_4_1 = Exercise(
    "4.1",
    "additive_scores",
    "additive_scores(queries, keys, W_q, W_k, w_v)",
    additive_scores,
    (
        _case("Q = 2, K = 4", _add_inputs(2, 2, 4, 4, 4, 6)),
        _case("one query, keys wider than queries", _add_inputs(1, 1, 3, 3, 5, 2)),
    ),
    (
        Mistake(
            "no-tanh",
            "the tanh is missing: without it the score is linear in q and k and "
            "w_v . (W_q q + W_k k) splits into a query part plus a key part",
            lambda q, k, Wq, Wk, wv: (
                ((q @ Wq.T)[:, :, None, :] + (k @ Wk.T)[:, None, :, :]) @ wv
            ),
        ),
        Mistake(
            "tanh-after-wv",
            "tanh is applied after w_v; it belongs inside: w_v . tanh(W_q q + W_k k)",
            lambda q, k, Wq, Wk, wv: torch.tanh(
                ((q @ Wq.T)[:, :, None, :] + (k @ Wk.T)[:, None, :, :]) @ wv
            ),
        ),
        Mistake(
            "same-projection",
            "the keys are projected with W_q too: W_q projects the queries, W_k the "
            "keys",
            lambda q, k, Wq, Wk, wv: additive_scores(q, k, Wq, Wq, wv),
        ),
        Mistake(
            "product-not-sum",
            "the projected query and key are multiplied; additive attention adds them "
            "before the tanh",
            lambda q, k, Wq, Wk, wv: (
                torch.tanh((q @ Wq.T)[:, :, None, :] * (k @ Wk.T)[:, None, :, :]) @ wv
            ),
        ),
    ),
)


# -- 5.1 scaled dot-product attention -------------------------------------------------


def sdpa_reference(queries, keys, values, valid_lens):
    return dot_product_attention(queries, keys, values, valid_lens)[0]


def _sdpa_inputs(B, Q, K, D, Dv, lens):
    def make(g):
        return (
            _randn(g, B, Q, D),
            _randn(g, B, K, D),
            _randn(g, B, K, Dv),
            torch.tensor(lens),
        ), {}

    return make


def _sdpa(q, k, v, lens, scale=None, dim=-1, mask=True):
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = q @ k.transpose(-1, -2) * scale  # (B, Q, K)
    keep = torch.arange(k.shape[-2])[None, None, :] < lens[:, None, None]
    if not mask:
        keep = torch.ones_like(keep)
    w = torch.softmax(scores.masked_fill(~keep, -math.inf), dim=dim)
    return w @ v


EX_5_1 = Exercise(
    "5.1",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention(queries, keys, values, valid_lens)",
    sdpa_reference,
    (
        _case("B = 2, Q = 3, K = 4, D = 8", _sdpa_inputs(2, 3, 4, 8, 2, [4, 2])),
        _case("keys of width D = 32", _sdpa_inputs(1, 2, 5, 32, 3, [5])),
    ),
    (
        Mistake(
            "no-scale",
            "the scores are not divided by sqrt(D): with wide keys the softmax "
            "saturates (chapter 5)",
            lambda q, k, v, n: _sdpa(q, k, v, n, scale=1.0),
        ),
        Mistake(
            "divide-by-D",
            "the scores are divided by D; divide by sqrt(D), which keeps their "
            "variance at 1",
            lambda q, k, v, n: _sdpa(q, k, v, n, scale=1 / q.shape[-1]),
        ),
        Mistake(
            "no-mask",
            "valid_lens is ignored: keys at positions >= valid_len must get zero "
            "weight (use a masked softmax)",
            lambda q, k, v, n: _sdpa(q, k, v, n, mask=False),
        ),
        Mistake(
            "wrong-axis",
            "the softmax runs over the queries; it must run over the keys, the last "
            "axis of the (B, Q, K) scores",
            lambda q, k, v, n: _sdpa(q, k, v, n, dim=-2),
        ),
    ),
)


# -- 6.1 causal attention, queries at the end -----------------------------------------


def causal_attention(queries, keys, values):
    """``queries (B, Q, D)`` are the *last* ``Q`` of ``K`` positions (``Q <= K``),
    ``keys (B, K, D)``, ``values (B, K, Dv)`` -> ``(B, Q, Dv)``: query ``i`` (position
    ``K - Q + i``) sees the keys up to its own position, scaled dot-product scores."""
    return dot_product_attention(queries, keys, values, is_causal=True)[0]


def _causal_inputs(B, Q, K, D):
    def make(g):
        return (_randn(g, B, Q, D), _randn(g, B, K, D), _randn(g, B, K, D)), {}

    return make


def _causal(q, k, v, mask):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return masked_softmax(scores, mask=mask) @ v


EX_6_1 = Exercise(
    "6.1",
    "causal_attention",
    "causal_attention(queries, keys, values)",
    causal_attention,
    (
        _case("self-attention: Q = K = 5", _causal_inputs(2, 5, 5, 4)),
        _case("the last 2 of 6 positions (decoding)", _causal_inputs(1, 2, 6, 4)),
        _case("one new query after 4 cached keys", _causal_inputs(2, 1, 5, 4)),
    ),
    (
        Mistake(
            "sees-the-future",
            "the mask keeps the keys after each query (triu instead of tril): a "
            "causal query sees only itself and the positions before it",
            lambda q, k, v: _causal(
                q, k, v, torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu()
            ),
        ),
        Mistake(
            "excludes-itself",
            "each query is masked from its own position (tril(-1)): a token attends "
            "to itself too, and the first one would see nothing",
            lambda q, k, v: _causal(
                q,
                k,
                v,
                causal_mask(q.shape[-2], k.shape[-2]).tril(
                    k.shape[-2] - q.shape[-2] - 1
                ),
            ),
        ),
        Mistake(
            "top-left",
            "the mask is aligned to the top left (torch.ones(Q, K).tril(), or SDPA's "
            "is_causal=True): when the queries are the last Q of K positions, query i "
            "sits at position K - Q + i, so align the diagonal to the bottom right",
            lambda q, k, v: _causal(
                q, k, v, torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
            ),
        ),
        Mistake(
            "no-scale",
            "the scores are not divided by sqrt(D)",
            lambda q, k, v: (
                masked_softmax(
                    q @ k.transpose(-1, -2), mask=causal_mask(q.shape[-2], k.shape[-2])
                )
                @ v
            ),
        ),
    ),
)


# -- 7.1 / 7.2 split and merge heads --------------------------------------------------


def _split_inputs(B, n, H, d):
    def make(g):
        return (_randn(g, B, n, H * d), H), {}

    return make


EX_7_1 = Exercise(
    "7.1",
    "split_heads",
    "split_heads(X, num_heads)",
    split_heads,
    (
        _case("B = 2, n = 3, 4 heads of width 2", _split_inputs(2, 3, 4, 2)),
        _case("2 heads of width 3", _split_inputs(1, 5, 2, 3)),
    ),
    (
        Mistake(
            "reshape-without-transpose",
            "X was reshaped straight to (B, H, n, d): that mixes tokens between "
            "heads. Reshape to (B, n, H, d) first, then swap the n and H axes "
            "(transpose(1, 2))",
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
    ),
)


def _merge_inputs(B, H, n, d):
    def make(g):
        return (_randn(g, B, H, n, d),), {}

    return make


EX_7_2 = Exercise(
    "7.2",
    "merge_heads",
    "merge_heads(X)",
    merge_heads,
    (
        _case("B = 2, 4 heads, n = 3, d = 2", _merge_inputs(2, 4, 3, 2)),
        _case("3 heads, n = 1", _merge_inputs(1, 3, 1, 2)),
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
    ),
)


# -- 8.1 grouped-query attention core, 8.2 a cached decode step ------------------------


def gqa_reference(queries, keys, values):
    """``queries (B, H, Q, d)``, ``keys`` and ``values (B, Hkv, K, d)`` -> ``(B, H, Q,
    d)``: query head ``h`` uses key/value head ``h // (H / Hkv)``; causal is off."""
    n_rep = queries.shape[1] // keys.shape[1]
    return dot_product_attention(
        queries, repeat_kv(keys, n_rep), repeat_kv(values, n_rep)
    )[0]


def _gqa_inputs(B, H, Hkv, Q, K, d):
    def make(g):
        return (
            _randn(g, B, H, Q, d),
            _randn(g, B, Hkv, K, d),
            _randn(g, B, Hkv, K, d),
        ), {}

    return make


def _interleave(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


def _gqa(q, k, v, expand, scale=True):
    n_rep = q.shape[1] // k.shape[1]
    k, v = expand(k, n_rep), expand(v, n_rep)
    s = q @ k.transpose(-1, -2) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    return torch.softmax(s, -1) @ v


EX_8_1 = Exercise(
    "8.1",
    "grouped_query_attention",
    "grouped_query_attention(queries, keys, values)",
    gqa_reference,
    (
        _case("8 query heads, 2 key/value heads", _gqa_inputs(2, 8, 2, 3, 5, 4)),
        _case("6 query heads, 3 key/value heads", _gqa_inputs(1, 6, 3, 2, 4, 4)),
        _case("MQA: 4 query heads, 1 key/value head", _gqa_inputs(1, 4, 1, 2, 3, 4)),
    ),
    (
        Mistake(
            "repeat-not-interleave",
            "the key/value heads are tiled (x.repeat(1, n_rep, 1, 1): heads 0, 1, 0, "
            "1, ...); the grouping is consecutive (repeat_interleave: 0, 0, 1, 1, "
            "...): query heads 0 .. g-1 share key/value head 0",
            lambda q, k, v: _gqa(q, k, v, lambda x, r: x.repeat(1, r, 1, 1)),
        ),
        Mistake(
            "no-scale",
            "the scores are not divided by sqrt(d)",
            lambda q, k, v: _gqa(q, k, v, _interleave, scale=False),
        ),
        Mistake(
            "shared-query",
            "the query heads of a group were averaged into one query: each query head "
            "keeps its own query, only the keys and values are shared",
            lambda q, k, v: repeat_kv(
                _gqa(
                    q.reshape(q.shape[0], k.shape[1], -1, *q.shape[2:]).mean(2),
                    k,
                    v,
                    _interleave,
                ),
                q.shape[1] // k.shape[1],
            ),
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


def _decode_inputs(B, H, Hkv, T, d):
    def make(g):
        return (
            _randn(g, B, H, 1, d),
            _randn(g, B, Hkv, 1, d),
            _randn(g, B, Hkv, 1, d),
            _randn(g, B, Hkv, T, d),
            _randn(g, B, Hkv, T, d),
        ), {}

    return make


EX_8_2 = Exercise(
    "8.2",
    "decode_step",
    "decode_step(q_new, k_new, v_new, cache_k, cache_v)",
    decode_step_reference,
    (
        _case(
            "4 cached tokens, 4 query heads, 2 kv heads", _decode_inputs(2, 4, 2, 4, 3)
        ),
        _case("an empty cache (the first token)", _decode_inputs(1, 2, 1, 0, 3)),
    ),
    (
        Mistake(
            "attend-before-append",
            "the new token's key and value are appended after attending: the new "
            "query must see its own key too (append first, then attend over T + 1)",
            lambda q, k, v, ck, cv: (
                gqa_reference(q, ck, cv) if ck.shape[2] else torch.zeros_like(q),
                torch.cat([ck, k], 2),
                torch.cat([cv, v], 2),
            ),
        ),
        Mistake(
            "prepended",
            "the new key and value went to the front of the cache; they belong at "
            "the end (position T), so that the cache stays in token order",
            lambda q, k, v, ck, cv: (
                gqa_reference(q, torch.cat([k, ck], 2), torch.cat([v, cv], 2)),
                torch.cat([k, ck], 2),
                torch.cat([v, cv], 2),
            ),
        ),
        Mistake(
            "cache-not-returned",
            "the cache returned is the old one: return the keys and values with the "
            "new token appended, for the next step",
            lambda q, k, v, ck, cv: (
                gqa_reference(q, torch.cat([ck, k], 2), torch.cat([cv, v], 2)),
                ck,
                cv,
            ),
        ),
    ),
)


# -- 9.1 MQAR accuracy ----------------------------------------------------------------


def mqar_accuracy(logits, targets):
    """``logits (B, T, V)``, ``targets (B, T)`` with ``al.MQAR_IGNORE`` where nothing is
    asked -> the share (a float) of asked positions whose argmax is the target."""
    asked = targets != MQAR_IGNORE
    return ((logits.argmax(-1) == targets) & asked).sum().item() / asked.sum().item()


def _mqar_inputs(B, T, V):
    def make(g):
        targets = torch.randint(0, V, (B, T), generator=g)
        targets[:, : T // 2] = MQAR_IGNORE  # the records: nothing asked
        logits = _randn(g, B, T, V)
        # make some answers right: the target's logit raised at random positions
        right = torch.rand(B, T, generator=g) < 0.5
        safe = targets.clamp(min=0)
        logits.scatter_add_(-1, safe[..., None], 10.0 * right[..., None].double())
        return (logits, targets), {}

    return make


EX_9_1 = Exercise(
    "9.1",
    "mqar_accuracy",
    "mqar_accuracy(logits, targets)",
    mqar_accuracy,
    (
        _case("B = 4, T = 12, 8 answers", _mqar_inputs(4, 12, 8)),
        _case("B = 2, T = 18", _mqar_inputs(2, 18, 16)),
    ),
    (
        Mistake(
            "counts-ignored",
            "every position is counted, also those where nothing is asked "
            "(targets == al.MQAR_IGNORE): average over the asked positions only",
            lambda lg, t: (lg.argmax(-1) == t).double().mean().item(),
        ),
        Mistake(
            "ignored-counted-right",
            "the positions where nothing is asked are counted as right answers: leave "
            "them out of both the count and the total",
            lambda lg, t: (
                ((lg.argmax(-1) == t) | (t == MQAR_IGNORE)).double().mean().item()
            ),
        ),
        Mistake(
            "shifted",
            "the predictions are compared with the next position's targets: "
            "targets[b, i] is already the answer expected after reading tokens[b, "
            ":i+1], so compare position i with position i (no shift)",
            lambda lg, t: (
                ((lg.argmax(-1)[:, :-1] == t[:, 1:]) & (t[:, 1:] != MQAR_IGNORE))
                .sum()
                .item()
                / (t[:, 1:] != MQAR_IGNORE).sum().item()
            ),
        ),
    ),
)


# -- 10.1 the online softmax, 10.2 merging two partial results -------------------------


def online_attention(q, keys, values, block_size):
    """Attention of one query ``q (D,)`` over ``keys (K, D)``, ``values (K, Dv)``, the
    keys read ``block_size`` at a time with a running max, a running sum and a running
    output (the online softmax) -> ``(Dv,)``; scores ``q . k / sqrt(D)``."""
    return dot_product_attention(q[None, None], keys[None], values[None])[0][0, 0]


def _online_inputs(K, D, Dv, block, scale=1.0):
    def make(g):
        return (
            scale * _randn(g, D),
            scale * _randn(g, K, D),
            _randn(g, K, Dv),
            block,
        ), {}

    return make


def _online(q, keys, values, block, rescale_sum=True, rescale_out=True, divide=True):
    m = torch.tensor(-math.inf, dtype=q.dtype)
    s = torch.zeros((), dtype=q.dtype)
    out = torch.zeros(values.shape[-1], dtype=q.dtype)
    for start in range(0, keys.shape[0], block):
        scores = keys[start : start + block] @ q / math.sqrt(q.shape[-1])
        m_new = torch.maximum(m, scores.max())
        alpha = torch.exp(m - m_new)
        p = torch.exp(scores - m_new)
        s = (alpha if rescale_sum else 1.0) * s + p.sum()
        out = (alpha if rescale_out else 1.0) * out + p @ values[start : start + block]
        m = m_new
    return out / s if divide else out


EX_10_1 = Exercise(
    "10.1",
    "online_attention",
    "online_attention(q, keys, values, block_size)",
    online_attention,
    (
        _case("12 keys in blocks of 4", _online_inputs(12, 4, 3, 4)),
        _case(
            "10 keys in blocks of 3 (the last block shorter)",
            _online_inputs(10, 4, 2, 3),
        ),
        _case(
            "large scores (exp would overflow)", _online_inputs(9, 4, 2, 2, scale=40.0)
        ),
    ),
    (
        Mistake(
            "sum-not-rescaled",
            "the running sum is not rescaled when the maximum grows: multiply it by "
            "exp(m_old - m_new) before adding the new block's terms",
            lambda q, k, v, b: _online(q, k, v, b, rescale_sum=False),
        ),
        Mistake(
            "output-not-rescaled",
            "the running output is not rescaled when the maximum grows: multiply it "
            "by exp(m_old - m_new) too, like the sum",
            lambda q, k, v, b: _online(q, k, v, b, rescale_out=False),
        ),
        Mistake(
            "not-divided",
            "the output is not divided by the running sum at the end",
            lambda q, k, v, b: _online(q, k, v, b, divide=False),
        ),
        Mistake(
            "no-max",
            "the scores are exponentiated without subtracting the running maximum: "
            "exp overflows for large scores (inf / inf = NaN)",
            lambda q, k, v, b: (
                torch.exp(k @ q / math.sqrt(q.shape[-1]))
                @ v
                / torch.exp(k @ q / math.sqrt(q.shape[-1])).sum()
            ),
        ),
    ),
)


def merge_reference(out1, lse1, out2, lse2):
    """Attention over two chunks of keys, merged: ``out1, out2 (Q, Dv)`` and ``lse1,
    lse2 (Q,)`` (each chunk's log-sum-exp of the scores) -> ``(out (Q, Dv), lse
    (Q,))``."""
    return merge_attention([out1, out2], [lse1, lse2])


def _merge_inputs_(Q, Dv, shift=0.0):
    def make(g):
        return (
            _randn(g, Q, Dv),
            _randn(g, Q) + shift,
            _randn(g, Q, Dv),
            _randn(g, Q) * 3 + shift,
        ), {}

    return make


def _merge(o1, l1, o2, l2, weights="lse", lse="logaddexp"):
    if weights == "mean":
        out = (o1 + o2) / 2
    elif weights == "raw":
        out = torch.exp(l1)[:, None] * o1 + torch.exp(l2)[:, None] * o2
    else:
        total = torch.logaddexp(l1, l2)
        out = torch.exp(l1 - total)[:, None] * o1 + torch.exp(l2 - total)[:, None] * o2
    new_lse = torch.logaddexp(l1, l2) if lse == "logaddexp" else torch.maximum(l1, l2)
    return out, new_lse


EX_10_2 = Exercise(
    "10.2",
    "merge_partial_attention",
    "merge_partial_attention(out1, lse1, out2, lse2)",
    merge_reference,
    (
        _case("3 queries", _merge_inputs_(3, 4)),
        _case("large log-sum-exps (around 800)", _merge_inputs_(2, 3, shift=800.0)),
    ),
    (
        Mistake(
            "plain-average",
            "the two outputs are averaged with equal weights: weigh each by its share "
            "of the total, exp(lse_c - lse) with lse = log(exp(lse1) + exp(lse2))",
            lambda o1, l1, o2, l2: _merge(o1, l1, o2, l2, weights="mean"),
        ),
        Mistake(
            "no-normaliser",
            "the outputs are weighted by exp(lse_c) but not divided by the total: "
            "the weights must sum to 1 (subtract the merged lse before exp)",
            lambda o1, l1, o2, l2: _merge(o1, l1, o2, l2, weights="raw"),
        ),
        Mistake(
            "lse-max",
            "the merged log-sum-exp is the larger of the two; it is "
            "log(exp(lse1) + exp(lse2)) (torch.logaddexp)",
            lambda o1, l1, o2, l2: _merge(o1, l1, o2, l2, lse="max"),
        ),
    ),
)


# -- 11.1 / 11.2 RoPE in both layouts -------------------------------------------------


def _rope_reference(layout):
    def rope(x, positions):
        inv_freq, _ = rope_frequencies(x.shape[-1], 10000.0, dtype=torch.float64)
        cos, sin = rope_cos_sin(positions, inv_freq)
        return apply_rope(x, cos, sin, layout=layout)

    return rope


def _rope_inputs(B, H, T, d, start=0):
    def make(g):
        return (_randn(g, B, H, T, d), torch.arange(start, start + T)), {}

    return make


def _rope(x, positions, layout, sign=1.0, exponent=2.0, offset=0):
    d = x.shape[-1]
    inv_freq = 10000.0 ** (-exponent * torch.arange(d // 2, dtype=torch.float64) / d)
    angles = (
        (positions.double() + offset)[:, None] * inv_freq[None, :] * sign
    )  # (T, d/2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    if layout == "half":
        a, b = x[..., : d // 2], x[..., d // 2 :]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)


def _rope_mistakes(layout, other):
    return (
        Mistake(
            f"{other}-layout",
            "the features are paired in the other layout"
            + (
                ": here pair r is (x[r], x[r + d/2]) (rotate-half, transformers' Llama)"
                if layout == "half"
                else ": here pair r is (x[2r], x[2r + 1]) (interleaved, RoFormer and "
                "GGUF files)"
            ),
            lambda x, p: _rope(x, p, other),
        ),
        Mistake(
            "wrong-direction",
            "the rotation goes the wrong way: pair (a, b) becomes (a cos - b sin, "
            "b cos + a sin), a turn by +angle",
            lambda x, p: _rope(x, p, layout, sign=-1.0),
        ),
        Mistake(
            "frequency-exponent",
            "the frequencies are base**(-r/d); they are base**(-2r/d), r = 0 .. d/2 "
            "- 1",
            lambda x, p: _rope(x, p, layout, exponent=1.0),
        ),
        Mistake(
            "positions-from-one",
            "the positions are counted from 1; use the positions given (the first "
            "token is at position 0 and is not rotated)",
            lambda x, p: _rope(x, p, layout, offset=1),
        ),
    )


EX_11_1 = Exercise(
    "11.1",
    "rope_half",
    "rope_half(x, positions)",
    _rope_reference("half"),
    (
        _case("positions 0 .. 4", _rope_inputs(2, 2, 5, 8)),
        _case(
            "positions 7 .. 9 (decoding after 7 tokens)", _rope_inputs(1, 3, 3, 4, 7)
        ),
    ),
    _rope_mistakes("half", "interleaved"),
)

EX_11_2 = Exercise(
    "11.2",
    "rope_interleaved",
    "rope_interleaved(x, positions)",
    _rope_reference("interleaved"),
    (
        _case("positions 0 .. 4", _rope_inputs(2, 2, 5, 8)),
        _case(
            "positions 7 .. 9 (decoding after 7 tokens)", _rope_inputs(1, 3, 3, 4, 7)
        ),
    ),
    _rope_mistakes("interleaved", "half"),
)


# -- 12.1 absorbed MLA decode ---------------------------------------------------------


def mla_absorbed_reference(q_nope, latent, W_uk, W_uv):
    """Multi-head latent attention's decode step with the up-projections absorbed
    (no RoPE part): ``q_nope (B, H, 1, dn)``, the cached latents ``latent (B, T, r)``,
    ``W_uk (H, dn, r)``, ``W_uv (H, dv, r)`` -> ``(B, H, 1, dv)``; scores scaled by
    ``1 / sqrt(dn)``. Equal to building keys ``W_uk[h] @ c`` and values ``W_uv[h] @ c``
    for every cached token."""
    keys = torch.einsum("hdr,btr->bhtd", W_uk, latent)  # (B, H, T, dn)
    values = torch.einsum("hdr,btr->bhtd", W_uv, latent)  # (B, H, T, dv)
    return dot_product_attention(q_nope, keys, values)[0]


def _mla_inputs(B, H, T, dn, dv, r):
    def make(g):
        return (
            _randn(g, B, H, 1, dn),
            _randn(g, B, T, r),
            _randn(g, H, dn, r) / math.sqrt(r),
            _randn(g, H, dv, r) / math.sqrt(r),
        ), {}

    return make


def _mla(q, c, W_uk, W_uv, scale=None, up=True, swap=False):
    if swap:
        W_uk, W_uv = W_uv, W_uk
    q_latent = q @ W_uk  # (B, H, 1, r)
    s = q_latent @ c[:, None].transpose(-1, -2)  # (B, H, 1, T)
    s = s / math.sqrt(q.shape[-1] if scale is None else scale)
    mixed = torch.softmax(s, -1) @ c[:, None]  # (B, H, 1, r)
    return mixed @ W_uv.transpose(1, 2) if up else mixed


EX_12_1 = Exercise(
    "12.1",
    "mla_absorbed_decode",
    "mla_absorbed_decode(q_nope, latent, W_uk, W_uv)",
    mla_absorbed_reference,
    (
        _case("4 heads, 6 cached latents, r = 8", _mla_inputs(2, 4, 6, 4, 4, 8)),
        _case("dn = 3, dv = 5, r = 6", _mla_inputs(1, 2, 3, 3, 5, 6)),
    ),
    (
        Mistake(
            "scale-by-r",
            "the scores are divided by sqrt(r), the latent's width; the scale is that "
            "of the per-head keys, 1 / sqrt(dn): absorbing W_uk does not change the "
            "scores",
            lambda q, c, Wk, Wv: _mla(q, c, Wk, Wv, scale=c.shape[-1]),
        ),
        Mistake(
            "no-value-up-projection",
            "the weights mix the latents but W_uv is never applied: multiply the "
            "mixed latent (B, H, 1, r) by W_uv^T to get each head's (B, H, 1, dv) "
            "output",
            lambda q, c, Wk, Wv: _mla(q, c, Wk, Wv, up=False),
        ),
        Mistake(
            "swapped-up-projections",
            "W_uk and W_uv are swapped: W_uk absorbs into the query (scores), W_uv "
            "into the output (values)",
            lambda q, c, Wk, Wv: _mla(q, c, Wk, Wv, swap=True),
        ),
    ),
)


# -- 13.1 recurrent linear attention, 13.2 the delta rule ------------------------------


def recurrent_linear_attention(queries, keys, values):
    """``queries, keys (..., T, D)``, ``values (..., T, Dv)`` -> ``(..., T, Dv)``:
    causal linear attention with ``phi = elu + 1``, one token at a time through the
    state ``S (Dv, D)`` and the normaliser ``z (D,)``."""
    return linear_attention(queries, keys, values, elu_feature_map, form="recurrent")


def _linear_inputs(*lead, T=6, D=4, Dv=3):
    def make(g):
        return (
            _randn(g, *lead, T, D),
            _randn(g, *lead, T, D),
            _randn(g, *lead, T, Dv),
        ), {}

    return make


def _recurrent(
    q, k, v, phi=elu_feature_map, normalise=True, read_first=False, z_late=False
):
    phi_q, phi_k = phi(q), phi(k)
    S = q.new_zeros(*q.shape[:-2], v.shape[-1], phi_k.shape[-1])
    z = q.new_zeros(*q.shape[:-2], phi_k.shape[-1])
    outs = []
    for t in range(q.shape[-2]):
        if read_first:
            out = (S @ phi_q[..., t, :, None])[..., 0]
            den = (z * phi_q[..., t, :]).sum(-1, keepdim=True)
        S = S + v[..., t, :, None] * phi_k[..., t, None, :]
        if not z_late:
            z = z + phi_k[..., t, :]
        if not read_first:
            out = (S @ phi_q[..., t, :, None])[..., 0]
            den = (z * phi_q[..., t, :]).sum(-1, keepdim=True)
        if z_late:
            z = z + phi_k[..., t, :]
        outs.append(out / den if normalise else out)
    return torch.stack(outs, -2)


EX_13_1 = Exercise(
    "13.1",
    "recurrent_linear_attention",
    "recurrent_linear_attention(queries, keys, values)",
    recurrent_linear_attention,
    (
        _case("one sequence of 6 tokens", _linear_inputs(T=6)),
        _case("batch 2, 3 heads, 5 tokens", _linear_inputs(2, 3, T=5)),
    ),
    (
        Mistake(
            "no-normaliser",
            "the output is not divided by the normaliser z_t . phi(q_t): linear "
            "attention's weights must sum to 1 like softmax's",
            lambda q, k, v: _recurrent(q, k, v, normalise=False),
        ),
        Mistake(
            "no-feature-map",
            "the queries and keys are used as they are: apply the feature map "
            "phi(x) = elu(x) + 1 first (it keeps every weight positive)",
            lambda q, k, v: _recurrent(q, k, v, phi=lambda x: x),
        ),
        Mistake(
            "read-before-write",
            "each token reads the state before its own key and value are written: "
            "write first (S_t = S_{t-1} + v_t phi(k_t)^T), then read, so a token "
            "attends to itself",
            lambda q, k, v: _recurrent(q, k, v, read_first=True),
        ),
        Mistake(
            "normaliser-late",
            "the normaliser z is updated after the read while S is updated before: "
            "both must include the current token",
            lambda q, k, v: _recurrent(q, k, v, z_late=True),
        ),
    ),
)


def delta_rule_reference(queries, keys, values, beta, decay):
    """The gated delta rule, one token at a time from ``S = 0``: ``S <- decay * S``,
    then ``S <- S + beta (v - S k) k^T``, output ``S q``; ``queries, keys (..., T, D)``
    (keys of unit norm), ``values (..., T, Dv)``, ``beta`` and ``decay`` numbers ->
    ``(outputs (..., T, Dv), S (..., Dv, D))``. ``decay = 1`` is DeltaNet."""
    return delta_rule(queries, keys, values, beta, decay=decay)


def _delta_inputs(*lead, T=6, D=4, Dv=3, beta=0.7, decay=1.0):
    def make(g):
        return (
            _randn(g, *lead, T, D),
            F.normalize(_randn(g, *lead, T, D), dim=-1),
            _randn(g, *lead, T, Dv),
            beta,
            decay,
        ), {}

    return make


def _delta(q, k, v, beta, decay, mistake=None):
    S = q.new_zeros(*q.shape[:-2], v.shape[-1], k.shape[-1])
    outs = []
    for t in range(q.shape[-2]):
        kt, vt = k[..., t, :], v[..., t, :]
        if mistake == "read-before-write":
            outs.append((S @ q[..., t, :, None])[..., 0])
        if mistake != "decay-after-write":
            S = decay * S
        old = (S @ kt[..., None])[..., 0]  # what S holds for k
        if mistake == "additive":
            S = S + (beta * vt)[..., None] * kt[..., None, :]
        elif mistake == "beta-on-value-only":
            S = S + (beta * vt - old)[..., None] * kt[..., None, :]
        else:
            S = S + (beta * (vt - old))[..., None] * kt[..., None, :]
        if mistake == "decay-after-write":
            S = decay * S
        if mistake != "read-before-write":
            outs.append((S @ q[..., t, :, None])[..., 0])
    return torch.stack(outs, -2), S


def _delta_mistake(name):
    return lambda q, k, v, b, a: _delta(q, k, v, b, a, mistake=name)


EX_13_2 = Exercise(
    "13.2",
    "delta_rule",
    "delta_rule(queries, keys, values, beta, decay)",
    delta_rule_reference,
    (
        _case("6 tokens, beta = 0.7, no decay", _delta_inputs(T=6)),
        _case(
            "batch 2, 2 heads, beta = 1, decay 0.9",
            _delta_inputs(2, 2, T=5, beta=1.0, decay=0.9),
        ),
    ),
    (
        Mistake(
            "additive",
            "the state only adds beta v k^T: the delta rule first reads what S already "
            "holds for k and writes the difference, beta (v - S k) k^T",
            _delta_mistake("additive"),
        ),
        Mistake(
            "beta-on-value-only",
            "beta scales the new value but not the old one that is removed: the update "
            "is beta (v - S k) k^T, beta on the whole difference",
            _delta_mistake("beta-on-value-only"),
        ),
        Mistake(
            "read-before-write",
            "each token reads the state before its own update: update first, then read "
            "S q",
            _delta_mistake("read-before-write"),
        ),
        Mistake(
            "decay-after-write",
            "the decay is applied after the write, so it shrinks the new token's value "
            "too: decay the old state first (S <- decay * S), then write",
            _delta_mistake("decay-after-write"),
        ),
    ),
)


EXERCISES = (
    EX_1_1,
    EX_2_1,
    EX_3_1,
    EX_4_1,
    EX_5_1,
    EX_6_1,
    EX_7_1,
    EX_7_2,
    EX_8_1,
    EX_8_2,
    EX_9_1,
    EX_10_1,
    EX_10_2,
    EX_11_1,
    EX_11_2,
    EX_12_1,
    EX_13_1,
    EX_13_2,
)
