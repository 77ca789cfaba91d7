"""Exercise 6.1: causal_attention(queries (B,Q,D), keys (B,K,D), values (B,K,Dv)), queries = last Q of K positions."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def causal_tril_offset(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    keep = torch.ones(Q, K, dtype=torch.bool, device=queries.device).tril(diagonal=K - Q)
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ values


def causal_loop(queries, keys, values):
    B, Q, D = queries.shape
    K = keys.shape[1]
    outs = []
    for i in range(Q):
        pos = K - Q + i  # absolute position of query i
        k, v = keys[:, : pos + 1], values[:, : pos + 1]
        s = torch.einsum("bd,bkd->bk", queries[:, i], k) / D**0.5
        w = torch.softmax(s, dim=-1)
        outs.append(torch.einsum("bk,bkv->bv", w, v))
    return torch.stack(outs, dim=1)


# ---------- wrong ----------
def causal_top_left(queries, keys, values):
    # PyTorch's own is_causal=True: aligned top-left
    return torch.nn.functional.scaled_dot_product_attention(queries, keys, values, is_causal=True)


def causal_excludes_self(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    blocked = torch.triu(torch.ones(Q, K, dtype=torch.bool), diagonal=K - Q)
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    w = torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1)
    return torch.nan_to_num(w) @ values


def causal_offset_sign(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    keep = torch.ones(Q, K, dtype=torch.bool).tril(diagonal=Q - K)
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    w = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.nan_to_num(w) @ values


def causal_no_scale(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    keep = al.causal_mask(Q, K)
    scores = queries @ keys.transpose(-2, -1)
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ values


def causal_fill_zero(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    keep = al.causal_mask(Q, K)
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    scores = scores * keep  # zero out the future
    return torch.softmax(scores, dim=-1) @ values


def causal_scale_Dv(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    keep = al.causal_mask(Q, K)
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(values.shape[-1])
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ values


def causal_mask_after_softmax(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    keep = al.causal_mask(Q, K)
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    weights = torch.softmax(scores, dim=-1) * keep  # zero the future weights
    return weights @ values


SOLUTIONS = [
    dict(name="tril_offset", correct=True, mistake="", family="", fn=causal_tril_offset),
    dict(name="loop", correct=True, mistake="", family="", fn=causal_loop),
    dict(name="top_left", correct=False,
         mistake="Uses SDPA's is_causal=True, whose mask is aligned top-left, so with a cache the queries miss most of the keys they should see.",
         family="causal-top-left", fn=causal_top_left),
    dict(name="excludes_self", correct=False,
         mistake="Blocks the diagonal as well (triu from K - Q instead of K - Q + 1), so no query sees its own key.",
         family="causal-excludes-self", fn=causal_excludes_self),
    dict(name="offset_sign", correct=False,
         mistake="Uses the diagonal offset Q - K instead of K - Q.",
         family="causal-offset-sign", fn=causal_offset_sign),
    dict(name="no_scale", correct=False,
         mistake="Forgets the 1/sqrt(D) scale.",
         family="no-scale", fn=causal_no_scale),
    dict(name="fill_zero", correct=False,
         mistake="Masks by multiplying the scores by the mask (future scores become 0, not -inf).",
         family="mask-fill-zero", fn=causal_fill_zero),
    dict(name="scale_Dv", correct=False,
         mistake="Scales by sqrt(Dv) instead of sqrt(D).",
         family="scale-wrong-dim", fn=causal_scale_Dv),
    dict(name="mask_after_softmax", correct=False,
         mistake="Zeroes the future weights after the softmax without renormalising, so the rows no longer sum to 1.",
         family="mask-after-softmax", fn=causal_mask_after_softmax),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'top_left': {'top-left'},
    'excludes_self': {'excludes-itself'},
    'offset_sign': {'diagonal-offset-sign'},
    'no_scale': {'no-scale'},
    'fill_zero': {'fill-zero'},
    'scale_Dv': {'scale-by-value-width'},
    'mask_after_softmax': {'mask-after-softmax'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
