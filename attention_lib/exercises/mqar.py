"""Exercise 9.1: scoring the multi-query associative recall task."""

from __future__ import annotations

import torch

from ..tasks import MQAR_IGNORE
from .spec import Case, Exercise, Mistake, in_float32, integer, randn


def mqar_accuracy(logits, targets):
    """``logits (B, T, V)``, ``targets (B, T)`` with ``al.MQAR_IGNORE`` where nothing is
    asked -> the share (a float) of asked positions whose argmax is the target."""
    asked = targets != MQAR_IGNORE
    return ((logits.argmax(-1) == targets) & asked).sum().item() / asked.sum().item()


def _mqar_inputs(B=None, silent_row=False):
    def make(g):
        b, T, V = B or integer(g, 2, 4), integer(g, 4, 16), integer(g, 3, 12)
        targets = torch.randint(0, V, (b, T), generator=g)
        # each row asks at its own random positions, a different number per row
        asked = torch.rand(b, T, generator=g) < torch.rand(b, 1, generator=g)
        asked[0, integer(g, 0, T - 1)] = True  # something is asked
        if silent_row and b > 1:
            asked[-1] = False  # a row that asks nothing
        targets[~asked] = MQAR_IGNORE
        logits = randn(g, b, T, V)
        right = torch.rand(b, T, generator=g) < 0.5
        safe = targets.clamp(min=0)
        logits.scatter_add_(-1, safe[..., None], 10.0 * right[..., None].double())
        return (logits, targets), {}

    return make


def _ratio(right, asked):
    return right.sum().item() / asked.sum().item()


EX_9_1 = Exercise(
    "9.1",
    "mqar_accuracy",
    "mqar_accuracy(logits, targets)",
    mqar_accuracy,
    (
        Case(
            "rows that ask at different positions, different numbers",
            _mqar_inputs(),
            14,
        ),
        Case("a row that asks nothing", _mqar_inputs(silent_row=True), 4),
        Case("one row", _mqar_inputs(B=1), 3),
        Case("float32 logits", in_float32(_mqar_inputs()), 4),
    ),
    (
        Mistake(
            "counts-ignored",
            "every position is counted, also those where nothing is asked (targets == "
            "al.MQAR_IGNORE): divide the right answers by the number of asked "
            "positions only",
            lambda lg, t: (lg.argmax(-1) == t).double().mean().item(),
        ),
        Mistake(
            "ignored-counted-right",
            "the positions where nothing is asked are counted as right answers: leave "
            "them out of both the count and the total",
            lambda lg, t: (
                ((lg.argmax(-1) == t) | (t == MQAR_IGNORE)).double().mean().item()
            ),
        ),
        Mistake(
            "mean-of-rows",
            "the accuracy is averaged per row, then over the rows: rows ask different "
            "numbers of questions, so count all the asked positions together (total "
            "right / total asked)",
            lambda lg, t: (
                (
                    ((lg.argmax(-1) == t) & (t != MQAR_IGNORE)).sum(1)
                    / (t != MQAR_IGNORE).sum(1)
                )
                .nanmean()
                .item()
            ),
        ),
        Mistake(
            "second-half",
            "the questions are assumed to be the second half of each row: they are "
            "wherever targets != al.MQAR_IGNORE",
            lambda lg, t: (
                (lg.argmax(-1)[:, t.shape[1] // 2 :] == t[:, t.shape[1] // 2 :])
                .double()
                .mean()
                .item()
            ),
        ),
        Mistake(
            "ignore-value-zero",
            "0 is taken as the 'nothing asked' value: token 0 is a real answer; the "
            "positions where nothing is asked hold al.MQAR_IGNORE",
            lambda lg, t: (lg.argmax(-1)[t != 0] == t[t != 0]).double().mean().item(),
        ),
        Mistake(
            "probability-threshold",
            "a position counts as right when the target's probability is above 0.5: "
            "it is right when the target is the most likely token (argmax), whatever "
            "its probability",
            lambda lg, t: (
                lg.softmax(-1)[t != MQAR_IGNORE]
                .gather(-1, t[t != MQAR_IGNORE][:, None])
                .gt(0.5)
                .double()
                .mean()
                .item()
            ),
        ),
        Mistake(
            "argmax-over-positions",
            "the argmax runs over the positions (dim=1): the prediction at each "
            "position is the most likely token, argmax over the vocabulary (dim=-1)",
            lambda lg, t: (
                (lg.argmax(1)[t != MQAR_IGNORE] == t[t != MQAR_IGNORE])
                .double()
                .mean()
                .item()
            ),
        ),
        Mistake(
            "shifted",
            "the predictions are compared with the next position's targets: "
            "targets[b, i] is already the answer expected after reading tokens[b, "
            ":i+1], so compare position i with position i (no shift)",
            lambda lg, t: _ratio(
                (lg.argmax(-1)[:, :-1] == t[:, 1:]) & (t[:, 1:] != MQAR_IGNORE),
                t[:, 1:] != MQAR_IGNORE,
            ),
        ),
    ),
)
