import math
import torch

def _c1(queries, keys, values, valid_lens):
    d = queries.shape[-1]
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    K = keys.shape[1]
    keep = torch.arange(K, device=s.device)[None, None, :] < valid_lens.to(s.device)[:, None, None]
    s = s.masked_fill(~keep, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return w @ values

def _c2(queries, keys, values, valid_lens):
    # loop over the batch, slice the valid keys
    outs = []
    for b in range(queries.shape[0]):
        n = int(valid_lens[b])
        q, k, v = queries[b], keys[b, :n], values[b, :n]
        if n == 0:
            outs.append(torch.zeros(q.shape[0], values.shape[-1], dtype=values.dtype, device=values.device))
            continue
        w = torch.softmax(q @ k.T * q.shape[-1] ** -0.5, dim=-1)
        outs.append(w @ v)
    return torch.stack(outs)

def _scores(queries, keys):
    return queries @ keys.transpose(-1, -2) / math.sqrt(queries.shape[-1])

def _keep(valid_lens, K):
    return torch.arange(K)[None, None, :] < valid_lens[:, None, None]

def _w_no_scale(queries, keys, values, valid_lens):
    s = queries @ keys.transpose(-1, -2)
    s = s.masked_fill(~_keep(valid_lens, keys.shape[1]), float("-inf"))
    return torch.softmax(s, -1) @ values

def _w_scale_by_d(queries, keys, values, valid_lens):
    s = queries @ keys.transpose(-1, -2) / queries.shape[-1]
    s = s.masked_fill(~_keep(valid_lens, keys.shape[1]), float("-inf"))
    return torch.softmax(s, -1) @ values

def _w_sqrt_dv(queries, keys, values, valid_lens):
    s = queries @ keys.transpose(-1, -2) / math.sqrt(values.shape[-1])
    s = s.masked_fill(~_keep(valid_lens, keys.shape[1]), float("-inf"))
    return torch.softmax(s, -1) @ values

def _w_mask_queries(queries, keys, values, valid_lens):
    s = _scores(queries, keys)
    Q = queries.shape[1]
    keep = torch.arange(Q)[None, :, None] < valid_lens[:, None, None]
    s = s.masked_fill(~keep, -1e9)
    return torch.softmax(s, -1) @ values

def _w_zero_scores(queries, keys, values, valid_lens):
    s = _scores(queries, keys)
    s = s * _keep(valid_lens, keys.shape[1])
    return torch.softmax(s, -1) @ values

def _w_transpose_keep_shape(queries, keys, values, valid_lens):
    # keys.transpose(0, 2)... then back: ends up with keys.mT in the wrong order when Q==K
    s = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    s = s.masked_fill(~_keep(valid_lens, keys.shape[1]), float("-inf"))
    w = torch.softmax(s, dim=1)
    return w @ values

SOLUTIONS = [
    dict(name="bmm_masked_fill", correct=True, mistake="", family="", fn=_c1),
    dict(name="loop_slice_valid", correct=True, mistake="", family="", fn=_c2),
    dict(name="no_scale", correct=False, mistake="Forgets to divide the scores by sqrt(D).", family="missing-scale", fn=_w_no_scale),
    dict(name="scale_by_d", correct=False, mistake="Divides the scores by D instead of sqrt(D).", family="wrong-scale", fn=_w_scale_by_d),
    dict(name="scale_by_dv", correct=False, mistake="Scales by the square root of the value dimension Dv instead of the key dimension D.", family="wrong-scale", fn=_w_sqrt_dv),
    dict(name="mask_queries", correct=False, mistake="Applies the length mask to the query axis instead of the key axis.", family="wrong-axis", fn=_w_mask_queries),
    dict(name="multiply_by_mask", correct=False, mistake="Multiplies the scores by the 0/1 mask, so padded keys get score 0 rather than weight 0.", family="mask-by-zero", fn=_w_zero_scores),
    dict(name="softmax_dim1", correct=False, mistake="Takes the softmax over dim=1 (the queries) instead of the last dim (the keys).", family="wrong-axis", fn=_w_transpose_keep_shape),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'no_scale': {'no-scale'},
    'scale_by_d': {'divide-by-width'},
    'scale_by_dv': {'scale-by-value-width'},
    'mask_queries': {'masks-queries'},
    'multiply_by_mask': {'fill-zero'},
    # -nan: 5.1's softmax over the queries without NaN -> 0, a mistake added on
    # 2026-11-29 (a reader's report), after this set's one run
    'softmax_dim1': {'softmax-over-queries', 'softmax-over-queries-nan'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
