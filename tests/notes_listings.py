"""The course notes' own listings (../shared/seeds/000 and 004, and 002's
AdditiveAttention), used as oracles.

Copied verbatim from the notes (comments translated or dropped, logic untouched) so the
tests can load the same weights into a listing and into attention_lib and check the two
agree. Their known flaws are kept on purpose -- the chapters show them -- and the tests
only call them where they are correct.
"""

from math import sqrt
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn


# --- seed 000: additive (concat) attention
# ------------------------------------------------------------------
class Seed000Attention(nn.Module):
    def __init__(self, n_hidden_enc, n_hidden_dec):
        super().__init__()
        self.h_hidden_enc = n_hidden_enc
        self.h_hidden_dec = n_hidden_dec
        self.W = nn.Linear(2 * n_hidden_enc + n_hidden_dec, n_hidden_dec, bias=False)
        self.V = nn.Parameter(torch.rand(n_hidden_dec))

    def forward(self, hidden_dec, last_layer_enc):
        batch_size = last_layer_enc.size(0)
        src_seq_len = last_layer_enc.size(1)
        hidden_dec = hidden_dec[:, -1, :].unsqueeze(1).repeat(1, src_seq_len, 1)
        tanh_W_s_h = torch.tanh(self.W(torch.cat((hidden_dec, last_layer_enc), dim=2)))
        tanh_W_s_h = tanh_W_s_h.permute(0, 2, 1)
        V = self.V.repeat(batch_size, 1).unsqueeze(1)
        e = torch.bmm(V, tanh_W_s_h).squeeze(1)
        att_weights = F.softmax(e, dim=1)
        return att_weights


# --- seed 000: self-attention and multi-head self-attention
# ------------------------------------------------
class Seed000SelfAttention(nn.Module):
    def __init__(self, dim_in, dim_k, dim_v):
        super().__init__()
        self.dim_in = dim_in
        self.dim_k = dim_k
        self.dim_v = dim_v
        self.linear_q = nn.Linear(dim_in, dim_k, bias=False)
        self.linear_k = nn.Linear(dim_in, dim_k, bias=False)
        self.linear_v = nn.Linear(dim_in, dim_v, bias=False)
        self._norm_fact = 1 / sqrt(dim_k)

    def forward(self, x):
        batch, n, dim_in = x.shape
        assert dim_in == self.dim_in
        q = self.linear_q(x)
        k = self.linear_k(x)
        v = self.linear_v(x)
        dist = torch.bmm(q, k.transpose(1, 2)) * self._norm_fact
        dist = torch.softmax(dist, dim=-1)
        att = torch.bmm(dist, v)
        return att


