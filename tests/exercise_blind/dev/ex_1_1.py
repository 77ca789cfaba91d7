"""Exercise 1.1: attention_pooling(queries (Q, D), keys (K, D), values (K, Dv)) -> (Q, Dv)."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def pooling_matmul_softmax(queries, keys, values):
    scores = queries @ keys.T  # (Q, K)
    weights = torch.softmax(scores, dim=-1)
    return weights @ values


def pooling_loop_logsumexp(queries, keys, values):
    outs = []
    for q in queries:  # one query at a time
        s = torch.einsum("kd,d->k", keys, q)
        w = torch.exp(s - torch.logsumexp(s, dim=0))  # stable softmax
        outs.append((w[:, None] * values).sum(0))
    return torch.stack(outs)


# ---------- wrong ----------
def pooling_softmax_dim0(queries, keys, values):
    scores = queries @ keys.T
    weights = torch.softmax(scores, dim=0)  # normalises over the queries
    return weights @ values


def pooling_scaled(queries, keys, values):
    scores = queries @ keys.T / math.sqrt(queries.shape[-1])
    return torch.softmax(scores, dim=-1) @ values


def pooling_naive_exp(queries, keys, values):
    scores = queries @ keys.T
    e = torch.exp(scores)
    weights = e / e.sum(dim=1, keepdim=True)
    return weights @ values


def pooling_of_keys(queries, keys, values):
    scores = queries @ keys.T
    weights = torch.softmax(scores, dim=-1)
    return weights @ keys  # averages the keys instead of the values


def pooling_neg_distance(queries, keys, values):
    # carries over the Gaussian kernel: similarity = -|q - k|^2 / 2
    d2 = torch.cdist(queries, keys) ** 2
    return torch.softmax(-d2 / 2, dim=-1) @ values


def pooling_global_softmax(queries, keys, values):
    scores = queries @ keys.T
    weights = torch.softmax(scores.flatten(), dim=0).reshape(scores.shape)
    weights = weights * scores.shape[0]  # "so the rows sum to about 1"
    return weights @ values


SOLUTIONS = [
    dict(name="matmul_softmax", correct=True, mistake="", family="", fn=pooling_matmul_softmax),
    dict(name="loop_logsumexp", correct=True, mistake="", family="", fn=pooling_loop_logsumexp),
    dict(name="softmax_dim0", correct=False,
         mistake="Takes the softmax over the queries (dim 0) instead of over the keys.",
         family="wrong-axis", fn=pooling_softmax_dim0),
    dict(name="scaled", correct=False,
         mistake="Divides the dot products by sqrt(D), a scale the task does not ask for.",
         family="unwanted-scale", fn=pooling_scaled),
    dict(name="naive_exp", correct=False,
         mistake="Normalises exp(scores) without subtracting the maximum, so large scores overflow to inf/NaN.",
         family="no-max-subtraction", fn=pooling_naive_exp),
    dict(name="pools_keys", correct=False,
         mistake="Averages the keys instead of the values with the attention weights.",
         family="pool-keys-not-values", fn=pooling_of_keys),
    dict(name="neg_distance", correct=False,
         mistake="Uses the negative squared distance (the Gaussian kernel) instead of the dot product as the score.",
         family="distance-not-dot", fn=pooling_neg_distance),
    dict(name="global_softmax", correct=False,
         mistake="Normalises over the whole score matrix instead of each query's row.",
         family="global-normalisation", fn=pooling_global_softmax),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'softmax_dim0': {'softmax-over-queries'},
    'scaled': {'scaled'},
    'naive_exp': {'no-max'},
    'pools_keys': {'pooled-keys'},
    'neg_distance': {'distance-score'},
    'global_softmax': set(),
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
