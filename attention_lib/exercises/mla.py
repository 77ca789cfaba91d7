"""Exercise 12.1: multi-head latent attention's decode step, up-projections absorbed."""

from __future__ import annotations

import math

import torch

from ..scoring import dot_product_attention
from .families import SCALE, mistakes
from .families import weights as _weights
from .spec import Case, Constraint, Exercise, Mistake, in_float32, integer, randn


def mla_absorbed_reference(q_nope, latent, W_uk, W_uv):
    """Multi-head latent attention's decode step with the up-projections absorbed
    (no RoPE part): ``q_nope (B, H, 1, dn)``, the cached latents ``latent (B, T, r)``,
    ``W_uk (H, dn, r)``, ``W_uv (H, dv, r)`` -> ``(B, H, 1, dv)``; scores scaled by
    ``1 / sqrt(dn)``. Equal to building keys ``W_uk[h] @ c`` and values ``W_uv[h] @ c``
    for every cached token."""
    keys = torch.einsum("hdr,btr->bhtd", W_uk, latent)  # (B, H, T, dn)
    values = torch.einsum("hdr,btr->bhtd", W_uv, latent)  # (B, H, T, dv)
    return dot_product_attention(q_nope, keys, values)[0]


def _mla_inputs(T=None, H=None, same_width=False):
    def make(g):
        B, h, t = integer(g, 1, 2), H or integer(g, 1, 4), T or integer(g, 1, 6)
        dn, dv, r = integer(g, 1, 5), integer(g, 1, 5), integer(g, 2, 8)
        while dv == dn and not same_width:
            dv = integer(g, 1, 6)
        dv = dn if same_width else dv
        return (
            randn(g, B, h, 1, dn),
            randn(g, B, t, r),
            randn(g, h, dn, r) / math.sqrt(r),
            randn(g, h, dv, r) / math.sqrt(r),
        ), {}

    return make


def _mla(
    q,
    c,
    W_uk,
    W_uv,
    *,
    scale="sqrt",
    up=True,
    swap=False,
    query=None,
    dim=-1,
    head_axis=True,
    **options,
):
    if swap:
        W_uk, W_uv = W_uv, W_uk
    if query == "W_uv":
        W_uk = W_uv
    q_latent = q @ W_uk  # (B, H, 1, r)
    if not head_axis:  # (B, T, r) against (B, H, ...): the batch meets the heads
        s = q_latent @ c.transpose(-1, -2) / math.sqrt(q.shape[-1])
        mixed = torch.softmax(s, dim=-1) @ c
        return mixed @ W_uv.transpose(1, 2)
    s = q_latent @ c[:, None].transpose(-1, -2)  # (B, H, 1, T)
    d = {"sqrt": q.shape[-1], "latent": c.shape[-1], "value-width": W_uv.shape[1]}
    s = s * {
        "none": 1.0,
        "width": 1 / q.shape[-1],
        "times": math.sqrt(q.shape[-1]),
    }.get(scale, 1 / math.sqrt(d.get(scale, q.shape[-1])))
    mixed = (torch.softmax(s, dim=1) if dim == 1 else _weights(s, **options)) @ c[
        :, None
    ]
    return mixed @ W_uv.transpose(1, 2) if up else mixed


