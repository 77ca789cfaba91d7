import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attention_lib as al
from attention_lib.scoring import fused_attention
import notes_listings as notes


def copy_linear(dst: nn.Linear, src: nn.Linear):
    with torch.no_grad():
        dst.weight.copy_(src.weight)
        if dst.bias is not None:
            dst.bias.copy_(src.bias)


# --- pure helpers
# ------------------------------------------------------------------------------------------
def test_split_merge_roundtrip_and_layout():
    X = torch.arange(2 * 3 * 8.0).reshape(2, 3, 8)
    heads = al.split_heads(X, 4)
    assert heads.shape == (2, 4, 3, 2)
    torch.testing.assert_close(heads[:, 1], X[:, :, 2:4])  # head 1 = columns 2..3
    torch.testing.assert_close(al.merge_heads(heads), X)


@pytest.mark.parametrize("n_rep", [1, 2, 4])
def test_repeat_kv_equals_repeat_interleave(n_rep):
    x = torch.randn(2, 3, 5, 4)
    out = al.repeat_kv(x, n_rep)
    torch.testing.assert_close(out, torch.repeat_interleave(x, n_rep, dim=1))
    if n_rep > 1:
        assert not torch.equal(out, x.repeat(1, n_rep, 1, 1))


def test_kv_cache_bytes_llama2_70b():
    # 80 layers, 8 KV heads of width 128, 4096 tokens, fp16: 1.25 GiB
    assert al.kv_cache_bytes(80, 8, 128, 4096) == 1_342_177_280 == int(1.25 * 2**30)
    assert al.kv_cache_bytes(80, 64, 128, 4096) == 8 * al.kv_cache_bytes(
        80, 8, 128, 4096
    )
    with pytest.raises(
        ValueError, match="expected seq_len to be a non-negative integer, got -1"
    ):
        al.kv_cache_bytes(1, 1, 1, -1)
    assert type(al.kv_cache_bytes(32, 32, 128, 4096)) is int
    with pytest.raises(
        ValueError, match=r"expected seq_len to be a non-negative integer, got 4096\.0"
    ):
        al.kv_cache_bytes(
            32, 32, 128, 4096.0
        )  # an int is promised: a float is refused, not passed through


# --- oracles
# -----------------------------------------------------------------------------------------------
def mha_with_copied_weights(ours: al.MultiHeadAttention, bias: bool):
    E, H = ours.num_hiddens, ours.num_heads
    torch_mha = nn.MultiheadAttention(E, H, bias=bias, batch_first=True)
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(
            torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight])
        )
        torch_mha.out_proj.weight.copy_(ours.W_o.weight)
        if bias:
            torch_mha.in_proj_bias.copy_(
                torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias])
            )
            torch_mha.out_proj.bias.copy_(ours.W_o.bias)
    return torch_mha.eval()


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_matches_torch_multihead_attention(bias, need_weights):
    ours = al.MultiHeadAttention(16, 4, bias=bias).eval()
    theirs = mha_with_copied_weights(ours, bias)
    q, kv = torch.randn(3, 5, 16), torch.randn(3, 7, 16)
    lens = torch.tensor([7, 3, 1])
    keep = al.valid_lens_to_mask(lens, 5, 7)[:, 0]  # (B, K)
    expected, w = theirs(
        q, kv, kv, key_padding_mask=al.keep_to_blocked(keep), average_attn_weights=False
    )
    torch.testing.assert_close(
        ours(q, kv, kv, lens, need_weights=need_weights), expected, atol=1e-5, rtol=1e-5
    )
    if need_weights:
        torch.testing.assert_close(ours.attention_weights, w)
    causal = al.causal_mask(5, 7)
    expected, _ = theirs(q, kv, kv, attn_mask=al.keep_to_blocked(causal))
    torch.testing.assert_close(
        ours(q, kv, kv, mask=causal, need_weights=need_weights),
        expected,
        atol=1e-5,
        rtol=1e-5,
    )


def test_mha_matches_d2l(d2l):
    ours = al.MultiHeadAttention(12, 3).eval()
    theirs = d2l.MultiHeadAttention(12, 3, dropout=0.0).eval()
    q, kv = torch.randn(2, 4, 12), torch.randn(2, 6, 12)
    for lens in (torch.tensor([3, 6]), torch.tensor([[1, 2, 3, 4], [6, 5, 4, 3]])):
        theirs(q, kv, kv, lens)  # materialise lazy layers
        for name in ("W_q", "W_k", "W_v", "W_o"):
            copy_linear(getattr(theirs, name), getattr(ours, name))
        torch.testing.assert_close(ours(q, kv, kv, lens), theirs(q, kv, kv, lens))
        torch.testing.assert_close(
            ours.attention_weights.reshape(6, 4, 6), theirs.attention.attention_weights
        )


