"""What an exercise is, as data: its cases, its mistakes, and the random draws they use.

Nothing here runs a learner's code (that is :mod:`attention_lib.exercises.checker`);
the exercises themselves are in the modules beside this one, one per step of the book
(``scores``, ``masks``, ``heads``, ...), and the mistakes that several exercises share
are in :mod:`attention_lib.exercises.families`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Case:
    """One property to check, drawn ``count`` times: ``make(generator) -> (args,
    kwargs)``, each draw from its own seeded ``torch.Generator`` (never the caller's
    random state)."""

    description: str
    make: Callable[[torch.Generator], tuple[tuple, dict]]
    count: int = 1


@dataclass(frozen=True)
class Mistake:
    """A mistake learners make: its ``diagnosis`` and the ``wrong`` implementation
    that makes it (same signature as the exercise). The checker names it when the
    learner's results equal the wrong implementation's on every case the learner gets
    wrong (two at least)."""

    name: str
    diagnosis: str
    wrong: Callable


@dataclass(frozen=True)
class Constraint:
    """A requirement of the task that the values cannot show: ``violated(fn, draws)``
    says whether the learner's ``fn`` breaks it (``draws``: the exercise's drawn
    cases, :class:`attention_lib.exercises.checker.Draw`)."""

    name: str
    diagnosis: str
    violated: Callable


@dataclass(frozen=True)
class Exercise:
    """One "write it yourself" exercise.

    ``reference`` is the library's answer: it is called on the inputs in float64 and its
    results are cast back to the inputs' dtype. ``results``: names of the results of a
    function that returns a tuple (``("the output", "the log-sum-exp")``).
    ``constraint(fn) -> message or None``: a requirement of the task that the values
    cannot show (10.1 reads the keys a block at a time), checked after every case
    passed."""

    id: str
    title: str
    signature: str
    reference: Callable
    cases: tuple[Case, ...]
    mistakes: tuple[Mistake, ...] = ()
    results: tuple[str, ...] = ()
    constraint: Constraint | None = None


# -- random draws --


def randn(g: torch.Generator, *shape: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def integer(g: torch.Generator, low: int, high: int) -> int:
    """A random integer in ``low .. high`` (both included)."""
    return int(torch.randint(low, high + 1, (), generator=g))


def uniform(g: torch.Generator, low: float, high: float) -> float:
    return low + (high - low) * float(torch.rand((), generator=g, dtype=torch.float64))


def choice(g: torch.Generator, options):
    return options[integer(g, 0, len(options) - 1)]


def in_float32(make):
    """The same draw with every float64 tensor (at any depth of the arguments) in
    float32."""

    def make32(g):
        args, kwargs = make(g)
        return _to32(args), _to32(kwargs)

    return make32


def _to32(x):
    if isinstance(x, torch.Tensor):
        return x.float() if x.dtype == torch.float64 else x
    if isinstance(x, tuple):
        return tuple(_to32(v) for v in x)
    if isinstance(x, list):
        return [_to32(v) for v in x]
    if isinstance(x, dict):
        return {k: _to32(v) for k, v in x.items()}
    return x