def _largest_result(fn, args) -> int:
    """The most numbers in a tensor that a torch operation returns while ``fn`` runs
    on ``args`` (views included), seen through a tensor subclass that watches every
    operation on the inputs and on what is computed from them."""
    largest = [0]

    class Watched(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            out = super().__torch_function__(func, types, args, kwargs or {})
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    largest[0] = max(largest[0], t.numel())
            return out

    fn(*(a.clone().as_subclass(Watched) for a in args))
    return largest[0]


def _builds_per_head_keys(fn, draws) -> bool:
    """Whether ``fn`` builds a per-head key or value of the cached tokens: on one
    input with many cached tokens and wide heads (``B = 2``, ``H = 4``, ``T = 80``,
    ``dn = 64``, ``dv = 56``, ``r = 2``), whether an operation in it returns a tensor of
    ``T * min(dn, dv) = 4480`` numbers or more, the size of one head's keys or values
    for one example. The absorbed route's largest is the latents seen by every head,
    ``B * H * T * r = 1280`` numbers. ``draws`` (the drawn cases) are not needed."""
    g = torch.Generator().manual_seed(12)
    B, H, T, dn, dv, r = 2, 4, 80, 64, 56, 2
    args = (
        randn(g, B, H, 1, dn),
        randn(g, B, T, r),
        randn(g, H, dn, r) / math.sqrt(r),
        randn(g, H, dv, r) / math.sqrt(r),
    )
    try:
        largest = _largest_result(fn, args)
    except Exception:
        return False  # it runs on the drawn cases only: cannot tell
    return largest >= T * min(dn, dv)


def _build(**options):
    return lambda q, c, Wk, Wv: _mla(q, c, Wk, Wv, **options)


EX_12_1 = Exercise(
    "12.1",
    "mla_absorbed_decode",
    "mla_absorbed_decode(q_nope, latent, W_uk, W_uv)",
    mla_absorbed_reference,
    (
        Case("random sizes", _mla_inputs(), 14),
        Case("one cached latent", _mla_inputs(T=1), 2),
        Case("several heads", _mla_inputs(H=4), 3),
        Case("dv = dn", _mla_inputs(same_width=True), 3),
        Case("float32", in_float32(_mla_inputs()), 6),
    ),
    (
        Mistake(
            "scale-by-r",
            "the scores are divided by sqrt(r), the latent's width; the scale is that "
            "of the per-head keys, 1 / sqrt(dn): absorbing W_uk does not change the "
            "scores",
            _build(scale="latent"),
        ),
        Mistake(
            "no-value-up-projection",
            "the weights mix the latents but W_uv is never applied: multiply the mixed "
            "latent (B, H, 1, r) by W_uv^T to get each head's (B, H, 1, dv) output",
            _build(up=False),
        ),
        Mistake(
            "swapped-up-projections",
            "W_uk and W_uv are swapped: W_uk absorbs into the query (scores), W_uv "
            "into the output (values)",
            _build(swap=True),
        ),
        Mistake(
            "value-projection-in-query",
            "the query is absorbed with W_uv: the scores use the keys' up-projection, "
            "q_latent = q_nope @ W_uk; W_uv belongs to the output",
            _build(query="W_uv"),
        ),
        Mistake(
            "key-projection-on-output",
            "the mixed latent is brought back with W_uk: the output's up-projection is "
            "W_uv (mixed @ W_uv^T); W_uk belongs to the scores",
            lambda q, c, Wk, Wv: _mla(q, c, Wk, Wk),
        ),
        Mistake(
            "latent-without-head-axis",
            "the latent (B, T, r) is used without a head axis: broadcasting then lines "
            "the batch up with the heads (it raises, or mixes examples when B = H); "
            "give it one, latent[:, None] (B, 1, T, r), shared by every head",
            _build(head_axis=False),
        ),
        Mistake(
            "softmax-over-heads",
            "the softmax runs over the heads (dim=1); each head's weights must sum to "
            "1 over the cached tokens, the last axis",
            _build(dim=1),
        ),
    )
    + mistakes(
        _build,
        SCALE,
        only=(
            "no-scale",
            "divide-by-width",
            "times-sqrt-width",
            "scale-by-value-width",
        ),
    ),
    constraint=Constraint(
        "builds-per-head-keys",
        "it builds per-head keys or values of the cached tokens (W_uk or W_uv "
        "applied to every latent: T x dn or T x dv numbers per head): absorb W_uk "
        "into the query instead, q_nope @ W_uk (B, H, 1, r), score it against the "
        "latents themselves, and apply W_uv once, to the weighted sum of the latents",
        _builds_per_head_keys,
    ),
)