def test_mha_matches_notes_004_listing():
    theirs = notes.Seed004MultiHeadAttention(32, 4, dropout=0.0)
    ours = al.MultiHeadAttention(32, 4, bias=True)
    for a, b in (("W_q", "fc_q"), ("W_k", "fc_k"), ("W_v", "fc_v"), ("W_o", "fc_out")):
        copy_linear(getattr(ours, a), getattr(theirs, b))
    x = torch.randn(2, 6, 32)
    torch.testing.assert_close(ours(x, x, x), theirs(x))
    keep = al.causal_mask(6)
    torch.testing.assert_close(ours(x, x, x, mask=keep), theirs(x, mask=keep.int()))


def test_mha_matches_notes_000_listing_without_output_projection():
    theirs = notes.Seed000MultiHeadSelfAttention(16, 16, 16, num_heads=4)
    ours = al.MultiHeadAttention(16, 4)
    for a, b in (("W_q", "linear_q"), ("W_k", "linear_k"), ("W_v", "linear_v")):
        copy_linear(getattr(ours, a), getattr(theirs, b))
    with torch.no_grad():
        ours.W_o.weight.copy_(
            torch.eye(16)
        )  # the notes' listing has no output projection
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(ours(x, x, x), theirs(x))


def test_gqa_matches_notes_004_listing():
    theirs = notes.Seed004GroupQueryAttention(128, 8, 4)
    ours = al.GroupedQueryAttention(128, 8, 4, bias=True)
    for a, b in (("W_q", "fc_q"), ("W_k", "fc_k"), ("W_v", "fc_v"), ("W_o", "fc_o")):
        copy_linear(getattr(ours, a), getattr(theirs, b))
    x = torch.rand(3, 2, 128)
    torch.testing.assert_close(ours(x, x, x), theirs(x))
    torch.testing.assert_close(
        ours(x, x, x, need_weights=False), theirs(x), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4, 8])
def test_gqa_matches_sdpa_enable_gqa(num_kv_heads):
    m = al.GroupedQueryAttention(64, 8, num_kv_heads).eval()
    x = torch.randn(2, 9, 64)
    q = al.split_heads(m.W_q(x), 8)
    k, v = (
        al.split_heads(m.W_k(x), num_kv_heads),
        al.split_heads(m.W_v(x), num_kv_heads),
    )
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    expected = m.W_o(al.merge_heads(ref))
    for nw in (True, False):
        torch.testing.assert_close(
            m(x, x, x, mask=al.causal_mask(9), need_weights=nw),
            expected,
            atol=1e-5,
            rtol=1e-5,
        )
    assert m.W_k.weight.shape == (num_kv_heads * 8, 64)


def test_gqa_with_all_heads_is_mha_and_one_head_is_mqa():
    mha = al.MultiHeadAttention(24, 6).eval()
    gqa = al.GroupedQueryAttention(24, 6, 6).eval()
    gqa.load_state_dict(mha.state_dict())
    x = torch.randn(2, 5, 24)
    torch.testing.assert_close(gqa(x, x, x), mha(x, x, x))
    mqa = al.GroupedQueryAttention(24, 6, 1).eval()
    mqa(x, x, x)
    w = mqa.attention_weights
    assert w.shape == (2, 6, 5, 5)
    assert sum(p.numel() for p in mqa.parameters()) == 2 * 24 * 24 + 2 * 24 * 4


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_both_paths_agree_with_masks_and_fully_masked_rows(num_kv_heads, dtype):
    m = al.GroupedQueryAttention(32, 4, num_kv_heads).eval().to(dtype)
    q, kv = torch.randn(3, 4, 32, dtype=dtype), torch.randn(3, 6, 32, dtype=dtype)
    lens = torch.tensor([[6, 5, 4, 3], [2, 2, 0, 0], [1, 2, 3, 4]])
    head_mask = torch.rand(3, 4, 4, 6) > 0.2  # (B, H, Q, K)
    a = m(q, kv, kv, lens, head_mask)
    b = m(q, kv, kv, lens, head_mask, need_weights=False)
    tol = (
        dict(atol=1e-5, rtol=1e-5)
        if dtype == torch.float32
        else dict(atol=3e-2, rtol=3e-2)
    )
    torch.testing.assert_close(b, a, **tol)
    assert not a.isnan().any() and not b.isnan().any()
    w = m(q, kv, kv, lens, head_mask) is not None and m.attention_weights
    assert w[1, :, 2:].eq(0).all()  # queries with valid_len 0 get all-zero weights


@pytest.mark.parametrize("need_weights", [True, False])
def test_training_mode_dropout_both_paths(need_weights):
    m = al.GroupedQueryAttention(16, 4, 2, dropout=0.5).train()
    x = torch.randn(2, 8, 16, requires_grad=True)
    torch.manual_seed(0)
    a = m(x, x, x, need_weights=need_weights)
    torch.manual_seed(1)
    b = m(x, x, x, need_weights=need_weights)
    assert not torch.allclose(a, b), "dropout should make two training passes differ"
    a.sum().backward()
    assert torch.isfinite(x.grad).all() and m.W_q.weight.grad is not None
    m.eval()
    torch.testing.assert_close(
        m(x, x, x, need_weights=need_weights),
        m(x, x, x, need_weights=not need_weights),
        atol=1e-5,
        rtol=1e-5,
    )


