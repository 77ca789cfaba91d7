"""attention_lib.linear: linear attention, its decoding state and the delta rule.

Oracles the course does not write:

* flash-linear-attention's pure-PyTorch references (the ``fla-core`` wheel,
  ``fla/ops/*/naive.py``; MIT licence). Its package imports triton, which a CPU machine
  lacks, so each reference file is loaded by its path. The chunked linear-attention
  and Based references and the chunkwise delta rule compute in the inputs' dtype
  (compared in float64); the recurrent ones cast to float32 (compared at float32's
  tolerance).
* performer-pytorch's ``softmax_kernel`` (FAVOR+ features) for ``RandomFeatureMap``.
* ``torch.nn.functional.scaled_dot_product_attention`` and :func:`nadaraya_watson` for
  "softmax attention is Nadaraya-Watson with an exponential kernel".
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import attention_lib as al

FEATURE_MAPS = {
    "elu": al.elu_feature_map,
    "taylor": al.taylor_feature_map,
    "random": al.RandomFeatureMap(
        5, 32, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    ),
}


def fla_reference(module: str):
    """``fla/ops/<module>/naive.py`` of the installed fla-core wheel, loaded by path."""
    path = importlib.metadata.distribution("fla-core").locate_file(
        f"fla/ops/{module}/naive.py"
    )
    spec = importlib.util.spec_from_file_location(f"fla_naive_{module}", path)
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    return reference


def qkv(*lead, T=37, D=5, Dv=4, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, T, D, generator=g, dtype=dtype)
    k = torch.randn(*lead, T, D, generator=g, dtype=dtype)
    v = torch.randn(*lead, T, Dv, generator=g, dtype=dtype)
    return q, k, v


def brute_force(q, k, v, phi, normalize=True, eps=0.0):
    """The definition, one query and one key at a time (float64)."""
    phi_q, phi_k = phi(q), phi(k)
    out = torch.zeros(*v.shape[:-1], v.shape[-1], dtype=v.dtype)
    for t in range(q.shape[-2]):
        w = (phi_q[..., t : t + 1, :] * phi_k[..., : t + 1, :]).sum(-1)  # (..., t+1)
        num = (w.unsqueeze(-1) * v[..., : t + 1, :]).sum(-2)
        out[..., t, :] = num / (w.sum(-1, keepdim=True) + eps) if normalize else num
    return out


# -- the three forms ------------------------------------------------------------------


@pytest.mark.parametrize("name", FEATURE_MAPS)
@pytest.mark.parametrize("chunk_size", [1, 7, 16, 37, 64])
def test_three_forms_agree_in_float64(name, chunk_size):
    phi = FEATURE_MAPS[name]
    q, k, v = qkv(2, 3)
    quadratic = al.linear_attention(q, k, v, phi)
    recurrent = al.linear_attention(q, k, v, phi, form="recurrent")
    chunked = al.linear_attention(q, k, v, phi, form="chunked", chunk_size=chunk_size)
    truth = brute_force(q, k, v, phi)
    for out in (quadratic, recurrent, chunked):
        assert out.shape == (2, 3, 37, 4)
        assert (out - truth).abs().max() <= 1e-12


@pytest.mark.parametrize("form", al.linear.FORMS)
def test_unnormalised_and_eps(form):
    q, k, v = qkv(2, T=20)
    phi = al.elu_feature_map
    for normalize, eps in ((False, 0.0), (True, 0.5)):
        out = al.linear_attention(
            q, k, v, phi, form=form, chunk_size=6, normalize=normalize, eps=eps
        )
        assert (out - brute_force(q, k, v, phi, normalize, eps)).abs().max() <= 1e-12


@pytest.mark.parametrize("form", al.linear.FORMS)
def test_valid_lens_ignore_the_padding(form):
    q, k, v = qkv(3, 2, T=12)
    lens = torch.tensor([12, 5, 0])
    out = al.linear_attention(q, k, v, form=form, chunk_size=4, valid_lens=lens)
    for b, n in enumerate(lens.tolist()):
        if n:
            alone = al.linear_attention(q[b, :, :n], k[b, :, :n], v[b, :, :n])
            assert (out[b, :, :n] - alone).abs().max() <= 1e-12
            # after the padding starts, every query reads the keys before it only
            phi_q = al.elu_feature_map(q[b, :, n:])
            phi_k = al.elu_feature_map(k[b, :, :n])
            w = phi_q @ phi_k.transpose(-1, -2)  # (H, T - n, n)
            expected = (w @ v[b, :, :n]) / w.sum(-1, keepdim=True)
            assert torch.allclose(out[b, :, n:], expected, rtol=0, atol=1e-12)
        else:
            assert (out[b] == 0).all()  # nothing to read: zeros, not NaN


def test_attention_weights_are_a_kernel_smoother():
    """With normalize=True every output is a convex combination of values seen so far:
    with values all equal to 1 it is exactly 1."""
    q, k, _ = qkv(2, T=25)
    ones = torch.ones(2, 25, 3, dtype=torch.float64)
    for phi in FEATURE_MAPS.values():
        out = al.linear_attention(q, k, ones, phi, form="chunked", chunk_size=8)
        assert (out - 1).abs().max() <= 1e-12


# -- oracles --------------------------------------------------------------------------


@pytest.mark.parametrize("normalize", [True, False])
def test_matches_fla_naive_chunk_linear_attn_float64(normalize):
    fla = fla_reference("linear_attn")
    q, k, v = qkv(2, 3, T=128, D=8, Dv=6, seed=1)
    phi_q, phi_k = al.elu_feature_map(q), al.elu_feature_map(k)
    # fla's layout is (B, T, H, D), and its normaliser has + 1e-10
    theirs = fla.naive_chunk_linear_attn(
        phi_q.transpose(1, 2),
        phi_k.transpose(1, 2),
        v.transpose(1, 2),
        scale=1.0,
        normalize=normalize,
    ).transpose(1, 2)
    ours = al.linear_attention(
        phi_q,
        phi_k,
        v,
        None,
        form="chunked",
        chunk_size=48,
        normalize=normalize,
        eps=1e-10 if normalize else 0.0,
    )
    assert theirs.dtype == torch.float64
    assert (ours - theirs).abs().max() <= 1e-12


def test_matches_fla_naive_recurrent_linear_attn_float32():
    fla = fla_reference("linear_attn")
    q, k, v = qkv(2, 3, T=40, D=8, Dv=6, seed=2)
    phi_q, phi_k = al.elu_feature_map(q), al.elu_feature_map(k)
    theirs, state = fla.naive_recurrent_linear_attn(
        phi_q.transpose(1, 2),
        phi_k.transpose(1, 2),
        v.transpose(1, 2),
        scale=1.0,
        output_final_state=True,
    )
    ours = al.LinearAttentionState(None, normalize=False)
    out = ours.step(phi_q, phi_k, v)
    # fla computes in float32 and returns the inputs' dtype
    torch.testing.assert_close(out, theirs.transpose(1, 2), rtol=1e-5, atol=1e-5)
    # fla stores S as (D, Dv); ours is (Dv, F), the transpose
    torch.testing.assert_close(ours.S.transpose(-1, -2).float(), state)


def test_taylor_features_match_fla_based_float64():
    fla = fla_reference("based")
    q, k, v = qkv(2, 3, T=50, D=6, Dv=5, seed=3)
    theirs = fla.naive_parallel_based(
        q, k, v, use_norm=True
    )  # + 1e-6 in the normaliser
    for form in al.linear.FORMS:
        ours = al.linear_attention(
            q, k, v, al.taylor_feature_map, form=form, chunk_size=9, eps=1e-6
        )
        assert (ours - theirs).abs().max() <= 1e-12


def test_taylor_kernel_is_the_series_of_exp():
    q, k, _ = qkv(3, T=10, D=7)
    s = q @ k.transpose(-1, -2) / math.sqrt(7)
    features = al.taylor_feature_map(q) @ al.taylor_feature_map(k).transpose(-1, -2)
    assert al.taylor_feature_map(q).shape[-1] == 1 + 7 + 49
    assert (features - (1 + s + s**2 / 2)).abs().max() <= 1e-12


def test_softmax_attention_is_nadaraya_watson_with_an_exponential_kernel():
    """exp(q.k / sqrt(D)) = exp(-|q' - k'|^2 / 2) exp(|q'|^2 / 2) exp(|k'|^2 / 2) with
    x' = x / D**0.25: with keys of equal norm the key factor is common to all keys,
    so softmax attention (SDPA) is Nadaraya-Watson with a Gaussian kernel of
    bandwidth 1."""
    g = torch.Generator().manual_seed(4)
    D = 6
    q = torch.randn(9, D, generator=g, dtype=torch.float64)
    k = F.normalize(torch.randn(15, D, generator=g, dtype=torch.float64), dim=-1) * 1.7
    v = torch.randn(15, 3, generator=g, dtype=torch.float64)
    softmax = F.scaled_dot_product_attention(q[None], k[None], v[None])[0]
    nw, _ = al.nadaraya_watson(k / D**0.25, v, q / D**0.25, al.gaussian, 1.0)
    assert (softmax - nw).abs().max() <= 1e-12


# -- random features ------------------------------------------------------------------


def test_random_features_match_performer_softmax_kernel():
    """Our FAVOR+ features and performer-pytorch's, with the same projection, give the
    same causal attention (performer's features differ by constant factors -- its
    overflow guards -- that the normaliser cancels)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its imports warn about deprecated torch APIs
        from performer_pytorch.performer_pytorch import softmax_kernel
    D, m = 8, 64
    features = al.RandomFeatureMap(
        D,
        m,
        orthogonal=True,
        generator=torch.Generator().manual_seed(5),
        dtype=torch.float64,
    )
    q, k, v = qkv(2, 3, T=30, D=D, Dv=4, seed=5)
    scale = D**-0.25
    ours = al.linear_attention(q * scale, k * scale, v, features)
    pq = softmax_kernel(q, projection_matrix=features.omega, is_query=True, eps=0.0)
    pk = softmax_kernel(k, projection_matrix=features.omega, is_query=False, eps=0.0)
    theirs = al.linear_attention(pq, pk, v, None)
    assert (ours - theirs).abs().max() <= 1e-12


