"""Attention scoring functions: scaled dot-product and additive, as pure functions plus
thin modules.

Shape legend: ``B`` batch, ``Q`` queries, ``K`` keys/values, ``D`` query/key width,
``Dq``/``Dk`` query and key widths when they differ (additive attention), ``Dv`` value
width, ``h`` hidden width. Any number of extra dimensions (for example heads ``H``) may
sit between ``B`` and ``Q``.

Masks are boolean with True = keep, as in
``torch.nn.functional.scaled_dot_product_attention``.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import check_dropout, check_last_dim, check_qkv, check_size
from .masking import _check_valid_lens, combine_masks, masked_softmax

__all__ = [
    "dot_product_attention",
    "additive_attention",
    "DotProductAttention",
    "AdditiveAttention",
]


def dot_product_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    valid_lens: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    scale: float | None = None,
    is_causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention, the readable way: ``softmax(Q K^T / sqrt(D)) V``.

    Reference implementation (what this computes)::

        scores = queries @ keys.transpose(-2, -1) * scale    # (B, ..., Q, K)
        # (B, ..., Q, K), rows sum to 1 (or 0)
        weights = masked_softmax(scores, valid_lens, mask, is_causal=is_causal)
        output = dropout(weights) @ values                   # (B, ..., Q, Dv)

    Equivalent to ``F.scaled_dot_product_attention(queries, keys, values,
    attn_mask=mask)``, fully masked queries included (both give zeros there, since torch
    2.5; ``nn.MultiheadAttention`` gives NaN with ``need_weights=True``, and also with
    ``need_weights=False`` on its ``eval()`` + ``no_grad()`` fast path: chapter 3),
    except that the weights are returned. With ``is_causal=True`` and ``Q == K`` it
    equals SDPA's ``is_causal=True``; with fewer queries than keys (decoding with a
    cache) the causal mask is aligned bottom-right, as
    :func:`~attention_lib.causal_mask`, where SDPA's is aligned top-left.

    Args:
        queries: ``(B, ..., Q, D)``.
        keys: ``(B, ..., K, D)``.
        values: ``(B, ..., K, Dv)``.
        valid_lens: ``(B,)`` or ``(B, Q)``; keys at positions ``>= valid_len`` are
            masked.
        mask: bool keep-mask broadcastable to ``(B, ..., Q, K)``.
        dropout_p: dropout on the weights (pass 0.0 in evaluation).
        scale: defaults to ``1 / sqrt(D)``.
        is_causal: query ``i`` attends only to keys ``0 .. i + K - Q`` (bottom-right
            aligned causal mask), combined with ``valid_lens`` and ``mask`` by logical
            and.

    Returns:
        ``(output (B, ..., Q, Dv), weights (B, ..., Q, K))``; the weights are taken
        before dropout.
    """
    check_qkv(queries, keys, values, same_width=True)
    check_dropout(dropout_p)
    scale = 1.0 / math.sqrt(queries.shape[-1]) if scale is None else scale
    scores = queries @ keys.transpose(-2, -1) * scale  # (B, ..., Q, K)
    weights = masked_softmax(
        scores, valid_lens, mask, is_causal=is_causal
    )  # (B, ..., Q, K)
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return dropped @ values, weights  # (B, ..., Q, Dv), (B, ..., Q, K)


