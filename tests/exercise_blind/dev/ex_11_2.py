"""Exercise 11.2: rope_interleaved(x (B,H,T,d), positions (T,)) -> (B,H,T,d); pair r = (x[2r], x[2r+1])."""
import math

import torch
import numpy as np
import attention_lib as al


def _angles(positions, d, dtype=torch.float32):
    r = torch.arange(d // 2, dtype=dtype, device=positions.device)
    omega = 10000.0 ** (-2 * r / d)
    return positions.to(dtype)[:, None] * omega[None, :]  # (T, d/2)


# ---------- correct ----------
def rope_il_stack(x, positions):
    d = x.shape[-1]
    ang = _angles(positions, d)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)


def rope_il_complex(x, positions):
    B, H, T, d = x.shape
    ang = _angles(positions, d, torch.float64)
    freqs_cis = torch.polar(torch.ones_like(ang), ang)  # (T, d/2), as in Meta's llama
    xc = torch.view_as_complex(x.double().reshape(B, H, T, d // 2, 2).contiguous())
    out = torch.view_as_real(xc * freqs_cis).reshape(B, H, T, d)
    return out.to(x.dtype)


# ---------- wrong ----------
def rope_il_cat(x, positions):
    d = x.shape[-1]
    ang = _angles(positions, d)
    cos, sin = ang.cos(), ang.sin()
    a, b = x[..., ::2], x[..., 1::2]
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)  # halves, not pairs


def rope_il_sign(x, positions):
    d = x.shape[-1]
    ang = _angles(positions, d)
    cos, sin = ang.cos(), ang.sin()
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos + b * sin, b * cos - a * sin), dim=-1).flatten(-2)


def rope_il_cat_freqs(x, positions):
    d = x.shape[-1]
    ang = _angles(positions, d)
    emb = torch.cat((ang, ang), dim=-1)  # copied from the rotate-half code
    rot = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)  # rotate every two
    return x * emb.cos() + rot * emb.sin()


def rope_il_half_pairs(x, positions):
    d = x.shape[-1]
    ang = _angles(positions, d)
    cos, sin = ang.cos(), ang.sin()
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)


def rope_il_ignores_positions(x, positions):
    T, d = x.shape[-2], x.shape[-1]
    ang = _angles(torch.arange(T, device=x.device), d)
    cos, sin = ang.cos(), ang.sin()
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)


def rope_il_freq_exponent(x, positions):
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, device=x.device).float() / (d // 2))  # divides by d/2
    ang = positions.float()[:, None] * theta
    cos, sin = ang.cos(), ang.sin()
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)


SOLUTIONS = [
    dict(name="stack_flatten", correct=True, mistake="", family="", fn=rope_il_stack),
    dict(name="complex", correct=True, mistake="", family="", fn=rope_il_complex),
    dict(name="cat", correct=False,
         mistake="Concatenates the rotated components into halves instead of putting each pair back side by side.",
         family="output-wrong-layout", fn=rope_il_cat),
    dict(name="sign", correct=False,
         mistake="Swaps the signs of the sine terms, rotating by minus the angle.",
         family="rotation-sign", fn=rope_il_sign),
    dict(name="cat_freqs", correct=False,
         mistake="Duplicates the angles with cat (the rotate-half layout) instead of repeat_interleave for the interleaved pairs.",
         family="freq-cat-not-interleave", fn=rope_il_cat_freqs),
    dict(name="half_pairs", correct=False,
         mistake="Reads the pairs as (r, r + d/2), the rotate-half layout, instead of (2r, 2r + 1).",
         family="wrong-pair-layout", fn=rope_il_half_pairs),
    dict(name="ignores_positions", correct=False,
         mistake="Uses arange(T) as the positions instead of the given positions.",
         family="ignores-positions", fn=rope_il_ignores_positions),
    dict(name="freq_exponent", correct=False,
         mistake="Divides the even indices 2r by d/2 instead of d in the frequency exponent.",
         family="freq-exponent", fn=rope_il_freq_exponent),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'cat': {'half-order-output', 'pairs-of-the-other-layout'},
    'sign': {'wrong-direction'},
    'cat_freqs': {'mixed-layout'},
    'half_pairs': {'other-layout', 'pairs-of-the-other-layout'},
    'ignores_positions': {'positions-ignored'},
    'freq_exponent': {'frequency-exponent-doubled'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
