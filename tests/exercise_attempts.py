"""Learner solutions of the "write it yourself" exercises, written as a learner would
(from the task text and the stub, in a learner's own style), kept apart from the
checker's mutants: tests/test_exercises.py checks every right one passes, every wrong
one fails, and measures how often the report names the mistake (and that a named one
is the mistake made).

``ATTEMPTS``: ``(exercise, fn, names)``; ``names`` is None for a right solution, else
the set of mistake names that are right to give (empty: no listed mistake matches it,
a report must then name none).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

import attention_lib as al

ATTEMPTS: list[tuple[str, object, set | None]] = []


def attempt(exercise, *names, right=False):
    def register(fn):
        ATTEMPTS.append((exercise, fn, None if right else set(names)))
        return fn

    return register


# -- 1.1 ------------------------------------------------------------------------------


@attempt("1.1", right=True)
def pooling_einsum(queries, keys, values):
    w = torch.einsum("qd,kd->qk", queries, keys).softmax(-1)
    return torch.einsum("qk,kv->qv", w, values)


@attempt("1.1", right=True)
def pooling_manual_max(queries, keys, values):
    s = queries @ keys.T
    e = torch.exp(s - s.max(dim=1, keepdim=True).values)
    return (e / e.sum(1, keepdim=True)) @ values


@attempt("1.1", right=True)
def pooling_float32_inside(queries, keys, values):
    s = (queries.float() @ keys.float().T).to(queries.dtype)  # float32, cast back
    return torch.softmax(s, -1) @ values


@attempt("1.1", "no-max")
def pooling_naive_exp(queries, keys, values):
    e = torch.exp(queries @ keys.T)
    return (e / e.sum(dim=-1, keepdim=True)) @ values


@attempt("1.1", "scaled")
def pooling_sqrt_d(queries, keys, values):
    scores = queries @ keys.T / math.sqrt(queries.shape[1])
    return torch.softmax(scores, dim=1) @ values


@attempt("1.1", "softmax-over-queries")
def pooling_dim0(queries, keys, values):
    return F.softmax(queries @ keys.T, dim=0) @ values


@attempt("1.1", "no-softmax")
def pooling_raw(queries, keys, values):
    return (queries @ keys.T) @ values


@attempt("1.1", "divide-by-sum")
def pooling_normalised(queries, keys, values):
    s = queries @ keys.T
    return (s / s.sum(-1, keepdim=True)) @ values


@attempt("1.1", "one-max")
def pooling_global_max(queries, keys, values):
    s = queries @ keys.T
    e = (s - s.max()).exp()
    return e / e.sum(-1, keepdim=True) @ values


# -- 2.1 ------------------------------------------------------------------------------


@attempt("2.1", right=True)
def nw_softmax(x_train, y_train, x_query, bandwidth):
    d = x_query.unsqueeze(1) - x_train.unsqueeze(0)
    return torch.softmax(-0.5 * (d / bandwidth) ** 2, dim=1) @ y_train


# exp underflows for a far query: 0 / 0 (the task asks for weights summing to 1)
@attempt("2.1", "kernel-underflows")
def nw_loop(x_train, y_train, x_query, bandwidth):
    out = []
    for xq in x_query:
        w = torch.exp(-(((xq - x_train) / bandwidth) ** 2) / 2)
        out.append((w * y_train).sum() / w.sum())
    return torch.stack(out)


@attempt("2.1", "no-bandwidth")
def nw_no_h(x_train, y_train, x_query, bandwidth):
    d = x_query[:, None] - x_train[None]
    w = torch.exp(-(d**2) / 2)
    return (w / w.sum(1, keepdim=True)) @ y_train


@attempt("2.1", "squared-distance-over-h")
def nw_over_h(x_train, y_train, x_query, bandwidth):
    d = x_query[:, None] - x_train[None]
    w = torch.exp(-(d**2) / (2 * bandwidth))
    return (w / w.sum(1, keepdim=True)) @ y_train


@attempt("2.1", "kernel-without-half")
def nw_no_half(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None]) / bandwidth
    return torch.softmax(-(u**2), dim=1) @ y_train


@attempt("2.1", "not-normalised")
def nw_unnormalised(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None]) / bandwidth
    return torch.exp(-(u**2) / 2) @ y_train


@attempt("2.1", "normalised-over-queries")
def nw_axis0(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train[None]) / bandwidth
    w = torch.exp(-(u**2) / 2)
    return (w / w.sum(0)) @ y_train


# -- 3.1 ------------------------------------------------------------------------------


@attempt("3.1", right=True)
def ms_where(X, valid_lens):
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(X.shape[0], X.shape[1])
    keep = torch.arange(X.shape[-1]) < valid_lens[..., None]
    w = torch.softmax(torch.where(keep, X, -torch.inf), dim=-1)
    return torch.where(keep, w, 0.0)


@attempt("3.1", right=True)
def ms_d2l_style_fixed(X, valid_lens):
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = X.reshape(-1, shape[-1])
    keep = torch.arange(shape[-1])[None, :] < valid_lens[:, None]
    w = torch.softmax(X.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.nan_to_num(w).reshape(shape)


@attempt("3.1", "d2l-uniform")
def ms_d2l(X, valid_lens):
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = X.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1])[None, :] < valid_lens[:, None]
    X = X.masked_fill(~mask, -1e6)
    return torch.softmax(X, dim=-1).reshape(shape)


@attempt("3.1", "fill-zero")
def ms_zero(X, valid_lens):
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    mask = torch.arange(X.shape[-1]) >= lens[..., None]
    return torch.softmax(X.masked_fill(mask, 0), dim=-1)


@attempt("3.1", "off-by-one")
def ms_off_by_one(X, valid_lens):
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(X.shape[-1]) <= lens[..., None]
    return torch.softmax(X.masked_fill(~keep, -math.inf), -1).nan_to_num(0)


@attempt("3.1", "nan-row")
def ms_nan(X, valid_lens):
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(X.shape[-1]) < lens[..., None]
    return torch.softmax(X.masked_fill(~keep, -math.inf), -1)


@attempt("3.1", "mask-after-softmax")
def ms_after(X, valid_lens):
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(X.shape[-1]) < lens[..., None]
    return torch.softmax(X, -1) * keep


@attempt("3.1", "inverted-mask")
def ms_inverted(X, valid_lens):
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(X.shape[-1]) < lens[..., None]
    return torch.softmax(X.masked_fill(keep, -math.inf), -1).nan_to_num(0)


@attempt("3.1", "nan-row")
def ms_min_fill_renormalised(X, valid_lens):
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(X.shape[-1]) < lens[..., None]
    w = torch.softmax(X, -1) * keep
    return w / w.sum(-1, keepdim=True)


# -- 4.1 ------------------------------------------------------------------------------


@attempt("4.1", right=True)
def additive_einsum(queries, keys, W_q, W_k, w_v):
    q = torch.einsum("bqd,hd->bqh", queries, W_q)
    k = torch.einsum("bkd,hd->bkh", keys, W_k)
    return torch.einsum("bqkh,h->bqk", torch.tanh(q[:, :, None] + k[:, None]), w_v)


@attempt("4.1", "no-tanh")
def additive_no_tanh(queries, keys, W_q, W_k, w_v):
    q, k = queries @ W_q.T, keys @ W_k.T
    return (q.unsqueeze(2) + k.unsqueeze(1)) @ w_v


@attempt("4.1", "projection-not-transposed")
def additive_untransposed(queries, keys, W_q, W_k, w_v):
    q, k = queries @ W_q, keys @ W_k
    return torch.tanh(q.unsqueeze(2) + k.unsqueeze(1)) @ w_v


@attempt("4.1", "keys-by-queries")
def additive_bkq(queries, keys, W_q, W_k, w_v):
    q, k = queries @ W_q.T, keys @ W_k.T
    return torch.tanh(k.unsqueeze(2) + q.unsqueeze(1)) @ w_v


@attempt("4.1", "no-w_v")
def additive_sum(queries, keys, W_q, W_k, w_v):
    q, k = queries @ W_q.T, keys @ W_k.T
    return torch.tanh(q.unsqueeze(2) + k.unsqueeze(1)).sum(-1)


# -- 5.1 ------------------------------------------------------------------------------


@attempt("5.1", right=True)
def sdpa_library(queries, keys, values, valid_lens):
    keep = torch.arange(keys.shape[1])[None, None, :] < valid_lens[:, None, None]
    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=keep)


@attempt("5.1", right=True)
def sdpa_masked_softmax(queries, keys, values, valid_lens):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(al.masked_softmax(scores, valid_lens), values)


@attempt("5.1", "no-scale")
def sdpa_no_scale(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2)
    return al.masked_softmax(scores, valid_lens) @ values


@attempt("5.1", "scale-by-value-width")
def sdpa_dv(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(values.shape[-1])
    return al.masked_softmax(scores, valid_lens) @ values


@attempt("5.1", "off-by-one")
def sdpa_off_by_one(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    keep = torch.arange(keys.shape[1]) <= valid_lens[:, None, None]
    return torch.softmax(scores.masked_fill(~keep, -1e9), -1) @ values


@attempt("5.1", "fill-zero")
def sdpa_fill_zero(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    keep = torch.arange(keys.shape[1]) < valid_lens[:, None, None]
    return torch.softmax(scores * keep, -1) @ values


@attempt("5.1", "first-length")
def sdpa_first_length(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    scores[:, :, int(valid_lens[0]) :] = -math.inf
    return torch.softmax(scores, -1) @ values


@attempt("5.1", "divide-by-width")
def sdpa_by_d(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2) / queries.shape[-1]
    return al.masked_softmax(scores, valid_lens) @ values


# -- 6.1 ------------------------------------------------------------------------------


@attempt("6.1", right=True)
def causal_sdpa(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    keep = torch.ones(Q, K, dtype=torch.bool).tril(K - Q)
    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=keep)


@attempt("6.1", right=True)
def causal_positions(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    q_pos = torch.arange(K - Q, K)[:, None]
    keep = torch.arange(K)[None, :] <= q_pos
    s = queries @ keys.transpose(-1, -2) / math.sqrt(queries.shape[-1])
    return torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ values


@attempt("6.1", "top-left")
def causal_is_causal(queries, keys, values):
    return F.scaled_dot_product_attention(queries, keys, values, is_causal=True)


@attempt("6.1", "top-left")
def causal_tril(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    keep = torch.tril(torch.ones(Q, K)).bool()
    s = queries @ keys.transpose(-1, -2) / math.sqrt(queries.shape[-1])
    return torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ values


@attempt("6.1", "excludes-itself")
def causal_strict(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    keep = torch.arange(K)[None, :] < torch.arange(K - Q, K)[:, None]
    s = queries @ keys.transpose(-1, -2) / math.sqrt(queries.shape[-1])
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), -1)
    return w.nan_to_num(0) @ values


@attempt("6.1", "no-scale")
def causal_no_scale(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    keep = torch.ones(Q, K, dtype=torch.bool).tril(K - Q)
    s = queries @ keys.transpose(-1, -2)
    return torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ values


# -- 7.1 / 7.2 ------------------------------------------------------------------------


@attempt("7.1", right=True)
def split_unflatten(X, num_heads):
    return X.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)


@attempt("7.1", "reshape-without-transpose")
def split_view(X, num_heads):
    B, n, E = X.shape
    return X.view(B, num_heads, n, E // num_heads)


@attempt("7.1", "interleaved-heads")
def split_strided(X, num_heads):
    B, n, E = X.shape
    return X.reshape(B, n, E // num_heads, num_heads).permute(0, 3, 1, 2)


@attempt("7.2", right=True)
def merge_flatten(X):
    return X.permute(0, 2, 1, 3).flatten(2)


@attempt("7.2", "reshape-without-transpose")
def merge_view(X):
    B, H, n, d = X.shape
    return X.reshape(B, n, H * d)


# -- 8.1 / 8.2 ------------------------------------------------------------------------


@attempt("8.1", right=True)
def gqa_grouped(queries, keys, values):
    B, H, Q, d = queries.shape
    Hkv = keys.shape[1]
    q = queries.reshape(B, Hkv, H // Hkv, Q, d)
    s = q @ keys[:, :, None].transpose(-1, -2) / math.sqrt(d)
    return (torch.softmax(s, -1) @ values[:, :, None]).reshape(B, H, Q, d)


@attempt("8.1", right=True)
def gqa_sdpa(queries, keys, values):
    return F.scaled_dot_product_attention(queries, keys, values, enable_gqa=True)


@attempt("8.1", "repeat-not-interleave")
def gqa_repeat(queries, keys, values):
    n = queries.shape[1] // keys.shape[1]
    k, v = keys.repeat(1, n, 1, 1), values.repeat(1, n, 1, 1)
    return F.scaled_dot_product_attention(queries, k, v)


@attempt("8.1", "repeat-not-interleave")
def gqa_modulo(queries, keys, values):
    H, Hkv = queries.shape[1], keys.shape[1]
    index = torch.arange(H) % Hkv
    return F.scaled_dot_product_attention(queries, keys[:, index], values[:, index])


@attempt("8.1", "scale-by-model-width")
def gqa_model_width(queries, keys, values):
    H, d = queries.shape[1], queries.shape[-1]
    n = H // keys.shape[1]
    k, v = keys.repeat_interleave(n, 1), values.repeat_interleave(n, 1)
    return torch.softmax(queries @ k.transpose(-1, -2) / math.sqrt(H * d), -1) @ v


@attempt("8.1", "no-scale")
def gqa_no_scale(queries, keys, values):
    n = queries.shape[1] // keys.shape[1]
    k, v = keys.repeat_interleave(n, 1), values.repeat_interleave(n, 1)
    return torch.softmax(queries @ k.transpose(-1, -2), -1) @ v


@attempt("8.2", right=True)
def decode_sdpa(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat((cache_k, k_new), dim=-2)
    values = torch.cat((cache_v, v_new), dim=-2)
    out = F.scaled_dot_product_attention(q_new, keys, values, enable_gqa=True)
    return out, keys, values


@attempt("8.2", "is-causal-over-cache")
def decode_is_causal(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat((cache_k, k_new), dim=2)
    values = torch.cat((cache_v, v_new), dim=2)
    out = F.scaled_dot_product_attention(
        q_new, keys, values, is_causal=True, enable_gqa=True
    )
    return out, keys, values


@attempt("8.2", "repeat-not-interleave")
def decode_repeat(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat((cache_k, k_new), dim=2)
    values = torch.cat((cache_v, v_new), dim=2)
    n = q_new.shape[1] // keys.shape[1]
    out = F.scaled_dot_product_attention(
        q_new, keys.repeat(1, n, 1, 1), values.repeat(1, n, 1, 1)
    )
    return out, keys, values


@attempt("8.2", "no-scale")
def decode_no_scale(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat((cache_k, k_new), dim=2)
    values = torch.cat((cache_v, v_new), dim=2)
    n = q_new.shape[1] // keys.shape[1]
    k, v = keys.repeat_interleave(n, 1), values.repeat_interleave(n, 1)
    return torch.softmax(q_new @ k.transpose(-1, -2), -1) @ v, keys, values


@attempt("8.2", "attend-before-append")
def decode_before(q_new, k_new, v_new, cache_k, cache_v):
    n = q_new.shape[1] // cache_k.shape[1]
    if cache_k.shape[2] == 0:
        out = torch.zeros_like(q_new)
    else:
        out = F.scaled_dot_product_attention(
            q_new, cache_k.repeat_interleave(n, 1), cache_v.repeat_interleave(n, 1)
        )
    return out, torch.cat((cache_k, k_new), 2), torch.cat((cache_v, v_new), 2)


# -- 9.1 ------------------------------------------------------------------------------


@attempt("9.1", right=True)
def mqar_numpy32(logits, targets):
    asked = (targets != al.MQAR_IGNORE).numpy()
    right = (logits.argmax(-1) == targets).numpy()
    return right[asked].astype("float32").mean()


@attempt("9.1", right=True)
def mqar_tensor(logits, targets):
    asked = targets != al.MQAR_IGNORE
    return (logits.argmax(-1)[asked] == targets[asked]).float().mean()


@attempt("9.1", "second-half")
def mqar_second_half(logits, targets):
    T = targets.shape[1]
    return (
        (logits.argmax(-1)[:, T // 2 :] == targets[:, T // 2 :]).double().mean().item()
    )


@attempt("9.1", "mean-of-rows")
def mqar_mean_of_means(logits, targets):
    asked = targets != al.MQAR_IGNORE
    right = (logits.argmax(-1) == targets) & asked
    return np.nanmean((right.sum(1) / asked.sum(1)).numpy())


@attempt("9.1", "counts-ignored")
def mqar_all(logits, targets):
    return (logits.argmax(-1) == targets).float().mean().item()


# -- 10.1 / 10.2 ----------------------------------------------------------------------


@attempt("10.1", right=True)
def online_lse(q, keys, values, block_size):
    lse, out = (
        torch.tensor(-math.inf, dtype=q.dtype),
        torch.zeros(values.shape[1], dtype=q.dtype),
    )
    for k, v in zip(keys.split(block_size), values.split(block_size)):
        s = k @ q / math.sqrt(q.numel())
        block_lse = torch.logsumexp(s, 0)
        new = torch.logaddexp(lse, block_lse)
        out = out * torch.exp(lse - new) + torch.softmax(s, 0) @ v * torch.exp(
            block_lse - new
        )
        lse = new
    return out


@attempt("10.1", "no-rescale")
def online_no_rescale(q, keys, values, block_size):
    m = torch.tensor(-math.inf, dtype=q.dtype)
    total, acc = 0.0, torch.zeros(values.shape[1], dtype=q.dtype)
    for i in range(0, len(keys), block_size):
        s = keys[i : i + block_size] @ q / math.sqrt(len(q))
        m = torch.maximum(m, s.max())
        p = torch.exp(s - m)
        total = total + p.sum()
        acc = acc + p @ values[i : i + block_size]
    return acc / total


@attempt("10.1", "max-starts-at-zero")
def online_m0(q, keys, values, block_size):
    m = torch.zeros((), dtype=q.dtype)
    s_ = torch.zeros((), dtype=q.dtype)
    out = torch.zeros(values.shape[-1], dtype=q.dtype)
    for i in range(0, len(keys), block_size):
        s = keys[i : i + block_size] @ q / math.sqrt(q.shape[0])
        m_new = torch.maximum(m, s.max())
        p, r = torch.exp(s - m_new), torch.exp(m - m_new)
        s_ = r * s_ + p.sum()
        out = r * out + p @ values[i : i + block_size]
        m = m_new
    return out / s_


@attempt("10.1", "last-block-dropped")
def online_drop_last(q, keys, values, block_size):
    m = torch.tensor(-math.inf, dtype=q.dtype)
    s_ = torch.zeros((), dtype=q.dtype)
    out = torch.zeros(values.shape[-1], dtype=q.dtype)
    for b in range(len(keys) // block_size):
        k, v = (
            keys[b * block_size : (b + 1) * block_size],
            values[b * block_size : (b + 1) * block_size],
        )
        s = k @ q / math.sqrt(q.shape[0])
        m_new = torch.maximum(m, s.max())
        p, r = torch.exp(s - m_new), torch.exp(m - m_new)
        s_ = r * s_ + p.sum()
        out = r * out + p @ v
        m = m_new
    return out / s_


@attempt("10.1", "all-keys-at-once")
def online_one_softmax(q, keys, values, block_size):
    return torch.softmax(keys @ q / math.sqrt(q.shape[0]), 0) @ values


@attempt("10.2", right=True)
def merge_max_shift(out1, lse1, out2, lse2):
    m = torch.maximum(lse1, lse2)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    w1, w2 = torch.exp(lse1 - m), torch.exp(lse2 - m)
    total = w1 + w2
    out = (w1[:, None] * out1 + w2[:, None] * out2) / total.clamp_min(1e-300)[:, None]
    return out, m + torch.log(total)


@attempt("10.2", right=True)
def merge_chapter_v2(out1, lse1, out2, lse2):  # the chapter's, asked of the lead
    lse = torch.logaddexp(lse1, lse2)  # log(exp(lse1) + exp(lse2)), without overflow
    # a query that saw no key in either chunk (lse = -inf): weights 0, output 0
    safe = lse.masked_fill(lse == float("-inf"), 0.0)
    w1 = torch.exp(lse1 - safe)[:, None]  # each chunk's share of the total
    w2 = torch.exp(lse2 - safe)[:, None]
    return w1 * out1 + w2 * out2, lse


@attempt("10.2", "nan-when-no-key")
def merge_chapter_v1(out1, lse1, out2, lse2):
    lse = torch.logaddexp(lse1, lse2)
    w1 = torch.exp(lse1 - lse)[:, None]
    w2 = torch.exp(lse2 - lse)[:, None]
    return w1 * out1 + w2 * out2, lse


@attempt("10.2", "naive-exp")
def merge_naive(out1, lse1, out2, lse2):
    e1, e2 = lse1.exp(), lse2.exp()
    out = (e1[:, None] * out1 + e2[:, None] * out2) / (e1 + e2)[:, None]
    return out, torch.log(e1 + e2)


@attempt("10.2", "weights-swapped")
def merge_swapped(out1, lse1, out2, lse2):
    lse = torch.logaddexp(lse1, lse2)
    safe = torch.where(torch.isinf(lse), 0.0, lse)
    w1, w2 = torch.exp(lse1 - safe)[:, None], torch.exp(lse2 - safe)[:, None]
    return w2 * out1 + w1 * out2, lse


@attempt("10.2", "plain-average")
def merge_mean(out1, lse1, out2, lse2):
    return (out1 + out2) / 2, torch.logaddexp(lse1, lse2)


# -- 11.1 / 11.2 ----------------------------------------------------------------------


def _hf_rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


@attempt("11.1", right=True)
def rope_transformers_float32(x, positions):
    d = x.shape[-1]
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    return x * cos + _hf_rotate_half(x) * sin


@attempt("11.1", right=True)
def rope_complex(x, positions):
    d = x.shape[-1]
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    z = torch.complex(x[..., : d // 2].double(), x[..., d // 2 :].double())
    z = z * torch.polar(torch.ones_like(omega), positions.double()[:, None] * omega)
    return torch.cat([z.real, z.imag], -1).to(x.dtype)


@attempt("11.1", "contiguous-positions")
def rope_contiguous(x, positions):
    d, T = x.shape[-1], x.shape[-2]
    pos = int(positions[0]) + torch.arange(T)
    omega = 10000.0 ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    ang = pos.to(x.dtype)[:, None] * omega
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([a * ang.cos() - b * ang.sin(), b * ang.cos() + a * ang.sin()], -1)


@attempt("11.1", "mixed-layout")
def rope_mixed(x, positions):
    d = x.shape[-1]
    inv_freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    freqs = positions.to(x.dtype)[:, None] * inv_freq
    emb = freqs.repeat_interleave(2, dim=-1)
    return x * emb.cos() + _hf_rotate_half(x) * emb.sin()


@attempt("11.1", "positions-ignored")
def rope_arange(x, positions):
    d, T = x.shape[-1], x.shape[-2]
    inv_freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    emb = torch.arange(T, dtype=x.dtype)[:, None] * inv_freq
    emb = torch.cat([emb, emb], -1)
    return x * emb.cos() + _hf_rotate_half(x) * emb.sin()


@attempt("11.1", "wrong-direction")
def rope_backwards(x, positions):
    d = x.shape[-1]
    inv_freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    emb = positions.to(x.dtype)[:, None] * inv_freq
    emb = torch.cat([emb, emb], -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * emb.cos() + torch.cat((x2, -x1), -1) * emb.sin()


@attempt("11.2", right=True)
def rope_interleaved_complex(x, positions):
    d = x.shape[-1]
    freqs = 1.0 / (10000 ** (torch.arange(0, d, 2)[: d // 2].double() / d))
    cis = torch.polar(
        torch.ones(len(positions), d // 2, dtype=torch.float64),
        positions.double()[:, None] * freqs,
    )
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(z * cis).flatten(-2).to(x.dtype)


@attempt("11.2", "half-order-output")
def rope_interleaved_half_order(x, positions):
    d = x.shape[-1]
    omega = 10000.0 ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    ang = positions.to(x.dtype)[:, None] * omega
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.cat([a * ang.cos() - b * ang.sin(), b * ang.cos() + a * ang.sin()], -1)


@attempt("11.2", "other-layout")
def rope_interleaved_as_half(x, positions):
    return rope_transformers_float32(x, positions)


# -- 12.1 -----------------------------------------------------------------------------


@attempt("12.1", right=True)
def mla_einsum(q_nope, latent, W_uk, W_uv):
    ql = torch.einsum("bhqd,hdr->bhqr", q_nope, W_uk)
    s = torch.einsum("bhqr,btr->bhqt", ql, latent) / math.sqrt(q_nope.shape[-1])
    mixed = torch.einsum("bhqt,btr->bhqr", s.softmax(-1), latent)
    return torch.einsum("bhqr,hvr->bhqv", mixed, W_uv)


@attempt("12.1", "softmax-over-heads")
def mla_dim1(q_nope, latent, W_uk, W_uv):
    ql = torch.einsum("bhqd,hdr->bhqr", q_nope, W_uk)
    s = torch.einsum("bhqr,btr->bhqt", ql, latent) / math.sqrt(q_nope.shape[-1])
    mixed = torch.einsum("bhqt,btr->bhqr", s.softmax(1), latent)
    return torch.einsum("bhqr,hvr->bhqv", mixed, W_uv)


@attempt("12.1", "scale-by-r")
def mla_sqrt_r(q_nope, latent, W_uk, W_uv):
    ql = torch.einsum("bhqd,hdr->bhqr", q_nope, W_uk)
    s = torch.einsum("bhqr,btr->bhqt", ql, latent) / math.sqrt(latent.shape[-1])
    mixed = torch.einsum("bhqt,btr->bhqr", s.softmax(-1), latent)
    return torch.einsum("bhqr,hvr->bhqv", mixed, W_uv)


@attempt("12.1", "no-scale")
def mla_no_scale(q_nope, latent, W_uk, W_uv):
    ql = torch.einsum("bhqd,hdr->bhqr", q_nope, W_uk)
    s = torch.einsum("bhqr,btr->bhqt", ql, latent)
    mixed = torch.einsum("bhqt,btr->bhqr", s.softmax(-1), latent)
    return torch.einsum("bhqr,hvr->bhqv", mixed, W_uv)


# -- 13.1 / 13.2 ----------------------------------------------------------------------


@attempt("13.1", right=True)
def linear_cumsum(queries, keys, values):
    pq, pk = F.elu(queries) + 1, F.elu(keys) + 1
    S = torch.cumsum(values[..., :, None] * pk[..., None, :], dim=-3)  # (..., T, Dv, D)
    z = torch.cumsum(pk, dim=-2)
    num = (S @ pq[..., None])[..., 0]
    return num / (z * pq).sum(-1, keepdim=True)


@attempt("13.1", "elu-without-one")
def linear_elu(queries, keys, values):
    pq, pk = F.elu(queries), F.elu(keys)
    S = torch.cumsum(values[..., :, None] * pk[..., None, :], dim=-3)
    z = torch.cumsum(pk, dim=-2)
    return (S @ pq[..., None])[..., 0] / (z * pq).sum(-1, keepdim=True)


@attempt("13.1", "non-causal")
def linear_non_causal(queries, keys, values):
    pq, pk = F.elu(queries) + 1, F.elu(keys) + 1
    S = pk.transpose(-1, -2) @ values  # (..., D, Dv): every token
    z = pk.sum(-2)
    return (pq @ S) / (pq @ z[..., None])


@attempt("13.1", "no-normaliser")
def linear_unnormalised(queries, keys, values):
    pq, pk = F.elu(queries) + 1, F.elu(keys) + 1
    S = torch.cumsum(values[..., :, None] * pk[..., None, :], dim=-3)
    return (S @ pq[..., None])[..., 0]


@attempt("13.1", "read-before-write")
def linear_read_first(queries, keys, values):
    pq, pk = F.elu(queries) + 1, F.elu(keys) + 1
    S = values.new_zeros(*values.shape[:-2], values.shape[-1], keys.shape[-1])
    z = keys.new_zeros(*keys.shape[:-2], keys.shape[-1])
    out = []
    for t in range(queries.shape[-2]):
        out.append(
            (S @ pq[..., t, :, None])[..., 0] / (z * pq[..., t, :]).sum(-1, True)
        )
        S = S + values[..., t, :, None] * pk[..., t, None, :]
        z = z + pk[..., t, :]
    return torch.stack(out, -2)


@attempt("13.2", right=True)
def delta_transition(queries, keys, values, beta, decay):
    S = queries.new_zeros(*queries.shape[:-2], values.shape[-1], keys.shape[-1])
    eye = torch.eye(keys.shape[-1], dtype=keys.dtype)
    outs = []
    for t in range(queries.shape[-2]):
        k, v = keys[..., t, :], values[..., t, :]
        S = decay * S @ (eye - beta * k[..., :, None] * k[..., None, :])
        S = S + beta * v[..., :, None] * k[..., None, :]
        outs.append(torch.einsum("...vd,...d->...v", S, queries[..., t, :]))
    return torch.stack(outs, -2), S


def _delta_learner(queries, keys, values, beta, decay, order):
    S = queries.new_zeros(*queries.shape[:-2], values.shape[-1], keys.shape[-1])
    outs = []
    for t in range(queries.shape[-2]):
        k, v, q = keys[..., t, :], values[..., t, :], queries[..., t, :]
        if order == "read-before-decay":
            old = (S @ k[..., None])[..., 0]
            S = decay * S
        elif order == "ignore-decay":
            old = (S @ k[..., None])[..., 0]
        else:
            S = decay * S
            old = (S @ k[..., None])[..., 0]
        if order == "ema":
            S = (1 - beta) * S + beta * v[..., None] * k[..., None, :]
        else:
            S = S + beta * (v - old)[..., None] * k[..., None, :]
        outs.append((S @ q[..., None])[..., 0])
    return torch.stack(outs, -2), S


@attempt("13.2", "read-before-decay")
def delta_read_before_decay(queries, keys, values, beta, decay):
    return _delta_learner(queries, keys, values, beta, decay, "read-before-decay")


@attempt("13.2", "decay-ignored")
def delta_no_decay(queries, keys, values, beta, decay):
    return _delta_learner(queries, keys, values, beta, decay, "ignore-decay")


@attempt("13.2", "ema")
def delta_ema(queries, keys, values, beta, decay):
    return _delta_learner(queries, keys, values, beta, decay, "ema")


@attempt("13.2", "state-transposed")
def delta_transposed(queries, keys, values, beta, decay):
    out, S = _delta_learner(queries, keys, values, beta, decay, "right")
    return out, S.transpose(-1, -2)


# -- a second batch, written after the families, from the task texts alone ----------
# (its naming rate is reported apart: tests/test_exercises.py, SECOND_BATCH)

SECOND_BATCH_START = len(ATTEMPTS)


@attempt("1.1", right=True)
def b2_pooling_loop(queries, keys, values):
    rows = []
    for q in queries:
        w = torch.softmax(keys @ q, dim=0)
        rows.append(w @ values)
    return torch.stack(rows)


@attempt("1.1", "scaled")
def b2_pooling_sdpa(queries, keys, values):
    return F.scaled_dot_product_attention(queries[None], keys[None], values[None])[0]


@attempt("1.1", "no-max")
def b2_pooling_exp_loop(queries, keys, values):
    out = torch.zeros(queries.shape[0], values.shape[1], dtype=values.dtype)
    for i in range(queries.shape[0]):
        e = torch.exp(keys @ queries[i])
        out[i] = (e[:, None] * values).sum(0) / e.sum()
    return out


# right up to the constant, but 0 / 0 for a far query (exp underflows)
@attempt("2.1", "kernel-underflows")
def b2_nw_gaussian_constant(x_train, y_train, x_query, bandwidth):
    u = (x_query[:, None] - x_train) / bandwidth
    w = torch.exp(-(u**2) / 2) / math.sqrt(2 * math.pi)  # the constant cancels
    return (w * y_train).sum(1) / w.sum(1)


@attempt("2.1", "no-bandwidth")
def b2_nw_forgot_h(x_train, y_train, x_query, bandwidth):
    w = torch.softmax(-((x_query[:, None] - x_train) ** 2) / 2, dim=1)
    return w @ y_train


@attempt("3.1", right=True)
def b2_ms_loops(X, valid_lens):
    out = torch.zeros_like(X)
    B, Q, K = X.shape
    for b in range(B):
        for q in range(Q):
            n = int(valid_lens[b] if valid_lens.dim() == 1 else valid_lens[b, q])
            if n > 0:
                out[b, q, :n] = torch.softmax(X[b, q, :n], -1)
    return out


@attempt("3.1", "off-by-one")
def b2_ms_loops_off_by_one(X, valid_lens):
    out = torch.zeros_like(X)
    B, Q, K = X.shape
    for b in range(B):
        for q in range(Q):
            n = int(valid_lens[b] if valid_lens.dim() == 1 else valid_lens[b, q])
            out[b, q, : n + 1] = torch.softmax(X[b, q, : n + 1], -1)
    return out


@attempt("3.1", "fill-zero")
def b2_ms_multiply(X, valid_lens):
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = (torch.arange(X.shape[-1]) < lens[..., None]).to(X.dtype)
    return torch.softmax(X * keep, dim=-1)


@attempt("3.1", "d2l-uniform")
def b2_ms_finfo(X, valid_lens):
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(X.shape[-1]) < lens[..., None]
    return X.masked_fill(~keep, torch.finfo(X.dtype).min).softmax(-1)


@attempt("5.1", "no-mask")
def b2_sdpa_no_mask(queries, keys, values, valid_lens):
    return F.scaled_dot_product_attention(queries, keys, values)


@attempt("5.1", "mask-after-softmax")
def b2_sdpa_after(queries, keys, values, valid_lens):
    w = torch.softmax(queries @ keys.mT / math.sqrt(keys.shape[-1]), -1)
    w = w * (torch.arange(keys.shape[1]) < valid_lens[:, None, None])
    return w @ values


@attempt("5.1", "inverted-mask")
def b2_sdpa_inverted(queries, keys, values, valid_lens):
    pad = torch.arange(keys.shape[1])[None, None, :] < valid_lens[:, None, None]
    s = queries @ keys.mT / math.sqrt(keys.shape[-1])
    return torch.softmax(s.masked_fill(pad, -1e9), -1) @ values


@attempt("6.1", "sees-the-future")
def b2_causal_triu(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    keep = torch.ones(Q, K, dtype=torch.bool).triu(K - Q)
    s = queries @ keys.mT / math.sqrt(queries.shape[-1])
    return torch.softmax(s.masked_fill(~keep, -torch.inf), -1) @ values


@attempt("6.1", "diagonal-offset-sign")
def b2_causal_sign(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    keep = torch.ones(Q, K, dtype=torch.bool).tril(Q - K)
    s = queries @ keys.mT / math.sqrt(queries.shape[-1])
    return torch.softmax(s.masked_fill(~keep, -torch.inf), -1).nan_to_num(0) @ values


@attempt("6.1", "fill-zero")
def b2_causal_zero(queries, keys, values):
    Q, K = queries.shape[1], keys.shape[1]
    keep = torch.ones(Q, K).tril(K - Q)
    s = queries @ keys.mT / math.sqrt(queries.shape[-1]) * keep
    return torch.softmax(s, -1) @ values


@attempt("7.1", "no-transpose")
def b2_split_no_transpose(X, num_heads):
    return X.unflatten(-1, (num_heads, -1))


@attempt("7.2", "interleaved")
def b2_merge_wrong_permute(X):
    B, H, n, d = X.shape
    return X.permute(0, 2, 3, 1).reshape(B, n, H * d)


@attempt("8.1", "shared-query")
def b2_gqa_mean_query(queries, keys, values):
    B, H, Q, d = queries.shape
    Hkv = keys.shape[1]
    q = queries.reshape(B, Hkv, H // Hkv, Q, d).mean(2)
    out = F.scaled_dot_product_attention(q, keys, values)
    return out.repeat_interleave(H // Hkv, dim=1)


@attempt("8.1", "softmax-over-queries")
def b2_gqa_dim(queries, keys, values):
    n = queries.shape[1] // keys.shape[1]
    k, v = keys.repeat_interleave(n, 1), values.repeat_interleave(n, 1)
    s = queries @ k.mT / math.sqrt(queries.shape[-1])
    return torch.softmax(s, dim=-2) @ v


@attempt("8.2", "prepended")
def b2_decode_prepend(q_new, k_new, v_new, cache_k, cache_v):
    keys, values = torch.cat([k_new, cache_k], 2), torch.cat([v_new, cache_v], 2)
    out = F.scaled_dot_product_attention(q_new, keys, values, enable_gqa=True)
    return out, keys, values


@attempt("8.2", "expanded-cache")
def b2_decode_expand_first(q_new, k_new, v_new, cache_k, cache_v):
    n = q_new.shape[1] // k_new.shape[1]
    keys = torch.cat([cache_k, k_new], 2).repeat_interleave(n, 1)
    values = torch.cat([cache_v, v_new], 2).repeat_interleave(n, 1)
    return F.scaled_dot_product_attention(q_new, keys, values), keys, values


@attempt("8.2", "cache-not-returned")
def b2_decode_old_cache(q_new, k_new, v_new, cache_k, cache_v):
    keys, values = torch.cat([cache_k, k_new], 2), torch.cat([cache_v, v_new], 2)
    out = F.scaled_dot_product_attention(q_new, keys, values, enable_gqa=True)
    return out, cache_k, cache_v


@attempt("9.1", "ignored-counted-right")
def b2_mqar_ignored_right(logits, targets):
    pred = logits.argmax(-1)
    ok = (pred == targets) | (targets == al.MQAR_IGNORE)
    return ok.float().mean().item()


@attempt("9.1", "shifted")
def b2_mqar_shift(logits, targets):
    pred = logits[:, :-1].argmax(-1)
    t = targets[:, 1:]
    asked = t != al.MQAR_IGNORE
    return ((pred == t) & asked).sum().item() / asked.sum().item()


@attempt("10.1", "sum-not-rescaled")
def b2_online_sum(q, keys, values, block_size):
    m, l = -math.inf, 0.0
    acc = torch.zeros(values.shape[1], dtype=values.dtype)
    for i in range(0, keys.shape[0], block_size):
        s = keys[i : i + block_size] @ q / math.sqrt(q.shape[0])
        m_new = max(m, s.max().item())
        p = torch.exp(s - m_new)
        acc = acc * math.exp(m - m_new) + p @ values[i : i + block_size]
        l = l + p.sum().item()
        m = m_new
    return acc / l


@attempt("10.1", "not-divided")
def b2_online_no_divide(q, keys, values, block_size):
    m = -math.inf
    l, acc = 0.0, torch.zeros(values.shape[1], dtype=values.dtype)
    for i in range(0, keys.shape[0], block_size):
        s = keys[i : i + block_size] @ q / math.sqrt(q.shape[0])
        m_new = max(m, s.max().item())
        p = torch.exp(s - m_new)
        acc = acc * math.exp(m - m_new) + p @ values[i : i + block_size]
        l = l * math.exp(m - m_new) + p.sum().item()
        m = m_new
    return acc


@attempt("10.1", "no-scale")
def b2_online_no_scale(q, keys, values, block_size):
    m = -math.inf
    l, acc = 0.0, torch.zeros(values.shape[1], dtype=values.dtype)
    for i in range(0, keys.shape[0], block_size):
        s = keys[i : i + block_size] @ q
        m_new = max(m, s.max().item())
        p = torch.exp(s - m_new)
        acc = acc * math.exp(m - m_new) + p @ values[i : i + block_size]
        l = l * math.exp(m - m_new) + p.sum().item()
        m = m_new
    return acc / l


@attempt("10.2", "lse-max")
def b2_merge_lse_max(out1, lse1, out2, lse2):
    m = torch.maximum(lse1, lse2)
    lse = torch.logaddexp(lse1, lse2)
    safe = torch.where(torch.isinf(lse), 0.0, lse)
    out = (
        torch.exp(lse1 - safe)[:, None] * out1 + torch.exp(lse2 - safe)[:, None] * out2
    )
    return out, m


@attempt("10.2", "no-normaliser")
def b2_merge_raw(out1, lse1, out2, lse2):
    out = lse1.exp()[:, None] * out1 + lse2.exp()[:, None] * out2
    return out, torch.logaddexp(lse1, lse2)


@attempt("11.1", "positions-from-one")
def b2_rope_plus_one(x, positions):
    d = x.shape[-1]
    omega = 10000.0 ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    ang = (positions + 1).to(x.dtype)[:, None] * omega
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()], -1)


@attempt("11.1", "frequency-exponent")
def b2_rope_exponent(x, positions):
    d = x.shape[-1]
    omega = 10000.0 ** (-torch.arange(d // 2, dtype=x.dtype) / d)
    ang = positions.to(x.dtype)[:, None] * omega
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()], -1)


@attempt("11.2", "mixed-layout")
def b2_rope_interleaved_cat_angles(x, positions):
    d = x.shape[-1]
    omega = 10000.0 ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    ang = positions.to(x.dtype)[:, None] * omega
    ang = torch.cat([ang, ang], -1)
    rot = torch.stack([-x[..., 1::2], x[..., 0::2]], -1).flatten(-2)
    return x * ang.cos() + rot * ang.sin()


@attempt("11.2", "positions-ignored")
def b2_rope_interleaved_arange(x, positions):
    d, T = x.shape[-1], x.shape[-2]
    omega = 10000.0 ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    ang = torch.arange(T, dtype=x.dtype)[:, None] * omega
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack(
        [a * ang.cos() - b * ang.sin(), b * ang.cos() + a * ang.sin()], -1
    ).flatten(-2)


@attempt("12.1", "no-value-up-projection")
def b2_mla_no_up(q_nope, latent, W_uk, W_uv):
    ql = q_nope @ W_uk
    s = ql @ latent[:, None].mT / math.sqrt(q_nope.shape[-1])
    return torch.softmax(s, -1) @ latent[:, None]


@attempt("12.1", "value-projection-in-query")
def b2_mla_wuv_query(q_nope, latent, W_uk, W_uv):
    ql = q_nope @ W_uv
    s = ql @ latent[:, None].mT / math.sqrt(q_nope.shape[-1])
    return torch.softmax(s, -1) @ latent[:, None] @ W_uv.mT


@attempt("13.1", "no-feature-map")
def b2_linear_identity(queries, keys, values):
    S = torch.cumsum(values[..., :, None] * keys[..., None, :], dim=-3)
    z = torch.cumsum(keys, dim=-2)
    return (S @ queries[..., None])[..., 0] / (z * queries).sum(-1, keepdim=True)


@attempt("13.1", "normaliser-late")
def b2_linear_z_late(queries, keys, values):
    pq, pk = F.elu(queries) + 1, F.elu(keys) + 1
    S = queries.new_zeros(*queries.shape[:-2], values.shape[-1], keys.shape[-1])
    z = queries.new_zeros(*queries.shape[:-2], keys.shape[-1])
    out = []
    for t in range(queries.shape[-2]):
        S = S + values[..., t, :, None] * pk[..., t, None, :]
        out.append(
            (S @ pq[..., t, :, None])[..., 0] / (z * pq[..., t, :]).sum(-1, True)
        )
        z = z + pk[..., t, :]
    return torch.stack(out, -2)


@attempt("13.2", "additive")
def b2_delta_additive(queries, keys, values, beta, decay):
    S = queries.new_zeros(*queries.shape[:-2], values.shape[-1], keys.shape[-1])
    outs = []
    for t in range(queries.shape[-2]):
        S = decay * S + beta * values[..., t, :, None] * keys[..., t, None, :]
        outs.append((S @ queries[..., t, :, None])[..., 0])
    return torch.stack(outs, -2), S


@attempt("13.2", "decay-after-write")
def b2_delta_decay_last(queries, keys, values, beta, decay):
    S = queries.new_zeros(*queries.shape[:-2], values.shape[-1], keys.shape[-1])
    outs = []
    for t in range(queries.shape[-2]):
        k, v = keys[..., t, :], values[..., t, :]
        S = S + beta * (v - (S @ k[..., None])[..., 0])[..., None] * k[..., None, :]
        S = decay * S
        outs.append((S @ queries[..., t, :, None])[..., 0])
    return torch.stack(outs, -2), S


@attempt("13.2", "read-before-write")
def b2_delta_output_first(queries, keys, values, beta, decay):
    S = queries.new_zeros(*queries.shape[:-2], values.shape[-1], keys.shape[-1])
    outs = []
    for t in range(queries.shape[-2]):
        k, v = keys[..., t, :], values[..., t, :]
        outs.append((S @ queries[..., t, :, None])[..., 0])
        S = decay * S
        S = S + beta * (v - (S @ k[..., None])[..., 0])[..., None] * k[..., None, :]
    return torch.stack(outs, -2), S


# two slips at once: no single listed mistake matches; none may be named


@attempt("10.2", "plain-average-and-lse-max")
def b2_merge_average_and_max(out1, lse1, out2, lse2):
    return (out1 + out2) / 2, torch.maximum(lse1, lse2)


@attempt("5.1")
def b2_sdpa_no_scale_fill_zero(queries, keys, values, valid_lens):
    keep = torch.arange(keys.shape[1]) < valid_lens[:, None, None]
    return torch.softmax((queries @ keys.mT) * keep, -1) @ values


@attempt("13.1")
def b2_linear_relu_eps(queries, keys, values):
    pq, pk = F.relu(queries) + 1e-6, F.relu(keys) + 1e-6
    S = torch.cumsum(values[..., :, None] * pk[..., None, :], dim=-3)
    z = torch.cumsum(pk, dim=-2)
    return (S @ pq[..., None])[..., 0] / (z * pq).sum(-1, keepdim=True)


@attempt("10.1", right=True)
def b2_online_from_keys(q, keys, values, block_size):
    m = keys.new_full((), float("-inf"))
    total = torch.zeros_like(m)
    acc = values.new_zeros(values.shape[-1])
    for start in range(0, len(keys), block_size):
        block = keys[start : start + block_size]
        s = block @ q / math.sqrt(keys.size(-1))
        m_new = torch.maximum(m, s.amax())
        scale = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        total = total * scale + p.sum()
        acc = acc * scale + p @ values[start : start + block_size]
        m = m_new
    return acc / total


@attempt("10.1", right=True)
def b2_online_transposed_keys(q, keys, values, block_size):
    kt = keys.T.contiguous()  # (D, K)
    m, total = -math.inf, 0.0
    acc = torch.zeros(values.shape[-1], dtype=values.dtype)
    for start in range(0, kt.shape[1], block_size):
        s = q @ kt[:, start : start + block_size] / math.sqrt(q.shape[0])
        m_new = max(m, float(s.max()))
        p = torch.exp(s - m_new)
        acc = acc * math.exp(m - m_new) + p @ values[start : start + block_size]
        total = total * math.exp(m - m_new) + float(p.sum())
        m = m_new
    return acc / total


@attempt("11.1", right=True)
def b2_rope_float64_angles(x, positions):  # float64 out for float32 in: more precise
    d = x.shape[-1]
    omega = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    angle = positions[:, None] * omega
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat(
        [a * angle.cos() - b * angle.sin(), b * angle.cos() + a * angle.sin()], -1
    )
