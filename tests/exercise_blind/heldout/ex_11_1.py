import math
import torch

def _c1(x, positions):
    # transformers style: rotate_half, cos/sin duplicated with cat
    d = x.shape[-1]
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = positions.to(torch.float64)[:, None] * inv[None, :]          # (T, d/2)
    emb = torch.cat([ang, ang], dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    rot = torch.cat([-x2, x1], dim=-1)
    return x * cos + rot * sin

def _c2(x, positions):
    # complex numbers: z_r = x_r + i x_{r+d/2}, times e^{i theta}
    d = x.shape[-1]
    h = d // 2
    r = torch.arange(h, dtype=torch.float64)
    omega = torch.exp(-math.log(10000.0) * 2 * r / d)
    theta = positions.double()[:, None] * omega
    z = torch.complex(x[..., :h].double(), x[..., h:].double()) * torch.polar(torch.ones_like(theta), theta)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)

def _rot(x, cos, sin):
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)

def _angles(positions, d, two=2.0, sign=-1.0):
    r = torch.arange(d // 2, dtype=torch.float32)
    omega = 10000.0 ** (sign * two * r / d)
    return positions.float()[:, None] * omega

def _w_missing_two(x, positions):
    a = _angles(positions, x.shape[-1], two=1.0)
    return _rot(x, a.cos(), a.sin())

def _w_exponent_sign(x, positions):
    a = _angles(positions, x.shape[-1], sign=1.0)
    return _rot(x, a.cos(), a.sin())

def _w_rotate_half_sign(x, positions):
    d = x.shape[-1]
    a = _angles(positions, d)
    emb = torch.cat([a, a], -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb.cos() + torch.cat([x2, -x1], -1) * emb.sin()

def _w_repeat_interleave_cos(x, positions):
    # mixes the two layouts: cos/sin duplicated per pair (interleaved) with rotate_half
    d = x.shape[-1]
    a = _angles(positions, d).repeat_interleave(2, dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * a.cos() + torch.cat([-x2, x1], -1) * a.sin()

def _w_interleaved_pairs(x, positions):
    a = _angles(positions, x.shape[-1])
    ev, od = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = ev * a.cos() - od * a.sin()
    out[..., 1::2] = od * a.cos() + ev * a.sin()
    return out

def _w_arange_positions(x, positions):
    T = x.shape[-2]
    a = _angles(torch.arange(T), x.shape[-1])
    return _rot(x, a.cos(), a.sin())

SOLUTIONS = [
    dict(name="hf_rotate_half_float64", correct=True, mistake="", family="", fn=_c1),
    dict(name="complex_polar", correct=True, mistake="", family="", fn=_c2),
    dict(name="omega_missing_factor_2", correct=False, mistake="Uses omega_r = 10000^(-r/d) instead of 10000^(-2r/d).", family="wrong-frequency", fn=_w_missing_two),
    dict(name="omega_positive_exponent", correct=False, mistake="Drops the minus sign in the exponent, using 10000^(2r/d).", family="wrong-frequency", fn=_w_exponent_sign),
    dict(name="rotate_half_sign_flipped", correct=False, mistake="Builds rotate_half as cat(x2, -x1) instead of cat(-x2, x1), rotating by the negative angle.", family="sign-flip", fn=_w_rotate_half_sign),
    dict(name="cos_repeat_interleave", correct=False, mistake="Duplicates cos/sin with repeat_interleave (interleaved layout) while rotating halves, so features get the wrong frequencies.", family="repeat-vs-repeat_interleave", fn=_w_repeat_interleave_cos),
    dict(name="interleaved_pairs", correct=False, mistake="Rotates the interleaved pairs (x_2r, x_2r+1) instead of the half pairs (x_r, x_r+d/2).", family="wrong-layout", fn=_w_interleaved_pairs),
    dict(name="ignores_positions", correct=False, mistake="Uses arange(T) as the positions, ignoring the positions argument.", family="common-case-only", fn=_w_arange_positions),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'omega_missing_factor_2': {'frequency-exponent'},
    'omega_positive_exponent': set(),
    'rotate_half_sign_flipped': {'wrong-direction'},
    'cos_repeat_interleave': {'mixed-layout'},
    'interleaved_pairs': {'other-layout'},
    'ignores_positions': {'positions-ignored'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
