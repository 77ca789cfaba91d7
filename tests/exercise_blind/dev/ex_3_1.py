"""Exercise 3.1: masked_softmax(X (B, Q, K), valid_lens (B,) or (B, Q)) -> (B, Q, K)."""
import math

import torch
import numpy as np
import attention_lib as al


def _lens(valid_lens, X):
    B, Q, K = X.shape
    if valid_lens.dim() == 1:
        return valid_lens[:, None].expand(B, Q)
    return valid_lens


# ---------- correct ----------
def ms_where(X, valid_lens):
    B, Q, K = X.shape
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]  # (B, Q) or (B, 1)
    keep = torch.arange(K, device=X.device) < lens[..., None]  # (B, Q|1, K)
    filled = X.masked_fill(~keep, float("-inf"))
    w = torch.softmax(filled, dim=-1)
    return torch.where(keep, w, torch.zeros_like(w))  # empty rows: NaN -> 0


def ms_loops(X, valid_lens):
    B, Q, K = X.shape
    out = torch.zeros_like(X)
    for b in range(B):
        for q in range(Q):
            n = int(valid_lens[b] if valid_lens.dim() == 1 else valid_lens[b, q])
            n = min(n, K)
            if n > 0:
                row = X[b, q, :n]
                e = torch.exp(row - row.max())
                out[b, q, :n] = e / e.sum()
    return out


# ---------- wrong ----------
def ms_fill_zero(X, valid_lens):
    K = X.shape[-1]
    lens = _lens(valid_lens, X)
    keep = torch.arange(K, device=X.device) < lens[..., None]
    return torch.softmax(X.masked_fill(~keep, 0.0), dim=-1)


def ms_d2l_minus_1e6(X, valid_lens):
    B, Q, K = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, Q)
    else:
        valid_lens = valid_lens.reshape(-1)
    flat = X.reshape(-1, K)
    keep = torch.arange(K, device=X.device)[None, :] < valid_lens[:, None]
    flat = flat.masked_fill(~keep, -1e6)
    return torch.softmax(flat.reshape(B, Q, K), dim=-1)


def ms_inf_nan(X, valid_lens):
    K = X.shape[-1]
    lens = _lens(valid_lens, X)
    keep = torch.arange(K, device=X.device) < lens[..., None]
    return torch.softmax(X.masked_fill(~keep, float("-inf")), dim=-1)


def ms_repeat_not_interleave(X, valid_lens):
    B, Q, K = X.shape
    if valid_lens.dim() == 1:
        valid_lens = valid_lens.repeat(Q)  # [l0, l1, l0, l1, ...]
    else:
        valid_lens = valid_lens.reshape(-1)
    keep = (torch.arange(K, device=X.device)[None, :] < valid_lens[:, None]).reshape(B, Q, K)
    w = torch.softmax(X.masked_fill(~keep, float("-inf")), dim=-1)
    return w.masked_fill(~keep, 0.0)


def ms_off_by_one(X, valid_lens):
    K = X.shape[-1]
    lens = _lens(valid_lens, X)
    keep = torch.arange(K, device=X.device) <= lens[..., None]
    w = torch.softmax(X.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.nan_to_num(w, nan=0.0)


def ms_mask_queries(X, valid_lens):
    B, Q, K = X.shape
    lens = valid_lens if valid_lens.dim() == 1 else valid_lens.max(dim=1).values
    keep = (torch.arange(Q, device=X.device)[None, :] < lens[:, None])[:, :, None]  # (B, Q, 1)
    w = torch.softmax(X, dim=-1)
    return w * keep


def ms_inplace(X, valid_lens):
    K = X.shape[-1]
    lens = _lens(valid_lens, X)
    keep = torch.arange(K, device=X.device) < lens[..., None]
    X.masked_fill_(~keep, float("-inf"))  # writes into the caller's scores
    w = torch.softmax(X, dim=-1)
    return torch.nan_to_num(w, nan=0.0)


SOLUTIONS = [
    dict(name="where", correct=True, mistake="", family="", fn=ms_where),
    dict(name="loops", correct=True, mistake="", family="", fn=ms_loops),
    dict(name="fill_zero", correct=False,
         mistake="Fills the masked scores with 0 instead of -inf, so masked keys still get weight.",
         family="mask-fill-zero", fn=ms_fill_zero),
    dict(name="d2l_minus_1e6", correct=False,
         mistake="Fills with -1e6 and never zeroes afterwards, so a query with no valid key gets uniform weights instead of zeros.",
         family="empty-row-uniform", fn=ms_d2l_minus_1e6),
    dict(name="inf_nan", correct=False,
         mistake="Fills with -inf but does not handle rows with no valid key, which come out NaN.",
         family="empty-row-nan", fn=ms_inf_nan),
    dict(name="repeat_not_interleave", correct=False,
         mistake="Expands (B,) lengths to every query with repeat instead of repeat_interleave, so queries get another batch row's length.",
         family="repeat-not-interleave", fn=ms_repeat_not_interleave),
    dict(name="off_by_one", correct=False,
         mistake="Keeps positions <= valid_len instead of < valid_len.",
         family="off-by-one", fn=ms_off_by_one),
    dict(name="mask_queries", correct=False,
         mistake="Applies the lengths to the query axis (zeroing whole rows) instead of to the keys.",
         family="mask-wrong-axis", fn=ms_mask_queries),
    dict(name="inplace", correct=False,
         mistake="Uses masked_fill_ on X, overwriting the caller's scores with -inf.",
         family="in-place-input", fn=ms_inplace),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'fill_zero': {'fill-zero'},
    'd2l_minus_1e6': {'d2l-uniform'},
    'inf_nan': {'nan-row'},
    'repeat_not_interleave': {'lengths-tiled'},
    'off_by_one': {'off-by-one'},
    'mask_queries': {'masks-queries'},
    'inplace': {'in-place'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
