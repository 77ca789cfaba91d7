import math
import torch

def _c1(q_nope, latent, W_uk, W_uv):
    # absorb W_uk into the query, attend over latents, apply W_uv at the end
    dn = q_nope.shape[-1]
    q_lat = torch.einsum("bhqn,hnr->bhqr", q_nope, W_uk)
    s = torch.einsum("bhqr,btr->bhqt", q_lat, latent) / math.sqrt(dn)
    ctx = torch.einsum("bhqt,btr->bhqr", torch.softmax(s, -1), latent)
    return torch.einsum("bhqr,hvr->bhqv", ctx, W_uv)

def _c2(q_nope, latent, W_uk, W_uv):
    # matmuls, one head at a time
    B, H, _, dn = q_nope.shape
    outs = []
    for h in range(H):
        ql = q_nope[:, h] @ W_uk[h]                        # (B, 1, r)
        s = ql @ latent.transpose(1, 2) * dn ** -0.5       # (B, 1, T)
        ctx = torch.softmax(s, dim=-1) @ latent            # (B, 1, r)
        outs.append(ctx @ W_uv[h].T)                       # (B, 1, dv)
    return torch.stack(outs, dim=1)

def _core(q_nope, latent, W_uk, W_uv, scale, dim=-1):
    q_lat = q_nope @ W_uk[None]                            # (B, H, 1, r)
    s = q_lat @ latent[:, None].transpose(-1, -2) * scale
    return torch.softmax(s, dim) @ latent[:, None] @ W_uv.transpose(-1, -2)[None]

def _w_scale_r(q_nope, latent, W_uk, W_uv):
    return _core(q_nope, latent, W_uk, W_uv, 1 / math.sqrt(latent.shape[-1]))

def _w_no_scale(q_nope, latent, W_uk, W_uv):
    return _core(q_nope, latent, W_uk, W_uv, 1.0)

def _w_scale_dv(q_nope, latent, W_uk, W_uv):
    return _core(q_nope, latent, W_uk, W_uv, 1 / math.sqrt(W_uv.shape[1]))

def _w_softmax_heads(q_nope, latent, W_uk, W_uv):
    return _core(q_nope, latent, W_uk, W_uv, 1 / math.sqrt(q_nope.shape[-1]), dim=1)

def _w_einsum_drops_h(q_nope, latent, W_uk, W_uv):
    dn = q_nope.shape[-1]
    q_lat = torch.einsum("bhqn,hnr->bqr", q_nope, W_uk)   # h summed away
    s = torch.einsum("bqr,btr->bqt", q_lat, latent) / math.sqrt(dn)
    ctx = torch.softmax(s, -1) @ latent                  # (B, 1, r)
    return torch.einsum("bqr,hvr->bhqv", ctx, W_uv)

def _w_scale_after_softmax(q_nope, latent, W_uk, W_uv):
    q_lat = q_nope @ W_uk[None]
    s = q_lat @ latent[:, None].transpose(-1, -2)
    w = torch.softmax(s, -1) / math.sqrt(q_nope.shape[-1])
    return w @ latent[:, None] @ W_uv.transpose(-1, -2)[None]

SOLUTIONS = [
    dict(name="einsum_absorbed", correct=True, mistake="", family="", fn=_c1),
    dict(name="per_head_matmul_loop", correct=True, mistake="", family="", fn=_c2),
    dict(name="scale_sqrt_r", correct=False, mistake="Scales the scores by 1/sqrt(r), the latent width the dot product is taken in, instead of 1/sqrt(d_n).", family="wrong-scale", fn=_w_scale_r),
    dict(name="no_scale", correct=False, mistake="Forgets the 1/sqrt(d_n) scale.", family="missing-scale", fn=_w_no_scale),
    dict(name="scale_sqrt_dv", correct=False, mistake="Scales by 1/sqrt(d_v) instead of 1/sqrt(d_n).", family="wrong-scale", fn=_w_scale_dv),
    dict(name="softmax_over_heads", correct=False, mistake="Takes the softmax over dim=1 (the heads) instead of over the cached tokens.", family="wrong-axis", fn=_w_softmax_heads),
    dict(name="einsum_sums_heads", correct=False, mistake="Leaves h out of the einsum's output when absorbing W_uk, summing the heads' queries into one.", family="einsum-index", fn=_w_einsum_drops_h),
    dict(name="scale_after_softmax", correct=False, mistake="Divides the softmax weights by sqrt(d_n) instead of the scores before the softmax.", family="wrong-scale", fn=_w_scale_after_softmax),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'scale_sqrt_r': {'scale-by-r'},
    'no_scale': {'no-scale'},
    'scale_sqrt_dv': {'scale-by-value-width'},
    'softmax_over_heads': {'softmax-over-heads'},
    'einsum_sums_heads': set(),
    'scale_after_softmax': set(),
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