def test_random_features_are_unbiased_and_converge_as_one_over_sqrt_m():
    g = torch.Generator().manual_seed(6)
    D = 8
    q = torch.randn(64, D, generator=g, dtype=torch.float64) / math.sqrt(D)
    k = torch.randn(64, D, generator=g, dtype=torch.float64) / math.sqrt(D)
    exact = torch.exp((q * k).sum(-1))  # (64,)
    rmse = {}
    for m in (64, 1024):
        estimates = torch.stack(
            [
                (phi(q) * phi(k)).sum(-1)
                for phi in (
                    al.RandomFeatureMap(D, m, generator=g, dtype=torch.float64)
                    for _ in range(40)
                )
            ]
        )  # (draws, pairs)
        relative = estimates / exact - 1
        draw_means = relative.mean(1)  # one number per draw of W
        bias, se = draw_means.mean(), draw_means.std() / math.sqrt(len(draw_means))
        assert abs(bias) < 4 * se  # unbiased: the mean error within 4 standard errors
        rmse[m] = relative.pow(2).mean().sqrt()
    # 16x the features: the error shrinks about 4x (1/sqrt(m)); with 40 draws the ratio
    # ranged 2.7-5.0 over seeds 0-7 of this test
    assert 2.5 < rmse[64] / rmse[1024] < 6.0


