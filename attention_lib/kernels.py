"""Nadaraya–Watson kernel regression: attention pooling whose weights come from a similarity kernel.

The estimate at a query ``q`` is ``f(q) = sum_i alpha(q, k_i) v_i`` with
``alpha(q, k_i) = kappa(|q - k_i| / h) / sum_j kappa(|q - k_j| / h)``: keys are the training inputs, values
the training targets, ``kappa`` a kernel and ``h`` the bandwidth.

Shape legend: ``Q`` queries, ``K`` training points (keys/values), ``D`` input width, ``Dv`` target width.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_positive
from .masking import masked_softmax

__all__ = ["gaussian", "boxcar", "constant", "epanechikov", "nadaraya_watson", "NadarayaWatson"]


def gaussian(d: torch.Tensor) -> torch.Tensor:
    """Gaussian kernel ``exp(-d**2 / 2)`` of a distance ``d``."""
    return torch.exp(-(d**2) / 2)


def boxcar(d: torch.Tensor) -> torch.Tensor:
    """Boxcar kernel: 1 where ``|d| <= 1``, else 0."""
    return (d.abs() <= 1).to(d.dtype if d.is_floating_point() else torch.get_default_dtype())


def constant(d: torch.Tensor) -> torch.Tensor:
    """Constant kernel: 1 everywhere (every query gets the plain average of the targets)."""
    return torch.ones_like(d, dtype=d.dtype if d.is_floating_point() else torch.get_default_dtype())


def epanechikov(d: torch.Tensor) -> torch.Tensor:
    """The notes' "Epanechikov" kernel ``max(0, 1 - |d|)``.

    Strictly this is the *triangular* kernel; the Epanechnikov kernel proper is ``3/4 * max(0, 1 - d**2)``
    (chapter 2 plots both). The name and formula follow the notes so that their examples reproduce.
    """
    return torch.clamp(1 - d.abs(), min=0)


def _as_points(name: str, x: torch.Tensor) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dim() not in (1, 2):
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name}: expected shape (n,) for scalar inputs or (n, D) for vectors, got {shape}")
    return x[:, None] if x.dim() == 1 else x  # (n, D)


def _distances(x_train: torch.Tensor, y_train: torch.Tensor, x_query: torch.Tensor) -> torch.Tensor:
    keys, queries = _as_points("x_train", x_train), _as_points("x_query", x_query)
    if not isinstance(y_train, torch.Tensor) or y_train.dim() not in (1, 2):
        shape = tuple(y_train.shape) if isinstance(y_train, torch.Tensor) else type(y_train).__name__
        raise ValueError(f"y_train: expected shape (K,) or (K, Dv), got {shape}")
    if y_train.shape[0] != keys.shape[0]:
        raise ValueError(
            f"x_train and y_train must have the same length: got {keys.shape[0]} inputs and {y_train.shape[0]} targets"
        )
    if keys.shape[1] != queries.shape[1]:
        raise ValueError(
            f"x_query: expected inputs of width D={keys.shape[1]} like x_train, got width {queries.shape[1]}"
        )
    # |q - k| for every query/key pair, written out (cdist's fast path rounds differently).
    return (queries[:, None, :] - keys[None, :, :]).norm(dim=-1)  # (Q, K)


def _pool(weights: torch.Tensor, y_train: torch.Tensor) -> torch.Tensor:
    y_hat = weights @ (y_train[:, None] if y_train.dim() == 1 else y_train)  # (Q, Dv)
    return y_hat[:, 0] if y_train.dim() == 1 else y_hat


def _kernel_weights(dist_over_h: torch.Tensor, kernel, keep: torch.Tensor | None) -> torch.Tensor:
    if kernel is gaussian:
        # Same numbers as gaussian(d) / sum gaussian(d), computed as a softmax of -d^2/2 so that a query far from
        # every key does not underflow to 0/0 -- the link to softmax attention made in chapter 5.
        return masked_softmax(-(dist_over_h**2) / 2, mask=keep)
    k = kernel(dist_over_h)  # (Q, K)
    if keep is not None:
        k = k.masked_fill(~keep, 0.0)
    total = k.sum(dim=-1, keepdim=True)
    return k / torch.where(total > 0, total, torch.ones_like(total))  # a row with no support stays all 0


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
        kernel: a function of the scaled distance ``|q - k| / bandwidth``: :func:`gaussian`, :func:`boxcar`,
            :func:`constant`, :func:`epanechikov` or your own.
        bandwidth: ``h > 0``; small ``h`` follows the data closely, large ``h`` averages widely.

    Returns:
        ``(y_hat, weights)``: ``y_hat`` is ``(Q,)`` or ``(Q, Dv)``; ``weights`` is ``(Q, K)`` with rows summing
        to 1 (a query that no training point reaches under a compact kernel gets a row of zeros and
        ``y_hat = 0``).
    """
    if not isinstance(bandwidth, torch.Tensor):
        check_positive("bandwidth", bandwidth)
    elif not (bandwidth > 0).all():
        raise ValueError(f"bandwidth: expected a positive number, got {bandwidth.tolist()}")
    dist = _distances(x_train, y_train, x_query)  # (Q, K)
    weights = _kernel_weights(dist / bandwidth, kernel, None)  # (Q, K)
    return _pool(weights, y_train), weights


class NadarayaWatson(nn.Module):
    """Nadaraya–Watson regression with a learnable bandwidth ``h = exp(log_bandwidth)`` (always positive).

    ``forward(x_train, y_train, x_query, leave_one_out=False)`` returns ``y_hat`` and keeps the last weights
    in ``.attention_weights``. With ``leave_one_out=True`` the queries must be the training inputs themselves,
    and each one is kept from attending to its own key: otherwise, as ``h -> 0`` every training point predicts
    itself perfectly and the training loss rewards overfitting (chapter 2 shows it).
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
        self, x_train: torch.Tensor, y_train: torch.Tensor, x_query: torch.Tensor, leave_one_out: bool = False
    ) -> torch.Tensor:
        """Estimate ``y_hat`` (``(Q,)`` or ``(Q, Dv)``) at ``x_query`` from ``(x_train, y_train)``; see the class."""
        dist = _distances(x_train, y_train, x_query)  # (Q, K)
        keep = None
        if leave_one_out:
            if dist.shape[0] != dist.shape[1]:
                raise ValueError(
                    "leave_one_out: expected the queries to be the training inputs, "
                    f"got {dist.shape[0]} queries for {dist.shape[1]} training points"
                )
            keep = ~torch.eye(dist.shape[0], dtype=torch.bool, device=dist.device)  # (Q, K): no self-attention
        weights = _kernel_weights(dist / self.bandwidth.to(dist.dtype), self.kernel, keep)
        self.attention_weights = weights
        return _pool(weights, y_train)

    def extra_repr(self) -> str:
        return f"kernel={getattr(self.kernel, '__name__', self.kernel)}, bandwidth={self.bandwidth.item():.4g}"
