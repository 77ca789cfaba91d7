"""Self-attention (queries, keys and values all projected from the same sequence) and
positional encoding.

Shape legend: ``B`` batch, ``n`` sequence length (so ``Q = K = n``), ``d_in`` input
width, ``d_k`` query/key width, ``d_v`` value width, ``E`` model width
(``num_hiddens``).
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_dropout, check_last_dim, check_rank, check_size
from .scoring import dot_product_attention, fused_attention

__all__ = ["SelfAttention", "PositionalEncoding"]


class SelfAttention(nn.Module):
    """Single-head self-attention ``softmax(X W_q (X W_k)^T / sqrt(d_k)) X W_v``.

    Args:
        d_in: width of the input tokens.
        d_k: width of queries and keys.
        d_v: width of values (and of the output); defaults to ``d_k``.
        bias: whether ``W_q``, ``W_k``, ``W_v`` have biases.
        dropout: on the attention weights while training.

    ``forward(X (B, n, d_in), valid_lens=None, mask=None, need_weights=True,
    is_causal=False)`` -> ``(B, n, d_v)``. With ``need_weights=True`` the readable path
    runs and the weights ``(B, n, n)`` are kept (detached) in ``.attention_weights``;
    with ``False`` the fused ``F.scaled_dot_product_attention`` runs and none are kept.
    ``is_causal=True`` lets token ``i`` attend only to tokens ``0 .. i`` (SDPA's causal
    kernel on the fused path).
    """

    def __init__(
        self,
        d_in: int,
        d_k: int,
        d_v: int | None = None,
        *,
        bias: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__()
        d_v = d_k if d_v is None else d_v
        check_size("SelfAttention", d_in=d_in, d_k=d_k, d_v=d_v)
        check_dropout(dropout)
        self.d_in, self.d_k, self.d_v = d_in, d_k, d_v
        self.W_q = nn.Linear(d_in, d_k, bias=bias)
        self.W_k = nn.Linear(d_in, d_k, bias=bias)
        self.W_v = nn.Linear(d_in, d_v, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights: torch.Tensor | None = None

    def forward(
        self,
        X,
        valid_lens=None,
        mask=None,
        need_weights: bool = True,
        is_causal: bool = False,
    ):
        check_rank("X", X, (3,), "(B, n, d_in)")
        check_last_dim("X", X, self.d_in, "d_in of this SelfAttention")
        q, k, v = (
            self.W_q(X),
            self.W_k(X),
            self.W_v(X),
        )  # (B, n, d_k), (B, n, d_k), (B, n, d_v)
        p = self.dropout.p if self.training else 0.0
        if need_weights:
            out, weights = dot_product_attention(
                q, k, v, valid_lens, mask, dropout_p=p, is_causal=is_causal
            )
            self.attention_weights = (
                weights.detach()
            )  # for heatmaps: no autograd graph kept alive
        else:
            out = fused_attention(
                q, k, v, valid_lens, mask, dropout_p=p, is_causal=is_causal
            )
            self.attention_weights = None
        return out  # (B, n, d_v)


class PositionalEncoding(nn.Module):
    """Sinusoidal positional encoding (Vaswani et al., 2017), the same values as d2l's.

    ``P[pos, 2i] = sin(pos / 10000^(2i/E))`` and ``P[pos, 2i+1] = cos(pos /
    10000^(2i/E))``. ``forward(X (B, n, E), offset=0)`` returns ``dropout(X + P[offset :
    offset + n])``: ``offset`` is the position of the first token, e.g. the cache length
    when decoding one token at a time. The table is the buffer ``P`` of shape ``(1,
    max_len, E)``.
    """

    def __init__(self, num_hiddens: int, dropout: float = 0.0, max_len: int = 1000):
        super().__init__()
        check_size("PositionalEncoding", num_hiddens=num_hiddens, max_len=max_len)
        check_dropout(dropout)
        self.num_hiddens, self.max_len = num_hiddens, max_len
        self.dropout = nn.Dropout(dropout)
        pos = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1)  # (max_len, 1)
        # Pair i turns at the angular frequency omega_i = 1 / 10000^(2i/E): Hugging
        # Face's `inv_freq` is omega. Its inverse, the wavelength over 2 pi, divides
        # the positions (d2l's arithmetic, so the same values bit for bit).
        wavelength_scale = torch.pow(
            10000, torch.arange(0, num_hiddens, 2, dtype=torch.float32) / num_hiddens
        )  # (ceil(E/2),): 10000^(2i/E) = 1 / omega_i
        angles = pos / wavelength_scale  # (max_len, ceil(E/2)): pos * omega_i
        P = torch.zeros(1, max_len, num_hiddens)  # (1, max_len, E)
        P[0, :, 0::2] = torch.sin(angles)
        P[0, :, 1::2] = torch.cos(angles[:, : num_hiddens // 2])
        self.register_buffer("P", P, persistent=False)

    def forward(self, X: torch.Tensor, offset: int = 0) -> torch.Tensor:
        check_rank("X", X, (3,), "(B, n, E)")
        check_last_dim(
            "X", X, self.num_hiddens, "num_hiddens of this PositionalEncoding"
        )
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(
                "offset: expected a non-negative int (the position of the first "
                f"token), got {offset!r}"
            )
        if offset + X.shape[1] > self.max_len:
            raise ValueError(
                f"X: expected at most max_len={self.max_len} positions, got positions "
                f"{offset} .. {offset + X.shape[1] - 1}"
            )
        return self.dropout(X + self.P[:, offset : offset + X.shape[1], :].to(X.dtype))
