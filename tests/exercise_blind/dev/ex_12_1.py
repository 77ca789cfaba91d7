"""Exercise 12.1: mla_absorbed_decode(q_nope (B,H,1,dn), latent (B,T,r), W_uk (H,dn,r), W_uv (H,dv,r)) -> (B,H,1,dv)."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def mla_einsum(q_nope, latent, W_uk, W_uv):
    dn = q_nope.shape[-1]
    q_lat = torch.einsum("bhqn,hnr->bhqr", q_nope, W_uk)  # W_UK^T q, per head
    scores = torch.einsum("bhqr,btr->bhqt", q_lat, latent) / math.sqrt(dn)
    weights = scores.softmax(dim=-1)
    ctx = torch.einsum("bhqt,btr->bhqr", weights, latent)  # weighted sum of latents
    return torch.einsum("bhqr,hvr->bhqv", ctx, W_uv)


def mla_matmul(q_nope, latent, W_uk, W_uv):
    c = latent.unsqueeze(1)  # (B, 1, T, r): one shared "head"
    q_lat = q_nope @ W_uk  # (B, H, 1, dn) @ (H, dn, r) -> (B, H, 1, r)
    scores = q_lat @ c.transpose(-2, -1) * q_nope.shape[-1] ** -0.5  # (B, H, 1, T)
    ctx = torch.softmax(scores, dim=-1) @ c  # (B, H, 1, r)
    return ctx @ W_uv.transpose(-2, -1)  # (B, H, 1, dv)


# ---------- wrong ----------
def mla_scale_r(q_nope, latent, W_uk, W_uv):
    q_lat = torch.einsum("bhqn,hnr->bhqr", q_nope, W_uk)
    scores = torch.einsum("bhqr,btr->bhqt", q_lat, latent) / math.sqrt(latent.shape[-1])
    ctx = torch.einsum("bhqt,btr->bhqr", scores.softmax(-1), latent)
    return torch.einsum("bhqr,hvr->bhqv", ctx, W_uv)


def mla_wrong_up_projection(q_nope, latent, W_uk, W_uv):
    q_lat = torch.einsum("bhqn,hnr->bhqr", q_nope, W_uk)
    scores = torch.einsum("bhqr,btr->bhqt", q_lat, latent) / math.sqrt(q_nope.shape[-1])
    ctx = torch.einsum("bhqt,btr->bhqr", scores.softmax(-1), latent)
    return torch.einsum("bhqr,hvr->bhqv", ctx, W_uk)  # copy-paste: W_uk for the values


def mla_softmax_heads(q_nope, latent, W_uk, W_uv):
    q_lat = torch.einsum("bhqn,hnr->bhqr", q_nope, W_uk)
    scores = torch.einsum("bhqr,btr->bhqt", q_lat, latent) / math.sqrt(q_nope.shape[-1])
    weights = scores.softmax(dim=1)  # over the heads
    ctx = torch.einsum("bhqt,btr->bhqr", weights, latent)
    return torch.einsum("bhqr,hvr->bhqv", ctx, W_uv)


def mla_no_scale(q_nope, latent, W_uk, W_uv):
    c = latent.unsqueeze(1)
    scores = (q_nope @ W_uk) @ c.transpose(-2, -1)
    return (torch.softmax(scores, -1) @ c) @ W_uv.transpose(-2, -1)


def mla_scale_dn_not_sqrt(q_nope, latent, W_uk, W_uv):
    c = latent.unsqueeze(1)
    scores = (q_nope @ W_uk) @ c.transpose(-2, -1) / q_nope.shape[-1]
    return (torch.softmax(scores, -1) @ c) @ W_uv.transpose(-2, -1)


def mla_broadcast_batch_as_heads(q_nope, latent, W_uk, W_uv):
    q_lat = q_nope @ W_uk  # (B, H, 1, r)
    kT = latent.transpose(-2, -1)  # (B, r, T): broadcasts B against the head axis
    scores = q_lat @ kT / math.sqrt(q_nope.shape[-1])
    ctx = torch.softmax(scores, -1) @ latent
    return ctx @ W_uv.transpose(-2, -1)


SOLUTIONS = [
    dict(name="einsum", correct=True, mistake="", family="", fn=mla_einsum),
    dict(name="matmul", correct=True, mistake="", family="", fn=mla_matmul),
    dict(name="scale_r", correct=False,
         mistake="Scales by sqrt(r), the width of the absorbed query, instead of sqrt(d_n).",
         family="scale-wrong-dim", fn=mla_scale_r),
    dict(name="wrong_up_projection", correct=False,
         mistake="Maps the weighted latent back with W_uk instead of W_uv (shapes agree when d_v = d_n).",
         family="wrong-up-projection", fn=mla_wrong_up_projection),
    dict(name="softmax_heads", correct=False,
         mistake="Takes the softmax over the heads instead of over the cached tokens.",
         family="wrong-axis", fn=mla_softmax_heads),
    dict(name="no_scale", correct=False,
         mistake="Forgets the 1/sqrt(d_n) scale.",
         family="no-scale", fn=mla_no_scale),
    dict(name="scale_dn_not_sqrt", correct=False,
         mistake="Divides the scores by d_n instead of sqrt(d_n).",
         family="scale-D", fn=mla_scale_dn_not_sqrt),
    dict(name="broadcast_batch_as_heads", correct=False,
         mistake="Multiplies by the (B, r, T) latents without a head axis, so broadcasting lines the batch up with the heads (runs only when B == H or B == 1, wrong when B == H > 1).",
         family="broadcast-batch-as-heads", fn=mla_broadcast_batch_as_heads),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'scale_r': {'scale-by-r'},
    'wrong_up_projection': {'key-projection-on-output'},
    'softmax_heads': {'softmax-over-heads'},
    'no_scale': {'no-scale'},
    'scale_dn_not_sqrt': {'divide-by-width'},
    'broadcast_batch_as_heads': {'latent-without-head-axis'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
