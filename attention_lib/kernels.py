"""Nadaraya–Watson kernel regression: attention pooling whose weights come from a
similarity kernel.

The estimate at a query ``q`` is ``f(q) = sum_i alpha(q, k_i) v_i`` with ``alpha(q, k_i)
= kappa(|q - k_i| / h) / sum_j kappa(|q - k_j| / h)``: keys are the training inputs,
values the training targets, ``kappa`` a kernel and ``h`` the bandwidth.

Shape legend: ``Q`` queries, ``K`` training points (keys/values), ``D`` input width,
``Dv`` target width.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_positive
from .masking import masked_softmax

__all__ = [
    "gaussian",
    "boxcar",
    "constant",
    "triangular",
    "epanechnikov",
    "nadaraya_watson",
    "NadarayaWatson",
]


def gaussian(d: torch.Tensor) -> torch.Tensor:
    """Gaussian kernel ``exp(-d**2 / 2)`` of a distance ``d``."""
    return torch.exp(-(d**2) / 2)


def boxcar(d: torch.Tensor) -> torch.Tensor:
    """Boxcar kernel: 1 where ``|d| <= 1``, else 0."""
    return (d.abs() <= 1).to(
        d.dtype if d.is_floating_point() else torch.get_default_dtype()
    )


def constant(d: torch.Tensor) -> torch.Tensor:
    """Constant kernel: 1 everywhere (every query gets the plain average of the
    targets)."""
    return torch.ones_like(
        d, dtype=d.dtype if d.is_floating_point() else torch.get_default_dtype()
    )


def triangular(d: torch.Tensor) -> torch.Tensor:
    """Triangular kernel ``max(0, 1 - |d|)`` -- the kernel the course notes call
    "Epanechikov".

    The notes' name is wrong twice: the spelling (Epanechnikov) and the kernel (the
    Epanechnikov kernel is :func:`epanechnikov`, a parabola). Chapter 2 plots both.
    """
    return torch.clamp(1 - d.abs(), min=0)


def epanechnikov(d: torch.Tensor) -> torch.Tensor:
    """Epanechnikov kernel ``3/4 * max(0, 1 - d**2)`` (a parabola on ``[-1, 1]``,
    integrating to 1)."""
    return 0.75 * torch.clamp(1 - d**2, min=0)


def _as_points(name: str, x: torch.Tensor) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dim() not in (1, 2):
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(
            f"{name}: expected shape (n,) for scalar inputs or (n, D) for vectors, got "
            f"{shape}"
        )
    return x[:, None] if x.dim() == 1 else x  # (n, D)


def _distances(
    x_train: torch.Tensor, y_train: torch.Tensor, x_query: torch.Tensor
) -> torch.Tensor:
    keys, queries = _as_points("x_train", x_train), _as_points("x_query", x_query)
    if not isinstance(y_train, torch.Tensor) or y_train.dim() not in (1, 2):
        shape = (
            tuple(y_train.shape)
            if isinstance(y_train, torch.Tensor)
            else type(y_train).__name__
        )
        raise ValueError(f"y_train: expected shape (K,) or (K, Dv), got {shape}")
    if y_train.shape[0] != keys.shape[0]:
        raise ValueError(
            f"x_train and y_train must have the same length: got {keys.shape[0]} "
            f"inputs and {y_train.shape[0]} targets"
        )
    if keys.shape[1] != queries.shape[1]:
        raise ValueError(
            f"x_query: expected inputs of width D={keys.shape[1]} like x_train, got "
            f"width {queries.shape[1]}"
        )
    # |q - k| for every query/key pair, written out (cdist's fast path rounds
    # differently).
    return (queries[:, None, :] - keys[None, :, :]).norm(dim=-1)  # (Q, K)


def _pool(weights: torch.Tensor, y_train: torch.Tensor) -> torch.Tensor:
    y_hat = weights @ (y_train[:, None] if y_train.dim() == 1 else y_train)  # (Q, Dv)
    return y_hat[:, 0] if y_train.dim() == 1 else y_hat


def _kernel_weights(
    dist: torch.Tensor, bandwidth, kernel, keep: torch.Tensor | None
) -> torch.Tensor:
    """Normalised kernel weights ``(Q, K)`` of the distances ``dist`` at bandwidth
    ``h``."""
    if kernel is gaussian:
        # Same numbers as gaussian(d/h) / sum gaussian(d/h), computed as a softmax so
        # that a query far from every key does not underflow to 0/0 (the link to softmax
        # attention made in chapter 5). Each row's nearest distance d_min is subtracted
        # first, which the softmax ignores: the score
        # -(d^2 - d_min^2) / (2 h^2) = -((d - d_min)/h) * ((d + d_min)/h) / 2 is 0 for
        # the nearest key and at worst -inf for the others, so as h -> 0 the weights
        # tend to the nearest neighbour instead of overflowing to inf - inf = NaN.
        d_min = (dist if keep is None else dist.masked_fill(~keep, float("inf"))).amin(
            dim=-1, keepdim=True
        )
        d_min = torch.where(
            torch.isfinite(d_min), d_min, torch.zeros_like(d_min)
        )  # a fully masked row
        gap = dist - d_min  # (Q, K), >= 0 for kept keys
        scores = torch.where(
            gap == 0,
            torch.zeros_like(gap),
            -(gap / bandwidth) * ((dist + d_min) / bandwidth) / 2,
        )
        return masked_softmax(scores, mask=keep)
    k = kernel(dist / bandwidth)  # (Q, K)
    if keep is not None:
        k = k.masked_fill(~keep, 0.0)
    total = k.sum(dim=-1, keepdim=True)
    return k / torch.where(
        total > 0, total, torch.ones_like(total)
    )  # a row with no support stays all 0


def nadaraya_watson(
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_query: torch.Tensor,
    kernel=gaussian,
    bandwidth: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Nadaraya–Watson estimate at ``x_query``.

    Args:
        x_train: keys, ``(K,)`` scalars or ``(K, D)`` vectors.
        y_train: values, ``(K,)`` or ``(K, Dv)`` (one-hot rows for classification).
        x_query: queries, ``(Q,)`` or ``(Q, D)``.
        kernel: a function of the scaled distance ``|q - k| / bandwidth``:
            :func:`gaussian`, :func:`boxcar`, :func:`constant`, :func:`triangular`,
            :func:`epanechnikov` or your own.
        bandwidth: ``h > 0``; small ``h`` follows the data closely, large ``h`` averages
            widely. With the Gaussian kernel, ``h -> 0`` gives the nearest neighbour
            (ties share the weight equally).

    Returns:
        ``(y_hat, weights)``: ``y_hat`` is ``(Q,)`` or ``(Q, Dv)``; ``weights`` is ``(Q,
        K)`` with rows summing to 1 (a query that no training point reaches under a
        compact kernel gets a row of zeros and ``y_hat = 0``).
    """
    if not isinstance(bandwidth, torch.Tensor):
        check_positive("bandwidth", bandwidth)
    elif not (bandwidth > 0).all():
        raise ValueError(
            f"bandwidth: expected a positive number, got {bandwidth.tolist()}"
        )
    dist = _distances(x_train, y_train, x_query)  # (Q, K)
    weights = _kernel_weights(dist, bandwidth, kernel, None)  # (Q, K)
    return _pool(weights, y_train), weights


