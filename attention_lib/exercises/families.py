"""Mistakes that several exercises share, written once.

A step taught once and repeated later (the softmax, the scale, the mask, causal
alignment, head sharing, the online softmax, RoPE, the recurrences of chapter 13) has
its mistakes listed here, each as ``(name, diagnosis, options)``. An exercise passes
its ``build(**options) -> wrong implementation`` to :func:`mistakes`, which makes the
:class:`~attention_lib.exercises.spec.Mistake` objects; the computations the options
switch (:func:`weights`, :func:`rope`, :func:`online`, :func:`merge`,
:func:`linear_scan`, :func:`delta_scan`) are here too, so that a mistake means the same
in every exercise that repeats the step.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .spec import Mistake

# -- how the weights come from the scores (chapters 1, 3, 5, 6, 8, 12) --

SOFTMAX = (
    (
        "no-softmax",
        "the weights are the raw scores: turn them into weights that are positive and "
        "sum to 1 over the keys with a softmax",
        {"softmax": "none"},
    ),
    (
        "softmax-over-queries",
        "the softmax runs over the queries: each query's weights must sum to 1 over "
        "the keys, the last axis (dim=-1)",
        {"dim": -2},
    ),
    (
        "divide-by-sum",
        "the scores are divided by their sum instead of exponentiated first (softmax "
        "is exp(s) / sum exp(s))",
        {"softmax": "sum"},
    ),
    (
        "no-max",
        "the scores are exponentiated without subtracting their maximum first: exp "
        "overflows for large scores (inf / inf = NaN); torch.softmax subtracts it for "
        "you",
        {"softmax": "naive"},
    ),
    (
        "one-max",
        "one maximum is subtracted for all the queries: subtract each query's own "
        "maximum (amax(dim=-1, keepdim=True)), or a query whose scores all lie far "
        "below it gets exp = 0 everywhere, and 0 / 0 = NaN",
        {"softmax": "one-max"},
    ),
)

# -- the scale (chapter 5 onwards) --

SCALE = (
    (
        "no-scale",
        "the scores are not divided by sqrt(d), the square root of the query/key "
        "width (chapter 5): without it wide keys saturate the softmax",
        {"scale": "none"},
    ),
    (
        "divide-by-width",
        "the scores are divided by the width d itself; divide by sqrt(d), which keeps "
        "their variance at 1",
        {"scale": "width"},
    ),
    (
        "times-sqrt-width",
        "the scores are multiplied by sqrt(d); divide them by it",
        {"scale": "times"},
    ),
    (
        "scale-by-value-width",
        "the scores are divided by the square root of the values' width; the scale "
        "is the square root of the queries' and keys' width",
        {"scale": "value-width"},
    ),
)

#: 1.1 asks for plain dot products: the scale is a mistake there.
SCALED = (
    (
        "scaled",
        "the scores are divided by sqrt(D): this exercise asks for plain dot products "
        "(the scale is chapter 5's step)",
        {"scale": "sqrt"},
    ),
)

# -- masking by lengths (chapters 3, 5) --

MASK = (
    (
        "inverted-mask",
        "the mask is inverted: the positions < valid_len are the ones to keep (True = "
        "keep), the ones after them are padding",
        {"keep": "inverted"},
    ),
    (
        "fill-zero",
        "masked scores are set to 0, and exp(0) = 1 still gives padding weight: fill "
        "them with -inf (or the dtype's most negative value) before the softmax",
        {"fill": 0.0},
    ),
    (
        "off-by-one",
        "one key too many is kept: valid_len = n keeps positions 0 .. n-1 (pos < n, "
        "not pos <= n)",
        {"keep": "off-by-one"},
    ),
    (
        "no-mask",
        "valid_lens is ignored: the keys at positions >= valid_len must get zero "
        "weight",
        {"keep": "none"},
    ),
    (
        "mask-after-softmax",
        "the weights are masked after the softmax, so the kept ones no longer sum to "
        "1: mask the scores before the softmax (fill with -inf)",
        {"after": True},
    ),
    (
        "first-length",
        "valid_lens[0] is used for every example: example b has its own length, "
        "valid_lens[b]",
        {"keep": "first"},
    ),
    (
        "nan-row",
        "a query with no valid key gets NaN (softmax of all -inf): give it all-zero "
        "weights instead (e.g. torch.nan_to_num, or set masked weights to 0 after the "
        "softmax)",
        {"empty": "nan"},
    ),
    (
        "lengths-tiled",
        "the (B,) lengths were expanded to the queries with repeat (l0, l1, l0, l1, "
        "...), so a query gets another example's length: example b's queries all "
        "take valid_lens[b] (valid_lens[:, None], or repeat_interleave)",
        {"keep": "tiled"},
    ),
    (
        "masks-queries",
        "the lengths mask the queries (whole rows) instead of the keys: valid_len "
        "counts the keys each query may see, along the last axis (K)",
        {"keep": "queries"},
    ),
    (
        "d2l-uniform",
        "a fully masked row gets uniform weights over the padding (a large negative "
        "fill such as d2l's -1e6 does this): such a row must get all-zero weights",
        {"fill": -1e6},
    ),
)

# -- causal alignment (chapter 6, and with a cache in chapter 8) --

CAUSAL = (
    (
        "sees-the-future",
        "the mask keeps the keys after each query (triu instead of tril): a causal "
        "query sees only itself and the positions before it",
        {"causal": "future"},
    ),
    (
        "excludes-itself",
        "each query is masked from its own position (tril(-1)): a token attends to "
        "itself too, and the first one would see nothing",
        {"causal": "strict"},
    ),
    (
        "top-left",
        "the mask is aligned to the top left (torch.ones(Q, K).tril(), or SDPA's "
        "is_causal=True): when the queries are the last Q of K positions, query i sits "
        "at position K - Q + i, so align the diagonal to the bottom right",
        {"causal": "top-left"},
    ),
    (
        "diagonal-offset-sign",
        "the diagonal's offset has the wrong sign: tril(diagonal=Q - K) moves it to "
        "the left; query i sits at position K - Q + i, so keep tril(diagonal=K - Q)",
        {"causal": "offset-sign"},
    ),
    (
        "no-causal-mask",
        "there is no causal mask: query i must not see the keys after its own "
        "position K - Q + i",
        {"causal": "none"},
    ),
)

#: The new token of a decode step sees the whole cache: any causal mask is wrong there.
CACHE = (
    (
        "is-causal-over-cache",
        "the new query sees only key 0: a causal mask aligned to the top left (SDPA's "
        "is_causal=True, or torch.ones(1, T + 1).tril()) over a cache. The new token "
        "comes last and sees every cached key and itself: use no mask (chapter 8)",
        {"causal": "top-left"},
    ),
)

# -- sharing key/value heads (chapter 8) --

HEADS = (
    (
        "repeat-not-interleave",
        "the key/value heads are tiled (x.repeat(1, g, 1, 1), or head h % Hkv: heads "
        "0, 1, 0, 1, ...); the grouping is consecutive (repeat_interleave: 0, 0, 1, "
        "1, ...): query heads 0 .. g-1 share key/value head 0",
        {"share": "repeat"},
    ),
    (
        "group-index-divisor",
        "query head h reads key/value head h // Hkv; it is h // g, g = H / Hkv the "
        "number of query heads per key/value head (the two agree only when g = Hkv)",
        {"share": "divisor"},
    ),
    (
        "expand-one-head",
        "the key/value heads are expanded to H heads (expand): that works only for "
        "one key/value head (MQA); with Hkv > 1 each is repeated g = H / Hkv times, "
        "repeat_interleave(g, dim=1)",
        {"share": "expand"},
    ),
    (
        "shared-query",
        "the query heads of a group were averaged into one query: each query head "
        "keeps its own query, only the keys and values are shared",
        {"share": "mean-query"},
    ),
    (
        "scale-by-model-width",
        "the scores are divided by sqrt(H * d), the model's width; each head's scores "
        "are divided by the square root of its own width, sqrt(d)",
        {"scale": "model-width"},
    ),
)

# -- the online softmax (chapter 10) --

ONLINE = (
    (
        "no-rescale",
        "nothing is rescaled when the maximum grows: before adding a block, multiply "
        "the running sum and the running output by exp(m_old - m_new)",
        {"rescale_sum": False, "rescale_out": False},
    ),
    (
        "sum-not-rescaled",
        "the running sum is not rescaled when the maximum grows: multiply it by "
        "exp(m_old - m_new) before adding the new block's terms",
        {"rescale_sum": False},
    ),
    (
        "output-not-rescaled",
        "the running output is not rescaled when the maximum grows: multiply it by "
        "exp(m_old - m_new) too, like the sum",
        {"rescale_out": False},
    ),
    (
        "rescale-inverted",
        "the rescaling factor is upside down: the old terms are multiplied by "
        "exp(m_old - m_new), at most 1, not by exp(m_new - m_old)",
        {"inverted": True},
    ),
    (
        "not-divided",
        "the output is not divided by the running sum at the end",
        {"divide": False},
    ),
    (
        "max-starts-at-zero",
        "the running maximum starts at 0; start it at -inf: when every score is far "
        "below 0 (below about -745 in float64), exp(score - 0) is 0 everywhere and "
        "the result is 0 / 0 = NaN",
        {"m0": 0.0},
    ),
    (
        "per-block-max",
        "each block subtracts its own maximum and the blocks are added as they are: "
        "keep one running maximum and bring the old sum and output to it, times "
        "exp(m_old - m_new)",
        {"per_block": True},
    ),
    (
        "no-running-max",
        "the scores are exponentiated without subtracting the running maximum: exp "
        "overflows for large scores (inf / inf = NaN)",
        {"naive": True},
    ),
    (
        "last-block-dropped",
        "the last, shorter block is never read: range(0, K, block_size) starts a "
        "block at every multiple of block_size below K, and keys[start : start + "
        "block_size] stops at the end by itself",
        {"drop_last": True},
    ),
)

# -- merging partial results (chapter 10) --

MERGE = (
    (
        "plain-average",
        "the two outputs are averaged with equal weights: weigh each by its share of "
        "the total, exp(lse_c - lse) with lse = log(exp(lse1) + exp(lse2))",
        {"weights": "mean"},
    ),
    (
        "no-normaliser",
        "the outputs are weighted by exp(lse_c) but not divided by the total: the "
        "weights must sum to 1 (subtract the merged lse before exp)",
        {"weights": "raw"},
    ),
    (
        "naive-exp",
        "the log-sum-exps are exponentiated as they are: exp(800) overflows (inf / "
        "inf = NaN); subtract the merged lse (or the larger lse) before exp",
        {"weights": "naive"},
    ),
    (
        "not-divided-by-total",
        "the outputs are weighted by exp(lse_c - max(lse1, lse2)) but not divided by "
        "the weights' total: divide by exp(lse1 - m) + exp(lse2 - m), or subtract the "
        "merged lse (torch.logaddexp) instead of the maximum",
        {"weights": "max"},
    ),
    (
        "weights-not-unsqueezed",
        "the (Q,) weights multiply the (Q, Dv) outputs as they are: broadcasting "
        "lines them up with the last axis (Dv), not with the queries; give them an "
        "axis, w[:, None]",
        {"weights": "flat"},
    ),
    (
        "weights-swapped",
        "each output is weighted by the other chunk's share: out1 goes with exp(lse1 "
        "- lse), out2 with exp(lse2 - lse)",
        {"weights": "swapped"},
    ),
    (
        "lse-max",
        "the merged log-sum-exp is the larger of the two; it is log(exp(lse1) + "
        "exp(lse2)) (torch.logaddexp)",
        {"lse": "max"},
    ),
    (
        "lse-sum",
        "the merged log-sum-exp is lse1 + lse2; it is log(exp(lse1) + exp(lse2)) "
        "(torch.logaddexp): the sums add, not their logarithms",
        {"lse": "sum"},
    ),
    (
        "lse-sum-in-weights",
        "lse1 + lse2 is taken as the merged log-sum-exp, for the weights too: the "
        "sums add, not their logarithms, so lse = log(exp(lse1) + exp(lse2)) "
        "(torch.logaddexp), and each output is weighted by exp(lse_c - lse)",
        {"weights": "sum", "lse": "sum"},
    ),
    (
        "plain-average-and-lse-max",
        "two slips: the outputs are averaged with equal weights (weigh each by "
        "exp(lse_c - lse)), and the merged log-sum-exp is the larger of the two (it is "
        "log(exp(lse1) + exp(lse2)), torch.logaddexp)",
        {"weights": "mean", "lse": "max"},
    ),
    (
        "nan-when-no-key",
        "a query that saw no key in either chunk (both lse = -inf) gets NaN: -inf - "
        "(-inf) is NaN. Its output is 0 and its lse -inf, as al.merge_attention "
        "gives (e.g. subtract 0 instead where the merged lse is -inf)",
        {"empty": "nan"},
    ),
)

# -- RoPE (chapters 9, 11) --

ROPE = (
    (
        "other-layout",
        "the features are paired in the other layout: rotate-half pairs (x[r], x[r + "
        "d/2]) (transformers' Llama), interleaved pairs (x[2r], x[2r + 1]) (RoFormer, "
        "GGUF files); this exercise asks for the one in its name",
        {"other": True},
    ),
    (
        "mixed-layout",
        "the two layouts are mixed: the features are paired in one layout but the "
        "angles are laid out for the other (torch.cat([angles, angles]) goes with "
        "rotate-half pairs, repeat_interleave(angles, 2) with interleaved pairs)",
        {"mixed": True},
    ),
    (
        "pairs-of-the-other-layout",
        "the pairs are read in one layout and written back in the other: write each "
        "rotated pair back to the two places it was read from (rotate-half: x[r] and "
        "x[r + d/2]; interleaved: x[2r] and x[2r + 1])",
        {"pairs": "other"},
    ),
    (
        "wrong-direction",
        "the rotation goes the wrong way: pair (a, b) becomes (a cos - b sin, b cos + "
        "a sin), a turn by +angle",
        {"sign": -1.0},
    ),
    (
        "frequency-exponent",
        "the frequencies are base**(-r/d); they are base**(-2r/d), r = 0 .. d/2 - 1",
        {"exponent": 1.0},
    ),
    (
        "frequency-exponent-doubled",
        "the frequencies are base**(-4r/d) (arange(0, d, 2) divided by d/2); they "
        "are base**(-2r/d): arange(0, d, 2) / d",
        {"exponent": 4.0},
    ),
    (
        "positions-from-one",
        "the positions are counted from 1; use the positions given (position 0 is not "
        "rotated)",
        {"positions_kind": "plus-one"},
    ),
    (
        "positions-ignored",
        "the positions argument is ignored (0 .. T-1 used): token t is at position "
        "positions[t]",
        {"positions_kind": "arange"},
    ),
    (
        "contiguous-positions",
        "the positions are assumed to be consecutive (positions[0] + arange(T)): they "
        "can have gaps (packed sequences, a cache that dropped tokens); token t is at "
        "position positions[t]",
        {"positions_kind": "contiguous"},
    ),
)

# -- linear attention and the delta rule (chapter 13) --

RECURRENCE = (
    (
        "read-before-write",
        "each token reads the state before its own key and value are written: write "
        "first, then read, so that a token attends to itself",
        {"read_first": True},
    ),
    (
        "non-causal",
        "every token reads the final state, after all the tokens were written: token "
        "t must read the state after token t (a causal read)",
        {"read_last": True},
    ),
    (
        "outer-product-transposed",
        "an outer product is transposed: the state S is (..., Dv, D), a token writes "
        "value times key^T (v phi(k)^T, or (v - S k) k^T), and S phi(q) reads it; "
        "k v^T is (D, Dv)",
        {"outer": "transposed"},
    ),
    (
        "only-three-axes",
        "the inputs are unpacked as (B, T, D): they may have any number of leading "
        "axes, (T, D), (B, T, D) or (B, H, T, D); index from the end (*lead, T, D = "
        "queries.shape, x[..., t, :])",
        {"three_axes": True},
    ),
)

LINEAR = (
    (
        "no-normaliser",
        "the output is not divided by the normaliser z_t . phi(q_t): linear "
        "attention's weights must sum to 1 like softmax's",
        {"normalise": False},
    ),
    (
        "no-feature-map",
        "the queries and keys are used as they are: apply the feature map phi(x) = "
        "elu(x) + 1 first (it keeps every weight positive)",
        {"phi": "identity"},
    ),
    (
        "elu-without-one",
        "the feature map is elu(x), which is negative for x < 0: phi(x) = elu(x) + 1 "
        "keeps every weight positive",
        {"phi": "elu"},
    ),
    (
        "relu-feature-map",
        "the feature map is relu(x); this exercise's is phi(x) = elu(x) + 1 (relu "
        "gives zero weights, and a zero normaliser)",
        {"phi": "relu"},
    ),
    (
        "no-feature-map-on-queries",
        "the feature map is applied to the keys but not to the queries: the read is "
        "phi(q_t), in the numerator and in the normaliser",
        {"query_map": "identity"},
    ),
    (
        "normaliser-raw-query",
        "the normaliser uses the raw query: it is z_t . phi(q_t), with the same "
        "phi(q_t) as the numerator",
        {"den_raw": True},
    ),
    (
        "normaliser-late",
        "the normaliser z is updated after the read while S is updated before: both "
        "must include the current token",
        {"z_late": True},
    ),
)

DELTA = (
    (
        "additive",
        "the state only adds beta v k^T: the delta rule first reads what S already "
        "holds for k and writes the difference, beta (v - S k) k^T",
        {"rule": "additive"},
    ),
    (
        "beta-on-value-only",
        "beta scales the new value but not the old one that is removed: the update is "
        "beta (v - S k) k^T, beta on the whole difference",
        {"rule": "beta-on-value"},
    ),
    (
        "ema",
        "the state is an average, (1 - beta) S + beta v k^T: the delta rule removes "
        "only what S holds along k, S + beta (v - S k) k^T",
        {"rule": "ema"},
    ),
    (
        "decay-after-write",
        "the decay is applied after the write, so it shrinks the new token's value "
        "too: decay the old state first (S <- decay * S), then write",
        {"decay_kind": "after"},
    ),
    (
        "read-before-decay",
        "what S holds for k (S k) is read before the decay: decay first, then read S k "
        "from the decayed state and write beta (v - S k) k^T",
        {"decay_kind": "read-before"},
    ),
    (
        "decay-complement",
        "the state is multiplied by 1 - decay: decay is the share of the state kept "
        "(S <- decay * S), not the share forgotten",
        {"decay_kind": "complement"},
    ),
    (
        "decay-ignored",
        "the decay is never applied: S <- decay * S before each write (decay = 1 is "
        "DeltaNet, so only the gated cases show it)",
        {"decay_kind": "none"},
    ),
    (
        "state-transposed",
        "the state S is returned transposed: it is (..., Dv, D), so that S k has the "
        "values' width Dv",
        {"transposed": True},
    ),
)


def mistakes(build, *families, only: tuple[str, ...] = ()) -> tuple[Mistake, ...]:
    """The :class:`Mistake` s of ``families`` (tuples of ``(name, diagnosis,
    options)``), each wrong implementation ``build(**options)``; ``only``: keep these
    names."""
    found = []
    for family in families:
        for name, diagnosis, options in family:
            if only and name not in only:
                continue
            found.append(Mistake(name, diagnosis, build(**options)))
    return tuple(found)


# -- the computations the options switch --


def weights(
    scores: torch.Tensor,
    keep: torch.Tensor | None = None,
    *,
    softmax: str = "stable",
    dim: int = -1,
    fill: float = -math.inf,
    after: bool = False,
    empty: str = "zero",
) -> torch.Tensor:
    """Attention weights from ``scores``; ``keep`` (True = keep, broadcastable): a
    mask."""
    if keep is not None and not after:
        scores = scores.masked_fill(~keep, fill)
    if softmax == "none":
        w = scores if keep is None else scores.masked_fill(~keep, 0.0)
    elif softmax == "sum":
        w = scores / scores.sum(dim, keepdim=True)
    elif softmax == "naive":
        e = torch.exp(scores)
        w = e / e.sum(dim, keepdim=True)
    elif softmax == "one-max":
        e = torch.exp(scores - scores.max())
        w = e / e.sum(dim, keepdim=True)
    else:
        w = torch.softmax(scores, dim=dim)
    if keep is not None and after:
        w = w * keep
    if empty == "zero" and keep is not None and fill == -math.inf and not after:
        w = w.masked_fill(~keep.any(dim, keepdim=True), 0.0)  # no valid key: zeros
    return w


def scale_factor(kind: str, d: int, dv: int | None = None, heads: int = 1) -> float:
    """What the scores are multiplied by: ``sqrt`` 1/sqrt(d) (right), ``none``,
    ``width`` 1/d, ``times`` sqrt(d), ``value-width`` 1/sqrt(dv), ``model-width``
    1/sqrt(heads * d)."""
    return {
        "sqrt": 1 / math.sqrt(d),
        "none": 1.0,
        "width": 1 / d,
        "times": math.sqrt(d),
        "value-width": 1 / math.sqrt(dv if dv is not None else d),
        "model-width": 1 / math.sqrt(heads * d),
    }[kind]


def length_mask(
    valid_lens: torch.Tensor, K: int, keep: str = "right", Q: int = 1
) -> torch.Tensor:
    """``(B, Q|1, K)`` True = keep, from ``valid_lens (B,)`` or ``(B, Q)`` (``Q``: the
    number of queries, for the mistakes that need it)."""
    if keep == "queries":  # the rows of the queries past the length are dropped
        lens = valid_lens if valid_lens.dim() == 1 else valid_lens.amax(-1)
        rows = torch.arange(Q)[None, :] < lens[:, None]  # (B, Q)
        return rows[:, :, None].expand(-1, -1, K)
    if keep == "tiled" and valid_lens.dim() == 1:
        valid_lens = valid_lens.repeat(Q).reshape(valid_lens.shape[0], Q)
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    if keep == "first":
        lens = lens[:1].expand_as(lens)
    pos = torch.arange(K)[None, None, :]
    if keep == "inverted":
        return pos >= lens[..., None]
    if keep == "off-by-one":
        return pos <= lens[..., None]
    if keep == "none":
        return torch.ones_like(pos >= lens[..., None])
    return pos < lens[..., None]


def causal_keep(Q: int, K: int, kind: str = "bottom-right") -> torch.Tensor | None:
    """``(Q, K)`` True = keep for queries that are the last ``Q`` of ``K`` positions."""
    ones = torch.ones(Q, K, dtype=torch.bool)
    if kind == "none":
        return None
    if kind == "future":
        return ones.triu(K - Q)
    if kind == "strict":
        return ones.tril(K - Q - 1)
    if kind == "top-left":
        return ones.tril()
    if kind == "offset-sign":
        return ones.tril(Q - K)
    return ones.tril(K - Q)


def online(
    q,
    keys,
    values,
    block,
    *,
    scale: str = "sqrt",
    rescale_sum=True,
    rescale_out=True,
    inverted=False,
    divide=True,
    m0=-math.inf,
    naive=False,
    drop_last=False,
    per_block=False,
):
    """The online softmax of one query over blocks of keys, a mistake switched on."""
    f = scale_factor(scale, q.shape[-1])
    if naive:
        e = torch.exp(keys @ q * f)
        return e @ values / e.sum()
    m = torch.tensor(m0, dtype=q.dtype)
    s = torch.zeros((), dtype=q.dtype)
    out = torch.zeros(values.shape[-1], dtype=q.dtype)
    stop = keys.shape[0] - (keys.shape[0] % block if drop_last else 0)
    for start in range(0, stop, block):
        scores = keys[start : start + block] @ q * f
        m_new = torch.maximum(m, scores.max())
        if per_block:
            m_new, m = scores.max(), scores.max()
        alpha = torch.exp(m_new - m) if inverted else torch.exp(m - m_new)
        p = torch.exp(scores - m_new)
        s = (alpha if rescale_sum else 1.0) * s + p.sum()
        out = (alpha if rescale_out else 1.0) * out + p @ values[start : start + block]
        m = m_new
    return out / s if divide else out


def merge(o1, l1, o2, l2, *, weights="share", lse="logaddexp", empty="zero"):
    """Two chunks' attention merged, with a mistake switched on."""
    total = torch.logaddexp(l1, l2)
    safe = total.masked_fill(total == -math.inf, 0.0) if empty == "zero" else total
    if weights == "mean":
        out = (o1 + o2) / 2
    elif weights == "raw":
        out = torch.exp(l1)[:, None] * o1 + torch.exp(l2)[:, None] * o2
    elif weights == "naive":
        e1, e2 = torch.exp(l1)[:, None], torch.exp(l2)[:, None]
        out = (e1 * o1 + e2 * o2) / (e1 + e2)
    elif weights == "max":
        m = torch.maximum(l1, l2)
        a1, a2 = torch.exp(l1 - m), torch.exp(l2 - m)
        out = a1[:, None] * o1 + a2[:, None] * o2
        return out, m + torch.log(a1 + a2)
    elif weights == "flat":
        out = torch.exp(l1 - safe) * o1 + torch.exp(l2 - safe) * o2
    elif weights == "sum":
        s = l1 + l2
        out = torch.exp(l1 - s)[:, None] * o1 + torch.exp(l2 - s)[:, None] * o2
    elif weights == "swapped":
        out = torch.exp(l2 - safe)[:, None] * o1 + torch.exp(l1 - safe)[:, None] * o2
    else:
        out = torch.exp(l1 - safe)[:, None] * o1 + torch.exp(l2 - safe)[:, None] * o2
    if weights == "naive":
        new = torch.log(torch.exp(l1) + torch.exp(l2))
    elif lse == "max":
        new = torch.maximum(l1, l2)
    elif lse == "sum":
        new = l1 + l2
    else:
        new = total
    return out, new


