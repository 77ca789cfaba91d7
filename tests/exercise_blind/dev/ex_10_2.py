"""Exercise 10.2: merge_partial_attention(out1, lse1, out2, lse2) -> (out (Q,Dv), lse (Q,))."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def merge_logaddexp(out1, lse1, out2, lse2):
    lse = torch.logaddexp(lse1, lse2)
    w1 = torch.exp(lse1 - lse).nan_to_num(0.0)  # both chunks empty: -inf - -inf
    w2 = torch.exp(lse2 - lse).nan_to_num(0.0)
    out = torch.where(w1[:, None] > 0, w1[:, None] * out1, 0.0) + torch.where(
        w2[:, None] > 0, w2[:, None] * out2, 0.0
    )
    return out, lse


def merge_max_shift(out1, lse1, out2, lse2):
    m = torch.maximum(lse1, lse2)
    m_safe = torch.where(torch.isinf(m) & (m < 0), torch.zeros_like(m), m)
    a1 = torch.exp(lse1 - m_safe)
    a2 = torch.exp(lse2 - m_safe)
    total = a1 + a2
    num = torch.where(a1[:, None] > 0, a1[:, None] * out1, 0.0) + torch.where(
        a2[:, None] > 0, a2[:, None] * out2, 0.0
    )
    out = torch.where(total[:, None] > 0, num / total.clamp_min(1e-300)[:, None], 0.0)
    lse = m_safe + torch.log(total)
    return out, lse


# ---------- wrong ----------
def merge_naive_exp(out1, lse1, out2, lse2):
    e1, e2 = torch.exp(lse1), torch.exp(lse2)
    lse = torch.log(e1 + e2)
    out = (e1[:, None] * out1 + e2[:, None] * out2) / (e1 + e2)[:, None]
    return out, lse


def merge_plain_average(out1, lse1, out2, lse2):
    return (out1 + out2) / 2, torch.logaddexp(lse1, lse2)


def merge_lse_max(out1, lse1, out2, lse2):
    w = torch.softmax(torch.stack([lse1, lse2]), dim=0)  # (2, Q)
    out = w[0, :, None] * out1 + w[1, :, None] * out2
    return out, torch.maximum(lse1, lse2)


def merge_lse_sum(out1, lse1, out2, lse2):
    lse = lse1 + lse2  # "log of a product"... adds the logs
    out = torch.exp(lse1 - lse)[:, None] * out1 + torch.exp(lse2 - lse)[:, None] * out2
    return out, lse


def merge_not_renormalised(out1, lse1, out2, lse2):
    m = torch.maximum(lse1, lse2)
    a1, a2 = torch.exp(lse1 - m), torch.exp(lse2 - m)
    out = a1[:, None] * out1 + a2[:, None] * out2  # forgot to divide by a1 + a2
    return out, m + torch.log(a1 + a2)


def merge_swapped_weights(out1, lse1, out2, lse2):
    w1 = torch.sigmoid(lse2 - lse1)  # meant lse1 - lse2
    out = w1[:, None] * out1 + (1 - w1)[:, None] * out2
    return out, torch.logaddexp(lse1, lse2)


def merge_broadcast_wrong_axis(out1, lse1, out2, lse2):
    lse = torch.logaddexp(lse1, lse2)
    out = torch.exp(lse1 - lse) * out1 + torch.exp(lse2 - lse) * out2  # (Q,) against (Q, Dv)
    return out, lse


SOLUTIONS = [
    dict(name="logaddexp", correct=True, mistake="", family="", fn=merge_logaddexp),
    dict(name="max_shift", correct=True, mistake="", family="", fn=merge_max_shift),
    dict(name="naive_exp", correct=False,
         mistake="Exponentiates the log-sum-exps directly, which overflows for large scores.",
         family="no-max-subtraction", fn=merge_naive_exp),
    dict(name="plain_average", correct=False,
         mistake="Averages the two outputs equally instead of weighting each by its share of the total.",
         family="unweighted-average", fn=merge_plain_average),
    dict(name="lse_max", correct=False,
         mistake="Weights the outputs correctly but returns max(lse1, lse2) as the merged log-sum-exp.",
         family="lse-max-not-logsumexp", fn=merge_lse_max),
    dict(name="lse_sum", correct=False,
         mistake="Adds the two log-sum-exps instead of combining them with logaddexp.",
         family="lse-sum", fn=merge_lse_sum),
    dict(name="not_renormalised", correct=False,
         mistake="Rescales each output by exp(lse_i - max) but never divides by the total weight.",
         family="no-renormalise", fn=merge_not_renormalised),
    dict(name="swapped_weights", correct=False,
         mistake="Gives each chunk the other chunk's weight (sigmoid of lse2 - lse1 on out1).",
         family="swapped-weights", fn=merge_swapped_weights),
    dict(name="broadcast_wrong_axis", correct=False,
         mistake="Multiplies the (Q,) weights against (Q, Dv) outputs without unsqueezing, which scales columns (or raises) instead of rows.",
         family="broadcast-wrong-axis", fn=merge_broadcast_wrong_axis),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'naive_exp': {'naive-exp'},
    'plain_average': {'plain-average'},
    'lse_max': {'lse-max'},
    'lse_sum': {'lse-sum', 'lse-sum-in-weights'},
    'not_renormalised': {'no-normaliser', 'not-divided-by-total'},
    'swapped_weights': {'weights-swapped'},
    'broadcast_wrong_axis': {'weights-not-unsqueezed'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
