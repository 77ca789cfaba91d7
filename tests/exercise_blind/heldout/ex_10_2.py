import torch

def _c1(out1, lse1, out2, lse2):
    lse = torch.logaddexp(lse1, lse2)
    safe = torch.where(torch.isinf(lse) & (lse < 0), torch.zeros_like(lse), lse)
    w1 = torch.exp(lse1 - safe)[:, None]
    w2 = torch.exp(lse2 - safe)[:, None]
    return w1 * out1 + w2 * out2, lse

def _c2(out1, lse1, out2, lse2):
    # max-shift by hand, then normalise
    m = torch.maximum(lse1, lse2)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    a1, a2 = torch.exp(lse1 - m), torch.exp(lse2 - m)
    tot = a1 + a2
    out = (a1[:, None] * out1 + a2[:, None] * out2) / torch.where(tot > 0, tot, torch.ones_like(tot))[:, None]
    return out, m + torch.log(tot)

def _w_average(out1, lse1, out2, lse2):
    return (out1 + out2) / 2, torch.logaddexp(lse1, lse2)

def _w_naive_exp(out1, lse1, out2, lse2):
    e1, e2 = torch.exp(lse1), torch.exp(lse2)
    out = (e1[:, None] * out1 + e2[:, None] * out2) / (e1 + e2)[:, None]
    return out, torch.log(e1 + e2)

def _w_lse_sum(out1, lse1, out2, lse2):
    lse = torch.logaddexp(lse1, lse2)
    w1 = torch.exp(lse1 - lse)[:, None]
    w2 = torch.exp(lse2 - lse)[:, None]
    return w1 * out1 + w2 * out2, lse1 + lse2

def _w_lse_max(out1, lse1, out2, lse2):
    lse = torch.logaddexp(lse1, lse2)
    w1 = torch.exp(lse1 - lse)[:, None]
    w2 = torch.exp(lse2 - lse)[:, None]
    return w1 * out1 + w2 * out2, torch.maximum(lse1, lse2)

def _w_softmax_wrong_axis(out1, lse1, out2, lse2):
    w = torch.softmax(torch.stack([lse1, lse2]), dim=1)  # over the queries
    return w[0][:, None] * out1 + w[1][:, None] * out2, torch.logaddexp(lse1, lse2)

def _w_weights_swapped(out1, lse1, out2, lse2):
    lse = torch.logaddexp(lse1, lse2)
    w1 = torch.exp(lse1 - lse)[:, None]
    w2 = torch.exp(lse2 - lse)[:, None]
    return w2 * out1 + w1 * out2, lse

SOLUTIONS = [
    dict(name="logaddexp_where", correct=True, mistake="", family="", fn=_c1),
    dict(name="manual_max_shift", correct=True, mistake="", family="", fn=_c2),
    dict(name="plain_average", correct=False, mistake="Averages the two outputs equally instead of weighting each by its share exp(lse_i - lse) of the total.", family="missing-weights", fn=_w_average),
    dict(name="naive_exp_lse", correct=False, mistake="Exponentiates the log-sum-exps directly, which overflows (NaN) for large scores.", family="unstable-exp", fn=_w_naive_exp),
    dict(name="lse_added", correct=False, mistake="Returns lse1 + lse2 (log of a product) instead of log(exp(lse1) + exp(lse2)).", family="wrong-formula", fn=_w_lse_sum),
    dict(name="lse_max", correct=False, mistake="Returns the larger of the two log-sum-exps as the merged one, dropping the smaller chunk's mass.", family="wrong-formula", fn=_w_lse_max),
    dict(name="softmax_over_queries", correct=False, mistake="Stacks the lses as (2, Q) and takes the softmax over the queries instead of over the two chunks.", family="wrong-axis", fn=_w_softmax_wrong_axis),
    dict(name="weights_swapped", correct=False, mistake="Weights out1 with chunk 2's share and out2 with chunk 1's.", family="swapped-args", fn=_w_weights_swapped),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'plain_average': {'plain-average'},
    'naive_exp_lse': {'naive-exp'},
    'lse_added': {'lse-sum'},
    'lse_max': {'lse-max'},
    'softmax_over_queries': set(),
    'weights_swapped': {'weights-swapped'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
