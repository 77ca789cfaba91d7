"""Exercise 2.1: nadaraya_watson(x_train (K,), y_train (K,), x_query (Q,), bandwidth) -> (Q,)."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def nw_softmax(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None, :]) / bandwidth  # (Q, K)
    weights = torch.softmax(-(u**2) / 2, dim=1)
    return weights @ y_train


def nw_loop_maxshift(x_train, y_train, x_query, bandwidth):
    out = torch.empty(x_query.shape[0], dtype=y_train.dtype, device=y_train.device)
    for i in range(x_query.shape[0]):
        logits = -0.5 * ((x_query[i] - x_train) / bandwidth) ** 2
        logits = logits - logits.max()  # the nearest point gets exp(0) = 1
        w = torch.exp(logits)
        out[i] = (w * y_train).sum() / w.sum()
    return out


# ---------- wrong ----------
def nw_naive_exp(x_train, y_train, x_query, bandwidth):
    u = (x_query.unsqueeze(1) - x_train.unsqueeze(0)) / bandwidth
    k = torch.exp(-(u**2) / 2)
    return (k * y_train).sum(1) / k.sum(1)


def nw_h_not_squared(x_train, y_train, x_query, bandwidth):
    diff = x_query[:, None] - x_train[None, :]
    weights = torch.softmax(-(diff**2) / (2 * bandwidth), dim=1)
    return weights @ y_train


def nw_softmax_dim0(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None, :]) / bandwidth
    weights = torch.softmax(-(u**2) / 2, dim=0)
    return weights @ y_train


def nw_abs_distance(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None, :]).abs() / bandwidth
    weights = torch.softmax(-u / 2, dim=1)
    return weights @ y_train


def nw_missing_half(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None, :]) / bandwidth
    weights = torch.softmax(-(u**2), dim=1)
    return weights @ y_train


def nw_unnormalised(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None, :]) / bandwidth
    weights = torch.exp(-(u**2) / 2) / math.sqrt(2 * math.pi)  # the Gaussian density
    return weights @ y_train


SOLUTIONS = [
    dict(name="softmax", correct=True, mistake="", family="", fn=nw_softmax),
    dict(name="loop_maxshift", correct=True, mistake="", family="", fn=nw_loop_maxshift),
    dict(name="naive_exp", correct=False,
         mistake="Divides exp(-u^2/2) by its sum directly, which is 0/0 = NaN when a query is far from every point for a small bandwidth.",
         family="no-max-subtraction", fn=nw_naive_exp),
    dict(name="h_not_squared", correct=False,
         mistake="Divides the squared distance by 2h instead of 2h^2 (only right for h = 1).",
         family="bandwidth-not-squared", fn=nw_h_not_squared),
    dict(name="softmax_dim0", correct=False,
         mistake="Normalises the kernel weights over the queries instead of over the training points.",
         family="wrong-axis", fn=nw_softmax_dim0),
    dict(name="abs_distance", correct=False,
         mistake="Uses |u| instead of u^2 in the exponent (a Laplace kernel, not the Gaussian).",
         family="wrong-kernel", fn=nw_abs_distance),
    dict(name="missing_half", correct=False,
         mistake="Drops the 1/2 in exp(-u^2/2).",
         family="missing-half", fn=nw_missing_half),
    dict(name="unnormalised", correct=False,
         mistake="Uses the Gaussian density values as weights without dividing by their sum.",
         family="no-normalisation", fn=nw_unnormalised),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'naive_exp': {'kernel-underflows'},
    'h_not_squared': {'squared-distance-over-h'},
    'softmax_dim0': {'normalised-over-queries'},
    'abs_distance': {'absolute-distance'},
    'missing_half': {'kernel-without-half'},
    'unnormalised': {'density-not-normalised', 'not-normalised'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
