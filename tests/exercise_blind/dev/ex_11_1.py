"""Exercise 11.1: rope_half(x (B,H,T,d), positions (T,)) -> (B,H,T,d); pair r = (x[r], x[r + d/2])."""
import math

import torch
import numpy as np
import attention_lib as al


def _angles(positions, d, dtype=torch.float64):
    r = torch.arange(d // 2, dtype=dtype, device=positions.device)
    omega = 10000.0 ** (-2 * r / d)  # (d/2,)
    return positions.to(dtype)[:, None] * omega[None, :]  # (T, d/2)


# ---------- correct ----------
def rope_half_rotate_half(x, positions):
    d = x.shape[-1]
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d))
    freqs = positions.double()[:, None] * inv_freq[None, :]  # (T, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, d)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos + rotated * sin


def rope_half_complex(x, positions):
    d = x.shape[-1]
    ang = _angles(positions, d)  # float64
    rot = torch.polar(torch.ones_like(ang), ang)  # e^{i angle}, (T, d/2)
    z = torch.complex(x[..., : d // 2].double(), x[..., d // 2 :].double())
    z = z * rot
    return torch.cat((z.real, z.imag), dim=-1).to(x.dtype)


# ---------- wrong ----------
def rope_half_sign(x, positions):
    d = x.shape[-1]
    ang = _angles(positions, d, torch.float32)
    cos, sin = torch.cat((ang.cos(), ang.cos()), -1), torch.cat((ang.sin(), ang.sin()), -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat((x2, -x1), dim=-1) * sin


def rope_half_freq_exponent(x, positions):
    d = x.shape[-1]
    inv_freq = 10000.0 ** (-torch.arange(d // 2, dtype=torch.float32, device=x.device) / d)  # missing the 2
    ang = positions.float()[:, None] * inv_freq
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def rope_half_interleaved_pairs(x, positions):
    d = x.shape[-1]
    ang = _angles(positions, d, torch.float32)
    cos, sin = ang.cos(), ang.sin()
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


def rope_half_ignores_positions(x, positions):
    B, H, T, d = x.shape
    ang = _angles(torch.arange(T, device=x.device), d, torch.float32)  # assumes positions 0..T-1
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def rope_half_repeat_interleave_freqs(x, positions):
    d = x.shape[-1]
    ang = _angles(positions, d, torch.float32).repeat_interleave(2, dim=-1)  # (T, d)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * ang.cos() + torch.cat((-x2, x1), dim=-1) * ang.sin()


def rope_half_inplace(x, positions):
    d = x.shape[-1]
    h = d // 2
    ang = _angles(positions, d, torch.float32)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :h], x[..., h:]  # views into x
    x[..., :h] = x1 * cos - x2 * sin
    x[..., h:] = x2 * cos + x1 * sin  # x1 has already been overwritten
    return x


SOLUTIONS = [
    dict(name="rotate_half", correct=True, mistake="", family="", fn=rope_half_rotate_half),
    dict(name="complex", correct=True, mistake="", family="", fn=rope_half_complex),
    dict(name="sign", correct=False,
         mistake="Builds rotate_half as (x2, -x1) instead of (-x2, x1), rotating by minus the angle.",
         family="rotation-sign", fn=rope_half_sign),
    dict(name="freq_exponent", correct=False,
         mistake="Uses 10000^(-r/d) instead of 10000^(-2r/d) for the frequencies.",
         family="freq-exponent", fn=rope_half_freq_exponent),
    dict(name="interleaved_pairs", correct=False,
         mistake="Pairs features (2r, 2r+1) as in the interleaved layout instead of (r, r + d/2).",
         family="wrong-pair-layout", fn=rope_half_interleaved_pairs),
    dict(name="ignores_positions", correct=False,
         mistake="Uses arange(T) as the positions instead of the given positions.",
         family="ignores-positions", fn=rope_half_ignores_positions),
    dict(name="repeat_interleave_freqs", correct=False,
         mistake="Duplicates the angles with repeat_interleave (interleaved layout) while rotating the halves.",
         family="freq-repeat-interleave", fn=rope_half_repeat_interleave_freqs),
    dict(name="inplace", correct=False,
         mistake="Writes the rotated halves back into x through views, so the second half uses the already-overwritten first half and the input is modified.",
         family="in-place-view-aliasing", fn=rope_half_inplace),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'sign': {'wrong-direction'},
    'freq_exponent': {'frequency-exponent'},
    'interleaved_pairs': {'other-layout', 'pairs-of-the-other-layout'},
    'ignores_positions': {'positions-ignored'},
    'repeat_interleave_freqs': {'mixed-layout'},
    'inplace': {'in-place'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
