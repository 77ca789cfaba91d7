"""Exercise 13.1: recurrent_linear_attention(queries, keys (..., T, D), values (..., T, Dv)) -> (..., T, Dv)."""
import math

import torch
import torch.nn.functional as F
import numpy as np
import attention_lib as al


def _phi(x):
    return F.elu(x) + 1


# ---------- correct ----------
def rla_state_loop(queries, keys, values):
    pq, pk = _phi(queries), _phi(keys)
    *lead, T, D = queries.shape
    Dv = values.shape[-1]
    S = queries.new_zeros(*lead, Dv, D)
    z = queries.new_zeros(*lead, D)
    outs = []
    for t in range(T):
        k, q, v = pk[..., t, :], pq[..., t, :], values[..., t, :]
        S = S + v.unsqueeze(-1) * k.unsqueeze(-2)  # v k^T
        z = z + k
        num = (S @ q.unsqueeze(-1)).squeeze(-1)  # S q
        den = (z * q).sum(-1, keepdim=True)
        outs.append(num / den)
    return torch.stack(outs, dim=-2)


def rla_einsum_transposed_state(queries, keys, values):
    # state kept as (D, Dv): sum_j phi(k_j) v_j^T, the transpose of S_t
    pq = F.elu(queries) + 1
    pk = F.elu(keys) + 1
    M = torch.zeros(*queries.shape[:-2], queries.shape[-1], values.shape[-1], dtype=queries.dtype, device=queries.device)
    z = torch.zeros(*queries.shape[:-2], queries.shape[-1], dtype=queries.dtype, device=queries.device)
    outs = []
    for t in range(queries.shape[-2]):
        M = M + torch.einsum("...d,...v->...dv", pk[..., t, :], values[..., t, :])
        z = z + pk[..., t, :]
        num = torch.einsum("...d,...dv->...v", pq[..., t, :], M)
        den = torch.einsum("...d,...d->...", pq[..., t, :], z)[..., None]
        outs.append(num / den)
    return torch.stack(outs, -2)


# ---------- wrong ----------
def rla_elu_no_plus_one(queries, keys, values):
    pq, pk = F.elu(queries), F.elu(keys)
    *lead, T, D = queries.shape
    S = queries.new_zeros(*lead, values.shape[-1], D)
    z = queries.new_zeros(*lead, D)
    outs = []
    for t in range(T):
        S = S + values[..., t, :, None] * pk[..., t, None, :]
        z = z + pk[..., t, :]
        q = pq[..., t, :]
        outs.append((S @ q[..., None])[..., 0] / (z * q).sum(-1, keepdim=True))
    return torch.stack(outs, -2)


def rla_read_before_update(queries, keys, values):
    pq, pk = _phi(queries), _phi(keys)
    *lead, T, D = queries.shape
    S = queries.new_zeros(*lead, values.shape[-1], D)
    z = queries.new_zeros(*lead, D)
    outs = []
    for t in range(T):
        q = pq[..., t, :]
        den = (z * q).sum(-1, keepdim=True)
        outs.append(torch.where(den > 0, (S @ q[..., None])[..., 0] / den.clamp_min(1e-12), 0.0))
        S = S + values[..., t, :, None] * pk[..., t, None, :]
        z = z + pk[..., t, :]
    return torch.stack(outs, -2)


def rla_no_normaliser(queries, keys, values):
    pq, pk = _phi(queries), _phi(keys)
    *lead, T, D = queries.shape
    S = queries.new_zeros(*lead, values.shape[-1], D)
    outs = []
    for t in range(T):
        S = S + values[..., t, :, None] * pk[..., t, None, :]
        outs.append((S @ pq[..., t, :, None])[..., 0])
    return torch.stack(outs, -2)


def rla_phi_keys_only(queries, keys, values):
    pk = _phi(keys)
    *lead, T, D = queries.shape
    S = queries.new_zeros(*lead, values.shape[-1], D)
    z = queries.new_zeros(*lead, D)
    outs = []
    for t in range(T):
        S = S + values[..., t, :, None] * pk[..., t, None, :]
        z = z + pk[..., t, :]
        q = queries[..., t, :]  # forgot phi on the query
        outs.append((S @ q[..., None])[..., 0] / (z * q).sum(-1, keepdim=True))
    return torch.stack(outs, -2)


