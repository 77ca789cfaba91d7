import torch

def _c1(queries, keys, values, beta, decay):
    *lead, T, D = keys.shape
    Dv = values.shape[-1]
    S = keys.new_zeros(*lead, Dv, D)
    outs = []
    for t in range(T):
        k, v, q = keys[..., t, :], values[..., t, :], queries[..., t, :]
        S = decay * S
        err = v - torch.einsum("...vd,...d->...v", S, k)
        S = S + beta * torch.einsum("...v,...d->...vd", err, k)
        outs.append(torch.einsum("...vd,...d->...v", S, q))
    if T == 0:
        return values.new_zeros(*lead, 0, Dv), S
    return torch.stack(outs, dim=-2), S

def _c2(queries, keys, values, beta, decay):
    # the Householder-like form S <- a S (I - beta k k^T) + beta v k^T
    *lead, T, D = keys.shape
    Dv = values.shape[-1]
    S = keys.new_zeros(*lead, Dv, D)
    I = torch.eye(D, dtype=keys.dtype, device=keys.device)
    out = values.new_zeros(*lead, T, Dv)
    for t in range(T):
        k = keys[..., t, :, None]              # (..., D, 1)
        v = values[..., t, :, None]            # (..., Dv, 1)
        S = decay * S @ (I - beta * k @ k.transpose(-1, -2)) + beta * v @ k.transpose(-1, -2)
        out[..., t, :] = (S @ queries[..., t, :, None])[..., 0]
    return out, S

def _loop(queries, keys, values, beta, decay, order="decay_first", read_first=False, transpose_state=False):
    *lead, T, D = keys.shape
    Dv = values.shape[-1]
    S = keys.new_zeros(*lead, Dv, D)
    outs = []
    for t in range(T):
        k, v, q = keys[..., t, :], values[..., t, :], queries[..., t, :]
        if read_first:
            o = (S @ q.unsqueeze(-1)).squeeze(-1)
        if order == "decay_first":
            S = decay * S
            S = S + beta * (v - (S @ k.unsqueeze(-1)).squeeze(-1)).unsqueeze(-1) * k.unsqueeze(-2)
        elif order == "decay_after":
            S = S + beta * (v - (S @ k.unsqueeze(-1)).squeeze(-1)).unsqueeze(-1) * k.unsqueeze(-2)
            S = decay * S
        elif order == "stale_read":
            pred = (S @ k.unsqueeze(-1)).squeeze(-1)   # read before the decay
            S = decay * S
            S = S + beta * (v - pred).unsqueeze(-1) * k.unsqueeze(-2)
        elif order == "decay_write_only":
            S = decay * S + beta * v.unsqueeze(-1) * k.unsqueeze(-2) - beta * (S @ k.unsqueeze(-1)) * k.unsqueeze(-2)
        elif order == "additive":
            S = decay * S + beta * v.unsqueeze(-1) * k.unsqueeze(-2)
        if not read_first:
            o = (S @ q.unsqueeze(-1)).squeeze(-1)
        outs.append(o)
    return torch.stack(outs, dim=-2), S

def _w_decay_after_write(q, k, v, beta, decay):
    return _loop(q, k, v, beta, decay, order="decay_after")

def _w_stale_prediction(q, k, v, beta, decay):
    return _loop(q, k, v, beta, decay, order="stale_read")

def _w_read_before_write(q, k, v, beta, decay):
    return _loop(q, k, v, beta, decay, read_first=True)

def _w_undecayed_error(q, k, v, beta, decay):
    return _loop(q, k, v, beta, decay, order="decay_write_only")

def _w_additive(q, k, v, beta, decay):
    return _loop(q, k, v, beta, decay, order="additive")

def _w_state_transposed(queries, keys, values, beta, decay):
    # keeps S as (D, Dv) with outer(k, v) and returns it untransposed
    *lead, T, D = keys.shape
    S = keys.new_zeros(*lead, D, values.shape[-1])
    outs = []
    for t in range(T):
        k, v, q = keys[..., t, :], values[..., t, :], queries[..., t, :]
        S = decay * S
        err = v - (k.unsqueeze(-2) @ S).squeeze(-2)
        S = S + beta * k.unsqueeze(-1) * err.unsqueeze(-2)
        outs.append((q.unsqueeze(-2) @ S).squeeze(-2))
    return torch.stack(outs, dim=-2), S

SOLUTIONS = [
    dict(name="einsum_error_form", correct=True, mistake="", family="", fn=_c1),
    dict(name="householder_matrix_form", correct=True, mistake="", family="", fn=_c2),
    dict(name="decay_after_write", correct=False, mistake="Applies the decay after the delta write instead of before it.", family="wrong-update-order", fn=_w_decay_after_write),
    dict(name="prediction_before_decay", correct=False, mistake="Computes the prediction S k from the state before decaying it, then writes into the decayed state.", family="read-before-update", fn=_w_stale_prediction),
    dict(name="output_before_write", correct=False, mistake="Reads the output S q before the token's write instead of after it.", family="read-before-update", fn=_w_read_before_write),
    dict(name="plain_additive_write", correct=False, mistake="Writes beta v k^T without subtracting the prediction S k (linear attention, not the delta rule).", family="missing-term", fn=_w_additive),
    dict(name="state_returned_transposed", correct=False, mistake="Keeps the state as (D, Dv) (k v^T) and returns it as such, so the final state has the transposed shape/layout.", family="wrong-transpose", fn=_w_state_transposed),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'decay_after_write': {'decay-after-write'},
    'prediction_before_decay': {'read-before-decay'},
    'output_before_write': {'read-before-write'},
    'plain_additive_write': {'additive'},
    'state_returned_transposed': {'state-transposed'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
