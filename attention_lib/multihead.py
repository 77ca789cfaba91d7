"""Multi-head and grouped-query attention, with the small pure helpers they are made of.

Shape legend: ``B`` batch, ``Q`` queries, ``K`` keys/values, ``E`` model width (``num_hiddens``), ``H`` query
heads, ``Hkv`` key/value heads, ``d = E / H`` head width.

One ``forward`` holds two paths, chosen by ``need_weights`` (as in nanoGPT):

* readable (``need_weights=True``): scores, :func:`~attention_lib.masked_softmax`, weights @ values; the
  weights ``(B, H, Q, K)`` are kept in ``.attention_weights`` for heatmaps;
* fused (``need_weights=False``): ``F.scaled_dot_product_attention`` (with ``enable_gqa`` for GQA, so the
  shared key/value heads are never copied); no weights are kept.

Both paths give the same output (to float32 round-off).
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_dropout, check_last_dim, check_qkv, check_rank
from .scoring import dot_product_attention, fused_attention

__all__ = [
    "split_heads",
    "merge_heads",
    "repeat_kv",
    "kv_cache_bytes",
    "GroupedQueryAttention",
    "MultiHeadAttention",
]


def split_heads(X: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, n, H * d)`` -> ``(B, H, n, d)``: head ``h`` takes columns ``h*d .. (h+1)*d - 1``.

    Equals ``X.reshape(B, n, H, d).transpose(1, 2)`` (a view, no copy).
    """
    check_rank("X", X, (3,), "(B, n, H * d)")
    B, n, width = X.shape
    if num_heads <= 0 or width % num_heads:
        raise ValueError(f"split_heads: expected num_heads to divide the width {width}, got num_heads={num_heads}")
    return X.reshape(B, n, num_heads, width // num_heads).transpose(1, 2)  # (B, H, n, d)


def merge_heads(X: torch.Tensor) -> torch.Tensor:
    """``(B, H, n, d)`` -> ``(B, n, H * d)``, the inverse of :func:`split_heads` (concatenates the heads)."""
    check_rank("X", X, (4,), "(B, H, n, d)")
    B, H, n, d = X.shape
    return X.transpose(1, 2).reshape(B, n, H * d)  # (B, n, H, d) -> (B, n, H*d)


def repeat_kv(X: torch.Tensor, n_rep: int) -> torch.Tensor:
    """``(B, Hkv, n, d)`` -> ``(B, Hkv * n_rep, n, d)``, each key/value head repeated ``n_rep`` times in a row.

    Equals ``torch.repeat_interleave(X, n_rep, dim=1)``: query heads ``0 .. n_rep-1`` share kv head 0, the next
    ``n_rep`` share kv head 1, and so on -- the grouping of ``F.scaled_dot_product_attention(enable_gqa=True)``.
    (``X.repeat(1, n_rep, 1, 1)`` would interleave the groups instead: a different model.)
    """
    check_rank("X", X, (4,), "(B, Hkv, n, d)")
    if n_rep <= 0:
        raise ValueError(f"repeat_kv: expected n_rep >= 1, got {n_rep}")
    if n_rep == 1:
        return X
    B, Hkv, n, d = X.shape
    return X[:, :, None, :, :].expand(B, Hkv, n_rep, n, d).reshape(B, Hkv * n_rep, n, d)


def kv_cache_bytes(
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    seq_len: int,
    batch_size: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes a KV cache takes: ``2 (K and V) * layers * Hkv * d * seq_len * batch * bytes_per_element``.

    ``bytes_per_element`` is 2 for float16/bfloat16, 4 for float32, 1 for an 8-bit cache.
    """
    for name, value in (("num_layers", num_layers), ("num_kv_heads", num_kv_heads), ("head_dim", head_dim),
                        ("seq_len", seq_len), ("batch_size", batch_size), ("bytes_per_element", bytes_per_element)):
        if value < 0 or int(value) != value:
            raise ValueError(f"kv_cache_bytes: expected a non-negative integer {name}, got {value}")
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


class GroupedQueryAttention(nn.Module):
    """Grouped-query attention (Ainslie et al., 2023): ``H`` query heads share ``Hkv`` key/value heads.

    Args:
        num_hiddens: ``E``, the width of inputs and output.
        num_heads: ``H``; must divide ``E``.
        num_kv_heads: ``Hkv``; must divide ``H``. ``Hkv == H`` is multi-head attention, ``Hkv == 1`` multi-query.
        dropout: on the attention weights while training.
        bias: whether the four projections have biases.

    Layers: ``W_q: E -> E``, ``W_k, W_v: E -> Hkv * d``, ``W_o: E -> E``. Query head ``h`` uses key/value head
    ``h // (H // Hkv)``.

    ``forward(queries (B, Q, E), keys (B, K, E), values (B, K, E), valid_lens=None, mask=None,
    need_weights=True)`` -> ``(B, Q, E)``. ``valid_lens`` is ``(B,)`` or ``(B, Q)``; ``mask`` is a bool keep-mask
    broadcastable to ``(B, H, Q, K)``.
    """

    def __init__(self, num_hiddens: int, num_heads: int, num_kv_heads: int, dropout: float = 0.0, bias: bool = False):
        super().__init__()
        if num_heads <= 0 or num_hiddens % num_heads:
            raise ValueError(
                f"num_heads must divide num_hiddens: got num_hiddens={num_hiddens}, num_heads={num_heads}"
            )
        if num_kv_heads <= 0 or num_heads % num_kv_heads:
            raise ValueError(
                f"num_kv_heads must be positive and divide num_heads: got num_heads={num_heads}, "
                f"num_kv_heads={num_kv_heads}"
            )
        check_dropout(dropout)
        self.num_hiddens, self.num_heads, self.num_kv_heads = num_hiddens, num_heads, num_kv_heads
        self.head_dim = num_hiddens // num_heads
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(num_hiddens, num_kv_heads * self.head_dim, bias=bias)
        self.W_v = nn.Linear(num_hiddens, num_kv_heads * self.head_dim, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights: torch.Tensor | None = None

    def forward(self, queries, keys, values, valid_lens=None, mask=None, need_weights: bool = True):
        for name, t in (("queries", queries), ("keys", keys), ("values", values)):
            check_rank(name, t, (3,), "(B, n, E)")
            check_last_dim(name, t, self.num_hiddens, f"num_hiddens E of this {type(self).__name__}")
        check_qkv(queries, keys, values, same_width=True)
        H, Hkv = self.num_heads, self.num_kv_heads
        q = split_heads(self.W_q(queries), H)  # (B, Q, E) -> (B, H, Q, d)
        k = split_heads(self.W_k(keys), Hkv)  # (B, K, Hkv*d) -> (B, Hkv, K, d)
        v = split_heads(self.W_v(values), Hkv)  # (B, K, Hkv*d) -> (B, Hkv, K, d)
        p = self.dropout.p if self.training else 0.0
        if need_weights:
            k, v = repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)  # (B, H, K, d) each
            out, self.attention_weights = dot_product_attention(q, k, v, valid_lens, mask, dropout_p=p)
        else:
            out = fused_attention(q, k, v, valid_lens, mask, dropout_p=p, enable_gqa=Hkv != H)  # (B, H, Q, d)
            self.attention_weights = None
        return self.W_o(merge_heads(out))  # (B, H, Q, d) -> (B, Q, E) -> (B, Q, E)


class MultiHeadAttention(GroupedQueryAttention):
    """Multi-head attention (Vaswani et al., 2017): grouped-query attention with one key/value head per query head.

    ``MultiHeadAttention(E, H)`` is ``GroupedQueryAttention(E, H, num_kv_heads=H)``: the same layers ``W_q``,
    ``W_k``, ``W_v``, ``W_o`` (all ``E -> E``) and the same ``forward``.
    """

    def __init__(self, num_hiddens: int, num_heads: int, dropout: float = 0.0, bias: bool = False):
        super().__init__(num_hiddens, num_heads, num_heads, dropout=dropout, bias=bias)