def additive_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    W_q: torch.Tensor,
    W_k: torch.Tensor,
    w_v: torch.Tensor,
    valid_lens: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    *,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Additive (Bahdanau) attention, scores ``a(q, k) = w_v^T tanh(W_q q + W_k k)``.

    Reference implementation::

        q, k = queries @ W_q.T, keys @ W_k.T              # (B, Q, h), (B, K, h)
        # (B, Q, K, h)
        features = tanh(q[..., :, None, :] + k[..., None, :, :])
        # (B, Q, K)
        scores = features @ w_v.reshape(-1)
        # (B, Q, Dv)
        output = dropout(masked_softmax(scores, valid_lens, mask)) @ values

    Args:
        queries: ``(B, ..., Q, Dq)``; keys: ``(B, ..., K, Dk)``; values: ``(B, ..., K,
            Dv)``.
        W_q: ``(h, Dq)``; W_k: ``(h, Dk)``; w_v: ``(1, h)`` or ``(h,)`` -- ``nn.Linear``
            weight layout.
        valid_lens, mask, dropout_p: as in :func:`dot_product_attention`.

    Returns:
        ``(output (B, ..., Q, Dv), weights (B, ..., Q, K))``.
    """
    check_qkv(queries, keys, values, same_width=False)
    check_dropout(dropout_p)
    check_last_dim("queries", queries, W_q.shape[-1], "query width Dq of W_q")
    check_last_dim("keys", keys, W_k.shape[-1], "key width Dk of W_k")
    q = F.linear(queries, W_q)  # (B, ..., Q, h)
    k = F.linear(keys, W_k)  # (B, ..., K, h)
    features = torch.tanh(
        q.unsqueeze(-2) + k.unsqueeze(-3)
    )  # (B, ..., Q, 1, h) + (B, ..., 1, K, h) -> (B, ..., Q, K, h)
    scores = F.linear(features, w_v.reshape(1, -1)).squeeze(-1)  # (B, ..., Q, K)
    weights = masked_softmax(scores, valid_lens, mask)  # (B, ..., Q, K)
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return dropped @ values, weights  # (B, ..., Q, Dv), (B, ..., Q, K)


def fused_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    valid_lens: torch.Tensor | None,
    mask: torch.Tensor | None,
    *,
    dropout_p: float = 0.0,
    scale: float | None = None,
    enable_gqa: bool = False,
    is_causal: bool = False,
) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` with our mask conventions; keeps no weights.

    ``q``: ``(B, ..., Q, D)``, ``k``: ``(B, ..., K, D)``, ``v``: ``(B, ..., K, Dv)``.
    Queries whose every key is masked are set to zero afterwards, matching
    :func:`masked_softmax`. ``is_causal`` is aligned bottom-right; it is handed to
    SDPA's own ``is_causal=True`` kernels (which skip the masked half) when that is
    exact -- ``Q == K`` and no other mask -- and costs nothing when ``Q == 1`` (one new
    token sees every cached key). ``is_causal`` with 1-D ``valid_lens`` and ``Q == K``
    (causal self-attention over padded sequences) builds no ``(Q, K)`` mask either:
    memory stays linear in ``n`` (see :func:`_causal_with_lengths`). An explicit
    ``(Q, K)`` ``mask`` is the caller's own ``Q x K`` tensor, and SDPA turns it into
    a float mask of that size: prefer ``is_causal`` to ``mask=causal_mask(n)``.
    """
    num_queries, num_keys = q.shape[-2], k.shape[-2]
    sdpa = functools.partial(
        F.scaled_dot_product_attention,
        dropout_p=dropout_p,
        scale=scale,
        enable_gqa=enable_gqa,
    )
    no_heads = q.dim() == 3
    if (
        is_causal
        and mask is None
        and num_queries == num_keys > 1
        and isinstance(valid_lens, torch.Tensor)
        and valid_lens.dim() == 1
    ):
        # Causal self-attention over padded sequences: exact without a (Q, K) mask.
        _check_valid_lens(valid_lens, q.shape[0], num_queries)
        if no_heads:  # SDPA's flash CPU kernel takes 4-D inputs (see below)
            q, k, v = q[:, None], k[:, None], v[:, None]  # (B, 1, n, width)
        out = _causal_with_lengths(q, k, v, valid_lens, sdpa)
        return out[:, 0] if no_heads else out
    sdpa_causal, keep = False, None
    exact_in_sdpa = (
        not is_causal or num_queries == num_keys or num_queries == 1 <= num_keys
    )
    if valid_lens is None and mask is None and exact_in_sdpa:
        # Nothing for us to build: no mask at all, or a causal mask that SDPA's own
        # kernel computes exactly (its top-left alignment equals ours when Q == K; a
        # single query, as in a decode step, sees every key).
        sdpa_causal = is_causal and num_queries == num_keys and num_queries > 1
    else:
        scores_shape = q.shape[:-1] + (num_keys,)  # (B, ..., Q, K)
        keep = combine_masks(
            scores_shape, valid_lens, mask, device=q.device, is_causal=is_causal
        )
    if no_heads:
        # SDPA's fused (flash) CPU kernel takes only 4-D inputs; a 3-D call would fall
        # back to the math kernel, which materialises the (Q, K) scores. Add a head axis
        # of size 1 (views, no copies).
        q, k, v = q[:, None], k[:, None], v[:, None]  # (B, 1, n, width)
        if keep is not None:
            # (B|1, 1, Q|1, K)
            keep = keep.reshape((1,) * (3 - keep.dim()) + keep.shape)[:, None]
    if keep is None and num_queries == 1 and enable_gqa and q.dim() == 4:
        # a decode step with shared key/value heads: each head read once
        return one_query_shared_heads(q, k, v, dropout_p=dropout_p, scale=scale)
    out = sdpa(q, k, v, attn_mask=keep, is_causal=sdpa_causal)  # (B, ..., Q, Dv)
    if keep is not None:
        any_key = keep.any(dim=-1, keepdim=True)  # (B|1, ..., Q|1, 1)
        out = out.masked_fill(~any_key, 0.0)
    return out[:, 0] if no_heads else out


