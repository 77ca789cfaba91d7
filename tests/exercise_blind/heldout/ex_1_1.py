import math
import torch

def _c1(queries, keys, values):
    # einsum style
    s = torch.einsum("qd,kd->qk", queries, keys)
    return torch.einsum("qk,kv->qv", torch.softmax(s, dim=-1), values)

def _c2(queries, keys, values):
    # per-query loop with a stable manual softmax
    outs = []
    for q in queries:
        s = keys @ q
        w = torch.exp(s - s.max())
        w = w / w.sum()
        outs.append(w @ values)
    return torch.stack(outs)

def _w_axis(queries, keys, values):
    w = torch.softmax(queries @ keys.T, dim=0)
    return w @ values

def _w_scaled(queries, keys, values):
    w = torch.softmax(queries @ keys.T / math.sqrt(queries.shape[-1]), dim=-1)
    return w @ values

def _w_naive_exp(queries, keys, values):
    w = torch.exp(queries @ keys.T)
    return (w / w.sum(dim=-1, keepdim=True)) @ values

def _w_no_softmax(queries, keys, values):
    s = queries @ keys.T
    return (s / s.sum(dim=-1, keepdim=True)) @ values

def _w_transpose_values(queries, keys, values):
    # scores computed as (K, Q), softmaxed on the last axis, then transposed back
    w = torch.softmax(keys @ queries.T, dim=-1)
    return w.T @ values

def _w_mean_unweighted(queries, keys, values):
    w = torch.softmax(queries @ keys.T, dim=-1)
    return w.sum(-1, keepdim=True) * values.mean(0, keepdim=True)

SOLUTIONS = [
    dict(name="einsum", correct=True, mistake="", family="", fn=_c1),
    dict(name="loop_manual_softmax", correct=True, mistake="", family="", fn=_c2),
    dict(name="softmax_over_queries", correct=False, mistake="Normalises the softmax over the queries (dim=0) instead of over the keys.", family="wrong-axis", fn=_w_axis),
    dict(name="adds_sqrt_d_scale", correct=False, mistake="Divides the dot products by sqrt(D) although the task asks for plain dot-product scores.", family="wrong-scale", fn=_w_scaled),
    dict(name="naive_exp", correct=False, mistake="Takes exp of the raw scores without subtracting the max, so large scores overflow to inf and give NaN.", family="unstable-softmax", fn=_w_naive_exp),
    dict(name="normalise_raw_scores", correct=False, mistake="Divides the raw dot products by their sum instead of applying a softmax.", family="missing-softmax", fn=_w_no_softmax),
    dict(name="scores_KQ_then_transpose", correct=False, mistake="Builds the scores as (K, Q), applies the softmax on its last axis (the queries) and transposes back, so the weights are normalised over the wrong axis.", family="wrong-transpose", fn=_w_transpose_values),
    dict(name="weights_then_mean", correct=False, mistake="Computes the weights but then averages the values uniformly, ignoring which key each weight belongs to.", family="ignores-weights", fn=_w_mean_unweighted),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'softmax_over_queries': {'softmax-over-queries'},
    'adds_sqrt_d_scale': {'scaled'},
    'naive_exp': {'no-max'},
    'normalise_raw_scores': {'divide-by-sum'},
    'scores_KQ_then_transpose': {'softmax-over-queries'},
    'weights_then_mean': set(),
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
