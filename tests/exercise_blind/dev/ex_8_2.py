"""Exercise 8.2: decode_step(q_new (B,H,1,d), k_new, v_new (B,Hkv,1,d), cache_k, cache_v (B,Hkv,T,d))
-> (out (B,H,1,d), keys (B,Hkv,T+1,d), values (B,Hkv,T+1,d))."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def decode_cat_then_attend(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat([cache_k, k_new], dim=2)
    values = torch.cat([cache_v, v_new], dim=2)
    g = q_new.shape[1] // keys.shape[1]
    k = keys.repeat_interleave(g, dim=1)
    v = values.repeat_interleave(g, dim=1)
    scores = q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    out = torch.softmax(scores, dim=-1) @ v
    return out, keys, values


def decode_per_head_loop(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat((cache_k, k_new), dim=-2)
    values = torch.cat((cache_v, v_new), dim=-2)
    B, H, _, d = q_new.shape
    Hkv = keys.shape[1]
    outs = []
    for h in range(H):
        kv = h // (H // Hkv)
        s = torch.einsum("bd,btd->bt", q_new[:, h, 0], keys[:, kv]) / d**0.5
        w = torch.softmax(s, dim=-1)
        outs.append(torch.einsum("bt,btd->bd", w, values[:, kv]))
    out = torch.stack(outs, dim=1).unsqueeze(2)  # (B, H, 1, d)
    return out, keys, values


# ---------- wrong ----------
def _attend(q, keys, values, scale=True):
    g = q.shape[1] // keys.shape[1]
    k = keys.repeat_interleave(g, dim=1)
    v = values.repeat_interleave(g, dim=1)
    s = q @ k.transpose(-2, -1)
    if scale:
        s = s / math.sqrt(q.shape[-1])
    return torch.softmax(s, dim=-1) @ v


def decode_read_before_update(q_new, k_new, v_new, cache_k, cache_v):
    out = _attend(q_new, cache_k, cache_v)  # the new token does not see itself
    keys = torch.cat([cache_k, k_new], dim=2)
    values = torch.cat([cache_v, v_new], dim=2)
    return out, keys, values


def decode_prepend(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat([k_new, cache_k], dim=2)
    values = torch.cat([v_new, cache_v], dim=2)
    return _attend(q_new, keys, values), keys, values


def decode_sdpa_is_causal(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat([cache_k, k_new], dim=2)
    values = torch.cat([cache_v, v_new], dim=2)
    g = q_new.shape[1] // keys.shape[1]
    out = torch.nn.functional.scaled_dot_product_attention(
        q_new, keys.repeat_interleave(g, 1), values.repeat_interleave(g, 1), is_causal=True
    )
    return out, keys, values


def decode_repeat(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat([cache_k, k_new], dim=2)
    values = torch.cat([cache_v, v_new], dim=2)
    g = q_new.shape[1] // keys.shape[1]
    k, v = keys.repeat(1, g, 1, 1), values.repeat(1, g, 1, 1)
    s = q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    return torch.softmax(s, dim=-1) @ v, keys, values


def decode_no_scale(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat([cache_k, k_new], dim=2)
    values = torch.cat([cache_v, v_new], dim=2)
    return _attend(q_new, keys, values, scale=False), keys, values


def decode_returns_expanded(q_new, k_new, v_new, cache_k, cache_v):
    g = q_new.shape[1] // cache_k.shape[1]
    keys = torch.cat([cache_k, k_new], dim=2).repeat_interleave(g, dim=1)
    values = torch.cat([cache_v, v_new], dim=2).repeat_interleave(g, dim=1)
    s = q_new @ keys.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    return torch.softmax(s, dim=-1) @ values, keys, values


SOLUTIONS = [
    dict(name="cat_then_attend", correct=True, mistake="", family="", fn=decode_cat_then_attend),
    dict(name="per_head_loop", correct=True, mistake="", family="", fn=decode_per_head_loop),
    dict(name="read_before_update", correct=False,
         mistake="Attends over the old cache before appending, so the new token never sees its own key and value.",
         family="read-before-update", fn=decode_read_before_update),
    dict(name="prepend", correct=False,
         mistake="Puts the new token at the front of the cache instead of appending it at the end.",
         family="prepend-not-append", fn=decode_prepend),
    dict(name="sdpa_is_causal", correct=False,
         mistake="Passes is_causal=True to SDPA, whose top-left mask lets the single new query see only the first cached key.",
         family="causal-top-left", fn=decode_sdpa_is_causal),
    dict(name="repeat", correct=False,
         mistake="Expands the kv heads with repeat instead of repeat_interleave, the wrong head grouping.",
         family="repeat-not-interleave", fn=decode_repeat),
    dict(name="no_scale", correct=False,
         mistake="Forgets the 1/sqrt(d) scale.",
         family="no-scale", fn=decode_no_scale),
    dict(name="returns_expanded", correct=False,
         mistake="Returns the cache after expanding it to H heads instead of the Hkv-head cache.",
         family="returns-expanded-cache", fn=decode_returns_expanded),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'read_before_update': {'attend-before-append'},
    'prepend': {'prepended'},
    'sdpa_is_causal': {'is-causal-over-cache'},
    'repeat': {'repeat-not-interleave'},
    'no_scale': {'no-scale'},
    'returns_expanded': {'expanded-cache'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