def one_query_shared_heads(q, k, v, **sdpa_kwargs) -> torch.Tensor:
    """One query per head, ``q (B, H, 1, d)``, over shared key/value heads ``k, v (B,
    Hkv, K, d)`` (a decode step of grouped-query attention). The ``g = H / Hkv`` query
    heads of a group are ``g`` rows of one query matrix ``(B, Hkv, g, d)``, so each
    key/value head is read once: SDPA's ``enable_gqa`` reads it once per query head on
    a CPU, and gains from sharing only while the head stays in cache. Query head ``h``
    uses key/value head ``h // g``, as :func:`repeat_kv` does."""
    B, H, _, d = q.shape
    Hkv = k.shape[-3]
    out = F.scaled_dot_product_attention(
        q.reshape(B, Hkv, H // Hkv, d), k, v, **sdpa_kwargs
    )  # (B, Hkv, g, Dv)
    return out.reshape(B, H, 1, out.shape[-1])


def _causal_with_lengths(q, k, v, valid_lens, sdpa) -> torch.Tensor:
    """Causal self-attention (``Q == K == n``) with key lengths ``valid_lens (B,)``,
    in memory linear in ``n``: no ``(n, n)`` mask is built.

    Query ``i`` keeps the keys ``j <= i`` with ``j < L`` (``L`` = its example's
    valid length). For ``i < L`` that is just ``j <= i``: SDPA's causal kernel, one
    call for the whole batch. For ``i >= L`` it is every valid key ``0 .. L-1``: an
    unmasked SDPA of those queries over the first ``L`` keys (zeros when ``L == 0``,
    a fully masked query). Exactly the readable path's weights, row by row.

    Written for a CPU and for reading: ``valid_lens.tolist()`` waits for the lengths
    (on a GPU, a host synchronisation) and the rows past each length are one SDPA call
    per example, a Python loop over the batch. GPU libraries instead pack the
    sequences without padding and pass their offsets to a variable-length kernel
    (FlashAttention's ``cu_seqlens``).
    """
    n = q.shape[-2]
    out = sdpa(q, k, v, is_causal=True)  # (B, ..., n, Dv): right for rows i < L
    lengths = [min(int(length), n) for length in valid_lens.tolist()]
    if min(lengths) >= n:
        return out
    rows = []
    for b, length in enumerate(lengths):
        if length >= n:
            rows.append(out[b])
            continue
        if length == 0:
            tail = out.new_zeros(out[b].shape)  # every key masked: zeros
            rows.append(tail)
            continue
        qb, kb, vb = q[b : b + 1], k[b : b + 1], v[b : b + 1]
        # queries length .. n-1 over keys 0 .. length-1: (1, ..., n - length, Dv)
        tail = sdpa(qb[..., length:, :], kb[..., :length, :], vb[..., :length, :])
        rows.append(torch.cat([out[b, ..., :length, :], tail[0]], dim=-2))
    return torch.stack(rows)  # (B, ..., n, Dv)


class DotProductAttention(nn.Module):
    """Scaled dot-product attention (no parameters); keeps the last weights in
    ``.attention_weights``.

    ``forward(queries (B, Q, D), keys (B, K, D), values (B, K, Dv), valid_lens=None,
    mask=None, is_causal=False)`` -> ``(B, Q, Dv)``. See :func:`dot_product_attention`.
    The weights are kept detached from the autograd graph.
    """

    def __init__(self, dropout: float = 0.0):
        super().__init__()
        check_dropout(dropout)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights: torch.Tensor | None = None

    def forward(
        self, queries, keys, values, valid_lens=None, mask=None, is_causal: bool = False
    ):
        p = self.dropout.p if self.training else 0.0
        output, weights = dot_product_attention(
            queries, keys, values, valid_lens, mask, dropout_p=p, is_causal=is_causal
        )
        self.attention_weights = (
            weights.detach()
        )  # for heatmaps: no autograd graph kept alive
        return output


class AdditiveAttention(nn.Module):
    """Additive attention ``w_v^T tanh(W_q q + W_k k)`` with explicit, bias-free layers.

    Args:
        query_size: ``Dq``; key_size: ``Dk``; num_hiddens: ``h``; dropout: on the
            weights while training.

    ``forward(queries (B, Q, Dq), keys (B, K, Dk), values (B, K, Dv), valid_lens=None,
    mask=None)`` -> ``(B, Q, Dv)``; the last weights ``(B, Q, K)`` are kept in
    ``.attention_weights``.
    """

    def __init__(
        self, query_size: int, key_size: int, num_hiddens: int, dropout: float = 0.0
    ):
        super().__init__()
        check_size(
            "AdditiveAttention",
            query_size=query_size,
            key_size=key_size,
            num_hiddens=num_hiddens,
        )
        check_dropout(dropout)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights: torch.Tensor | None = None

    def forward(self, queries, keys, values, valid_lens=None, mask=None):
        p = self.dropout.p if self.training else 0.0
        output, weights = additive_attention(
            queries,
            keys,
            values,
            self.W_q.weight,
            self.W_k.weight,
            self.w_v.weight,
            valid_lens,
            mask,
            dropout_p=p,
        )
        self.attention_weights = (
            weights.detach()
        )  # for heatmaps: no autograd graph kept alive
        return output