class NadarayaWatson(nn.Module):
    """Nadaraya–Watson regression with a learnable bandwidth ``h = exp(log_bandwidth)``
    (always positive).

    ``forward(x_train, y_train, x_query, leave_one_out=False)`` returns ``y_hat`` and
    keeps the last weights in ``.attention_weights``. With ``leave_one_out=True`` the
    queries must be the training inputs themselves, and each one is kept from attending
    to its own key: otherwise, as ``h -> 0`` every training point predicts itself
    perfectly and the training loss rewards overfitting (chapter 2 shows it).
    """

    def __init__(self, kernel=gaussian, bandwidth: float = 1.0):
        super().__init__()
        check_positive("bandwidth", bandwidth)
        self.kernel = kernel
        self.log_bandwidth = nn.Parameter(torch.tensor(math.log(bandwidth)))
        self.attention_weights: torch.Tensor | None = None

    @property
    def bandwidth(self) -> torch.Tensor:
        return self.log_bandwidth.exp()

    def forward(
        self,
        x_train: torch.Tensor,
        y_train: torch.Tensor,
        x_query: torch.Tensor,
        leave_one_out: bool = False,
    ) -> torch.Tensor:
        """Estimate ``y_hat`` (``(Q,)`` or ``(Q, Dv)``) at ``x_query`` from ``(x_train,
        y_train)``; see the class."""
        dist = _distances(x_train, y_train, x_query)  # (Q, K)
        keep = None
        if leave_one_out:
            if dist.shape[0] != dist.shape[1]:
                raise ValueError(
                    "leave_one_out: expected the queries to be the training inputs, "
                    f"got {dist.shape[0]} queries for {dist.shape[1]} training points"
                )
            keep = ~torch.eye(
                dist.shape[0], dtype=torch.bool, device=dist.device
            )  # (Q, K): no self-attention
        weights = _kernel_weights(
            dist, self.bandwidth.to(dist.dtype), self.kernel, keep
        )
        self.attention_weights = weights.detach()
        return _pool(weights, y_train)

    def extra_repr(self) -> str:
        kernel = getattr(self.kernel, "__name__", self.kernel)
        return f"kernel={kernel}, bandwidth={self.bandwidth.item():.4g}"