@pytest.mark.parametrize("orthogonal", [False, True])
def test_random_features_are_unbiased_for_every_pair(orthogonal):
    """E[phi(q) . phi(k)] = exp(q . k) for each pair, iid or orthogonal rows. With
    m = 4 * 4000 rows in blocks of D = 4 (independent blocks: orthogonal rows are
    dependent within one), the mean over the blocks is within 5 standard errors of
    exp(q . k) (orthogonal, 100 seeds: z-scores of mean -0.07 to 0.00 per pair, s.d.
    1.0, largest 3.6). With QR's signs left as LAPACK returns them (row i of every
    block has a negative coordinate i), q = k = [0.5, 0, 0, 0] gave 1.08 +- 0.01
    instead of exp(0.25) = 1.284, and q . k = 0 gave 0.82 +- 0.005 instead of 1."""
    D, blocks = 4, 4000
    q = torch.tensor(
        [[0.5, 0, 0, 0], [0.5, 0, 0, 0], [0, 0, 0, 0.6], [0.3, -0.4, 0.2, 0.1]],
        dtype=torch.float64,
    )
    k = torch.tensor(
        [[0.5, 0, 0, 0], [0, 0.5, 0, 0], [0, 0, 0.3, 0.3], [-0.2, 0.1, 0.5, 0.3]],
        dtype=torch.float64,
    )
    features = al.RandomFeatureMap(
        D,
        D * blocks,
        orthogonal=orthogonal,
        generator=torch.Generator().manual_seed(22),
        dtype=torch.float64,
    )
    terms = features(q) * features(k) * features.num_features  # (pairs, m)
    per_block = terms.reshape(len(q), blocks, D).mean(-1)  # (pairs, blocks)
    mean = per_block.mean(-1)
    se = per_block.std(-1) / math.sqrt(blocks)
    exact = torch.exp((q * k).sum(-1))
    assert ((mean - exact).abs() <= 5 * se).all(), (mean, se, exact)
    assert (se < 0.02 * exact).all()  # the test can see a bias of a few percent


def test_orthogonal_features_have_orthogonal_rows_in_each_block():
    features = al.RandomFeatureMap(
        4, 10, orthogonal=True, generator=torch.Generator().manual_seed(0)
    )
    omega = features.omega.double()
    assert omega.shape == (10, 4)
    for block in (omega[:4], omega[4:8], omega[8:]):
        directions = F.normalize(block, dim=-1)
        gram = directions @ directions.T
        assert (gram - torch.eye(len(block), dtype=gram.dtype)).abs().max() < 1e-6


# -- the decoding state ---------------------------------------------------------------


@pytest.mark.parametrize("name", FEATURE_MAPS)
def test_state_decodes_token_by_token_like_the_full_pass(name):
    phi = FEATURE_MAPS[name]
    q, k, v = qkv(2, 3, T=20)
    full = al.linear_attention(q, k, v, phi)
    state = al.LinearAttentionState(phi)
    prefill = state.step(q[..., :7, :], k[..., :7, :], v[..., :7, :])
    sizes = {state.nbytes}
    steps = [prefill]
    for t in range(7, 20):
        steps.append(
            state.step(q[..., t : t + 1, :], k[..., t : t + 1, :], v[..., t : t + 1, :])
        )
        sizes.add(state.nbytes)
    assert (torch.cat(steps, dim=-2) - full).abs().max() <= 1e-12
    assert len(state) == 20
    F_ = phi(q).shape[-1]
    assert sizes == {2 * 3 * (4 * F_ + F_) * 8}  # constant: S and z, float64
    assert state.nbytes == al.linear_state_bytes(
        1, 3, F_, 4, batch_size=2, bytes_per_element=8
    )