def rope(
    x,
    positions,
    layout: str,
    *,
    other=False,
    mixed=False,
    sign=1.0,
    exponent=2.0,
    positions_kind: str = "given",
    pairs: str = "same",
):
    """RoPE of ``x (..., T, d)`` at ``positions (T,)`` in ``layout`` (``"half"`` or
    ``"interleaved"``), with a mistake switched on: ``other`` both layouts swapped,
    ``mixed`` the pairs of one layout with the angles of the other."""
    d = x.shape[-1]
    if other:
        layout = "interleaved" if layout == "half" else "half"
    if positions_kind == "plus-one":
        positions = positions + 1
    elif positions_kind == "arange":
        positions = torch.arange(x.shape[-2])
    elif positions_kind == "contiguous":
        positions = positions[0] + torch.arange(x.shape[-2])
    inv_freq = 10000.0 ** (-exponent * torch.arange(d // 2, dtype=torch.float64) / d)
    angles = positions.double()[:, None] * inv_freq[None, :] * sign  # (T, d/2)
    if pairs == "other":  # pair r read in the other layout, written in this one
        c, s_ = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        if layout == "half":
            a, b = x[..., 0::2], x[..., 1::2]
        else:
            a, b = x[..., : d // 2], x[..., d // 2 :]
        ra, rb = a * c - b * s_, b * c + a * s_
        if layout == "half":
            return torch.cat([ra, rb], dim=-1)
        return torch.stack([ra, rb], dim=-1).flatten(-2)
    angle_layout = (
        layout if not mixed else ("interleaved" if layout == "half" else "half")
    )
    if angle_layout == "half":
        full = torch.cat([angles, angles], dim=-1)  # feature j: angle j mod d/2
    else:
        full = angles.repeat_interleave(2, dim=-1)  # feature j: angle j // 2
    cos, sin = full.cos().to(x.dtype), full.sin().to(x.dtype)
    if layout == "half":
        a, b = x[..., : d // 2], x[..., d // 2 :]
        partner = torch.cat([-b, a], dim=-1)
    else:
        a, b = x[..., 0::2], x[..., 1::2]
        partner = torch.stack([-b, a], dim=-1).flatten(-2)
    return x * cos + partner * sin


def linear_scan(
    q,
    k,
    v,
    *,
    phi="elu+1",
    normalise=True,
    read_first=False,
    read_last=False,
    z_late=False,
    query_map=None,
    den_raw=False,
    outer="right",
    three_axes=False,
):
    """Causal linear attention one token at a time, with a mistake switched on."""
    if three_axes and q.dim() != 3:
        raise ValueError("expected (B, T, D)")
    maps = {
        "elu+1": lambda x: F.elu(x) + 1,
        "identity": lambda x: x,
        "elu": F.elu,
        "relu": F.relu,
    }
    q_raw = q
    phi_q, phi_k = maps[query_map or phi](q), maps[phi](k)
    S = q.new_zeros(*q.shape[:-2], v.shape[-1], k.shape[-1])
    if outer == "transposed":  # phi(k) v^T, (D, Dv), later read as S phi(q)
        S = S.transpose(-1, -2)
    z = q.new_zeros(*q.shape[:-2], k.shape[-1])
    states = []
    for t in range(q.shape[-2]):
        before = (S, z)
        if outer == "transposed":
            S = S + phi_k[..., t, :, None] * v[..., t, None, :]
        else:
            S = S + v[..., t, :, None] * phi_k[..., t, None, :]
        if not z_late:
            z = z + phi_k[..., t, :]
        states.append(before if read_first else (S, z))
        if z_late:
            z = z + phi_k[..., t, :]
    outs = []
    for t, (S_t, z_t) in enumerate(states):
        if read_last:
            S_t, z_t = S, z
        out = (S_t @ phi_q[..., t, :, None])[..., 0]
        read = q_raw if den_raw else phi_q
        den = (z_t * read[..., t, :]).sum(-1, keepdim=True)
        outs.append(out / den if normalise else out)
    return torch.stack(outs, -2)


def delta_scan(
    q,
    k,
    v,
    beta,
    decay,
    *,
    rule="delta",
    decay_kind="before",
    read_first=False,
    read_last=False,
    transposed=False,
    outer="right",
    three_axes=False,
):
    """The gated delta rule one token at a time, with a mistake switched on."""
    if three_axes and q.dim() != 3:
        raise ValueError("expected (B, T, D)")
    S = q.new_zeros(*q.shape[:-2], v.shape[-1], k.shape[-1])
    outs = []
    for t in range(q.shape[-2]):
        kt, vt, qt = k[..., t, :], v[..., t, :], q[..., t, :]
        if read_first:
            outs.append((S @ qt[..., None])[..., 0])
        old = (S @ kt[..., None])[..., 0]  # read before the decay (a mistake)
        if decay_kind in ("before", "read-before"):
            S = decay * S
        elif decay_kind == "complement":
            S = (1 - decay) * S
        if decay_kind != "read-before":
            old = (S @ kt[..., None])[..., 0]
        if rule == "additive":
            S = S + (beta * vt)[..., None] * kt[..., None, :]
        elif rule == "beta-on-value":
            S = S + (beta * vt - old)[..., None] * kt[..., None, :]
        elif rule == "ema":
            S = (1 - beta) * S + (beta * vt)[..., None] * kt[..., None, :]
        elif outer == "transposed":  # k (v - S k)^T
            S = S + beta * kt[..., :, None] * (vt - old)[..., None, :]
        else:
            S = S + (beta * (vt - old))[..., None] * kt[..., None, :]
        if decay_kind == "after":
            S = decay * S
        if not read_first:
            outs.append((S @ qt[..., None])[..., 0])
    if read_last:
        outs = [(S @ q[..., t, :, None])[..., 0] for t in range(q.shape[-2])]
    return torch.stack(outs, -2), (S.transpose(-1, -2) if transposed else S)
