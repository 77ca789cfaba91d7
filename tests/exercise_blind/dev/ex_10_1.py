"""Exercise 10.1: online_attention(q (D,), keys (K,D), values (K,Dv), block_size) -> (Dv,)."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def online_max_sum_acc(q, keys, values, block_size):
    scale = 1 / math.sqrt(q.shape[0])
    m = torch.tensor(float("-inf"), dtype=q.dtype, device=q.device)
    l = torch.zeros((), dtype=q.dtype, device=q.device)
    acc = torch.zeros(values.shape[1], dtype=values.dtype, device=values.device)
    for start in range(0, keys.shape[0], block_size):
        kb, vb = keys[start : start + block_size], values[start : start + block_size]
        s = kb @ q * scale
        m_new = torch.maximum(m, s.max())
        corr = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * corr + p.sum()
        acc = acc * corr + p @ vb
        m = m_new
    return acc / l


def online_lse_normalised(q, keys, values, block_size):
    # keeps the output normalised at every step, plus the running log-sum-exp
    out, lse = None, None
    for start in range(0, len(keys), block_size):
        s = (keys[start : start + block_size] @ q) / q.numel() ** 0.5
        lse_b = torch.logsumexp(s, 0)
        out_b = torch.softmax(s, 0) @ values[start : start + block_size]
        if out is None:
            out, lse = out_b, lse_b
            continue
        lse_new = torch.logaddexp(lse, lse_b)
        out = torch.exp(lse - lse_new) * out + torch.exp(lse_b - lse_new) * out_b
        lse = lse_new
    return out


# ---------- wrong ----------
def online_no_rescale_acc(q, keys, values, block_size):
    scale = q.shape[0] ** -0.5
    m, l = -math.inf, 0.0
    acc = torch.zeros(values.shape[1], dtype=values.dtype, device=values.device)
    for start in range(0, keys.shape[0], block_size):
        s = keys[start : start + block_size] @ q * scale
        m_new = max(m, s.max().item())
        p = torch.exp(s - m_new)
        l = l * math.exp(m - m_new) + p.sum()
        acc = acc + p @ values[start : start + block_size]  # forgot to rescale acc
        m = m_new
    return acc / l


def online_per_block_max(q, keys, values, block_size):
    scale = q.shape[0] ** -0.5
    l = 0.0
    acc = torch.zeros(values.shape[1], dtype=values.dtype, device=values.device)
    for start in range(0, keys.shape[0], block_size):
        s = keys[start : start + block_size] @ q * scale
        p = torch.exp(s - s.max())  # each block's own max, never reconciled
        l = l + p.sum()
        acc = acc + p @ values[start : start + block_size]
    return acc / l


def online_no_max(q, keys, values, block_size):
    scale = q.shape[0] ** -0.5
    l = 0.0
    acc = torch.zeros(values.shape[1], dtype=values.dtype, device=values.device)
    for start in range(0, keys.shape[0], block_size):
        p = torch.exp(keys[start : start + block_size] @ q * scale)
        l = l + p.sum()
        acc = acc + p @ values[start : start + block_size]
    return acc / l


def online_no_scale(q, keys, values, block_size):
    m = -math.inf
    l = 0.0
    acc = torch.zeros(values.shape[1], dtype=values.dtype, device=values.device)
    for start in range(0, keys.shape[0], block_size):
        s = keys[start : start + block_size] @ q
        m_new = max(m, s.max().item())
        c = math.exp(m - m_new)
        p = torch.exp(s - m_new)
        l, acc, m = l * c + p.sum(), acc * c + p @ values[start : start + block_size], m_new
    return acc / l


def online_drops_tail(q, keys, values, block_size):
    scale = q.shape[0] ** -0.5
    m = -math.inf
    l = 0.0
    acc = torch.zeros(values.shape[1], dtype=values.dtype, device=values.device)
    for b in range(keys.shape[0] // block_size):
        kb = keys[b * block_size : (b + 1) * block_size]
        vb = values[b * block_size : (b + 1) * block_size]
        s = kb @ q * scale
        m_new = max(m, s.max().item())
        c = math.exp(m - m_new)
        p = torch.exp(s - m_new)
        l, acc, m = l * c + p.sum(), acc * c + p @ vb, m_new
    return acc / l


def online_update_before_read(q, keys, values, block_size):
    scale = q.shape[0] ** -0.5
    m = torch.tensor(float("-inf"), device=q.device)
    l = torch.tensor(0.0, device=q.device)
    acc = torch.zeros(values.shape[1], dtype=values.dtype, device=values.device)
    for start in range(0, keys.shape[0], block_size):
        s = keys[start : start + block_size] @ q * scale
        new_m = torch.maximum(m, s.max())
        m = new_m
        p = torch.exp(s - m)
        l = l * torch.exp(m - new_m) + p.sum()
        acc = acc * torch.exp(m - new_m) + p @ values[start : start + block_size]
    return acc / l


SOLUTIONS = [
    dict(name="max_sum_acc", correct=True, mistake="", family="", fn=online_max_sum_acc),
    dict(name="lse_normalised", correct=True, mistake="", family="", fn=online_lse_normalised),
    dict(name="no_rescale_acc", correct=False,
         mistake="Rescales the running sum when the maximum grows but not the running output.",
         family="no-rescale", fn=online_no_rescale_acc),
    dict(name="per_block_max", correct=False,
         mistake="Subtracts each block's own maximum and adds the blocks up without bringing them to a common maximum.",
         family="per-block-max", fn=online_per_block_max),
    dict(name="no_max", correct=False,
         mistake="Accumulates exp(score) with no running maximum, which overflows for large scores.",
         family="no-max-subtraction", fn=online_no_max),
    dict(name="no_scale", correct=False,
         mistake="Forgets to divide the scores by sqrt(D).",
         family="no-scale", fn=online_no_scale),
    dict(name="drops_tail", correct=False,
         mistake="Loops over K // block_size blocks, silently dropping the last partial block.",
         family="drops-last-partial-block", fn=online_drops_tail),
    dict(name="update_before_read", correct=False,
         mistake="Overwrites the running maximum before computing the correction factor, so the old sum and output are never rescaled.",
         family="update-before-read", fn=online_update_before_read),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'no_rescale_acc': {'output-not-rescaled'},
    'per_block_max': {'per-block-max'},
    'no_max': {'no-running-max'},
    'no_scale': {'no-scale'},
    'drops_tail': {'last-block-dropped'},
    'update_before_read': {'no-rescale'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