def rla_assumes_3d(queries, keys, values):
    B, T, D = queries.shape
    Dv = values.shape[-1]
    pq, pk = _phi(queries), _phi(keys)
    S = torch.zeros(B, Dv, D, dtype=queries.dtype, device=queries.device)
    z = torch.zeros(B, D, dtype=queries.dtype, device=queries.device)
    out = torch.zeros(B, T, Dv, dtype=queries.dtype, device=queries.device)
    for t in range(T):
        S += torch.bmm(values[:, t, :, None], pk[:, t, None, :])
        z += pk[:, t]
        out[:, t] = torch.bmm(S, pq[:, t, :, None])[..., 0] / (z * pq[:, t]).sum(-1, keepdim=True)
    return out


def rla_outer_transposed(queries, keys, values):
    pq, pk = _phi(queries), _phi(keys)
    *lead, T, D = queries.shape
    S = queries.new_zeros(*lead, D, values.shape[-1])
    z = queries.new_zeros(*lead, D)
    outs = []
    for t in range(T):
        S = S + pk[..., t, :, None] * values[..., t, None, :]  # phi(k) v^T, (D, Dv)
        z = z + pk[..., t, :]
        q = pq[..., t, :]
        outs.append((S @ q[..., None])[..., 0] / (z * q).sum(-1, keepdim=True))  # S q, not S^T q
    return torch.stack(outs, -2)


def rla_normaliser_raw_query(queries, keys, values):
    pq, pk = _phi(queries), _phi(keys)
    *lead, T, D = queries.shape
    S = queries.new_zeros(*lead, values.shape[-1], D)
    z = queries.new_zeros(*lead, D)
    outs = []
    for t in range(T):
        S = S + values[..., t, :, None] * pk[..., t, None, :]
        z = z + pk[..., t, :]
        num = (S @ pq[..., t, :, None])[..., 0]
        den = (z * queries[..., t, :]).sum(-1, keepdim=True)  # raw q in the normaliser
        outs.append(num / den)
    return torch.stack(outs, -2)


SOLUTIONS = [
    dict(name="state_loop", correct=True, mistake="", family="", fn=rla_state_loop),
    dict(name="einsum_transposed_state", correct=True, mistake="", family="", fn=rla_einsum_transposed_state),
    dict(name="elu_no_plus_one", correct=False,
         mistake="Uses phi(x) = elu(x) without the +1, so features can be negative.",
         family="elu-without-plus-one", fn=rla_elu_no_plus_one),
    dict(name="read_before_update", correct=False,
         mistake="Reads the output from the state before adding the current token, so token t does not see itself.",
         family="read-before-update", fn=rla_read_before_update),
    dict(name="no_normaliser", correct=False,
         mistake="Returns S_t phi(q_t) without dividing by z_t . phi(q_t).",
         family="no-normaliser", fn=rla_no_normaliser),
    dict(name="phi_keys_only", correct=False,
         mistake="Applies the feature map to the keys but not to the queries.",
         family="phi-only-on-keys", fn=rla_phi_keys_only),
    dict(name="assumes_3d", correct=False,
         mistake="Unpacks the inputs as (B, T, D), so inputs with head dimensions or no batch dimension fail.",
         family="only-common-case", fn=rla_assumes_3d),
    dict(name="outer_transposed", correct=False,
         mistake="Stores phi(k) v^T (D, Dv) but reads it as S q instead of S^T q (wrong numbers when D == Dv, an error otherwise).",
         family="outer-product-transposed", fn=rla_outer_transposed),
    dict(name="normaliser_raw_query", correct=False,
         mistake="Uses the raw query instead of phi(q) in the normaliser.",
         family="normaliser-raw-query", fn=rla_normaliser_raw_query),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'elu_no_plus_one': {'elu-without-one'},
    'read_before_update': {'read-before-write'},
    'no_normaliser': {'no-normaliser'},
    'phi_keys_only': {'no-feature-map-on-queries'},
    'assumes_3d': {'only-three-axes'},
    'outer_transposed': {'outer-product-transposed'},
    'normaliser_raw_query': {'normaliser-raw-query'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
