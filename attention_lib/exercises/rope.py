"""Exercises 11.1 and 11.2: RoPE in transformers' rotate-half layout and in the
interleaved layout of RoFormer and GGUF files."""

from __future__ import annotations

import torch

from ..rotary import apply_rope, rope_cos_sin, rope_frequencies
from .families import ROPE, mistakes
from .families import rope as _rope
from .spec import Case, Exercise, in_float32, integer, randn


def _rope_reference(layout):
    def rope(x, positions):
        inv_freq, _ = rope_frequencies(x.shape[-1], 10000.0, dtype=torch.float64)
        cos, sin = rope_cos_sin(positions, inv_freq)
        return apply_rope(x, cos, sin, layout=layout)

    rope.__doc__ = (
        f"``x (B, H, T, d)``, integer ``positions (T,)`` -> RoPE, {layout} layout."
    )
    return rope


def _rope_inputs(kind="gaps", T=None):
    def make(g):
        B, H, t, d = (
            integer(g, 1, 2),
            integer(g, 1, 3),
            T or integer(g, 2, 6),
            2 * integer(g, 1, 6),
        )
        if kind == "from-zero":
            positions = torch.arange(t)
        elif kind == "decoding":
            positions = torch.tensor([integer(g, 5, 60)])
            t = 1
        else:  # increasing, with gaps, not from 0
            steps = torch.randint(1, 5, (t,), generator=g)
            positions = torch.cumsum(steps, 0) + integer(g, 0, 20)
        return (randn(g, B, H, t, d), positions), {}

    return make


_CASES = (
    Case("positions with gaps", _rope_inputs(), 14),
    Case("positions 0 .. T-1", _rope_inputs("from-zero"), 3),
    Case("one token, decoding at a later position", _rope_inputs("decoding"), 3),
    Case("float32", in_float32(_rope_inputs()), 6),
)


#: 11.2's own: the rotated pairs put back in the other order.
HALF_ORDER = (
    (
        "half-order-output",
        "the rotated pairs are put back in rotate-half order (torch.cat([a', b'])): in "
        "the interleaved layout pair r goes back to x[2r], x[2r + 1] "
        "(torch.stack([a', b'], dim=-1).flatten(-2))",
        {"output_order": "half"},
    ),
)


def _rope_half_order(x, positions, layout, output_order="half"):
    out = _rope(x, positions, layout)
    return torch.cat([out[..., 0::2], out[..., 1::2]], dim=-1)


EX_11_1 = Exercise(
    "11.1",
    "rope_half",
    "rope_half(x, positions)",
    _rope_reference("half"),
    _CASES,
    mistakes(lambda **o: lambda x, p: _rope(x, p, "half", **o), ROPE),
)

EX_11_2 = Exercise(
    "11.2",
    "rope_interleaved",
    "rope_interleaved(x, positions)",
    _rope_reference("interleaved"),
    _CASES,
    mistakes(lambda **o: lambda x, p: _rope(x, p, "interleaved", **o), ROPE)
    + mistakes(
        lambda **o: lambda x, p: _rope_half_order(x, p, "interleaved", **o), HALF_ORDER
    ),
)
