"""Masks and the masked softmax.

Convention (the same as ``F.scaled_dot_product_attention``): a boolean mask is **True
where a query may attend** ("keep") and False where it may not.
``nn.MultiheadAttention`` uses the opposite convention (True = blocked);
:func:`keep_to_blocked` converts, and the book's conventions page has the full table.

Shape legend: ``B`` batch, ``H`` heads, ``Q`` queries, ``K`` keys.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = [
    "sequence_mask",
    "valid_lens_to_mask",
    "masked_softmax",
    "causal_mask",
    "keep_to_blocked",
    "keep_to_additive",
]


def _check_valid_lens(valid_lens: torch.Tensor, batch: int, num_queries: int) -> None:
    if not isinstance(valid_lens, torch.Tensor):
        raise ValueError(
            "valid_lens: expected a tensor of shape (B,) or (B, Q), got "
            f"{type(valid_lens).__name__}"
        )
    if valid_lens.dim() not in (1, 2):
        raise ValueError(
            f"valid_lens: expected shape (B,) or (B, Q), got {tuple(valid_lens.shape)}"
        )
    if valid_lens.shape[0] != batch:
        raise ValueError(
            f"valid_lens: expected batch size B={batch} (shape ({batch},) or ({batch}, "
            f"{num_queries})), got shape {tuple(valid_lens.shape)}"
        )
    if valid_lens.dim() == 2 and valid_lens.shape[1] != num_queries:
        raise ValueError(
            f"valid_lens: expected one length per query, shape ({batch}, "
            f"{num_queries}), got shape {tuple(valid_lens.shape)}"
        )
    if valid_lens.dtype == torch.bool or valid_lens.is_complex():
        raise ValueError(
            f"valid_lens: expected integer lengths, got dtype {valid_lens.dtype}"
        )
    if torch.compiler.is_compiling():
        # Checking the values is a data-dependent branch: under torch.compile /
        # torch.export it would break the graph. The shapes and dtype were checked
        # above; the values are checked in eager mode.
        return
    if valid_lens.is_floating_point():
        bad = ~torch.isfinite(valid_lens) | (valid_lens != valid_lens.round())
        if bad.any():
            raise ValueError(
                "valid_lens: expected whole-number lengths (a length counts keys; a "
                "float tensor must hold whole numbers and no NaN or inf), got "
                f"{valid_lens.tolist()}"
            )
    if (valid_lens < 0).any():
        raise ValueError(
            f"valid_lens: expected non-negative lengths, got {valid_lens.tolist()}"
        )


def sequence_mask(
    X: torch.Tensor, valid_len: torch.Tensor, value: float = 0.0
) -> torch.Tensor:
    """Replace the entries of each row of ``X`` beyond that row's valid length by
    ``value``.

    d2l's ``sequence_mask``, without writing into its input.

    Args:
        X: ``(N, L, *)``; row ``i`` keeps its first ``valid_len[i]`` positions along
            dimension 1.
        valid_len: ``(N,)`` integer lengths.
        value: what masked positions become.

    Returns:
        A new tensor of the shape of ``X``.
    """
    if not isinstance(X, torch.Tensor) or X.dim() < 2:
        shape = tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(f"X: expected a tensor of shape (N, L, ...), got {shape}")
    if (
        not isinstance(valid_len, torch.Tensor)
        or valid_len.dim() != 1
        or valid_len.shape[0] != X.shape[0]
    ):
        shape = (
            tuple(valid_len.shape)
            if isinstance(valid_len, torch.Tensor)
            else type(valid_len).__name__
        )
        raise ValueError(f"valid_len: expected shape ({X.shape[0]},), got {shape}")
    _check_valid_lens(valid_len, X.shape[0], 1)
    keep = _lens_to_mask(valid_len.to(X.device), 1, X.shape[1])[:, 0]  # (N, L)
    keep = keep.reshape(keep.shape + (1,) * (X.dim() - 2))  # (N, L, 1, ...)
    return X.masked_fill(~keep, value)


def valid_lens_to_mask(
    valid_lens: torch.Tensor, num_queries: int, num_keys: int
) -> torch.Tensor:
    """Turn d2l-style ``valid_lens`` into a boolean keep-mask.

    Args:
        valid_lens: ``(B,)`` (the same length for every query of an example) or ``(B,
            Q)`` (one per query).
        num_queries: ``Q``.
        num_keys: ``K``.

    Returns:
        ``(B, 1, K)`` for 1-D ``valid_lens`` (it broadcasts over queries) or ``(B, Q,
        K)`` for 2-D; True where key position ``< valid_len``.
    """
    batch = (
        valid_lens.shape[0]
        if isinstance(valid_lens, torch.Tensor) and valid_lens.dim()
        else -1
    )
    _check_valid_lens(valid_lens, batch, num_queries)
    return _lens_to_mask(valid_lens, num_queries, num_keys)


def _lens_to_mask(
    valid_lens: torch.Tensor, num_queries: int, num_keys: int
) -> torch.Tensor:
    """The comparison behind every ``valid_lens`` mask (inputs already checked): key
    position < valid length."""
    positions = torch.arange(num_keys, device=valid_lens.device)  # (K,)
    if valid_lens.dim() == 1:
        return positions[None, None, :] < valid_lens[:, None, None]  # (B, 1, K)
    return positions[None, None, :] < valid_lens[:, :, None]  # (B, Q, K)


def _broadcast_mask(
    mask: torch.Tensor, shape: torch.Size, name: str = "mask"
) -> torch.Tensor:
    if not isinstance(mask, torch.Tensor):
        raise ValueError(
            f"{name}: expected a bool tensor broadcastable to {tuple(shape)}, got "
            f"{type(mask).__name__}"
        )
    if mask.dtype != torch.bool:
        raise ValueError(
            f"{name}: expected dtype torch.bool (True = keep), got {mask.dtype}; "
            "convert an additive float mask with `mask == 0`"
        )
    try:
        if torch.broadcast_shapes(mask.shape, shape) != shape:
            raise RuntimeError
    except RuntimeError:
        raise ValueError(
            f"{name}: expected a shape that broadcasts to the scores {tuple(shape)}, "
            f"got {tuple(mask.shape)}"
        ) from None
    return mask


def combine_masks(
    scores_shape: torch.Size,
    valid_lens: torch.Tensor | None,
    mask: torch.Tensor | None,
    device=None,
    is_causal: bool = False,
) -> torch.Tensor | None:
    """One keep-mask broadcastable to ``scores_shape`` = ``(B, ..., Q, K)`` from
    ``valid_lens``, ``mask`` and ``is_causal`` (combined by logical and).

    ``valid_lens`` applies to every head: its ``(B, 1 or Q, K)`` mask gets singleton
    dimensions inserted after the batch. ``is_causal`` adds :func:`causal_mask` ``(Q,
    K)``, aligned bottom-right. Returns None when there is nothing to mask.
    """
    out = None
    if valid_lens is not None:
        if len(scores_shape) < 3:
            raise ValueError(
                "valid_lens needs scores of shape (B, ..., Q, K), got "
                f"{tuple(scores_shape)}"
            )
        _check_valid_lens(valid_lens, scores_shape[0], scores_shape[-2])
        out = _lens_to_mask(
            valid_lens.to(device) if device is not None else valid_lens,
            scores_shape[-2],
            scores_shape[-1],
        )  # (B, 1|Q, K)
        out = out.reshape(
            out.shape[:1] + (1,) * (len(scores_shape) - 3) + out.shape[1:]
        )  # (B, 1.., 1|Q, K)
    if mask is not None:
        mask = _broadcast_mask(mask, torch.Size(scores_shape))
        out = mask if out is None else out & mask
    if is_causal:
        if len(scores_shape) < 2:
            raise ValueError(
                "is_causal needs scores of shape (..., Q, K), got "
                f"{tuple(scores_shape)}"
            )
        causal = causal_mask(
            scores_shape[-2], scores_shape[-1], device=device
        )  # (Q, K)
        out = causal if out is None else out & causal
    return out


def masked_softmax(
    X: torch.Tensor,
    valid_lens: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    *,
    is_causal: bool = False,
) -> torch.Tensor:
    """Softmax over the last axis that gives masked positions exactly zero weight.

    Equivalent to ``torch.softmax(X.masked_fill(~keep, -inf), -1)`` except that a query
    whose every key is masked gets **all-zero weights** instead of NaN, in every
    floating dtype. Masked positions are filled with the dtype's most negative finite
    value (not d2l's ``-1e6``, which overflows float16 to ``-inf``), the softmax is
    taken, and masked positions are then set to exactly 0.

    Args:
        X: scores ``(B, ..., Q, K)``.
        valid_lens: ``(B,)`` or ``(B, Q)``: keys at positions ``>= valid_len`` are
            masked (d2l's semantics); the same lengths apply to every head when ``X``
            has head dimensions.
        mask: bool, True = keep, broadcastable to ``X`` (e.g. ``(Q, K)`` from
            :func:`causal_mask`, or ``(B, 1, 1, K)``). Combined with ``valid_lens`` by
            logical and.
        is_causal: also mask every key after its query, :func:`causal_mask` ``(Q, K)``
            aligned bottom-right (so the last query sees every key, right for decoding
            with a cache); combined by logical and.

    Returns:
        Weights of the shape of ``X``; each row sums to 1, or to 0 if it is fully
        masked. ``X`` is not modified.
    """
    if not isinstance(X, torch.Tensor) or not X.is_floating_point():
        what = X.dtype if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(
            f"X: expected a floating-point tensor of scores (B, ..., Q, K), got {what}"
        )
    keep = combine_masks(
        X.shape, valid_lens, mask, device=X.device, is_causal=is_causal
    )
    if keep is None:
        return F.softmax(X, dim=-1)
    filled = X.masked_fill(
        ~keep, torch.finfo(X.dtype).min
    )  # masked -> most negative finite value
    return F.softmax(filled, dim=-1).masked_fill(
        ~keep, 0.0
    )  # fully masked rows -> 0, not uniform


def causal_mask(
    num_queries: int, num_keys: int | None = None, device=None
) -> torch.Tensor:
    """Boolean lower-triangular keep-mask ``(Q, K)``: query ``i`` may attend to keys ``0
    .. i + K - Q``.

    With ``K == Q`` this is ``torch.ones(Q, Q).tril().bool()``. When there are more keys
    than queries (decoding with a KV cache: the queries are the *last* ``Q`` positions)
    the diagonal is aligned to the bottom right, so the last query sees every key.
    ``F.scaled_dot_product_attention(is_causal=True)`` aligns it to the top left
    instead, which is wrong for a cache (chapter 8 shows the pitfall).
    """
    if num_keys is None:
        num_keys = num_queries
    if num_queries < 0 or num_keys < 0:
        raise ValueError(
            f"causal_mask: expected non-negative sizes, got Q={num_queries}, "
            f"K={num_keys}"
        )
    ones = torch.ones(num_queries, num_keys, dtype=torch.bool, device=device)
    return ones.tril(diagonal=num_keys - num_queries)


def keep_to_blocked(mask: torch.Tensor) -> torch.Tensor:
    """Our/SDPA keep-mask (True = attend) -> ``nn.MultiheadAttention``'s blocked-mask
    (True = may not attend)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise ValueError(
            "mask: expected a bool tensor, got "
            f"{getattr(mask, 'dtype', type(mask).__name__)}"
        )
    return ~mask


def keep_to_additive(
    mask: torch.Tensor, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Keep-mask -> additive float mask: 0 where kept, ``-inf`` where masked (add it to
    the scores)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise ValueError(
            "mask: expected a bool tensor, got "
            f"{getattr(mask, 'dtype', type(mask).__name__)}"
        )
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
        ~mask, float("-inf")
    )