def test_state_refuses_a_mismatch_and_keeps_itself():
    q, k, v = qkv(2, 3, T=4)
    state = al.LinearAttentionState()
    state.step(q, k, v)
    S, z, n = state.S.clone(), state.z.clone(), len(state)
    bad_calls = [
        lambda: state.step(q.float(), k.float(), v.float()),  # dtype
        lambda: state.step(q[:1], k[:1], v[:1]),  # batch
        lambda: state.step(q, k, v[..., :2]),  # Dv
        lambda: state.step(q, k[..., :3, :], v),  # T of keys
        lambda: state.step(q, k, v, beta=0.5),  # beta is the delta rule's
        lambda: state.step(q, k, v, decay=1.5),  # decay outside [0, 1]
        lambda: state.step(q, k, v, decay=torch.ones(5)),  # not broadcastable
    ]
    for call in bad_calls:
        with pytest.raises(ValueError):
            call()
        assert torch.equal(state.S, S) and torch.equal(state.z, z) and len(state) == n


def test_delta_rule_matches_fla_chunkwise_float64_and_recurrent_float32():
    fla = fla_reference("delta_rule")
    q, k, v = qkv(2, 3, T=64, D=8, Dv=6, seed=7)
    k = F.normalize(k, dim=-1)  # DeltaNet's L2-normalised keys
    beta = torch.rand(
        2, 3, 64, generator=torch.Generator().manual_seed(7), dtype=torch.float64
    )
    scale = 8**-0.5  # fla scales the queries by D**-0.5
    ours, S = al.delta_rule(q * scale, k, v, beta)
    theirs, S_theirs = fla.delta_rule_chunkwise(q, k, v, beta, chunk_size=16)
    assert theirs.dtype == torch.float64
    assert (ours - theirs).abs().max() <= 1e-12
    assert (S.transpose(-1, -2) - S_theirs).abs().max() <= 1e-12
    theirs32, _ = fla.delta_rule_recurrence(
        q.float(), k.float(), v.float(), beta.float()
    )
    torch.testing.assert_close(ours.float(), theirs32, rtol=1e-4, atol=1e-5)


def test_gated_delta_rule_matches_fla_float32():
    fla = fla_reference("gated_delta_rule")
    q, k, v = qkv(2, 3, T=30, D=8, Dv=6, seed=8)
    k = F.normalize(k, dim=-1)
    g = torch.Generator().manual_seed(8)
    beta = torch.rand(2, 3, 30, generator=g, dtype=torch.float64)
    decay = 0.8 + 0.2 * torch.rand(2, 3, 30, generator=g, dtype=torch.float64)
    ours, S = al.delta_rule(q * 8**-0.5, k, v, beta, decay=decay)
    # fla's layout is (B, T, H, D) and its gate is g = log(decay)
    theirs, S_theirs = fla.naive_recurrent_gated_delta_rule(
        *(x.transpose(1, 2).float() for x in (q, k, v, beta, decay.log())),
        output_final_state=True,
    )
    torch.testing.assert_close(
        ours.float(), theirs.transpose(1, 2), rtol=1e-4, atol=1e-5
    )
    torch.testing.assert_close(
        S.transpose(-1, -2).float(), S_theirs, rtol=1e-4, atol=1e-5
    )


# -- the chunkwise delta rule --------------------------------------------------------


def delta_inputs(*lead, T=37, D=5, Dv=4, seed=11, dtype=torch.float64):
    """Queries, L2-normalised keys, values, per-token beta in [0, 2], per-token decay
    in [0, 1] (some exactly 0 and 1) and an initial state."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = qkv(*lead, T=T, D=D, Dv=Dv, seed=seed, dtype=dtype)
    k = F.normalize(k, dim=-1)
    beta = 2 * torch.rand(*lead, T, generator=g, dtype=dtype)
    decay = torch.rand(*lead, T, generator=g, dtype=dtype)
    decay[..., 3], decay[..., 5] = 0.0, 1.0  # a gate that forgets all, one that keeps
    S0 = torch.randn(*lead, Dv, D, generator=g, dtype=dtype)
    return q, k, v, beta, decay, S0


@pytest.mark.parametrize("lead", [(), (2, 3)])
@pytest.mark.parametrize("T, C", [(37, 8), (37, 1), (37, 37), (37, 64), (64, 16)])
@pytest.mark.parametrize("gated", [False, True])
def test_chunkwise_delta_rule_equals_the_recurrence_float64(lead, T, C, gated):
    q, k, v, beta, decay, S0 = delta_inputs(*lead, T=T)
    for b, S_init in ((beta, None), (0.7, S0)):  # beta per token or one number
        for d in (decay, 0.9) if gated else (None,):
            kwargs = dict(decay=d, initial_state=S_init)
            loop, S_loop = al.delta_rule(q, k, v, b, **kwargs)
            chunked, S_chunked = al.delta_rule(q, k, v, b, chunk_size=C, **kwargs)
            assert chunked.shape == (*lead, T, 4) and S_chunked.shape == (*lead, 4, 5)
            assert (chunked - loop).abs().max() <= 1e-12
            assert (S_chunked - S_loop).abs().max() <= 1e-12


def test_chunkwise_delta_rule_with_a_feature_map_and_in_two_calls():
    q, _, v, beta, decay, _ = delta_inputs(2, T=30, seed=12)
    k = torch.randn(2, 30, 5, generator=torch.Generator().manual_seed(12))
    k = k.double()
    unit = lambda x: F.normalize(x, dim=-1)  # noqa: E731
    loop, S_loop = al.delta_rule(q, k, v, beta, decay=decay, feature_map=unit)
    first, S1 = al.delta_rule(
        q[:, :11],
        k[:, :11],
        v[:, :11],
        beta[:, :11],
        decay=decay[:, :11],
        feature_map=unit,
        chunk_size=4,
    )
    second, S2 = al.delta_rule(
        q[:, 11:],
        k[:, 11:],
        v[:, 11:],
        beta[:, 11:],
        decay=decay[:, 11:],
        feature_map=unit,
        chunk_size=4,
        initial_state=S1,
    )
    assert (torch.cat([first, second], -2) - loop).abs().max() <= 1e-12
    assert (S2 - S_loop).abs().max() <= 1e-12


@pytest.mark.parametrize("gated", [False, True])
def test_chunkwise_delta_rule_has_the_recurrences_gradients(gated):
    """Backpropagation through the chunkwise form (the triangular solve, the decay's
    cumulative products) gives the recurrence's gradients, for every input."""
    inputs = list(delta_inputs(2, T=23, seed=13))
    if not gated:
        inputs[4] = None
    grads = {}
    for C in (None, 5):
        leaves = [None if x is None else x.clone().requires_grad_() for x in inputs]
        q, k, v, beta, decay, S0 = leaves
        out, S = al.delta_rule(
            q, k, v, beta, decay=decay, initial_state=S0, chunk_size=C
        )
        g = torch.Generator().manual_seed(14)
        loss = (out * torch.randn(out.shape, generator=g, dtype=out.dtype)).sum()
        loss = loss + (S * torch.randn(S.shape, generator=g, dtype=S.dtype)).sum()
        loss.backward()
        grads[C] = [x.grad for x in leaves if x is not None]
    for ours, loop in zip(grads[5], grads[None]):
        assert (ours - loop).abs().max() <= 1e-11


