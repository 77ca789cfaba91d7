"""Exercise 4.1: additive_scores(queries (B,Q,Dq), keys (B,K,Dk), W_q (h,Dq), W_k (h,Dk), w_v (h,)) -> (B,Q,K)."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def add_broadcast(queries, keys, W_q, W_k, w_v):
    qh = queries @ W_q.T  # (B, Q, h)
    kh = keys @ W_k.T  # (B, K, h)
    features = torch.tanh(qh.unsqueeze(2) + kh.unsqueeze(1))  # (B, Q, K, h)
    return features @ w_v  # (B, Q, K)


def add_einsum_loop(queries, keys, W_q, W_k, w_v):
    B, Q, _ = queries.shape
    K = keys.shape[1]
    out = queries.new_empty(B, Q, K)
    qh = torch.einsum("bqd,hd->bqh", queries, W_q)
    kh = torch.einsum("bkd,hd->bkh", keys, W_k)
    for i in range(Q):
        f = torch.tanh(qh[:, i : i + 1, :] + kh)  # (B, K, h)
        out[:, i, :] = torch.einsum("bkh,h->bk", f, w_v)
    return out


# ---------- wrong ----------
def add_no_transpose(queries, keys, W_q, W_k, w_v):
    qh = queries @ W_q  # fine in the square example (Dq == h), wrong numbers otherwise
    kh = keys @ W_k
    return torch.tanh(qh[:, :, None, :] + kh[:, None, :, :]) @ w_v


def add_tanh_each(queries, keys, W_q, W_k, w_v):
    qh = torch.tanh(queries @ W_q.T)
    kh = torch.tanh(keys @ W_k.T)
    return (qh[:, :, None, :] + kh[:, None, :, :]) @ w_v


def add_swapped_axes(queries, keys, W_q, W_k, w_v):
    qh = queries @ W_q.T
    kh = keys @ W_k.T
    features = torch.tanh(qh[:, None, :, :] + kh[:, :, None, :])  # (B, K, Q, h)
    return features @ w_v


def add_wv_inside_tanh(queries, keys, W_q, W_k, w_v):
    qh = queries @ W_q.T
    kh = keys @ W_k.T
    return torch.tanh((qh[:, :, None, :] + kh[:, None, :, :]) @ w_v)


def add_scaled(queries, keys, W_q, W_k, w_v):
    qh = queries @ W_q.T
    kh = keys @ W_k.T
    features = torch.tanh(qh.unsqueeze(2) + kh.unsqueeze(1))
    return features @ w_v / math.sqrt(w_v.shape[0])


def add_softmaxed(queries, keys, W_q, W_k, w_v):
    qh = queries @ W_q.T
    kh = keys @ W_k.T
    scores = torch.tanh(qh.unsqueeze(2) + kh.unsqueeze(1)) @ w_v
    return torch.softmax(scores, dim=-1)


SOLUTIONS = [
    dict(name="broadcast", correct=True, mistake="", family="", fn=add_broadcast),
    dict(name="einsum_loop", correct=True, mistake="", family="", fn=add_einsum_loop),
    dict(name="no_transpose", correct=False,
         mistake="Multiplies by W_q and W_k instead of their transposes, which only has the right shape when they are square and then gives the wrong projection.",
         family="missing-transpose", fn=add_no_transpose),
    dict(name="tanh_each", correct=False,
         mistake="Applies tanh to the projected query and key separately and then adds, instead of tanh of the sum.",
         family="tanh-before-sum", fn=add_tanh_each),
    dict(name="swapped_axes", correct=False,
         mistake="Broadcasts the queries and keys on the wrong axes, producing (B, K, Q) scores (transposed when Q == K).",
         family="swapped-q-k-axes", fn=add_swapped_axes),
    dict(name="wv_inside_tanh", correct=False,
         mistake="Applies w_v before the tanh instead of after it.",
         family="tanh-after-wv", fn=add_wv_inside_tanh),
    dict(name="scaled", correct=False,
         mistake="Divides the scores by sqrt(h), a dot-product habit that additive attention does not have.",
         family="unwanted-scale", fn=add_scaled),
    dict(name="softmaxed", correct=False,
         mistake="Returns the softmax weights instead of the raw scores.",
         family="softmax-applied", fn=add_softmaxed),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'no_transpose': {'projection-not-transposed'},
    'tanh_each': {'tanh-on-each'},
    'swapped_axes': {'keys-by-queries'},
    'wv_inside_tanh': {'tanh-after-wv'},
    'scaled': {'scaled'},
    'softmaxed': {'softmax-applied'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
