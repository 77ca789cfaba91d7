"""Exercise 5.1: scaled_dot_product_attention(queries (B,Q,D), keys (B,K,D), values (B,K,Dv), valid_lens (B,)) -> (B,Q,Dv)."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def sdpa_manual(queries, keys, values, valid_lens):
    D = queries.shape[-1]
    K = keys.shape[1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(D)  # (B, Q, K)
    keep = torch.arange(K, device=scores.device)[None, None, :] < valid_lens[:, None, None]
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1).masked_fill(~keep, 0.0)
    return weights @ values


def sdpa_with_masked_softmax(queries, keys, values, valid_lens):
    scores = torch.einsum("bqd,bkd->bqk", queries, keys) * queries.shape[-1] ** -0.5
    weights = al.masked_softmax(scores, valid_lens)
    return torch.einsum("bqk,bkv->bqv", weights, values)


# ---------- wrong ----------
def _mask(scores, valid_lens, fill):
    K = scores.shape[-1]
    keep = torch.arange(K, device=scores.device)[None, None, :] < valid_lens[:, None, None]
    return scores.masked_fill(~keep, fill), keep


def sdpa_scale_D(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2) / queries.shape[-1]
    weights = al.masked_softmax(scores, valid_lens)
    return weights @ values


def sdpa_scale_Dv(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(values.shape[-1])
    weights = al.masked_softmax(scores, valid_lens)
    return weights @ values


def sdpa_no_scale(queries, keys, values, valid_lens):
    scores = torch.bmm(queries, keys.transpose(1, 2))
    return al.masked_softmax(scores, valid_lens) @ values


def sdpa_fill_zero(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    scores, keep = _mask(scores, valid_lens, 0.0)
    return torch.softmax(scores, dim=-1) @ values


def sdpa_minus_1e6(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    scores, keep = _mask(scores, valid_lens, -1e6)
    return torch.softmax(scores, dim=-1) @ values


def sdpa_off_by_one(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    K = scores.shape[-1]
    keep = torch.arange(1, K + 1, device=scores.device)[None, None, :] <= valid_lens[:, None, None] + 1
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.nan_to_num(weights) @ values


def sdpa_mask_wrong_axis(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    K = keys.shape[1]
    keep = torch.arange(K, device=scores.device)[None, :] < valid_lens[:, None]  # (B, K)
    scores = scores.masked_fill(~keep[:, :, None], float("-inf"))  # (B, K, 1): broadcasts over the wrong axis
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))
    return weights @ values


SOLUTIONS = [
    dict(name="manual", correct=True, mistake="", family="", fn=sdpa_manual),
    dict(name="with_masked_softmax", correct=True, mistake="", family="", fn=sdpa_with_masked_softmax),
    dict(name="scale_D", correct=False,
         mistake="Divides the scores by D instead of sqrt(D).",
         family="scale-D", fn=sdpa_scale_D),
    dict(name="scale_Dv", correct=False,
         mistake="Scales by sqrt of the value width Dv instead of the query/key width D.",
         family="scale-wrong-dim", fn=sdpa_scale_Dv),
    dict(name="no_scale", correct=False,
         mistake="Forgets the 1/sqrt(D) scale.",
         family="no-scale", fn=sdpa_no_scale),
    dict(name="fill_zero", correct=False,
         mistake="Fills masked scores with 0 instead of -inf, so padded keys still get weight.",
         family="mask-fill-zero", fn=sdpa_fill_zero),
    dict(name="minus_1e6", correct=False,
         mistake="Fills with -1e6 and never zeroes, so a sequence with valid_len 0 averages all the values instead of giving zeros.",
         family="empty-row-uniform", fn=sdpa_minus_1e6),
    dict(name="off_by_one", correct=False,
         mistake="Shifts the comparison by one and keeps the key at position valid_len as well.",
         family="off-by-one", fn=sdpa_off_by_one),
    dict(name="mask_wrong_axis", correct=False,
         mistake="Unsqueezes the (B, K) mask on the last axis so it masks queries rather than keys (only runs when Q == K).",
         family="mask-wrong-axis", fn=sdpa_mask_wrong_axis),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'scale_D': {'divide-by-width'},
    'scale_Dv': {'scale-by-value-width'},
    'no_scale': {'no-scale'},
    'fill_zero': {'fill-zero'},
    'minus_1e6': {'d2l-uniform'},
    'off_by_one': {'off-by-one'},
    'mask_wrong_axis': {'masks-queries'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
