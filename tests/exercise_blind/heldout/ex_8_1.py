import math
import torch

def _c1(queries, keys, values):
    B, H, Q, d = queries.shape
    Hkv = keys.shape[1]
    g = H // Hkv
    q = queries.reshape(B, Hkv, g, Q, d)
    s = q @ keys[:, :, None].transpose(-1, -2) / math.sqrt(d)   # (B, Hkv, g, Q, K)
    out = torch.softmax(s, -1) @ values[:, :, None]
    return out.reshape(B, H, Q, d)

def _c2(queries, keys, values):
    # loop over query heads, pick the kv head by index
    B, H, Q, d = queries.shape
    Hkv = keys.shape[1]
    outs = []
    for h in range(H):
        j = h // (H // Hkv)
        s = queries[:, h] @ keys[:, j].transpose(-1, -2) * d ** -0.5
        outs.append(torch.softmax(s, -1) @ values[:, j])
    return torch.stack(outs, dim=1)

def _sdpa(q, k, v):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(s, -1) @ v

def _w_repeat(queries, keys, values):
    r = queries.shape[1] // keys.shape[1]
    return _sdpa(queries, keys.repeat(1, r, 1, 1), values.repeat(1, r, 1, 1))

def _w_modulo(queries, keys, values):
    B, H, Q, d = queries.shape
    Hkv = keys.shape[1]
    idx = torch.arange(H) % Hkv
    return _sdpa(queries, keys[:, idx], values[:, idx])

def _w_expand_wrong(queries, keys, values):
    B, H, Q, d = queries.shape
    Hkv, K = keys.shape[1], keys.shape[2]
    g = H // Hkv
    k = keys[:, None].expand(B, g, Hkv, K, d).reshape(B, H, K, d)
    v = values[:, None].expand(B, g, Hkv, K, d).reshape(B, H, K, d)
    return _sdpa(queries, k, v)

def _w_no_scale(queries, keys, values):
    r = queries.shape[1] // keys.shape[1]
    k = keys.repeat_interleave(r, dim=1)
    v = values.repeat_interleave(r, dim=1)
    return torch.softmax(queries @ k.transpose(-1, -2), -1) @ v

def _w_interleave_wrong_dim(queries, keys, values):
    r = queries.shape[1] // keys.shape[1]
    k = keys.repeat_interleave(r, dim=1)
    v = values.repeat_interleave(r, dim=1)
    s = queries @ k.transpose(-1, -2) / math.sqrt(queries.shape[-1])
    return torch.softmax(s, dim=-2) @ v

def _w_mean_queries(queries, keys, values):
    # averages the query heads of a group, then broadcasts back
    B, H, Q, d = queries.shape
    Hkv = keys.shape[1]
    q = queries.reshape(B, Hkv, H // Hkv, Q, d).mean(2)
    out = _sdpa(q, keys, values)
    return out.repeat_interleave(H // Hkv, dim=1)

SOLUTIONS = [
    dict(name="group_reshape_broadcast", correct=True, mistake="", family="", fn=_c1),
    dict(name="loop_over_heads", correct=True, mistake="", family="", fn=_c2),
    dict(name="repeat_not_interleave", correct=False, mistake="Uses .repeat on the head axis, which tiles the kv heads (0,1,0,1) instead of repeating each in a row (0,0,1,1).", family="repeat-vs-repeat_interleave", fn=_w_repeat),
    dict(name="head_modulo", correct=False, mistake="Maps query head h to kv head h % Hkv instead of h // (H / Hkv).", family="repeat-vs-repeat_interleave", fn=_w_modulo),
    dict(name="expand_group_first", correct=False, mistake="Expands with the group axis before the kv-head axis, which again tiles the kv heads instead of grouping them.", family="repeat-vs-repeat_interleave", fn=_w_expand_wrong),
    dict(name="no_scale", correct=False, mistake="Forgets the 1/sqrt(d) scale on the scores.", family="missing-scale", fn=_w_no_scale),
    dict(name="softmax_over_queries", correct=False, mistake="Takes the softmax over dim=-2 (the queries) instead of the keys.", family="wrong-axis", fn=_w_interleave_wrong_dim),
    dict(name="average_group_queries", correct=False, mistake="Averages the query heads within a group, so every head in the group gets the same output.", family="wrong-formula", fn=_w_mean_queries),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'repeat_not_interleave': {'repeat-not-interleave'},
    'head_modulo': {'repeat-not-interleave'},
    'expand_group_first': {'repeat-not-interleave'},
    'no_scale': {'no-scale'},
    'softmax_over_queries': {'softmax-over-queries'},
    'average_group_queries': {'shared-query'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
