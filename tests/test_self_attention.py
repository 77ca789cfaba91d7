import pytest
import torch

import attention_lib as al
import notes_listings as notes


def test_matches_notes_000_listing():
    theirs = notes.Seed000SelfAttention(6, 4, 5)
    ours = al.SelfAttention(6, 4, 5)
    with torch.no_grad():
        for a, b in (("W_q", "linear_q"), ("W_k", "linear_k"), ("W_v", "linear_v")):
            getattr(ours, a).weight.copy_(getattr(theirs, b).weight)
    x = torch.randn(3, 7, 6)
    torch.testing.assert_close(ours(x), theirs(x))


def test_matches_notes_004_single_head_and_fused_qkv():
    E = 8
    theirs = notes.Seed004Attention(E, dropout=0.0)
    fused = notes.Seed004AttentionV1(E, dropout=0.0)
    ours = al.SelfAttention(E, E, bias=True)
    with torch.no_grad():
        for a, b in (("W_q", "fc_q"), ("W_k", "fc_k"), ("W_v", "fc_v")):
            getattr(ours, a).load_state_dict(getattr(theirs, b).state_dict())
        fused.qkv.weight.copy_(
            torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight])
        )
        fused.qkv.bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))
    x = torch.randn(2, 5, E)
    keep = al.causal_mask(5)
    torch.testing.assert_close(ours(x), theirs(x))
    torch.testing.assert_close(ours(x, mask=keep), theirs(x, mask=keep.int()))
    torch.testing.assert_close(ours(x, mask=keep), fused(x, mask=keep.int()))


@pytest.mark.parametrize("bias", [False, True])
def test_fused_path_equals_readable_path(bias):
    m = al.SelfAttention(8, 6, 4, bias=bias).eval()
    x = torch.randn(3, 9, 8)
    lens = torch.tensor([9, 4, 0])
    readable = m(x, lens)
    assert m.attention_weights.shape == (3, 9, 9)
    fused = m(x, lens, need_weights=False)
    assert m.attention_weights is None
    torch.testing.assert_close(fused, readable, atol=1e-5, rtol=1e-5)
    assert readable[2].eq(0).all() and fused[2].eq(0).all()


@pytest.mark.parametrize("masked", [False, True])
def test_fused_path_uses_the_flash_kernel(masked):
    """SDPA's flash CPU kernel needs 4-D inputs; the fused path must reach it (memory
    linear in n), not fall back to the math kernel that materialises the (n, n) scores.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    m = al.SelfAttention(8, 8).eval()
    x = torch.randn(2, 6, 8)
    kwargs = (
        dict(valid_lens=torch.tensor([6, 3]), mask=al.causal_mask(6)) if masked else {}
    )
    with sdpa_kernel(
        SDPBackend.FLASH_ATTENTION
    ):  # raises if the call cannot use flash attention
        fused = m(x, **kwargs, need_weights=False)
    torch.testing.assert_close(fused, m(x, **kwargs), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mask_shape", [(6,), (6, 6), (2, 6, 6), (2, 1, 6)])
def test_fused_path_mask_shapes(mask_shape):
    m = al.SelfAttention(8, 4).eval()
    x = torch.randn(2, 6, 8)
    mask = torch.rand(mask_shape) > 0.3
    torch.testing.assert_close(
        m(x, mask=mask, need_weights=False), m(x, mask=mask), atol=1e-5, rtol=1e-5
    )


def test_permutation_equivariance_and_positional_encoding():
    m = al.SelfAttention(16, 16).eval()
    x = torch.randn(1, 6, 16)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    torch.testing.assert_close(m(x[:, perm]), m(x)[:, perm])
    pe = al.PositionalEncoding(16).eval()
    assert not torch.allclose(m(pe(x[:, perm])), m(pe(x))[:, perm], atol=1e-4)


def test_positional_encoding_matches_d2l(d2l):
    for E in (8, 32):
        ours, theirs = (
            al.PositionalEncoding(E, max_len=60).eval(),
            d2l.PositionalEncoding(E, 0.0, max_len=60).eval(),
        )
        x = torch.randn(2, 50, E)
        torch.testing.assert_close(ours(x), theirs(x))
        torch.testing.assert_close(ours.P, theirs.P)


def test_positional_encoding_frequencies_are_hugging_faces_inv_freq():
    # P[pos, 2i] = sin(pos * omega_i) with omega_i = 1 / 10000^(2i/E), the vector that
    # Hugging Face's rotary code calls inv_freq (1 / base^(arange(0, d, 2) / d))
    E, n = 16, 50
    inv_freq = 1.0 / (10000 ** (torch.arange(0, E, 2, dtype=torch.float64) / E))
    angles = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq  # (n, E/2)
    P = al.PositionalEncoding(E, max_len=n).P[0].double()  # (n, E)
    torch.testing.assert_close(P[:, 0::2], torch.sin(angles), atol=2e-5, rtol=0)
    torch.testing.assert_close(P[:, 1::2], torch.cos(angles), atol=2e-5, rtol=0)


def test_positional_encoding_odd_width_and_values():
    pe = al.PositionalEncoding(5, max_len=4)
    assert pe.P.shape == (1, 4, 5)
    torch.testing.assert_close(pe.P[0, :, 0], torch.sin(torch.arange(4.0)))
    torch.testing.assert_close(pe.P[0, :, 1], torch.cos(torch.arange(4.0)))


def test_gradcheck_self_attention():
    m = al.SelfAttention(4, 3, bias=True).double()
    x = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: m(x, torch.tensor([3, 5])), (x,))
    pe = al.PositionalEncoding(4).double()
    assert torch.autograd.gradcheck(pe, (x,))


def test_training_dropout_both_paths():
    m = al.SelfAttention(8, 8, dropout=0.5).train()
    x = torch.randn(2, 6, 8, requires_grad=True)
    for nw in (True, False):
        out = m(x, need_weights=nw)
        out.sum().backward()
        assert torch.isfinite(x.grad).all()
        x.grad = None


def test_self_attention_bad_input():
    m = al.SelfAttention(8, 4)
    with pytest.raises(
        ValueError,
        match=r"expected last dimension 8 \(d_in of this SelfAttention\), got 6",
    ):
        m(torch.randn(2, 3, 6))
    with pytest.raises(
        ValueError, match=r"3-D tensor of shape \(B, n, d_in\), got shape \(3, 8\)"
    ):
        m(torch.randn(3, 8))
    with pytest.raises(
        ValueError, match=r"at most max_len=10 positions, got positions 0 \.\. 10"
    ):
        al.PositionalEncoding(4, max_len=10)(torch.randn(1, 11, 4))
    with pytest.raises(
        ValueError, match=r"num_hiddens of this PositionalEncoding\), got 3"
    ):
        al.PositionalEncoding(4)(torch.randn(1, 2, 3))
