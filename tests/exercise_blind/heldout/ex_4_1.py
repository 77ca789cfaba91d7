import torch

def _c1(queries, keys, W_q, W_k, w_v):
    q = torch.einsum("bqd,hd->bqh", queries, W_q)
    k = torch.einsum("bkd,hd->bkh", keys, W_k)
    return torch.einsum("bqkh,h->bqk", torch.tanh(q[:, :, None, :] + k[:, None, :, :]), w_v)

def _c2(queries, keys, W_q, W_k, w_v):
    # loop over queries, using nn.functional.linear
    qp = torch.nn.functional.linear(queries, W_q)  # (B, Q, h)
    kp = torch.nn.functional.linear(keys, W_k)     # (B, K, h)
    rows = []
    for i in range(qp.shape[1]):
        feat = torch.tanh(qp[:, i:i + 1, :] + kp)  # (B, K, h)
        rows.append(feat @ w_v)                     # (B, K)
    return torch.stack(rows, dim=1)

def _w_no_transpose_weights(queries, keys, W_q, W_k, w_v):
    # multiplies by W (not W^T); only shape-correct when h == D
    q = queries @ W_q
    k = keys @ W_k
    return torch.tanh(q[:, :, None] + k[:, None]) @ w_v

def _w_tanh_after(queries, keys, W_q, W_k, w_v):
    q = queries @ W_q.T
    k = keys @ W_k.T
    return (torch.tanh(q)[:, :, None] + torch.tanh(k)[:, None]) @ w_v

def _w_softmax(queries, keys, W_q, W_k, w_v):
    q = queries @ W_q.T
    k = keys @ W_k.T
    s = torch.tanh(q[:, :, None] + k[:, None]) @ w_v
    return torch.softmax(s, dim=-1)

def _w_transposed_out(queries, keys, W_q, W_k, w_v):
    q = queries @ W_q.T
    k = keys @ W_k.T
    s = torch.tanh(q[:, None, :, :] + k[:, :, None, :]) @ w_v  # (B, K, Q)
    return s.reshape(s.shape[0], s.shape[2], s.shape[1])

def _w_swapped_weights(queries, keys, W_q, W_k, w_v):
    q = queries @ W_k.T
    k = keys @ W_q.T
    return torch.tanh(q[:, :, None] + k[:, None]) @ w_v

def _w_sum_not_wv(queries, keys, W_q, W_k, w_v):
    q = queries @ W_q.T
    k = keys @ W_k.T
    return (torch.tanh(q[:, :, None] + k[:, None]) * w_v.sum()).mean(-1)

SOLUTIONS = [
    dict(name="einsum", correct=True, mistake="", family="", fn=_c1),
    dict(name="loop_over_queries_F_linear", correct=True, mistake="", family="", fn=_c2),
    dict(name="W_not_transposed", correct=False, mistake="Projects with X @ W instead of X @ W^T, which is wrong (or fails) whenever W is not square-and-symmetric.", family="wrong-transpose", fn=_w_no_transpose_weights),
    dict(name="tanh_before_sum", correct=False, mistake="Applies tanh to each projection separately and then adds, instead of tanh of the sum.", family="wrong-formula", fn=_w_tanh_after),
    dict(name="softmax_scores", correct=False, mistake="Returns the softmax-normalised weights instead of the raw scores.", family="extra-softmax", fn=_w_softmax),
    dict(name="reshape_instead_of_transpose", correct=False, mistake="Builds the scores as (B, K, Q) and reshapes to (B, Q, K) instead of transposing, scrambling the entries.", family="wrong-transpose", fn=_w_transposed_out),
    dict(name="swapped_W", correct=False, mistake="Uses W_k on the queries and W_q on the keys.", family="swapped-args", fn=_w_swapped_weights),
    dict(name="mean_times_sum_wv", correct=False, mistake="Replaces the dot product with w_v by the mean of tanh times the sum of w_v.", family="wrong-formula", fn=_w_sum_not_wv),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'W_not_transposed': {'projection-not-transposed'},
    'tanh_before_sum': {'tanh-on-each'},
    'softmax_scores': {'softmax-applied'},
    'reshape_instead_of_transpose': set(),
    'swapped_W': set(),
    'mean_times_sum_wv': set(),
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