def test_chunkwise_delta_rule_passes_gradcheck():
    q, k, v, beta, decay, S0 = delta_inputs(T=6, D=3, Dv=2, seed=15)
    # inside (0, 1) and (0, 2), so that gradcheck's small steps stay in range
    decay, beta = 0.5 + 0.4 * decay, 0.1 + 0.9 * beta

    def f(q, k, v, beta, decay, S0):
        return al.delta_rule(q, k, v, beta, decay=decay, initial_state=S0, chunk_size=3)

    inputs = [x.requires_grad_() for x in (q, k, v, beta, decay, S0)]
    assert torch.autograd.gradcheck(f, inputs, fast_mode=True)


def test_chunkwise_delta_rule_matches_fla_chunk_delta_rule_float64():
    """fla's delta_rule_chunkwise (layout (B, H, T, D), queries scaled by D**-0.5,
    state (D, Dv) = our S^T, T a multiple of the chunk) computes in float64."""
    fla = fla_reference("delta_rule")
    q, k, v, beta, _, _ = delta_inputs(2, 3, T=64, D=8, Dv=6, seed=16)
    beta = beta / 2  # fla's beta is a sigmoid's, in (0, 1)
    theirs, S_theirs = fla.delta_rule_chunkwise(q, k, v, beta, chunk_size=16)
    assert theirs.dtype == torch.float64
    for C in (16, 10):
        ours, S = al.delta_rule(q * 8**-0.5, k, v, beta, chunk_size=C)
        assert (ours - theirs).abs().max() <= 1e-12
        assert (S.transpose(-1, -2) - S_theirs).abs().max() <= 1e-12


def test_chunkwise_gated_delta_rule_matches_fla_naive_chunk_float32():
    """fla's naive_chunk_gated_delta_rule (layout (B, T, H, D), gate g = log(decay),
    scale D**-0.5, state (D, Dv), pads T to a multiple of the chunk) casts to float32:
    compared at float32's tolerance, with T = 45 not a multiple of 16 and an initial
    state."""
    fla = fla_reference("gated_delta_rule")
    q, k, v, beta, decay, S0 = delta_inputs(2, 3, T=45, D=8, Dv=6, seed=17)
    beta, decay = beta / 2, 0.8 + 0.2 * decay  # fla's ranges
    ours, S = al.delta_rule(
        q * 8**-0.5, k, v, beta, decay=decay, initial_state=S0, chunk_size=16
    )
    theirs, S_theirs = fla.naive_chunk_gated_delta_rule(
        *(x.transpose(1, 2) for x in (q, k, v)),
        decay.log().transpose(1, 2),
        beta.transpose(1, 2),
        chunk_size=16,
        initial_state=S0.transpose(-1, -2),
        output_final_state=True,
    )
    torch.testing.assert_close(
        ours.float(), theirs.transpose(1, 2), rtol=1e-4, atol=1e-5
    )
    torch.testing.assert_close(
        S.transpose(-1, -2).float(), S_theirs, rtol=1e-4, atol=1e-5
    )


