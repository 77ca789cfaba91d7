"""Attention by tiles with the online softmax: FlashAttention's algorithm, written to be
read.

* :func:`tiled_attention` -- the output of :func:`~attention_lib.dot_product_attention`
  without ever holding the ``(Q, K)`` scores, only ``(B, ..., block, block)`` tiles:
  query blocks outside, key blocks inside (FlashAttention-2's order), and for each
  query a running maximum ``m``, a running sum ``l`` and a running, unnormalised
  output ``acc`` that every new key block rescales.
* :func:`merge_attention` -- exact attention over the union of disjoint key chunks from
  each chunk's output and log-sum-exp (the merge behind split-K decoding and ring
  attention).

This is plain PyTorch, a loop a learner can follow, not a fast kernel: a GPU kernel does
the same arithmetic with each tile in on-chip memory (chapter 10), and like it the
running state is float32 for float16/bfloat16 inputs.

Shape legend: ``B`` batch, ``Q`` queries, ``K`` keys/values, ``D`` query/key width,
``Dv`` value width; any number of extra dimensions (for example heads ``H``) may sit
between ``B`` and ``Q``. Boolean masks mean True = keep, as in
``torch.nn.functional.scaled_dot_product_attention``.
"""

from __future__ import annotations

import math
import numbers

import torch

from ._checks import check_qkv, check_size
from .masking import _broadcast_mask, _check_valid_lens

__all__ = ["tiled_attention", "merge_attention"]


def _check_floating(queries, keys, values) -> None:
    dtypes = {t.dtype for t in (queries, keys, values)}
    if len(dtypes) != 1 or not queries.is_floating_point():
        raise ValueError(
            "queries, keys and values: expected one floating-point dtype, got "
            f"{queries.dtype}, {keys.dtype} and {values.dtype}"
        )


def _check_scale(scale) -> None:
    if scale is None:
        return
    if (
        isinstance(scale, bool)
        or not isinstance(scale, numbers.Real)
        or not math.isfinite(scale)
    ):
        raise ValueError(f"scale: expected a finite real number or None, got {scale!r}")


def _tile_keep(
    q0: int,
    q1: int,
    k0: int,
    k1: int,
    *,
    num_queries: int,
    num_keys: int,
    valid_lens: torch.Tensor | None,
    mask: torch.Tensor | None,
    is_causal: bool,
    batch_rank: int,
    device,
) -> torch.Tensor | None:
    """The keep-mask of the tile (queries ``q0:q1``, keys ``k0:k1``), broadcastable to
    ``(B, ..., q1 - q0, k1 - k0)``; None when every pair of the tile is kept."""
    keep = None
    if valid_lens is not None:
        positions = torch.arange(k0, k1, device=device)  # (bk,)
        lens = valid_lens.to(device)
        if lens.dim() == 1:
            keep = positions[None, None, :] < lens[:, None, None]  # (B, 1, bk)
        else:
            keep = positions[None, None, :] < lens[:, q0:q1, None]  # (B, bq, bk)
        ones = (1,) * (batch_rank - 1)  # one singleton per extra dimension (heads)
        keep = keep.reshape(
            keep.shape[:1] + ones + keep.shape[1:]
        )  # (B, 1.., bq|1, bk)
    if mask is not None:
        m = mask
        if m.dim() >= 2 and m.shape[-2] != 1:
            m = m[
                ..., q0:q1, :
            ]  # this block's queries (a size-1 axis broadcasts as is)
        if m.shape[-1] != 1:
            m = m[..., k0:k1]  # this block's keys
        keep = m if keep is None else keep & m
    if is_causal and k1 - 1 > q0 + num_keys - num_queries:
        # the tile crosses the diagonal: query i keeps keys j <= i + K - Q
        # (bottom-right)
        rows = torch.arange(q0, q1, device=device)[:, None]  # (bq, 1)
        cols = torch.arange(k0, k1, device=device)[None, :]  # (1, bk)
        causal = cols <= rows + (num_keys - num_queries)  # (bq, bk)
        keep = causal if keep is None else keep & causal
    return keep


