import torch
import torch.nn.functional as F

def _phi(x):
    return F.elu(x) + 1

def _c1(queries, keys, values):
    # explicit state loop with einsum
    q, k = _phi(queries), _phi(keys)
    *lead, T, D = k.shape
    Dv = values.shape[-1]
    S = k.new_zeros(*lead, Dv, D)
    z = k.new_zeros(*lead, D)
    outs = []
    for t in range(T):
        S = S + torch.einsum("...v,...d->...vd", values[..., t, :], k[..., t, :])
        z = z + k[..., t, :]
        num = torch.einsum("...vd,...d->...v", S, q[..., t, :])
        den = (z * q[..., t, :]).sum(-1, keepdim=True)
        outs.append(num / den)
    return torch.stack(outs, dim=-2)

def _c2(queries, keys, values):
    # prefix sums of the outer products (the same states, all at once)
    q, k = _phi(queries), _phi(keys)
    S = torch.cumsum(values.unsqueeze(-1) * k.unsqueeze(-2), dim=-3)   # (..., T, Dv, D)
    z = torch.cumsum(k, dim=-2)                                          # (..., T, D)
    num = (S @ q.unsqueeze(-1)).squeeze(-1)
    return num / (z * q).sum(-1, keepdim=True)

def _loop(queries, keys, values, phi=_phi, read_first=False, normalise=True, phi_q=True, z_accumulate=True):
    q = phi(queries) if phi_q else queries
    k = phi(keys)
    *lead, T, D = k.shape
    S = k.new_zeros(*lead, values.shape[-1], D)
    z = k.new_zeros(*lead, D)
    outs = []
    for t in range(T):
        kt, vt, qt = k[..., t, :], values[..., t, :], q[..., t, :]
        if read_first:
            num = (S @ qt.unsqueeze(-1)).squeeze(-1)
            den = (z * qt).sum(-1, keepdim=True)
        S = S + vt.unsqueeze(-1) * kt.unsqueeze(-2)
        z = (z + kt) if z_accumulate else kt
        if not read_first:
            num = (S @ qt.unsqueeze(-1)).squeeze(-1)
            den = (z * qt).sum(-1, keepdim=True)
        outs.append(num / den if normalise else num)
    return torch.stack(outs, dim=-2)

def _w_read_before_write(queries, keys, values):
    return _loop(queries, keys, values, read_first=True)

def _w_elu_no_plus_one(queries, keys, values):
    return _loop(queries, keys, values, phi=F.elu)

def _w_no_normaliser(queries, keys, values):
    return _loop(queries, keys, values, normalise=False)

def _w_phi_keys_only(queries, keys, values):
    return _loop(queries, keys, values, phi_q=False)

def _w_z_not_accumulated(queries, keys, values):
    return _loop(queries, keys, values, z_accumulate=False)

def _w_three_dims_only(queries, keys, values):
    # indexes time as axis 1, assuming (B, T, D)
    q, k = _phi(queries), _phi(keys)
    T = k.shape[1]
    S = 0
    z = 0
    outs = []
    for t in range(T):
        S = S + values[:, t].unsqueeze(-1) * k[:, t].unsqueeze(-2)
        z = z + k[:, t]
        outs.append((S @ q[:, t].unsqueeze(-1)).squeeze(-1) / (z * q[:, t]).sum(-1, keepdim=True))
    return torch.stack(outs, dim=1)

SOLUTIONS = [
    dict(name="einsum_state_loop", correct=True, mistake="", family="", fn=_c1),
    dict(name="cumsum_prefix_states", correct=True, mistake="", family="", fn=_c2),
    dict(name="read_before_write", correct=False, mistake="Reads the output from the state before adding the current token, so token t does not see itself (and t = 0 gives 0/0).", family="read-before-update", fn=_w_read_before_write),
    dict(name="elu_without_plus_one", correct=False, mistake="Uses phi(x) = elu(x) without the +1, so features can be negative and the normaliser can vanish or change sign.", family="missing-+1", fn=_w_elu_no_plus_one),
    dict(name="no_normaliser", correct=False, mistake="Returns S phi(q) without dividing by z . phi(q).", family="missing-normaliser", fn=_w_no_normaliser),
    dict(name="phi_on_keys_only", correct=False, mistake="Applies the feature map to the keys but not to the queries.", family="missing-feature-map", fn=_w_phi_keys_only),
    dict(name="z_not_accumulated", correct=False, mistake="Sets z to the current phi(k_t) instead of accumulating it over the tokens.", family="missing-accumulation", fn=_w_z_not_accumulated),
    dict(name="time_axis_1", correct=False, mistake="Indexes the time axis as dim 1, which is only right for 3-D (B, T, D) inputs and wrong with extra leading axes such as heads.", family="common-case-only", fn=_w_three_dims_only),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'read_before_write': {'read-before-write'},
    'elu_without_plus_one': {'elu-without-one'},
    'no_normaliser': {'no-normaliser'},
    'phi_on_keys_only': {'no-feature-map-on-queries'},
    'z_not_accumulated': set(),
    'time_axis_1': {'only-three-axes'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