class Seed000MultiHeadSelfAttention(nn.Module):
    def __init__(self, dim_in, dim_k, dim_v, num_heads=8):
        super().__init__()
        assert dim_k % num_heads == 0 and dim_v % num_heads == 0
        self.dim_in = dim_in
        self.dim_k = dim_k
        self.dim_v = dim_v
        self.num_heads = num_heads
        self.linear_q = nn.Linear(dim_in, dim_k, bias=False)
        self.linear_k = nn.Linear(dim_in, dim_k, bias=False)
        self.linear_v = nn.Linear(dim_in, dim_v, bias=False)
        self._norm_fact = 1 / sqrt(dim_k // num_heads)

    def forward(self, x):
        batch, n, dim_in = x.shape
        assert dim_in == self.dim_in
        nh = self.num_heads
        dk = self.dim_k // nh
        dv = self.dim_v // nh
        q = self.linear_q(x).reshape(batch, n, nh, dk).transpose(1, 2)
        k = self.linear_k(x).reshape(batch, n, nh, dk).transpose(1, 2)
        v = self.linear_v(x).reshape(batch, n, nh, dv).transpose(1, 2)
        dist = torch.matmul(q, k.transpose(2, 3)) * self._norm_fact
        dist = torch.softmax(dist, dim=-1)
        att = torch.matmul(dist, v)
        att = att.transpose(1, 2).reshape(batch, n, self.dim_v)
        return att


# --- seed 002: the additive attention class (reads batch_size/num_query/num_pair from
# globals) --------------
batch_size, num_query, num_pair = 30, 10, 15


class Seed002AdditiveAttention(nn.Module):
    def __init__(self, query_size, key_size, hiden_size):
        super().__init__()
        self.linear_q = nn.Linear(query_size, hiden_size, bias=False)
        self.linear_k = nn.Linear(key_size, hiden_size, bias=False)
        self.dense = nn.Linear(hiden_size, 1, bias=False)
        self.softmax = nn.Softmax(dim=2)

    def forward(self, query, key, value):
        query_ = self.linear_q(query)
        key_ = self.linear_k(key)
        H = torch.tanh(query_[:, :, None, :] + key_[:, None, :, :])
        score = self.dense(H).reshape(batch_size, num_query, num_pair)
        weight = self.softmax(score)
        output = torch.bmm(weight, value)
        return output


# --- seed 004: single head, fused QKV, multi-head, grouped-query
# ---------------------------------------------
class Seed004Attention(nn.Module):
    def __init__(self, emb_dim: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.emb_dim = emb_dim
        self.fc_q = nn.Linear(emb_dim, emb_dim)
        self.fc_k = nn.Linear(emb_dim, emb_dim)
        self.fc_v = nn.Linear(emb_dim, emb_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, mask: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        Q = self.fc_q(x)
        K = self.fc_k(x)
        V = self.fc_v(x)
        attention_scores = Q @ K.transpose(-1, -2)
        attention_scores = attention_scores / (self.emb_dim**0.5)
        if mask is not None:
            attention_scores = attention_scores.masked_fill(mask == 0, float("-inf"))
        attention_weights = torch.softmax(attention_scores, dim=-1)
        attention_weights = self.dropout(attention_weights)
        output = attention_weights @ V
        return output


class Seed004AttentionV1(nn.Module):
    def __init__(self, emb_dim: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.emb_dim = emb_dim
        self.qkv = nn.Linear(emb_dim, emb_dim * 3)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, mask: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        QKV = self.qkv(x)
        Q, K, V = torch.split(QKV, self.emb_dim, dim=-1)
        attention_scores = Q @ K.transpose(-1, -2) / (self.emb_dim**0.5)
        if mask is not None:
            attention_scores = attention_scores.masked_fill(mask == 0, float("-inf"))
        attention_weights = torch.softmax(attention_scores, dim=-1)
        attention_weights = self.dropout(attention_weights)
        output = attention_weights @ V
        return output


class Seed004MultiHeadAttention(nn.Module):
    def __init__(self, emb_dim: int, head_nums: int, dropout: float = 0.1) -> None:
        super().__init__()
        assert emb_dim % head_nums == 0
        self.emb_dim = emb_dim
        self.head_num = head_nums
        self.head_dim = emb_dim // head_nums
        self.dropout = nn.Dropout(dropout)
        self.fc_q = nn.Linear(emb_dim, emb_dim)
        self.fc_k = nn.Linear(emb_dim, emb_dim)
        self.fc_v = nn.Linear(emb_dim, emb_dim)
        self.fc_out = nn.Linear(emb_dim, emb_dim)

    def forward(
        self, x: torch.Tensor, mask: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        batch_size, seq_len, _ = x.size()
        Q = self.fc_q(x)
        K = self.fc_k(x)
        V = self.fc_v(x)
        Q_heads = Q.view(batch_size, seq_len, self.head_num, self.head_dim).permute(
            0, 2, 1, 3
        )
        K_heads = K.view(batch_size, seq_len, self.head_num, self.head_dim).transpose(
            1, 2
        )
        V_heads = V.view(batch_size, seq_len, self.head_num, self.head_dim).transpose(
            1, 2
        )
        attention_scores = Q_heads @ K_heads.transpose(-1, -2) / (self.head_dim**0.5)
        if mask is not None:
            attention_scores = attention_scores.masked_fill(mask == 0, float("-inf"))
        attention_weights = torch.softmax(attention_scores, dim=-1)
        attention_weights = self.dropout(attention_weights)
        output = attention_weights @ V_heads
        output = output.transpose(1, 2).contiguous()
        output = output.view(batch_size, seq_len, -1)
        output = self.fc_out(output)
        return output


class Seed004GroupQueryAttention(nn.Module):
    def __init__(self, emb_dim: int, head_num: int, group_num: int) -> None:
        super().__init__()
        assert emb_dim % head_num == 0
        assert head_num % group_num == 0
        self.emb_dim = emb_dim
        self.head_num = head_num
        self.group_num = group_num
        self.head_dim = emb_dim // head_num
        self.fc_q = nn.Linear(emb_dim, emb_dim)
        self.fc_k = nn.Linear(emb_dim, group_num * self.head_dim)
        self.fc_v = nn.Linear(emb_dim, group_num * self.head_dim)
        self.fc_o = nn.Linear(emb_dim, emb_dim)

    def forward(
        self, x: torch.Tensor, mask: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        batch_size, seq_len, _ = x.size()
        Q = self.fc_q(x)
        K = self.fc_k(x)
        V = self.fc_v(x)
        Q = Q.view(batch_size, seq_len, self.head_num, self.head_dim)
        K = K.view(batch_size, seq_len, self.group_num, self.head_dim)
        V = V.view(batch_size, seq_len, self.group_num, self.head_dim)
        Q = Q.transpose(1, 2)
        K = K.transpose(1, 2)
        V = V.transpose(1, 2)
        K = K.repeat_interleave(self.head_num // self.group_num, dim=1)
        V = V.repeat_interleave(self.head_num // self.group_num, dim=1)
        attention_scores = (Q @ K.transpose(2, 3)) / (self.head_dim**0.5)
        if mask is not None:
            attention_scores = attention_scores.masked_fill(mask == 0, float("-inf"))
        attention_weights = torch.softmax(attention_scores, dim=-1)
        output = attention_weights @ V
        output = output.transpose(1, 2).contiguous()
        output = output.view(batch_size, seq_len, -1)
        output = self.fc_o(output)
        return output