def tiled_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    valid_lens: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    block_size: int = 64,
    return_lse: bool = False,
):
    """Scaled dot-product attention computed tile by tile with the online softmax.

    The same result as :func:`~attention_lib.dot_product_attention` (the same shapes,
    masks, bottom-right ``is_causal`` and zero output for a query whose every key is
    masked), without the weights and without dropout. It never holds a ``(Q, K)``
    matrix of scores, only a handful of ``(B, ..., block, block)`` tiles at a time (the
    scores, the shifted scores and their exponentials). For each block of queries it
    walks through the blocks of keys keeping, per query::

        m   running maximum of the scores seen so far         (B, ..., bq)
        l   running sum of exp(score - m)                     (B, ..., bq)
        acc running sum of exp(score - m) * value             (B, ..., bq, Dv)

    and, when a new key block raises the maximum from ``m`` to ``m_new``, rescales ``l``
    and ``acc`` by ``exp(m - m_new)``. At the end ``output = acc / l`` and
    ``lse = m + log(l)``. With ``is_causal`` the key blocks entirely above the diagonal
    are skipped, not computed. Autograd works through the loop (it then stores every
    tile; chapter 10 shows the backward pass that recomputes them from ``lse`` instead).

    For float16 and bfloat16 inputs, the scores and the running state ``m``, ``l``,
    ``acc`` are float32 (FlashAttention's kernels keep them in float32 registers; only
    the output is rounded to the input dtype), so the error does not grow with ``K``
    and ``l`` cannot overflow.

    Args:
        queries: ``(B, ..., Q, D)``.
        keys: ``(B, ..., K, D)``.
        values: ``(B, ..., K, Dv)``.
        valid_lens: ``(B,)`` or ``(B, Q)``; keys at positions ``>= valid_len`` are
            masked.
        mask: bool keep-mask broadcastable to ``(B, ..., Q, K)``.
        scale: defaults to ``1 / sqrt(D)``.
        is_causal: query ``i`` attends only to keys ``0 .. i + K - Q`` (bottom-right
            aligned), combined with ``valid_lens`` and ``mask`` by logical and.
        block_size: rows of a query block and of a key block; it need not divide ``Q``
            or ``K``.
        return_lse: also return ``lse``.

    Returns:
        ``output (B, ..., Q, Dv)``; with ``return_lse=True``, ``(output, lse)`` where
        ``lse (B, ..., Q)`` is the log-sum-exp of each query's scaled, masked scores
        (``-inf`` for a query whose every key is masked). The output has the inputs'
        dtype; ``lse`` is float32 for float16/bfloat16 inputs (as FlashAttention's
        ``softmax_lse``), else the inputs' dtype.
    """
    check_qkv(queries, keys, values, same_width=True)
    _check_floating(queries, keys, values)
    check_size("tiled_attention", block_size=block_size)
    _check_scale(scale)
    num_queries, num_keys = queries.shape[-2], keys.shape[-2]
    scores_shape = queries.shape[:-1] + (num_keys,)  # (B, ..., Q, K), never allocated
    if valid_lens is not None:
        if queries.dim() < 3:
            raise ValueError(
                "valid_lens needs queries of shape (B, ..., Q, D), "
                f"got {tuple(queries.shape)}"
            )
        _check_valid_lens(valid_lens, queries.shape[0], num_queries)
    if mask is not None:
        _broadcast_mask(mask, scores_shape)
    scale = 1.0 / math.sqrt(queries.shape[-1]) if scale is None else scale
    tile_keep = dict(
        num_queries=num_queries,
        num_keys=num_keys,
        valid_lens=valid_lens,
        mask=mask,
        is_causal=is_causal,
        batch_rank=queries.dim() - 2,
        device=queries.device,
    )

    # The running state (m, l, acc) and the scores are kept in float32 even for float16
    # or bfloat16 inputs, as FlashAttention's kernels keep them in float32 registers:
    # in 16 bits, l overflows (float16's largest value is 65504) and acc loses a few
    # digits at every rescaling. The output is rounded to the input dtype at the end.
    state = torch.promote_types(queries.dtype, torch.float32)  # float32 or float64
    output = queries.new_empty(queries.shape[:-1] + values.shape[-1:])  # (B, .., Q, Dv)
    lse = queries.new_empty(queries.shape[:-1], dtype=state)  # (B, ..., Q)
    for q0 in range(0, num_queries, block_size):
        q1 = min(q0 + block_size, num_queries)
        q = queries[..., q0:q1, :].to(state)  # (B, ..., bq, D)
        m = q.new_full(q.shape[:-1], -math.inf)  # (B, ..., bq) running maximum
        l = q.new_zeros(q.shape[:-1])  # (B, ..., bq) running sum  # noqa: E741
        acc = q.new_zeros(q.shape[:-1] + values.shape[-1:])  # (B, ..., bq, Dv)
        # causal: the block's last query sees keys up to q1 - 1 + K - Q; the tiles
        # after that are skipped
        key_end = min(num_keys, q1 + num_keys - num_queries) if is_causal else num_keys
        for k0 in range(0, key_end, block_size):
            k1 = min(k0 + block_size, num_keys)
            k = keys[..., k0:k1, :].to(state)  # (B, ..., bk, D)
            v = values[..., k0:k1, :].to(state)  # (B, ..., bk, Dv)
            s = q @ k.transpose(-2, -1) * scale  # (B, ..., bq, bk)
            keep = _tile_keep(q0, q1, k0, k1, **tile_keep)
            if keep is not None:
                s = s.masked_fill(~keep, -math.inf)  # masked scores add exp(-inf) = 0
            # The maximum is only a shift that cancels in acc / l, so no gradient flows
            # through it. A row that has seen no key yet (maximum -inf) is shifted by 0.
            m_new = torch.maximum(m, s.detach().amax(dim=-1))  # (B, ..., bq)
            shift = torch.where(torch.isfinite(m_new), m_new, 0.0)  # (B, ..., bq)
            p = torch.exp(s - shift[..., None])  # (B, ..., bq, bk), entries in [0, 1]
            # exp(m_old - m_new): 1 if the maximum stayed, 0 for the first tile
            rescale = torch.exp(m - shift)  # (B, ..., bq)
            l = l * rescale + p.sum(dim=-1)  # noqa: E741
            acc = acc * rescale[..., None] + p @ v  # (B, ..., bq, Dv)
            m = m_new
        seen = l > 0  # (B, ..., bq): False for a query whose every key is masked
        l_safe = torch.where(seen, l, 1.0)
        # each block's rows are written once, into the output, in the input dtype
        output[..., q0:q1, :] = acc / l_safe[..., None]  # 0 where nothing was seen
        lse[..., q0:q1] = torch.where(seen, m + torch.log(l_safe), -math.inf)
    if not return_lse:
        return output
    return output, lse  # (B, ..., Q, Dv), (B, ..., Q)


