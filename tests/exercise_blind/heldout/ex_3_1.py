import torch

def _c1(X, valid_lens):
    B, Q, K = X.shape
    vl = valid_lens
    if vl.dim() == 1:
        vl = vl[:, None].expand(B, Q)
    mask = torch.arange(K, device=X.device)[None, None, :] < vl[:, :, None]
    s = X.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.nan_to_num(w, nan=0.0)

def _c2(X, valid_lens):
    # loops, explicit
    B, Q, K = X.shape
    out = torch.zeros_like(X)
    for b in range(B):
        for q in range(Q):
            n = int(valid_lens[b] if valid_lens.dim() == 1 else valid_lens[b, q])
            n = max(0, min(n, K))
            if n > 0:
                out[b, q, :n] = torch.softmax(X[b, q, :n], dim=-1)
    return out

def _mask(X, valid_lens):
    B, Q, K = X.shape
    vl = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(B, Q)
    return torch.arange(K, device=X.device)[None, None, :] < vl[:, :, None]

def _w_neg1e6(X, valid_lens):
    # d2l style
    m = _mask(X, valid_lens)
    return torch.softmax(X.masked_fill(~m, -1e6), dim=-1)

def _w_inf_nan(X, valid_lens):
    m = _mask(X, valid_lens)
    return torch.softmax(X.masked_fill(~m, float("-inf")), dim=-1)

def _w_le(X, valid_lens):
    B, Q, K = X.shape
    vl = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(B, Q)
    m = torch.arange(K)[None, None, :] <= vl[:, :, None]
    w = torch.softmax(X.masked_fill(~m, float("-inf")), dim=-1)
    return torch.nan_to_num(w)

def _w_flip(X, valid_lens):
    m = _mask(X, valid_lens)
    w = torch.softmax(X.masked_fill(m, float("-inf")), dim=-1)
    return torch.nan_to_num(w)

def _w_1d_only(X, valid_lens):
    B, Q, K = X.shape
    vl = valid_lens.reshape(B, -1)[:, :1]  # assumes one length per batch row
    m = torch.arange(K)[None, None, :] < vl[:, :, None]
    w = torch.softmax(X.masked_fill(~m, float("-inf")), dim=-1)
    return torch.nan_to_num(w)

def _w_mult_after(X, valid_lens):
    m = _mask(X, valid_lens)
    return torch.softmax(X, dim=-1) * m

SOLUTIONS = [
    dict(name="masked_fill_inf_nan_to_num", correct=True, mistake="", family="", fn=_c1),
    dict(name="loops_softmax_prefix", correct=True, mistake="", family="", fn=_c2),
    dict(name="d2l_minus_1e6", correct=False, mistake="Fills the masked scores with -1e6 (d2l style), so a query with no valid key gets uniform weights instead of zeros.", family="-1e9-vs-inf", fn=_w_neg1e6),
    dict(name="inf_without_nan_fix", correct=False, mistake="Fills with -inf but never handles a fully masked row, which comes out NaN instead of zeros.", family="empty-row-nan", fn=_w_inf_nan),
    dict(name="le_off_by_one", correct=False, mistake="Keeps positions <= valid_len instead of < valid_len, letting one extra key through.", family="off-by-one", fn=_w_le),
    dict(name="mask_flipped", correct=False, mistake="Masks the valid keys and keeps the padded ones (mask convention flipped).", family="mask-flipped", fn=_w_flip),
    dict(name="only_1d_lengths", correct=False, mistake="Handles only one length per batch row, silently using the first query's length when valid_lens is (B, Q).", family="common-case-only", fn=_w_1d_only),
    dict(name="renorm_missing", correct=False, mistake="Zeroes the padded weights after the softmax without renormalising, so the kept weights no longer sum to 1.", family="missing-normaliser", fn=_w_mult_after),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'd2l_minus_1e6': {'d2l-uniform'},
    'inf_without_nan_fix': {'nan-row'},
    'le_off_by_one': {'off-by-one'},
    'mask_flipped': {'inverted-mask'},
    'only_1d_lengths': set(),
    'renorm_missing': {'mask-after-softmax'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