def test_delta_rule_overwrites_where_the_additive_rule_accumulates():
    """Orthonormal keys, each written twice with two different values: the delta rule
    (beta = 1) returns the second value, the additive rule the sum of both."""
    D = 6
    keys = torch.eye(D, dtype=torch.float64)[None]  # (1, D, D): D orthonormal keys
    first, second = torch.randn(2, 1, D, 3, dtype=torch.float64).unbind(0)
    sequence_k = torch.cat([keys, keys], dim=-2)
    sequence_v = torch.cat([first, second], dim=-2)
    delta = al.LinearAttentionState(None, rule="delta")
    delta.step(sequence_k, sequence_k, sequence_v, beta=1.0)
    additive = al.LinearAttentionState(None, normalize=False)
    additive.step(sequence_k, sequence_k, sequence_v)
    read = lambda S: (S @ keys.transpose(-1, -2)).transpose(-1, -2)  # (1, D, Dv)
    assert (read(delta.S) - second).abs().max() <= 1e-12
    assert (read(additive.S) - (first + second)).abs().max() <= 1e-12


def test_decay_forgets_geometrically():
    keys = torch.eye(3, dtype=torch.float64)[None]
    values = torch.ones(1, 3, 2, dtype=torch.float64)
    state = al.LinearAttentionState(None, rule="delta")
    state.step(keys, keys, values, beta=1.0, decay=0.5)
    read = (state.S @ keys.transpose(-1, -2)).transpose(-1, -2)[0, :, 0]
    # key 0 was decayed twice after its write, key 1 once, key 2 not at all
    assert torch.allclose(read, torch.tensor([0.25, 0.5, 1.0], dtype=torch.float64))


def test_delta_rule_in_two_calls_equals_one():
    q, k, v = qkv(2, T=16, seed=9)
    k = F.normalize(k, dim=-1)
    whole, S = al.delta_rule(q, k, v, 0.7, decay=0.9)
    first, S1 = al.delta_rule(q[:, :9], k[:, :9], v[:, :9], 0.7, decay=0.9)
    second, S2 = al.delta_rule(
        q[:, 9:], k[:, 9:], v[:, 9:], 0.7, decay=0.9, initial_state=S1
    )
    assert (torch.cat([first, second], -2) - whole).abs().max() <= 1e-12
    assert (S2 - S).abs().max() <= 1e-12


def test_capacity_of_the_additive_state():
    """N random unit keys stored in a D-feature state: exact recall with N <= D
    orthonormal keys, crosstalk beyond; the error grows with N."""
    D, Dv = 16, 8
    g = torch.Generator().manual_seed(10)
    errors = {}
    for N in (8, 16, 64):
        if N <= D:
            keys = torch.linalg.qr(torch.randn(D, D, generator=g, dtype=torch.float64))[
                0
            ].T[:N]
        else:
            keys = F.normalize(
                torch.randn(N, D, generator=g, dtype=torch.float64), dim=-1
            )
        values = torch.randn(N, Dv, generator=g, dtype=torch.float64)
        state = al.LinearAttentionState(None, normalize=False)
        state.step(keys, keys, values)
        recalled = keys @ state.S.T  # (N, Dv)
        errors[N] = (recalled - values).norm() / values.norm()
    assert errors[8] < 1e-12 and errors[16] < 1e-12
    assert errors[64] > 0.5


# -- stability of the delta rule -------------------------------------------------------


def test_delta_rule_warns_when_a_write_expands_the_state():
    """|k|^2 ~ 8 with beta = 1: the eigenvalue 1 - beta |k|^2 ~ -7 along each key, and
    the state runs to ~1e60 in 200 tokens; every entry point says so."""
    q, k, v = qkv(1, T=200, D=8, Dv=4, seed=20)
    for chunk_size in (None, 16):
        with pytest.warns(RuntimeWarning, match=r"beta \* \|phi\(k\)\|\^2 reaches"):
            _, S = al.delta_rule(q, k, v, 1.0, chunk_size=chunk_size)
        assert S.abs().max() > 1e30  # what the warning is about
    state = al.LinearAttentionState(None, rule="delta")
    with pytest.warns(RuntimeWarning, match="L2-normalised keys"):
        state.step(q[:, :3], k[:, :3], v[:, :3], beta=1.0)
    # one key too long is enough, also behind a feature map and a per-token beta
    k_unit = F.normalize(k, dim=-1)
    k_unit[0, 7] *= 1.5  # beta |k|^2 = 2 * 2.25
    with pytest.warns(RuntimeWarning, match="4.5"):
        al.delta_rule(q, k_unit, v, 2.0, chunk_size=8)
    with pytest.warns(RuntimeWarning):
        al.delta_rule(q, k / 2, v, torch.full((1, 200), 0.5), feature_map=torch.exp)


@pytest.mark.parametrize(
    "dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16]
)
def test_delta_rule_is_silent_for_unit_keys_and_beta_up_to_two(dtype):
    """beta |k|^2 = 2 exactly (unit keys, beta = 2: the eigenvalue -1) is stable; the
    keys' rounding in the dtype must not make it warn."""
    q, k, v = qkv(2, 3, T=50, D=16, Dv=4, seed=21, dtype=dtype)
    k = F.normalize(k.double(), dim=-1).to(dtype)
    beta = 2 * torch.rand(2, 3, 50, generator=torch.Generator().manual_seed(21))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for b in (2.0, beta.to(dtype), 0.0):
            for chunk_size in (None, 8):
                al.delta_rule(q, k, v, b, decay=0.9, chunk_size=chunk_size)
            al.LinearAttentionState(None, rule="delta").step(q, k, v, beta=b)


