"""Exercises 13.1 (linear attention as a recurrence) and 13.2 (the gated delta rule)."""

from __future__ import annotations

import torch.nn.functional as F

from ..linear import delta_rule, elu_feature_map, linear_attention
from .families import DELTA, LINEAR, RECURRENCE, delta_scan, linear_scan, mistakes
from .spec import Case, Exercise, in_float32, integer, randn, uniform


def recurrent_linear_attention(queries, keys, values):
    """``queries, keys (..., T, D)``, ``values (..., T, Dv)`` -> ``(..., T, Dv)``:
    causal linear attention with ``phi = elu + 1``, one token at a time through the
    state ``S (Dv, D)`` and the normaliser ``z (D,)``."""
    return linear_attention(queries, keys, values, elu_feature_map, form="recurrent")


def _lead(g):
    return [(), (integer(g, 1, 3),), (integer(g, 1, 2), integer(g, 1, 3))][
        integer(g, 0, 2)
    ]


def _linear_inputs(T=None):
    def make(g):
        lead, t = _lead(g), T or integer(g, 2, 7)
        D, Dv = integer(g, 1, 5), integer(g, 1, 4)
        return (
            randn(g, *lead, t, D),
            randn(g, *lead, t, D),
            randn(g, *lead, t, Dv),
        ), {}

    return make


EX_13_1 = Exercise(
    "13.1",
    "recurrent_linear_attention",
    "recurrent_linear_attention(queries, keys, values)",
    recurrent_linear_attention,
    (
        Case("random sizes, with or without batch and head axes", _linear_inputs(), 14),
        Case("one token", _linear_inputs(T=1), 2),
        Case("float32", in_float32(_linear_inputs()), 5),
    ),
    mistakes(lambda **o: lambda q, k, v: linear_scan(q, k, v, **o), LINEAR, RECURRENCE),
)


def delta_rule_reference(queries, keys, values, beta, decay):
    """The gated delta rule, one token at a time from ``S = 0``: ``S <- decay * S``,
    then ``S <- S + beta (v - S k) k^T``, output ``S q``; ``queries, keys (..., T, D)``
    (keys of unit norm), ``values (..., T, Dv)``, ``beta`` and ``decay`` numbers ->
    ``(outputs (..., T, Dv), S (..., Dv, D))``. ``decay = 1`` is DeltaNet."""
    return delta_rule(queries, keys, values, beta, decay=decay)


def _delta_inputs(decay=None, beta=None):
    def make(g):
        lead, t = _lead(g), integer(g, 2, 7)
        D, Dv = integer(g, 2, 5), integer(g, 1, 5)
        while Dv == D:
            Dv = integer(g, 1, 5)
        b = beta if beta is not None else round(uniform(g, 0.2, 1.0), 3)
        a = decay if decay is not None else round(uniform(g, 0.5, 0.95), 3)
        return (
            randn(g, *lead, t, D),
            F.normalize(randn(g, *lead, t, D), dim=-1),
            randn(g, *lead, t, Dv),
            b,
            a,
        ), {}

    return make


EX_13_2 = Exercise(
    "13.2",
    "delta_rule",
    "delta_rule(queries, keys, values, beta, decay)",
    delta_rule_reference,
    (
        Case("random sizes, beta and decay", _delta_inputs(), 14),
        Case("no decay (DeltaNet, decay = 1)", _delta_inputs(decay=1.0), 3),
        Case("beta = 1", _delta_inputs(beta=1.0), 2),
        Case("float32", in_float32(_delta_inputs()), 5),
    ),
    mistakes(
        lambda **o: lambda q, k, v, b, a: delta_scan(q, k, v, b, a, **o),
        DELTA,
        RECURRENCE,
    ),
    results=("the outputs", "the final state S"),
)
