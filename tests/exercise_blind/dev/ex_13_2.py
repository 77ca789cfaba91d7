"""Exercise 13.2: delta_rule(queries, keys (..., T, D), values (..., T, Dv), beta, decay)
-> (outputs (..., T, Dv), S (..., Dv, D))."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def delta_loop(queries, keys, values, beta, decay):
    *lead, T, D = queries.shape
    S = queries.new_zeros(*lead, values.shape[-1], D)
    outs = []
    for t in range(T):
        q, k, v = queries[..., t, :], keys[..., t, :], values[..., t, :]
        S = decay * S
        pred = (S @ k.unsqueeze(-1)).squeeze(-1)  # S k, (..., Dv)
        S = S + beta * (v - pred).unsqueeze(-1) * k.unsqueeze(-2)
        outs.append((S @ q.unsqueeze(-1)).squeeze(-1))
    return torch.stack(outs, dim=-2), S


def delta_householder_einsum(queries, keys, values, beta, decay):
    # S_t = a S (I - beta k k^T) + beta v k^T
    D = queries.shape[-1]
    S = torch.zeros(*queries.shape[:-2], values.shape[-1], D, dtype=queries.dtype, device=queries.device)
    eye = torch.eye(D, dtype=queries.dtype, device=queries.device)
    outs = []
    for t in range(queries.shape[-2]):
        k = keys[..., t, :]
        P = eye - beta * torch.einsum("...i,...j->...ij", k, k)
        S = decay * torch.einsum("...vi,...ij->...vj", S, P) + beta * torch.einsum(
            "...v,...d->...vd", values[..., t, :], k
        )
        outs.append(torch.einsum("...vd,...d->...v", S, queries[..., t, :]))
    return torch.stack(outs, -2), S


# ---------- wrong ----------
def delta_decay_after_write(queries, keys, values, beta, decay):
    *lead, T, D = queries.shape
    S = queries.new_zeros(*lead, values.shape[-1], D)
    outs = []
    for t in range(T):
        q, k, v = queries[..., t, :], keys[..., t, :], values[..., t, :]
        S = S + beta * (v - (S @ k[..., None])[..., 0])[..., None] * k[..., None, :]
        S = decay * S
        outs.append((S @ q[..., None])[..., 0])
    return torch.stack(outs, -2), S


def delta_predict_before_decay(queries, keys, values, beta, decay):
    *lead, T, D = queries.shape
    S = queries.new_zeros(*lead, values.shape[-1], D)
    outs = []
    for t in range(T):
        q, k, v = queries[..., t, :], keys[..., t, :], values[..., t, :]
        err = v - (S @ k[..., None])[..., 0]  # uses the undecayed state
        S = decay * S + beta * err[..., None] * k[..., None, :]
        outs.append((S @ q[..., None])[..., 0])
    return torch.stack(outs, -2), S


def delta_read_before_update(queries, keys, values, beta, decay):
    *lead, T, D = queries.shape
    S = queries.new_zeros(*lead, values.shape[-1], D)
    outs = []
    for t in range(T):
        q, k, v = queries[..., t, :], keys[..., t, :], values[..., t, :]
        outs.append((S @ q[..., None])[..., 0])
        S = decay * S
        S = S + beta * (v - (S @ k[..., None])[..., 0])[..., None] * k[..., None, :]
    return torch.stack(outs, -2), S


def delta_beta_only_on_write(queries, keys, values, beta, decay):
    *lead, T, D = queries.shape
    S = queries.new_zeros(*lead, values.shape[-1], D)
    outs = []
    for t in range(T):
        q, k, v = queries[..., t, :], keys[..., t, :], values[..., t, :]
        S = decay * S
        old = (S @ k[..., None])[..., 0]
        S = S - old[..., None] * k[..., None, :] + beta * v[..., None] * k[..., None, :]
        outs.append((S @ q[..., None])[..., 0])
    return torch.stack(outs, -2), S


def delta_decay_complement(queries, keys, values, beta, decay):
    *lead, T, D = queries.shape
    S = queries.new_zeros(*lead, values.shape[-1], D)
    outs = []
    for t in range(T):
        q, k, v = queries[..., t, :], keys[..., t, :], values[..., t, :]
        S = (1 - decay) * S  # "decay" read as the forgetting rate
        S = S + beta * (v - (S @ k[..., None])[..., 0])[..., None] * k[..., None, :]
        outs.append((S @ q[..., None])[..., 0])
    return torch.stack(outs, -2), S


def delta_state_transposed(queries, keys, values, beta, decay):
    # state M = S^T, (D, Dv): M <- a M, M <- M + beta k (v - M^T k)^T, output M^T q
    *lead, T, D = queries.shape
    M = queries.new_zeros(*lead, D, values.shape[-1])
    outs = []
    for t in range(T):
        q, k, v = queries[..., t, :], keys[..., t, :], values[..., t, :]
        M = decay * M
        err = v - torch.einsum("...dv,...d->...v", M, k)
        M = M + beta * k[..., :, None] * err[..., None, :]
        outs.append(torch.einsum("...dv,...d->...v", M, q))
    return torch.stack(outs, -2), M  # forgot to transpose back to (Dv, D)


def delta_outer_wrong_order(queries, keys, values, beta, decay):
    *lead, T, D = queries.shape
    S = queries.new_zeros(*lead, values.shape[-1], D)
    outs = []
    for t in range(T):
        q, k, v = queries[..., t, :], keys[..., t, :], values[..., t, :]
        S = decay * S
        err = v - (S @ k[..., None])[..., 0]
        S = S + beta * k[..., :, None] * err[..., None, :]  # k (v - Sk)^T instead of (v - Sk) k^T
        outs.append((S @ q[..., None])[..., 0])
    return torch.stack(outs, -2), S


SOLUTIONS = [
    dict(name="loop", correct=True, mistake="", family="", fn=delta_loop),
    dict(name="householder_einsum", correct=True, mistake="", family="", fn=delta_householder_einsum),
    dict(name="decay_after_write", correct=False,
         mistake="Decays the state after the write instead of before it.",
         family="decay-after-write", fn=delta_decay_after_write),
    dict(name="predict_before_decay", correct=False,
         mistake="Computes the prediction S k from the state before decaying it.",
         family="read-before-decay", fn=delta_predict_before_decay),
    dict(name="read_before_update", correct=False,
         mistake="Outputs S q before the token's decay and write instead of after.",
         family="read-before-update", fn=delta_read_before_update),
    dict(name="beta_only_on_write", correct=False,
         mistake="Applies beta only to the new value and erases the old S k completely.",
         family="beta-only-on-write", fn=delta_beta_only_on_write),
    dict(name="decay_complement", correct=False,
         mistake="Multiplies the state by 1 - a instead of a.",
         family="decay-complement", fn=delta_decay_complement),
    dict(name="state_transposed", correct=False,
         mistake="Keeps the state as (D, Dv) and returns it without transposing to (Dv, D).",
         family="state-transposed-return", fn=delta_state_transposed),
    dict(name="outer_wrong_order", correct=False,
         mistake="Writes k (v - S k)^T instead of (v - S k) k^T (only runs when D == Dv, and then wrong).",
         family="outer-product-transposed", fn=delta_outer_wrong_order),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'decay_after_write': {'decay-after-write'},
    'predict_before_decay': {'read-before-decay'},
    'read_before_update': {'read-before-write'},
    'beta_only_on_write': {'beta-on-value-only'},
    'decay_complement': {'decay-complement'},
    'state_transposed': {'state-transposed'},
    'outer_wrong_order': {'outer-product-transposed'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