def merge_attention(outputs, lses) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact attention over the union of disjoint key chunks, from each chunk's
    attention.

    If chunk ``c`` gave ``outputs[c] = attention(q, K_c, V_c)`` and ``lses[c]``, the
    log-sum-exp of the scores of ``q`` against ``K_c`` (``tiled_attention(...,
    return_lse=True)``), then::

        lse    = log(sum_c exp(lses[c]))
        output = sum_c exp(lses[c] - lse) * outputs[c]

    is attention over all the keys: each chunk's softmax is re-weighted by its share of
    the total. A chunk in which a query sees no key (``lse = -inf``) gets weight 0 and
    adds exactly 0, whatever its output holds (0, NaN or inf); a query that sees no key
    in any chunk gets output 0 and ``lse = -inf``. This is how
    FlashDecoding combines the splits of a long KV cache and how ring attention combines
    the blocks that travel between devices.

    Args:
        outputs: a non-empty list or tuple of ``(B, ..., Q, Dv)`` tensors, one per
            chunk.
        lses: a list or tuple of as many ``(B, ..., Q)`` tensors.

    Returns:
        ``(output (B, ..., Q, Dv), lse (B, ..., Q))``: the output in the dtype of
        ``outputs``, ``lse`` (and the arithmetic) in float32 at least.
    """
    if not isinstance(outputs, (list, tuple)) or not isinstance(lses, (list, tuple)):
        raise ValueError(
            "outputs and lses: expected two lists (or tuples) of tensors, got "
            f"{type(outputs).__name__} and {type(lses).__name__}"
        )
    if len(outputs) == 0 or len(outputs) != len(lses):
        raise ValueError(
            "outputs and lses: expected as many lses as outputs, at least one, got "
            f"{len(outputs)} outputs and {len(lses)} lses"
        )
    first = outputs[0]
    for c, (out, lse) in enumerate(zip(outputs, lses)):
        for name, t, legend in (
            ("outputs", out, "(B, ..., Q, Dv)"),
            ("lses", lse, "(B, ..., Q)"),
        ):
            if not isinstance(t, torch.Tensor) or not t.is_floating_point():
                what = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(
                    f"{name}[{c}]: expected a floating-point tensor {legend}, "
                    f"got {what}"
                )
        if out.dim() < 1 or out.shape != first.shape:
            raise ValueError(
                f"outputs[{c}]: expected the shape of outputs[0] {tuple(first.shape)}, "
                f"got {tuple(out.shape)}"
            )
        if lse.shape != out.shape[:-1]:
            raise ValueError(
                f"lses[{c}]: expected shape {tuple(out.shape[:-1])} (outputs[{c}] "
                f"without its last dimension), got {tuple(lse.shape)}"
            )
    # float32 at least, as in tiled_attention (16-bit outputs come with float32 lses)
    state = torch.promote_types(
        torch.promote_types(first.dtype, lses[0].dtype), torch.float32
    )
    stacked_lse = torch.stack([lse.to(state) for lse in lses])  # (C, B, ..., Q)
    stacked_out = torch.stack([out.to(state) for out in outputs])  # (C, B, ..., Q, Dv)
    top = stacked_lse.detach().amax(dim=0)  # (B, ..., Q), a shift that cancels
    shift = torch.where(torch.isfinite(top), top, 0.0)
    share = torch.exp(stacked_lse - shift)  # (C, B, ..., Q), 0 for a chunk with no key
    total = share.sum(dim=0)  # (B, ..., Q)
    seen = total > 0
    total_safe = torch.where(seen, total, 1.0)
    # a chunk of weight 0 adds exactly 0, even if its output is NaN or inf (what some
    # kernels return for a query that saw no key)
    weighted = torch.where(share[..., None] > 0, share[..., None] * stacked_out, 0.0)
    output = weighted.sum(dim=0) / total_safe[..., None]  # (B, ..., Q, Dv)
    lse = torch.where(seen, shift + torch.log(total_safe), -math.inf)  # (B, ..., Q)
    return output.to(first.dtype), lse
