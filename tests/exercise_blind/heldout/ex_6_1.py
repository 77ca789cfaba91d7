import math
import torch

def _c1(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    s = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    mask = torch.ones(Q, K, dtype=torch.bool, device=s.device).tril(diagonal=K - Q)
    s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ values

def _c2(queries, keys, values):
    # per-query loop over positions
    Q, K = queries.shape[1], keys.shape[1]
    outs = []
    for i in range(Q):
        p = K - Q + i
        q = queries[:, i:i + 1]                       # (B, 1, D)
        k, v = keys[:, :p + 1], values[:, :p + 1]
        w = torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, -1)
        outs.append(w @ v)
    return torch.cat(outs, dim=1)

def _attn(queries, keys, values, mask):
    s = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ values

def _w_plain_tril(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    return _attn(queries, keys, values, torch.ones(Q, K, dtype=torch.bool).tril())

def _w_off_by_one(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    return _attn(queries, keys, values, torch.ones(Q, K, dtype=torch.bool).tril(K - Q - 1))

def _w_triu(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    m = torch.ones(Q, K, dtype=torch.bool).triu(K - Q)
    return _attn(queries, keys, values, m)

def _w_no_scale(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    s = queries @ keys.transpose(1, 2)
    m = torch.ones(Q, K, dtype=torch.bool).tril(K - Q)
    return torch.softmax(s.masked_fill(~m, float("-inf")), -1) @ values

def _w_square_mask_last(queries, keys, values):
    # builds a K x K causal mask and takes its first Q rows
    Q, K = queries.shape[1], keys.shape[1]
    m = torch.ones(K, K, dtype=torch.bool).tril()[:Q]
    return _attn(queries, keys, values, m)

def _w_no_mask_when_decoding(queries, keys, values):
    # handles only Q == K; otherwise skips the mask as "decoding sees everything"
    Q, K = queries.shape[1], keys.shape[1]
    if Q == K:
        m = torch.ones(Q, K, dtype=torch.bool).tril()
    else:
        m = torch.ones(Q, K, dtype=torch.bool)
    return _attn(queries, keys, values, m)

SOLUTIONS = [
    dict(name="tril_offset", correct=True, mistake="", family="", fn=_c1),
    dict(name="loop_prefix_slices", correct=True, mistake="", family="", fn=_c2),
    dict(name="plain_tril", correct=False, mistake="Uses an ordinary tril mask aligned to the top-left, as if query i sat at position i rather than K - Q + i.", family="position-offset", fn=_w_plain_tril),
    dict(name="diagonal_off_by_one", correct=False, mistake="Offsets the diagonal by K - Q - 1, so each query cannot see its own key.", family="off-by-one", fn=_w_off_by_one),
    dict(name="triu_mask", correct=False, mistake="Uses triu instead of tril, keeping the future keys and hiding the past.", family="mask-flipped", fn=_w_triu),
    dict(name="no_scale", correct=False, mistake="Forgets to scale the scores by 1/sqrt(D).", family="missing-scale", fn=_w_no_scale),
    dict(name="first_rows_of_square_mask", correct=False, mistake="Takes the first Q rows of a K x K causal mask instead of the last Q rows.", family="position-offset", fn=_w_square_mask_last),
    dict(name="no_mask_if_Q_lt_K", correct=False, mistake="Only masks when Q == K and drops the mask entirely for a chunk of several new queries.", family="common-case-only", fn=_w_no_mask_when_decoding),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'plain_tril': {'top-left'},
    'diagonal_off_by_one': {'excludes-itself'},
    'triu_mask': {'sees-the-future'},
    'no_scale': {'no-scale'},
    'first_rows_of_square_mask': {'top-left'},
    'no_mask_if_Q_lt_K': {'no-causal-mask'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
