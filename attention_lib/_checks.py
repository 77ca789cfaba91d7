"""Input validation shared by the public entry points.

Every check raises :class:`ValueError` with a message that names what was expected and
what came, so a learner sees the shape mistake at the call that made it rather than deep
inside a matmul.
"""

from __future__ import annotations

import numbers

import torch


def shape_or_type(x) -> str:
    """How an error message shows a wrong argument: a tensor's shape, e.g. ``(2, 3)``,
    or the type name of anything else."""
    return str(tuple(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__


def check_rank(name: str, x: torch.Tensor, ranks: tuple[int, ...], legend: str) -> None:
    """Raise unless ``x.dim()`` is one of ``ranks``; ``legend`` spells the expected
    shape, e.g. ``(B, Q, D)``."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(
            f"{name}: expected a torch.Tensor of shape {legend}, got {type(x).__name__}"
        )
    if x.dim() not in ranks:
        raise ValueError(
            f"{name}: expected a {' or '.join(f'{r}-D' for r in ranks)} tensor of "
            f"shape {legend}, got shape {tuple(x.shape)}"
        )


def check_last_dim(name: str, x: torch.Tensor, expected: int, what: str) -> None:
    """Raise unless the last dimension of ``x`` is ``expected`` (``what`` names that
    width)."""
    if x.shape[-1] != expected:
        raise ValueError(
            f"{name}: expected last dimension {expected} ({what}), got {x.shape[-1]} "
            f"(shape {tuple(x.shape)})"
        )


def check_qkv(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *, same_width: bool
) -> None:
    """Check the (B, ..., Q, D) / (B, ..., K, D) / (B, ..., K, Dv) contract of an
    attention call."""
    for name, t in (("queries", queries), ("keys", keys), ("values", values)):
        if not isinstance(t, torch.Tensor) or t.dim() < 2:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(
                f"{name}: expected a tensor of shape (B, ..., n, width), got {shape}"
            )
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(
            "keys and values must hold the same number of pairs K: got keys "
            f"{tuple(keys.shape)} (K={keys.shape[-2]}) and values "
            f"{tuple(values.shape)} (K={values.shape[-2]})"
        )
    if same_width and queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            "queries and keys must have the same width D for a dot product: got "
            f"queries {tuple(queries.shape)} (D={queries.shape[-1]}) and keys "
            f"{tuple(keys.shape)} (D={keys.shape[-1]})"
        )
    if queries.shape[:-2] != keys.shape[:-2] or keys.shape[:-2] != values.shape[:-2]:
        raise ValueError(
            "queries, keys and values must share their leading (batch) dimensions: "
            f"got {tuple(queries.shape)}, {tuple(keys.shape)}, {tuple(values.shape)}"
        )


def check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name}: expected a positive number, got {value}")


def check_dropout(p: float) -> None:
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p < 1.0:
        raise ValueError(f"dropout: expected a probability in [0, 1), got {p!r}")


def check_size(owner: str, **sizes) -> None:
    """Raise unless every size is a positive integer (``True``, ``2.0`` and ``-8`` are
    not), naming the bad one."""
    _check_integers(owner, sizes, minimum=1, what="a positive integer")


def check_count(owner: str, **counts) -> None:
    """Raise unless every count is a non-negative integer (``True``, ``2.0`` and ``-1``
    are not), naming the bad one."""
    _check_integers(owner, counts, minimum=0, what="a non-negative integer")


def _check_integers(owner: str, values: dict, minimum: int, what: str) -> None:
    for name, value in values.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Integral)
            or value < minimum
        ):
            raise ValueError(f"{owner}: expected {name} to be {what}, got {value!r}")
