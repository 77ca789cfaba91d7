import inspect

import pytest
import torch
import torch.nn.functional as F

import attention_lib as al
import notes_listings as notes
from tolerances import TOL


def toy():
    """The notes' toy example: queries (2, 1, 2), keys (2, 10, 2), values (2, 10, 4),
    valid_lens [2, 6]."""
    return (
        torch.randn(2, 1, 2),
        torch.randn(2, 10, 2),
        torch.randn(2, 10, 4),
        torch.tensor([2, 6]),
    )


def test_dot_product_notes_example():
    q, k, v, lens = toy()
    attention = al.DotProductAttention(dropout=0.5).eval()
    out = attention(q, k, v, lens)
    assert out.shape == (2, 1, 4)
    w = attention.attention_weights
    assert w.shape == (2, 1, 10) and w[0, :, 2:].eq(0).all() and w[1, :, 6:].eq(0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(2, 3, 5, 4, 6), (1, 1, 1, 8, 3), (3, 7, 2, 5, 5)])
def test_dot_product_matches_sdpa(dtype, shape):
    B, Q, K, D, Dv = shape
    q, k, v = (
        torch.randn(B, Q, D, dtype=dtype),
        torch.randn(B, K, D, dtype=dtype),
        torch.randn(B, K, Dv, dtype=dtype),
    )
    out, w = al.dot_product_attention(q, k, v)
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v), **TOL[dtype]
    )
    mask = torch.rand(B, Q, K) > 0.5
    mask[..., 0] = True
    out, _ = al.dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **TOL[dtype]
    )


def test_dot_product_causal_and_heads_match_sdpa():
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    out, _ = al.dot_product_attention(q, k, v, mask=al.causal_mask(6))
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, is_causal=True)
    )
    out, _ = al.dot_product_attention(q, k, v, scale=0.3)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=0.3))


def test_dot_product_matches_d2l(d2l):
    q, k, v, lens = toy()
    theirs = d2l.DotProductAttention(dropout=0.0)
    ours = al.DotProductAttention()
    torch.testing.assert_close(ours(q, k, v, lens), theirs(q, k, v, lens))
    torch.testing.assert_close(ours.attention_weights, theirs.attention_weights)


def test_additive_matches_d2l(d2l):
    q, k, v, lens = toy()
    q = torch.randn(2, 1, 20)
    ours = al.AdditiveAttention(query_size=20, key_size=2, num_hiddens=8).eval()
    theirs = d2l.AdditiveAttention(num_hiddens=8, dropout=0.0)
    theirs(q, k, v, lens)  # materialise d2l's lazy layers, then copy our weights in
    with torch.no_grad():
        for name in ("W_q", "W_k", "w_v"):
            getattr(theirs, name).weight.copy_(getattr(ours, name).weight)
    torch.testing.assert_close(ours(q, k, v, lens), theirs(q, k, v, lens))
    torch.testing.assert_close(ours.attention_weights, theirs.attention_weights)


def test_additive_matches_notes_002_listing_on_its_own_globals():
    Q, K, V = torch.randn(30, 10, 20), torch.randn(30, 15, 8), torch.randn(30, 15, 5)
    theirs = notes.Seed002AdditiveAttention(20, 8, 40)
    ours = al.AdditiveAttention(20, 8, 40)
    with torch.no_grad():
        ours.W_q.weight.copy_(theirs.linear_q.weight)
        ours.W_k.weight.copy_(theirs.linear_k.weight)
        ours.w_v.weight.copy_(theirs.dense.weight)
    torch.testing.assert_close(ours(Q, K, V), theirs(Q, K, V))
    with pytest.raises(
        RuntimeError
    ):  # the notes' class reads batch_size etc. from globals
        theirs(Q[:2], K[:2], V[:2])
    assert ours(Q[:2], K[:2], V[:2]).shape == (2, 10, 5)


def test_additive_concat_form_of_notes_000():
    """W [s; h] = W_q s + W_k h: the notes' concat listing is additive attention with a
    split weight."""
    enc, dec = 6, 5
    theirs = notes.Seed000Attention(enc, dec)
    hidden_dec, last_layer_enc = torch.randn(3, 4, dec), torch.randn(3, 7, 2 * enc)
    ours = al.AdditiveAttention(query_size=dec, key_size=2 * enc, num_hiddens=dec)
    with torch.no_grad():
        ours.W_q.weight.copy_(theirs.W.weight[:, :dec])
        ours.W_k.weight.copy_(theirs.W.weight[:, dec:])
        ours.w_v.weight.copy_(theirs.V[None, :])
    query = hidden_dec[
        :, -1:, :
    ]  # the listing attends with the decoder's last state only
    ours(query, last_layer_enc, last_layer_enc)
    torch.testing.assert_close(
        ours.attention_weights[:, 0], theirs(hidden_dec, last_layer_enc)
    )


def test_additive_functional_source_is_what_the_module_runs():
    assert "additive_attention(" in inspect.getsource(al.AdditiveAttention.forward)


@pytest.mark.parametrize("module", ["dot", "additive"])
def test_gradcheck_scoring(module):
    q = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    lens = torch.tensor([2, 5])
    if module == "dot":
        m = al.DotProductAttention()
    else:
        m = al.AdditiveAttention(4, 4, 6).double()
    assert torch.autograd.gradcheck(lambda q, k, v: m(q, k, v, lens), (q, k, v))


def test_dropout_only_in_training():
    q, k, v, lens = toy()
    m = al.DotProductAttention(dropout=0.5)
    m.train()
    torch.manual_seed(1)
    a = m(q, k, v, lens)
    m.eval()
    b = m(q, k, v, lens)
    assert not torch.allclose(a, b)
    torch.testing.assert_close(b, al.dot_product_attention(q, k, v, lens)[0])


def test_scoring_bad_input():
    q, k, v, lens = toy()
    with pytest.raises(
        ValueError, match=r"same width D for a dot product: got queries \(2, 1, 3\)"
    ):
        al.dot_product_attention(torch.randn(2, 1, 3), k, v)
    with pytest.raises(
        ValueError,
        match=r"same number of pairs K: got keys \(2, 10, 2\) \(K=10\) and values",
    ):
        al.dot_product_attention(q, k, v[:, :9])
    with pytest.raises(ValueError, match="batch size B=2"):
        al.DotProductAttention()(q, k, v, torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="expected last dimension 20"):
        al.AdditiveAttention(20, 2, 8)(q, k, v)
    with pytest.raises(ValueError, match=r"probability in \[0, 1\)"):
        al.DotProductAttention(dropout=1.5)
