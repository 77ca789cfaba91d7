"""Exercise 8.1: grouped_query_attention(queries (B,H,Q,d), keys/values (B,Hkv,K,d)) -> (B,H,Q,d)."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def gqa_repeat_interleave(queries, keys, values):
    H, Hkv = queries.shape[1], keys.shape[1]
    g = H // Hkv
    k = keys.repeat_interleave(g, dim=1)
    v = values.repeat_interleave(g, dim=1)
    scores = queries @ k.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def gqa_grouped_einsum(queries, keys, values):
    B, H, Q, d = queries.shape
    Hkv = keys.shape[1]
    q = queries.reshape(B, Hkv, H // Hkv, Q, d)  # consecutive query heads share a kv head
    s = torch.einsum("bgrqd,bgkd->bgrqk", q, keys) * d**-0.5
    w = s.softmax(dim=-1)
    out = torch.einsum("bgrqk,bgkd->bgrqd", w, values)
    return out.reshape(B, H, Q, d)


# ---------- wrong ----------
def gqa_repeat(queries, keys, values):
    g = queries.shape[1] // keys.shape[1]
    k = keys.repeat(1, g, 1, 1)
    v = values.repeat(1, g, 1, 1)
    scores = queries @ k.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def gqa_reshape_group_order(queries, keys, values):
    B, H, Q, d = queries.shape
    Hkv = keys.shape[1]
    q = queries.reshape(B, H // Hkv, Hkv, Q, d)  # (B, g, Hkv, Q, d)
    s = q @ keys.unsqueeze(1).transpose(-2, -1) / math.sqrt(d)
    out = torch.softmax(s, dim=-1) @ values.unsqueeze(1)
    return out.reshape(B, H, Q, d)


def gqa_no_scale(queries, keys, values):
    g = queries.shape[1] // keys.shape[1]
    k = torch.repeat_interleave(keys, g, dim=1)
    v = torch.repeat_interleave(values, g, dim=1)
    return torch.softmax(queries @ k.transpose(-2, -1), dim=-1) @ v


def gqa_scale_d(queries, keys, values):
    g = queries.shape[1] // keys.shape[1]
    k = torch.repeat_interleave(keys, g, dim=1)
    v = torch.repeat_interleave(values, g, dim=1)
    return torch.softmax(queries @ k.transpose(-2, -1) / queries.shape[-1], dim=-1) @ v


def gqa_softmax_wrong_axis(queries, keys, values):
    g = queries.shape[1] // keys.shape[1]
    k = torch.repeat_interleave(keys, g, dim=1)
    v = torch.repeat_interleave(values, g, dim=1)
    scores = queries @ k.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    return torch.softmax(scores, dim=-2) @ v


def gqa_expand_only_mqa(queries, keys, values):
    B, H, Q, d = queries.shape
    k = keys.expand(B, H, keys.shape[2], d)  # broadcast the shared head
    v = values.expand(B, H, values.shape[2], d)
    scores = queries @ k.transpose(-2, -1) / math.sqrt(d)
    return torch.softmax(scores, dim=-1) @ v


def gqa_index_divisor(queries, keys, values):
    H, Hkv = queries.shape[1], keys.shape[1]
    idx = torch.arange(H, device=queries.device) // Hkv  # meant // (H // Hkv)
    idx = idx.clamp(max=Hkv - 1)
    k, v = keys[:, idx], values[:, idx]
    scores = queries @ k.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


SOLUTIONS = [
    dict(name="repeat_interleave", correct=True, mistake="", family="", fn=gqa_repeat_interleave),
    dict(name="grouped_einsum", correct=True, mistake="", family="", fn=gqa_grouped_einsum),
    dict(name="repeat", correct=False,
         mistake="Uses repeat instead of repeat_interleave, so query head h reads kv head h % Hkv instead of h // (H/Hkv).",
         family="repeat-not-interleave", fn=gqa_repeat),
    dict(name="reshape_group_order", correct=False,
         mistake="Reshapes the query heads as (g, Hkv) instead of (Hkv, g), pairing heads with kv heads round-robin.",
         family="group-reshape-order", fn=gqa_reshape_group_order),
    dict(name="no_scale", correct=False,
         mistake="Forgets the 1/sqrt(d) scale.",
         family="no-scale", fn=gqa_no_scale),
    dict(name="scale_d", correct=False,
         mistake="Divides the scores by d instead of sqrt(d).",
         family="scale-D", fn=gqa_scale_d),
    dict(name="softmax_wrong_axis", correct=False,
         mistake="Takes the softmax over the queries (dim -2) instead of the keys.",
         family="wrong-axis", fn=gqa_softmax_wrong_axis),
    dict(name="expand_only_mqa", correct=False,
         mistake="Expands the kv heads to H, which only works for a single kv head (MQA) and raises for real grouping.",
         family="only-common-case", fn=gqa_expand_only_mqa),
    dict(name="index_divisor", correct=False,
         mistake="Maps query head h to kv head h // Hkv instead of h // (H / Hkv), right only when the group size equals Hkv.",
         family="group-index-divisor", fn=gqa_index_divisor),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'repeat': {'repeat-not-interleave'},
    'reshape_group_order': {'repeat-not-interleave'},
    'no_scale': {'no-scale'},
    'scale_d': {'divide-by-width'},
    'softmax_wrong_axis': {'softmax-over-queries'},
    'expand_only_mqa': {'expand-one-head'},
    'index_divisor': {'group-index-divisor'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