# -- empty sequences, failed calls, 16-bit features, devices -------------------------


def test_empty_sequences_give_empty_outputs_and_keep_the_state():
    """T = 0, like SDPA: an empty output of shape (..., 0, Dv); the state is the one
    the call started from (no error from inside torch)."""
    q, k, v = qkv(2, 3, T=0)
    for form in al.linear.FORMS:
        for lens in (None, torch.zeros(2, dtype=torch.long)):
            out = al.linear_attention(q, k, v, form=form, chunk_size=4, valid_lens=lens)
            assert out.shape == (2, 3, 0, 4) and out.dtype == v.dtype
    S0 = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    for chunk_size in (None, 4):
        out, S = al.delta_rule(q, k, v, 0.5, decay=0.9, chunk_size=chunk_size)
        assert out.shape == (2, 3, 0, 4) and torch.equal(S, torch.zeros(2, 3, 4, 5))
        out, S = al.delta_rule(q, k, v, 0.5, initial_state=S0, chunk_size=chunk_size)
        assert out.shape == (2, 3, 0, 4) and torch.equal(S, S0) and S is not S0
    for rule, beta in (("additive", None), ("delta", 0.5)):
        state = al.LinearAttentionState(rule=rule)
        assert state.step(q, k, v, beta=beta).shape == (2, 3, 0, 4)
        assert state.S is None and state.z is None and len(state) == 0


@pytest.mark.parametrize("rule", al.linear.RULES)
def test_a_call_that_raises_changes_no_state(rule):
    """Fresh (S None) or used, the state after any refused call -- bad shapes, beta,
    decay, dtype, device -- is exactly what it was."""
    q, k, v = qkv(2, 3, T=4)
    k = F.normalize(k, dim=-1)
    beta = 0.5 if rule == "delta" else None
    bad_calls = [
        lambda s: s.step(q, k, v[..., :3, :], beta=beta),  # T of values
        lambda s: s.step(q, k[..., :4], v, beta=beta),  # D of keys
        lambda s: s.step(q, k, v, beta=beta, decay=-0.1),
        lambda s: s.step(q, k, v, beta=beta, decay=torch.ones(7)),
        lambda s: s.step(q, k, v.float(), beta=beta),  # two dtypes
        lambda s: s.step(q, k, v.to("meta"), beta=beta),  # two devices
        lambda s: s.step(q, k, v, beta=0.5 if beta is None else None),
        lambda s: s.step(q, k, v, beta=3.0),
    ]
    if rule == "delta":
        bad_calls.append(lambda s: s.step(q, k, v, beta=torch.full((2, 3, 4), -1.0)))
    for used in (False, True):
        state = al.LinearAttentionState(None, rule=rule)
        if used:
            state.step(q, k, v, beta=beta)
            # inputs of another dtype, or on another device, than the state's
            bad_calls.append(
                lambda s: s.step(q.float(), k.float(), v.float(), beta=beta)
            )
            meta = [t.to("meta") for t in (q, k, v)]
            bad_calls.append(lambda s: s.step(*meta, beta=beta))
        before = [None if t is None else t.clone() for t in (state.S, state.z)]
        n = len(state)
        for call in bad_calls:
            with pytest.raises(ValueError):
                call(state)
            for now, then in zip((state.S, state.z), before):
                assert (now is None) == (then is None)
                assert now is None or torch.equal(now, then)
            assert len(state) == n
    # the call that used to change a fresh state: T = 0 raised from torch.stack after
    # S had been set to zeros; now it returns an empty output and touches nothing
    state = al.LinearAttentionState(None, rule=rule)
    with contextlib.suppress(Exception):
        state.step(q[..., :0, :], k[..., :0, :], v[..., :0, :], beta=beta)
    assert state.S is None and state.z is None and len(state) == 0


@pytest.mark.parametrize(
    "dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64]
)
def test_elu_features_are_positive_in_every_dtype(dtype):
    """elu(x) + 1 = exp(x) for x <= 0: in 16-bit (and, further out, 32-bit) formats
    elu(x) + 1 rounds to exactly 0, and a query made of such features reads nothing."""
    x = torch.tensor([-20.0, -200.0, -1e4, -3.0, 0.0, 2.5], dtype=dtype)
    phi = al.elu_feature_map(x)
    assert phi.dtype == dtype and (phi > 0).all()
    exact = torch.exp(x.double().clamp(max=0)) + x.double().clamp(min=0)
    # where exp(x) is a normal number of the dtype, the feature is exp(x) rounded
    normal = exact >= torch.finfo(dtype).tiny
    assert torch.allclose(
        phi.double()[normal], exact[normal], rtol=torch.finfo(dtype).eps, atol=0
    )
    # a query far in the negative still reads a weighted average of the values
    q = torch.full((1, 3, 4), -20.0, dtype=dtype)
    k, v = torch.randn(1, 3, 4).to(dtype), torch.randn(1, 3, 2).to(dtype)
    assert al.linear_attention(q, k, v).isfinite().all()
    assert (al.linear_attention(q, k, v).abs().sum(-1) > 0).all()