@pytest.mark.parametrize("num_kv_heads", [2, 4])
def test_gradcheck_modules(num_kv_heads):
    m = al.GroupedQueryAttention(8, 4, num_kv_heads, bias=True).double()
    q = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    kv = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda q, kv: m(q, kv, kv, torch.tensor([2, 4])), (q, kv)
    )
    assert torch.autograd.gradcheck(
        lambda q, kv: m(q, kv, kv, mask=al.causal_mask(3, 4), need_weights=False),
        (q, kv),
    )


def test_does_not_mutate_inputs():
    m = al.MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    lens = torch.tensor([1, 3])
    before, lens_before = x.clone(), lens.clone()
    m(x, x, x, lens)
    m(x, x, x, lens, need_weights=False)
    assert torch.equal(x, before) and torch.equal(lens, lens_before)


def test_multihead_bad_input():
    with pytest.raises(
        ValueError,
        match="num_heads must divide num_hiddens: got num_hiddens=10, num_heads=4",
    ):
        al.MultiHeadAttention(10, 4)
    with pytest.raises(
        ValueError,
        match="num_kv_heads must be positive and divide num_heads: got num_heads=8, num_kv_heads=3",
    ):
        al.GroupedQueryAttention(16, 8, 3)
    with pytest.raises(
        ValueError, match="num_kv_heads to be a positive integer, got 0"
    ):
        al.GroupedQueryAttention(16, 8, 0)
    m = al.MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(
        ValueError,
        match=r"expected last dimension 8 \(num_hiddens E of this MultiHeadAttention\), got 6",
    ):
        m(torch.randn(2, 3, 6), x, x)
    with pytest.raises(ValueError, match="same number of pairs K"):
        m(x, x, x[:, :2])
    with pytest.raises(ValueError, match="batch size B=2"):
        m(x, x, x, torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="non-negative"):
        m(x, x, x, torch.tensor([1, -2]))
    with pytest.raises(
        ValueError, match=r"broadcasts to the scores \(2, 2, 3, 3\), got \(2, 1, 3, 4\)"
    ):
        m(x, x, x, mask=torch.ones(2, 1, 3, 4, dtype=torch.bool))
    with pytest.raises(
        ValueError,
        match=r"expected a 2-D \(Q, K\) or 4-D .* got 3-D \(2, 3, 3\).*mask\[:, None\]",
    ):
        m(
            x, x, x, mask=torch.ones(2, 3, 3, dtype=torch.bool)
        )  # B == H == 2: it would run, with the wrong mask
    with pytest.raises(ValueError, match="divide the width 8, got num_heads=3"):
        al.split_heads(x, 3)


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
def test_fused_path_uses_the_flash_kernel_without_copying_kv(num_kv_heads):
    """need_weights=False must reach SDPA's flash kernel (enable_gqa: no repeat of K and
    V), masks included."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    m = al.GroupedQueryAttention(32, 4, num_kv_heads).eval()
    x = torch.randn(2, 5, 32)
    with sdpa_kernel(
        SDPBackend.FLASH_ATTENTION
    ):  # raises if flash attention cannot serve the call
        fused = m(x, x, x, torch.tensor([3, 5]), al.causal_mask(5), need_weights=False)
    torch.testing.assert_close(
        fused, m(x, x, x, torch.tensor([3, 5]), al.causal_mask(5)), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4, 8])
def test_a_decode_step_stacks_each_groups_query_heads(num_kv_heads, monkeypatch):
    """One new query over shared key/value heads: SDPA sees one query matrix of g rows
    per key/value head (each cached head read once), on the library's fused path and on
    the cached decode path, with the result of repeating the heads (float64)."""
    H, g, d = 8, 8 // num_kv_heads, 16
    torch.manual_seed(0)
    q = torch.randn(2, H, 1, d, dtype=torch.float64)
    k = torch.randn(2, num_kv_heads, 9, d, dtype=torch.float64)
    v = torch.randn(2, num_kv_heads, 9, 5, dtype=torch.float64)
    want, _ = al.dot_product_attention(q, al.repeat_kv(k, g), al.repeat_kv(v, g))
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(
        F,
        "scaled_dot_product_attention",
        lambda q_, *a, **kw: calls.append(tuple(q_.shape)) or sdpa(q_, *a, **kw),
    )
    got = fused_attention(q, k, v, None, None, enable_gqa=num_kv_heads != H)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert calls == [(2, num_kv_heads, g, d)]

    layer = al.GroupedQueryAttention(32, H, num_kv_heads).double().eval()
    x = torch.randn(2, 4, 32, dtype=torch.float64)
    with torch.no_grad():
        cache = al.KVCache()
        layer(x[:, :3], x[:, :3], x[:, :3], is_causal=True, kv_cache=cache)
        calls.clear()
        x1 = x[:, 3:]
        step = layer(x1, x1, x1, kv_cache=cache, need_weights=False)
        assert calls == [(2, num_kv_heads, g, 4)]  # d = 32 / 8
        full = layer(x, x, x, is_causal=True, need_weights=False)
    torch.testing.assert_close(step, full[:, 3:], rtol=1e-12, atol=1e-12)
