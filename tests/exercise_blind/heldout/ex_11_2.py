import math
import torch

def _c1(x, positions):
    # reshape to pairs and stack back
    d = x.shape[-1]
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = positions.double()[:, None] * omega
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    p = x.unflatten(-1, (d // 2, 2))
    a, b = p[..., 0], p[..., 1]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)

def _c2(x, positions):
    # view_as_complex, RoFormer/llama-reference style
    d = x.shape[-1]
    freqs = 1.0 / (10000.0 ** (torch.arange(0, d, 2)[: d // 2].double() / d))
    freqs_cis = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64),
                            torch.outer(positions.double(), freqs))
    xc = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(xc * freqs_cis).flatten(-2).to(x.dtype)

def _angles(positions, d, two=2.0):
    r = torch.arange(d // 2, dtype=torch.float32)
    return positions.float()[:, None] * 10000.0 ** (-two * r / d)

def _w_cat_cos(x, positions):
    # rotate_every_two, but cos/sin duplicated with cat (half layout)
    d = x.shape[-1]
    a = _angles(positions, d)
    a = torch.cat([a, a], -1)
    rot = torch.stack([-x[..., 1::2], x[..., 0::2]], -1).flatten(-2)
    return x * a.cos() + rot * a.sin()

def _w_half_layout(x, positions):
    d = x.shape[-1]
    a = _angles(positions, d)
    h = d // 2
    u, v = x[..., :h], x[..., h:]
    return torch.cat([u * a.cos() - v * a.sin(), v * a.cos() + u * a.sin()], -1)

def _w_sign(x, positions):
    d = x.shape[-1]
    a = _angles(positions, d)
    ev, od = x[..., 0::2], x[..., 1::2]
    return torch.stack([ev * a.cos() + od * a.sin(), od * a.cos() - ev * a.sin()], -1).flatten(-2)

def _w_missing_two(x, positions):
    d = x.shape[-1]
    a = _angles(positions, d, two=1.0)
    ev, od = x[..., 0::2], x[..., 1::2]
    return torch.stack([ev * a.cos() - od * a.sin(), od * a.cos() + ev * a.sin()], -1).flatten(-2)

def _w_inplace_reuse(x, positions):
    # writes the even features in place, then reads them back for the odd ones
    d = x.shape[-1]
    a = _angles(positions, d).to(x.dtype)
    ev, od = x[..., 0::2], x[..., 1::2]
    x[..., 0::2] = ev * a.cos() - od * a.sin()
    x[..., 1::2] = od * a.cos() + ev * a.sin()
    return x

def _w_arange_positions(x, positions):
    d = x.shape[-1]
    a = _angles(torch.arange(x.shape[-2]), d)
    ev, od = x[..., 0::2], x[..., 1::2]
    return torch.stack([ev * a.cos() - od * a.sin(), od * a.cos() + ev * a.sin()], -1).flatten(-2)

SOLUTIONS = [
    dict(name="unflatten_stack", correct=True, mistake="", family="", fn=_c1),
    dict(name="view_as_complex", correct=True, mistake="", family="", fn=_c2),
    dict(name="cos_cat_not_interleave", correct=False, mistake="Duplicates cos/sin with cat (the half layout's way) while rotating adjacent pairs, so pair r gets the wrong frequency.", family="repeat-vs-repeat_interleave", fn=_w_cat_cos),
    dict(name="half_layout", correct=False, mistake="Copies the half-layout rotation, pairing x_r with x_{r+d/2} instead of x_2r with x_2r+1.", family="wrong-layout", fn=_w_half_layout),
    dict(name="sign_flipped", correct=False, mistake="Puts the minus sign on the wrong term, rotating by -angle.", family="sign-flip", fn=_w_sign),
    dict(name="omega_missing_factor_2", correct=False, mistake="Uses 10000^(-r/d) instead of 10000^(-2r/d) for the frequencies.", family="wrong-frequency", fn=_w_missing_two),
    dict(name="inplace_read_after_write", correct=False, mistake="Writes the rotated even features into x in place and then reads those updated values (and mutates the caller's input) when computing the odd ones.", family="in-place-update", fn=_w_inplace_reuse),
    dict(name="ignores_positions", correct=False, mistake="Uses arange(T) instead of the given positions.", family="common-case-only", fn=_w_arange_positions),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'cos_cat_not_interleave': {'mixed-layout'},
    'half_layout': {'other-layout'},
    'sign_flipped': {'wrong-direction'},
    'omega_missing_factor_2': {'frequency-exponent'},
    'inplace_read_after_write': {'in-place'},
    'ignores_positions': {'positions-ignored'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
