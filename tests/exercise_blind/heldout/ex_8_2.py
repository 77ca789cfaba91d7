import math
import torch

def _c1(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat([cache_k, k_new], dim=2)
    vals = torch.cat([cache_v, v_new], dim=2)
    g = q_new.shape[1] // keys.shape[1]
    k = keys.repeat_interleave(g, dim=1)
    v = vals.repeat_interleave(g, dim=1)
    out = torch.nn.functional.scaled_dot_product_attention(q_new, k, v)
    return out, keys, vals

def _c2(q_new, k_new, v_new, cache_k, cache_v):
    # preallocate, copy, then grouped einsum
    B, Hkv, T, d = cache_k.shape
    keys = cache_k.new_empty(B, Hkv, T + 1, d)
    vals = cache_v.new_empty(B, Hkv, T + 1, cache_v.shape[-1])
    keys[:, :, :T] = cache_k; keys[:, :, T:] = k_new
    vals[:, :, :T] = cache_v; vals[:, :, T:] = v_new
    H = q_new.shape[1]
    q = q_new.reshape(B, Hkv, H // Hkv, d)
    s = torch.einsum("bgrd,bgtd->bgrt", q, keys) / math.sqrt(d)
    o = torch.einsum("bgrt,bgtd->bgrd", torch.softmax(s, -1), vals)
    return o.reshape(B, H, 1, -1), keys, vals

def _attend(q, keys, vals, scale=True, interleave=True):
    g = q.shape[1] // keys.shape[1]
    if interleave:
        k, v = keys.repeat_interleave(g, 1), vals.repeat_interleave(g, 1)
    else:
        k, v = keys.repeat(1, g, 1, 1), vals.repeat(1, g, 1, 1)
    s = q @ k.transpose(-1, -2)
    if scale:
        s = s / math.sqrt(q.shape[-1])
    return torch.softmax(s, -1) @ v

def _w_read_before_append(q_new, k_new, v_new, cache_k, cache_v):
    out = _attend(q_new, cache_k, cache_v) if cache_k.shape[2] > 0 else torch.zeros_like(q_new)
    return out, torch.cat([cache_k, k_new], 2), torch.cat([cache_v, v_new], 2)

def _w_prepend(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat([k_new, cache_k], dim=2)
    vals = torch.cat([v_new, cache_v], dim=2)
    return _attend(q_new, keys, vals), keys, vals

def _w_repeat(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat([cache_k, k_new], 2)
    vals = torch.cat([cache_v, v_new], 2)
    return _attend(q_new, keys, vals, interleave=False), keys, vals

def _w_cat_wrong_axis(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat([cache_k, k_new], dim=2)
    vals = torch.cat([cache_v, v_new], dim=2)
    g = q_new.shape[1] // keys.shape[1]
    k, v = keys.repeat_interleave(g, 1), vals.repeat_interleave(g, 1)
    s = q_new @ k.transpose(-1, -2) / math.sqrt(q_new.shape[-1])   # (B, H, 1, T + 1)
    return torch.softmax(s, dim=-2) @ v, keys, vals

def _w_no_scale(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat([cache_k, k_new], 2)
    vals = torch.cat([cache_v, v_new], 2)
    return _attend(q_new, keys, vals, scale=False), keys, vals

def _w_keys_for_values(q_new, k_new, v_new, cache_k, cache_v):
    keys = torch.cat([cache_k, k_new], 2)
    vals = torch.cat([cache_v, v_new], 2)
    return _attend(q_new, keys, vals), keys, torch.cat([cache_v, k_new], 2)

SOLUTIONS = [
    dict(name="cat_then_F_sdpa", correct=True, mistake="", family="", fn=_c1),
    dict(name="prealloc_grouped_einsum", correct=True, mistake="", family="", fn=_c2),
    dict(name="read_before_append", correct=False, mistake="Attends over the old cache before appending the new key and value, so the token never sees itself.", family="read-before-update", fn=_w_read_before_append),
    dict(name="prepend_new", correct=False, mistake="Puts the new token at the front of the cache instead of appending it at the end.", family="wrong-order", fn=_w_prepend),
    dict(name="repeat_not_interleave", correct=False, mistake="Expands the kv heads with .repeat (tiling) instead of repeat_interleave, pairing query heads with the wrong kv head.", family="repeat-vs-repeat_interleave", fn=_w_repeat),
    dict(name="softmax_dim_minus2", correct=False, mistake="Takes the softmax over dim=-2, the single query, so every weight is 1 and the output is the sum of the values.", family="wrong-axis", fn=_w_cat_wrong_axis),
    dict(name="no_scale", correct=False, mistake="Forgets to scale the scores by 1/sqrt(d).", family="missing-scale", fn=_w_no_scale),
    dict(name="appends_key_to_values", correct=False, mistake="Copy-paste slip: appends k_new (not v_new) to the returned value cache.", family="copy-paste", fn=_w_keys_for_values),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'read_before_append': {'attend-before-append'},
    'prepend_new': {'prepended'},
    'repeat_not_interleave': {'repeat-not-interleave'},
    'softmax_dim_minus2': {'softmax-over-queries'},
    'no_scale': {'no-scale'},
    'appends_key_to_values': set(),
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
