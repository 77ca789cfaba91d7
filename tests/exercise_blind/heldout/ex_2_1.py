import math
import torch

def _c1(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None, :]) / bandwidth
    w = torch.softmax(-u ** 2 / 2, dim=1)
    return w @ y_train

def _c2(x_train, y_train, x_query, bandwidth):
    # log-sum-exp by hand, loop over queries
    out = []
    for xq in x_query:
        logw = -0.5 * ((xq - x_train) / bandwidth) ** 2
        logw = logw - torch.logsumexp(logw, 0)
        out.append((logw.exp() * y_train).sum())
    return torch.stack(out)

def _w_naive(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None, :]) / bandwidth
    k = torch.exp(-u ** 2 / 2)
    return (k @ y_train) / k.sum(1)

def _w_no_half(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None, :]) / bandwidth
    return torch.softmax(-u ** 2, dim=1) @ y_train

def _w_axis(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None, :]) / bandwidth
    w = torch.softmax(-u ** 2 / 2, dim=0)
    return w @ y_train

def _w_mult_bandwidth(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None, :]) * bandwidth
    return torch.softmax(-u ** 2 / 2, dim=1) @ y_train

def _w_abs(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None, :]) / bandwidth
    return torch.softmax(-u.abs() / 2, dim=1) @ y_train

def _w_bandwidth_outside(x_train, y_train, x_query, bandwidth):
    d = x_query[:, None] - x_train[None, :]
    return torch.softmax(-d ** 2 / (2 * bandwidth), dim=1) @ y_train

SOLUTIONS = [
    dict(name="broadcast_softmax", correct=True, mistake="", family="", fn=_c1),
    dict(name="loop_logsumexp", correct=True, mistake="", family="", fn=_c2),
    dict(name="exp_then_divide", correct=False, mistake="Normalises exp(-u^2/2) by its sum directly, which underflows to 0/0 = NaN for a query far from all training inputs.", family="unstable-softmax", fn=_w_naive),
    dict(name="drop_half", correct=False, mistake="Forgets the 1/2 in the Gaussian exponent, using exp(-u^2).", family="wrong-scale", fn=_w_no_half),
    dict(name="softmax_over_queries", correct=False, mistake="Normalises the weights over the queries (dim=0) instead of over the training points.", family="wrong-axis", fn=_w_axis),
    dict(name="multiply_bandwidth", correct=False, mistake="Multiplies the distance by h instead of dividing by it.", family="wrong-scale", fn=_w_mult_bandwidth),
    dict(name="laplace_kernel", correct=False, mistake="Uses |u| instead of u^2 in the exponent (a Laplace kernel, not Gaussian).", family="wrong-formula", fn=_w_abs),
    dict(name="h_not_squared", correct=False, mistake="Divides the squared distance by h instead of h^2.", family="wrong-scale", fn=_w_bandwidth_outside),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'exp_then_divide': {'kernel-underflows'},
    'drop_half': {'kernel-without-half'},
    'softmax_over_queries': {'normalised-over-queries'},
    'multiply_bandwidth': {'times-bandwidth'},
    'laplace_kernel': {'absolute-distance'},
    'h_not_squared': {'squared-distance-over-h'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