def test_elu_features_are_elu_plus_one_with_its_gradient():
    x = torch.linspace(-30, 5, 351, dtype=torch.float64).requires_grad_()
    phi = al.elu_feature_map(x)
    assert (phi - (F.elu(x) + 1)).abs().max() <= 1e-15
    (grad,) = torch.autograd.grad(phi.sum(), x)
    (expected,) = torch.autograd.grad((F.elu(x) + 1).sum(), x)
    assert (grad - expected).abs().max() <= 1e-15


def test_inputs_on_two_devices_are_refused_with_a_clear_message():
    """A tensor on another device ('meta' stands for a GPU) gets the library's
    ValueError naming both devices, not torch's RuntimeError from inside a matmul."""
    q, k, v = qkv(2, 3, T=6)
    k = F.normalize(k, dim=-1)
    meta = v.to("meta")
    for form in al.linear.FORMS:
        with pytest.raises(ValueError, match="device.*cpu.*meta"):
            al.linear_attention(q, k, meta, form=form)
        with pytest.raises(ValueError, match="valid_lens.*device"):
            al.linear_attention(
                q, k, v, form=form, valid_lens=torch.tensor([6, 2]).to("meta")
            )
    for chunk_size in (None, 4):
        with pytest.raises(ValueError, match="device.*cpu.*meta"):
            al.delta_rule(q, k, meta, 0.5, chunk_size=chunk_size)
        with pytest.raises(ValueError, match="beta.*device"):
            al.delta_rule(
                q,
                k,
                v,
                torch.full((2, 3, 6), 0.5, device="meta"),
                chunk_size=chunk_size,
            )
        with pytest.raises(ValueError, match="decay.*device"):
            al.delta_rule(
                q,
                k,
                v,
                0.5,
                decay=torch.ones(2, 3, 6, device="meta"),
                chunk_size=chunk_size,
            )
        with pytest.raises(ValueError, match="initial_state.*meta"):
            al.delta_rule(
                q,
                k,
                v,
                0.5,
                initial_state=torch.zeros(2, 3, 4, 5, device="meta"),
                chunk_size=chunk_size,
            )
    with pytest.raises(ValueError, match="device.*cpu.*meta"):
        al.LinearAttentionState().step(q, k, meta)


# -- bytes and bad input --------------------------------------------------------------


def test_linear_state_bytes():
    assert al.linear_state_bytes(1, 8, 8, 8, bytes_per_element=4) == 8 * (64 + 8) * 4
    assert al.linear_state_bytes(2, 4, 10, 3, batch_size=5, normalizer=False) == (
        2 * 4 * 30 * 5 * 2
    )
    for bad in (dict(num_layers=-1), dict(feature_dim=2.0), dict(num_heads=True)):
        args = dict(num_layers=1, num_heads=1, feature_dim=1, value_dim=1) | bad
        with pytest.raises(ValueError, match=next(iter(bad))):
            al.linear_state_bytes(**args)


def test_bad_input_is_refused_with_a_clear_message():
    q, k, v = qkv(2, T=6)
    cases = [
        (dict(form="parallel"), "form"),
        (dict(form="chunked", chunk_size=0), "chunk_size"),
        (dict(eps=-1.0), "eps"),
        (dict(valid_lens=torch.tensor([7, 1])), "valid_lens"),
        (dict(valid_lens=torch.tensor([1, 2, 3])), "valid_lens"),
    ]
    for kwargs, word in cases:
        with pytest.raises(ValueError, match=word):
            al.linear_attention(q, k, v, **kwargs)
    with pytest.raises(ValueError, match="queries and keys"):
        al.linear_attention(q, k[:, :5], v)
    with pytest.raises(ValueError, match="values"):
        al.linear_attention(q, k, v[:, :5])
    with pytest.raises(ValueError, match="dtype"):
        al.linear_attention(q, k, v.float())
    with pytest.raises(ValueError, match="width D=5"):
        FEATURE_MAPS["random"](torch.zeros(3, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="delta rule keeps no normaliser"):
        al.LinearAttentionState(rule="delta", normalize=True)
    with pytest.raises(ValueError, match="needs beta"):
        al.LinearAttentionState(None, rule="delta").step(q, k, v)
    with pytest.raises(ValueError, match="rule"):
        al.LinearAttentionState(rule="hebbian")


def test_inputs_are_not_changed():
    q, k, v = qkv(2, T=8)
    k = F.normalize(k, dim=-1)
    S0 = torch.randn(2, 4, 5, dtype=torch.float64)
    copies = [t.clone() for t in (q, k, v, S0)]
    for form in al.linear.FORMS:
        al.linear_attention(
            q, k, v, form=form, chunk_size=3, valid_lens=torch.tensor([8, 3])
        )
    for chunk_size in (None, 3):
        al.delta_rule(q, k, v, 0.5, decay=0.9, initial_state=S0, chunk_size=chunk_size)
    for t, c in zip((q, k, v, S0), copies):
        assert torch.equal(t, c)
