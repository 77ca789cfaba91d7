"""``is_causal`` on every attention entry point, and ``KVCache``: decoding one token at
a time.

Oracles: the bottom-right ``causal_mask`` passed as an explicit mask, the uncached
forward over the whole
sequence, and ``F.scaled_dot_product_attention(is_causal=True, enable_gqa=True)``.
"""

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import attention_lib as al
from tolerances import TOL

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def gqa(E=32, H=4, Hkv=2, dtype=torch.float32, seed=0, bias=False):
    torch.manual_seed(seed)
    return al.GroupedQueryAttention(E, H, Hkv, bias=bias).to(dtype).eval()


# --- is_causal == the explicit bottom-right causal mask
# --------------------------------------------------------
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("num_queries,num_keys", [(6, 6), (1, 6), (3, 7), (5, 2)])
def test_dot_product_is_causal_equals_causal_mask(need_weights, num_queries, num_keys):
    torch.manual_seed(0)
    q, k, v = (
        torch.randn(2, 3, num_queries, 8),
        torch.randn(2, 3, num_keys, 8),
        torch.randn(2, 3, num_keys, 5),
    )
    want, w_want = al.dot_product_attention(
        q, k, v, mask=al.causal_mask(num_queries, num_keys)
    )
    if need_weights:
        got, w = al.dot_product_attention(q, k, v, is_causal=True)
        torch.testing.assert_close(w, w_want)
    else:
        from attention_lib.scoring import fused_attention

        got = fused_attention(q, k, v, None, None, is_causal=True)
    torch.testing.assert_close(got, want, **TOL[torch.float32])
    if num_queries > num_keys:  # the first queries see no key at all: zeros, not NaN
        assert torch.equal(
            got[..., : num_queries - num_keys, :],
            torch.zeros_like(got[..., : num_queries - num_keys, :]),
        )


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("num_queries,num_keys", [(6, 6), (2, 6)])
def test_is_causal_combines_with_valid_lens_and_mask_by_and(
    need_weights, num_queries, num_keys
):
    layer = gqa()
    torch.manual_seed(1)
    q, kv = torch.randn(2, num_queries, 32), torch.randn(2, num_keys, 32)
    lens = torch.tensor([num_keys, 3])
    extra = torch.rand(num_queries, num_keys) > 0.3
    keep = (
        al.valid_lens_to_mask(lens, num_queries, num_keys)[:, None]
        & extra
        & al.causal_mask(num_queries, num_keys)
    )
    want = layer(q, kv, kv, mask=keep, need_weights=need_weights)
    got = layer(
        q,
        kv,
        kv,
        valid_lens=lens,
        mask=extra,
        is_causal=True,
        need_weights=need_weights,
    )
    torch.testing.assert_close(got, want, **TOL[torch.float32])


@pytest.mark.parametrize("need_weights", [True, False])
def test_self_attention_and_module_wrappers_take_is_causal(need_weights):
    torch.manual_seed(0)
    X = torch.randn(2, 5, 6)
    sa = al.SelfAttention(6, 4)
    torch.testing.assert_close(
        sa(X, is_causal=True, need_weights=need_weights),
        sa(X, mask=al.causal_mask(5), need_weights=need_weights),
        **TOL[torch.float32],
    )
    dpa = al.DotProductAttention()
    torch.testing.assert_close(
        dpa(X, X, X, is_causal=True), dpa(X, X, X, mask=al.causal_mask(5))
    )
    mha = al.MultiHeadAttention(8, 2)
    Y = torch.randn(2, 5, 8)
    torch.testing.assert_close(
        mha(Y, Y, Y, is_causal=True, need_weights=need_weights),
        mha(Y, Y, Y, mask=al.causal_mask(5), need_weights=need_weights),
        **TOL[torch.float32],
    )


def test_masked_softmax_is_causal():
    X = torch.randn(2, 4, 6)
    torch.testing.assert_close(
        al.masked_softmax(X, is_causal=True),
        al.masked_softmax(X, mask=al.causal_mask(4, 6)),
    )


def record_sdpa_calls(monkeypatch):
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    return calls


def test_fused_path_reaches_sdpa_causal_kernel_when_exact(monkeypatch):
    calls = record_sdpa_calls(monkeypatch)
    layer = gqa()
    x = torch.randn(2, 6, 32)
    layer(x, x, x, is_causal=True, need_weights=False)
    assert (
        calls[-1]["is_causal"] is True
        and calls[-1]["attn_mask"] is None
        and calls[-1]["enable_gqa"] is True
    )
    # one new query over a longer cache: bottom-right causal masks nothing, so no mask
    # is built at all
    layer(x[:, :1], x, x, is_causal=True, need_weights=False)
    assert not calls[-1].get("is_causal", False) and calls[-1].get("attn_mask") is None
    # Q < K with several queries, or another mask: SDPA's top-left is_causal would be
    # wrong -> explicit mask
    layer(x[:, :3], x, x, is_causal=True, need_weights=False)
    assert calls[-1]["is_causal"] is False and calls[-1]["attn_mask"].shape[-2:] == (
        3,
        6,
    )
    # valid_lens + is_causal (Q == K): SDPA's causal kernel, then the padded rows of
    # the short example over its valid keys; no mask anywhere
    calls.clear()
    layer(x, x, x, valid_lens=torch.tensor([6, 4]), is_causal=True, need_weights=False)
    assert [c.get("is_causal", False) for c in calls] == [True, False]
    assert all(c.get("attn_mask") is None for c in calls)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("seed", range(6))
def test_fused_valid_lens_and_is_causal_equal_the_readable_path(dtype, seed):
    g = torch.Generator().manual_seed(seed)
    B, n = (
        int(torch.randint(1, 5, (), generator=g)),
        int(torch.randint(2, 12, (), generator=g)),
    )
    lens = torch.randint(0, n + 3, (B,), generator=g)  # 0 (all padding) .. beyond n
    lens[0] = n // 2
    if seed % 2:
        lens = lens.float()  # whole-number float lengths are accepted too
    x = torch.randn(B, n, 32, generator=g, dtype=dtype)
    for layer in (gqa(Hkv=2, dtype=dtype, seed=seed), gqa(Hkv=4, dtype=dtype)):
        readable = layer(x, x, x, valid_lens=lens, is_causal=True)
        fused = layer(x, x, x, valid_lens=lens, is_causal=True, need_weights=False)
        torch.testing.assert_close(fused, readable, **TOL[dtype])
    torch.manual_seed(seed)
    sa = al.SelfAttention(32, 8).to(dtype)  # 3-D inputs, no head axis
    readable = sa(x, valid_lens=lens, is_causal=True)
    fused = sa(x, valid_lens=lens, is_causal=True, need_weights=False)
    torch.testing.assert_close(fused, readable, **TOL[dtype])
    # the gradients agree too (the rows are assembled without in-place writes)
    grads = []
    for need_weights in (True, False):
        sa.zero_grad()
        xg = x.clone().requires_grad_()
        sa(
            xg, valid_lens=lens, is_causal=True, need_weights=need_weights
        ).sum().backward()
        grads.append((xg.grad, sa.W_q.weight.grad.clone()))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, **TOL[dtype])


class LargestTensor(TorchDispatchMode):
    """Records the largest tensor any aten op returns (its size, not its time)."""

    def __init__(self):
        super().__init__()
        self.numel, self.op = 0, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.numel() > self.numel:
                self.numel, self.op = t.numel(), str(func)
        return out


@pytest.mark.parametrize(
    "kwargs, quadratic",
    [
        ({"valid_lens": torch.tensor([1000, 300]), "is_causal": True}, False),
        ({"valid_lens": torch.tensor([1000, 300])}, False),
        ({"is_causal": True}, False),
        ({"mask": al.causal_mask(1024)}, True),  # the caller's own n x n tensor
    ],
)
def test_fused_path_memory_is_linear_with_valid_lens_and_is_causal(kwargs, quadratic):
    # Issue 14 (chapter 6): valid_lens + is_causal used to build an n x n mask
    # (aten.ones, n^2 elements at n = 1024) on the fused path.
    n = 1024
    layer, x = gqa(E=64, H=4, Hkv=2), torch.randn(2, n, 64)
    with torch.no_grad(), LargestTensor() as largest:
        layer(x, x, x, need_weights=False, **kwargs)
    assert largest.numel >= 2 * n * 64  # it saw the (B, n, E) activations
    if quadratic:
        assert largest.numel >= n * n, largest.op
    else:
        assert largest.numel < n * n, (largest.numel, largest.op)


def test_fused_causal_gqa_equals_projections_plus_sdpa():
    layer = gqa(E=64, H=8, Hkv=2)
    x = torch.randn(2, 9, 64)
    q = layer.W_q(x).reshape(2, 9, 8, 8).transpose(1, 2)
    k = layer.W_k(x).reshape(2, 9, 2, 8).transpose(1, 2)
    v = layer.W_v(x).reshape(2, 9, 2, 8).transpose(1, 2)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    ref = layer.W_o(ref.transpose(1, 2).reshape(2, 9, 64))
    torch.testing.assert_close(
        layer(x, x, x, is_causal=True, need_weights=False), ref, **TOL[torch.float32]
    )


# --- the KV cache
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("Hkv", [1, 2, 4])
def test_cached_decoding_equals_the_uncached_forward(dtype, need_weights, Hkv):
    layer = gqa(Hkv=Hkv, dtype=dtype, bias=True)
    B, T, new = 2, 5, 3
    x = torch.randn(B, T + new, 32, dtype=dtype)
    with torch.no_grad():
        full = layer(x, x, x, is_causal=True, need_weights=need_weights)
        cache = al.KVCache()
        steps = [
            layer(
                x[:, :T],
                x[:, :T],
                x[:, :T],
                is_causal=True,
                kv_cache=cache,
                need_weights=need_weights,
            )
        ]
        for t in range(T, T + new):
            xt = x[:, t : t + 1]
            steps.append(
                layer(
                    xt,
                    xt,
                    xt,
                    is_causal=True,
                    kv_cache=cache,
                    need_weights=need_weights,
                )
            )
            if need_weights:
                assert layer.attention_weights.shape == (B, 4, 1, t + 1)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, **TOL[dtype])
    assert (
        cache.keys.shape == cache.values.shape == (B, Hkv, T + new, 8)
        and len(cache) == T + new
    )
    # the cache holds exactly the projected keys/values of every position, only the Hkv
    # heads
    with torch.no_grad():
        k_all = al.split_heads(layer.W_k(x), Hkv)
    torch.testing.assert_close(cache.keys, k_all, **TOL[dtype])


def test_the_issue_benchmark_call_sequence():
    B, T, E, H, Hkv = 1, 16, 64, 8, 2
    layer = gqa(E, H, Hkv)
    x, x1 = torch.randn(B, T, E), torch.randn(B, 1, E)
    cache = al.KVCache()
    with torch.no_grad():
        y = layer(x, x, x, is_causal=True, kv_cache=cache, need_weights=False)
        y1 = layer(x1, x1, x1, is_causal=True, kv_cache=cache, need_weights=False)
    assert y.shape == (B, T, E) and y1.shape == (B, 1, E)
    assert cache.keys.shape == (B, Hkv, T + 1, E // H) and len(cache) == T + 1
    assert cache.values.shape == (B, Hkv, T + 1, E // H)


def test_appending_does_not_copy_the_cache_every_step():
    cache = al.KVCache()
    k = torch.randn(1, 2, 100, 4)
    cache.update(k, k)
    # a view keeps the first buffer alive, so the allocator cannot hand its address
    # to a later buffer and the pointer comparison below means what it says
    first = cache.keys
    reallocations, capacity = 0, cache.capacity
    for _ in range(1000):
        one = torch.randn(1, 2, 1, 4)
        cache.update(one, one)
        if cache.capacity != capacity:
            reallocations, capacity = reallocations + 1, cache.capacity
    assert len(cache) == 1100
    assert (
        reallocations <= 3
    )  # capacity doubles: 356 -> 712 -> 1424, not one copy per token
    assert cache.keys.data_ptr() != first.data_ptr() and capacity >= 1100
    # within capacity, an append writes in place: the buffer stays where it is
    ptr = cache.keys.data_ptr()
    cache.update(one, one)
    assert cache.keys.data_ptr() == ptr


def test_reset_crop_and_capacity():
    cache = al.KVCache(capacity=8)
    k = torch.randn(2, 1, 3, 4)
    cache.update(k, k)
    assert cache.capacity == 8 and len(cache) == 3
    cache.crop(1)
    assert len(cache) == 1 and torch.equal(cache.keys, k[:, :, :1])
    cache.reset()
    assert len(cache) == 0 and cache.keys is None
    cache.update(
        torch.randn(5, 1, 2, 4), torch.randn(5, 1, 2, 4)
    )  # another batch size after reset is fine
    assert cache.keys.shape == (5, 1, 2, 4)


@pytest.mark.parametrize(
    "other,what",
    [
        ((3, 2, 1, 8), r"expected batch size B = 2, got 3"),
        ((2, 1, 1, 8), r"expected key/value heads Hkv = 2, got 1"),
        ((2, 2, 1, 4), r"expected head width d = 8, got 4"),
    ],
)
def test_a_cache_of_another_batch_heads_or_width_is_refused(other, what):
    cache = al.KVCache()
    k = torch.randn(2, 2, 3, 8)
    cache.update(k, k)
    bad = torch.randn(*other)
    with pytest.raises(ValueError, match=what):
        cache.update(bad, bad)


def test_a_cache_shared_between_layers_of_another_shape_is_refused():
    cache = al.KVCache()
    x = torch.randn(2, 4, 32)
    with torch.no_grad():
        gqa(Hkv=2)(x, x, x, kv_cache=cache, is_causal=True)
        with pytest.raises(
            ValueError, match=r"expected key/value heads Hkv = 2, got 4"
        ):
            gqa(Hkv=4)(x, x, x, kv_cache=cache, is_causal=True)
        with pytest.raises(ValueError, match=r"expected batch size B = 2, got 1"):
            gqa(Hkv=2)(x[:1], x[:1], x[:1], kv_cache=cache, is_causal=True)
        with pytest.raises(ValueError, match=r"expected head width d = 8, got 16"):
            gqa(E=32, H=2, Hkv=2)(x, x, x, kv_cache=cache, is_causal=True)
    with pytest.raises(
        ValueError, match="expected an attention_lib.KVCache or None, got dict"
    ):
        gqa()(x, x, x, kv_cache={})


def test_cache_with_autograd_concatenates():
    cache = al.KVCache()
    a = torch.randn(1, 1, 2, 4, requires_grad=True)
    b = torch.randn(1, 1, 1, 4, requires_grad=True)
    cache.update(a, a)
    keys, _ = cache.update(b, b)
    keys.sum().backward()
    assert torch.equal(a.grad, torch.ones_like(a)) and torch.equal(
        b.grad, torch.ones_like(b)
    )


BAD_CALLS = {
    "valid_lens of another batch": dict(valid_lens=torch.tensor([4, 4, 4])),
    "negative valid_lens": dict(valid_lens=torch.tensor([4, -1])),
    "float mask": dict(mask=torch.ones(1, 4)),
    "mask of the wrong width": dict(mask=torch.ones(1, 3, dtype=torch.bool)),
    "3-D mask": dict(mask=torch.ones(2, 1, 4, dtype=torch.bool)),
}


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("bad", list(BAD_CALLS))
@pytest.mark.parametrize("Hkv", [2, 4])
def test_a_rejected_call_leaves_the_cache_as_it_was(bad, need_weights, Hkv):
    # Issue 14, bug 1: the keys/values were appended before valid_lens/mask were
    # checked, so the good call after a rejected one attended to a stale extra step.
    layer = gqa(Hkv=Hkv)
    x = torch.randn(2, 4, 32)
    with torch.no_grad():
        fresh = al.KVCache()
        layer(x[:, :3], x[:, :3], x[:, :3], is_causal=True, kv_cache=fresh)
        want = layer(x[:, 3:], x[:, 3:], x[:, 3:], kv_cache=fresh, need_weights=False)
        cache = al.KVCache()
        layer(x[:, :3], x[:, :3], x[:, :3], is_causal=True, kv_cache=cache)
        keys, values = cache.keys.clone(), cache.values.clone()
        weights = layer.attention_weights  # (B, H, 3, 3) of the prefill
        assert weights is not None
        x1 = x[:, 3:]
        with pytest.raises(ValueError, match="valid_lens|mask"):
            layer(
                x1, x1, x1, kv_cache=cache, need_weights=need_weights, **BAD_CALLS[bad]
            )
        assert len(cache) == 3
        assert torch.equal(cache.keys, keys) and torch.equal(cache.values, values)
        assert layer.attention_weights is weights  # no state of the layer changed
        got = layer(x1, x1, x1, kv_cache=cache, need_weights=False)
    assert len(cache) == 4
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_a_cache_of_another_layer_is_refused_before_anything_is_written():
    cache = al.KVCache()
    x = torch.randn(2, 4, 32)
    with torch.no_grad():
        gqa(Hkv=2)(x, x, x, kv_cache=cache, is_causal=True)
        keys = cache.keys.clone()
        for layer in (gqa(Hkv=4), gqa(Hkv=2, dtype=torch.float64)):
            x_other = x.to(layer.W_q.weight.dtype)
            with pytest.raises(ValueError, match="KVCache"):
                layer(x_other, x_other, x_other, kv_cache=cache)
            assert len(cache) == 4 and torch.equal(cache.keys, keys)


@pytest.mark.parametrize("prefilled", [False, True])
def test_an_unexpected_failure_after_the_append_restores_the_cache(
    monkeypatch, prefilled
):
    # Belt and braces: whatever fails after the append, the cache is put back.
    layer, x = gqa(), torch.randn(2, 4, 32)
    cache = al.KVCache()
    with torch.no_grad():
        if prefilled:
            layer(x, x, x, kv_cache=cache, is_causal=True)
        before = (len(cache), cache.keys, cache.values, cache.capacity)

        def broken(*args, **kwargs):
            raise RuntimeError("broken kernel")

        monkeypatch.setattr(al.multihead, "fused_attention", broken)
        with pytest.raises(RuntimeError, match="broken kernel"):
            layer(x, x, x, kv_cache=cache, need_weights=False)
    after = (len(cache), cache.keys, cache.values, cache.capacity)
    assert after[0] == before[0] and after[3] == before[3]
    for a, b in zip(after[1:3], before[1:3]):
        assert (a is None and b is None) or torch.equal(a, b)


def test_prefill_under_inference_mode_then_decode_under_no_grad():
    # Issue 14, bug 2: buffers made under inference_mode cannot be written outside it.
    layer = gqa(Hkv=2)
    x = torch.randn(2, 8, 32)
    with torch.no_grad():
        full = layer(x, x, x, is_causal=True, need_weights=False)
    cache = al.KVCache()
    with torch.inference_mode():
        steps = [layer(x[:, :5], x[:, :5], x[:, :5], is_causal=True, kv_cache=cache)]
    assert cache.keys.is_inference()
    pointers = set()
    with torch.no_grad():
        for t in range(5, 8):
            xt = x[:, t : t + 1]
            steps.append(layer(xt, xt, xt, kv_cache=cache, need_weights=t % 2 == 0))
            pointers.add(cache.keys.data_ptr())
    assert not cache.keys.is_inference() and not cache.values.is_inference()
    assert len(pointers) == 1  # reallocated once, at the first step outside
    assert len(cache) == 8
    torch.testing.assert_close(torch.cat(steps, dim=1), full, **TOL[torch.float32])
    with torch.inference_mode():  # and back: ordinary buffers are writable in there
        xt = torch.randn(2, 1, 32)
        layer(xt, xt, xt, kv_cache=cache)
    assert len(cache) == 9 and cache.keys.data_ptr() in pointers


def test_the_decoder_prefills_in_inference_mode_and_decodes_under_no_grad():
    torch.manual_seed(0)
    m = al.TinyDecoder(11, 16, 4, 2, 2, 20).eval()
    tokens = torch.randint(0, 11, (2, 9))
    with torch.no_grad():
        full = m(tokens, need_weights=False)
    caches = [al.KVCache() for _ in m.blocks]
    with torch.inference_mode():
        prefill = m(tokens[:, :6], kv_caches=caches)
    with torch.no_grad():
        rest = [m(tokens[:, t : t + 1], kv_caches=caches) for t in range(6, 9)]
    torch.testing.assert_close(torch.cat([prefill, *rest], dim=1), full)


def fast_gqa(E=32, H=4, Hkv=2, dtype=torch.float32, seed=0, bias=False):
    torch.manual_seed(seed)
    return al.FastGroupedQueryAttention(E, H, Hkv, bias=bias).to(dtype).eval()


def test_the_decode_step_sees_every_change_to_the_key_value_weights():
    # The fast decode step projects keys and values with one matmul over W_k and W_v
    # packed in one block of memory; whatever changes them must show in the output.
    layer = fast_gqa(Hkv=2, bias=True)
    assert layer._fused_kv() is not None  # packed at construction
    assert set(layer.state_dict()) == {
        f"W_{n}.{p}" for n in "qkvo" for p in ("weight", "bias")
    }
    x = torch.randn(2, 6, 32)

    def cached_vs_full():
        cache = al.KVCache()
        with torch.no_grad():
            full = layer(x, x, x, is_causal=True, need_weights=False)
            layer(x[:, :5], x[:, :5], x[:, :5], is_causal=True, kv_cache=cache)
            x1 = x[:, 5:]
            step = layer(x1, x1, x1, kv_cache=cache, need_weights=False)
        torch.testing.assert_close(step, full[:, 5:], **TOL[torch.float32])

    cached_vs_full()
    layer.W_k.weight.data.mul_(2)  # through .data: no version counter bump
    with torch.no_grad():
        layer.W_v.bias.add_(1)
    cached_vs_full()
    layer.load_state_dict(fast_gqa(Hkv=2, bias=True, seed=5).state_dict())
    cached_vs_full()
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    layer(x, x, x).square().sum().backward()  # W_k and W_v get their own gradients
    assert layer.W_k.weight.grad.shape == layer.W_k.weight.shape
    optimizer.step()
    cached_vs_full()
    layer.W_k.weight = torch.nn.Parameter(torch.randn(16, 32))  # replaced: unpacked
    assert layer._fused_kv() is None
    cached_vs_full()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("Hkv", [1, 2, 4])
@pytest.mark.parametrize("bias", [False, True])
def test_the_fast_layer_is_the_readable_layer(dtype, Hkv, bias):
    # FastGroupedQueryAttention: the same parameters and outputs, on every path; its
    # own decode step takes one fused K/V matmul and one cache copy.
    slow = gqa(Hkv=Hkv, dtype=dtype, bias=bias)
    fast = fast_gqa(Hkv=Hkv, dtype=dtype, bias=bias)
    assert isinstance(fast, al.GroupedQueryAttention)
    assert fast.state_dict().keys() == slow.state_dict().keys()
    fast.load_state_dict(slow.state_dict())
    # packed at construction, and load_state_dict copies in; .to(float64) unpacks
    # (the decode step then projects keys and values separately)
    assert (fast._fused_kv() is not None) == (dtype == torch.float32)
    x = torch.randn(2, 7, 32, dtype=dtype)
    for need_weights in (True, False):
        torch.testing.assert_close(
            fast(x, x, x, is_causal=True, need_weights=need_weights),
            slow(x, x, x, is_causal=True, need_weights=need_weights),
            **TOL[dtype],
        )
    caches = {"slow": al.KVCache(), "fast": al.KVCache()}
    with torch.inference_mode():
        for name, layer in (("slow", slow), ("fast", fast)):
            layer(x[:, :4], x[:, :4], x[:, :4], is_causal=True, kv_cache=caches[name])
        for t in range(4, 7):
            xt = x[:, t : t + 1]
            a = slow(xt, xt, xt, kv_cache=caches["slow"], need_weights=False)
            b = fast(xt, xt, xt, kv_cache=caches["fast"], need_weights=False)
            torch.testing.assert_close(b, a, **TOL[dtype])
        two = x[:, 5:7]  # two new queries at once, causal, through the fused route
        caches["slow"].crop(5)
        caches["fast"].crop(5)
        a = slow(
            two, two, two, kv_cache=caches["slow"], need_weights=False, is_causal=True
        )
        b = fast(
            two, two, two, kv_cache=caches["fast"], need_weights=False, is_causal=True
        )
        torch.testing.assert_close(b, a, **TOL[dtype])
    torch.testing.assert_close(caches["fast"].keys, caches["slow"].keys, **TOL[dtype])
    torch.testing.assert_close(
        caches["fast"].values, caches["slow"].values, **TOL[dtype]
    )
    # a bad decode call is refused by the same checks, the cache unchanged
    with torch.no_grad(), pytest.raises(ValueError, match="num_hiddens E"):
        fast(x[:, :1, :8], x[:, :1, :8], x[:, :1, :8], kv_cache=caches["fast"],
             need_weights=False)  # fmt: skip
    assert len(caches["fast"]) == 7


def test_the_fast_decode_step_takes_its_own_route(monkeypatch):
    # the decode step does not go through the parent's forward (one fused K/V matmul)
    layer = fast_gqa(Hkv=2)
    x = torch.randn(1, 5, 32)
    cache = al.KVCache()
    with torch.no_grad():
        layer(x[:, :4], x[:, :4], x[:, :4], is_causal=True, kv_cache=cache)
        calls = []
        monkeypatch.setattr(
            al.GroupedQueryAttention, "forward", lambda *a, **k: calls.append(1)
        )
        x1 = x[:, 4:]
        layer(x1, x1, x1, kv_cache=cache, need_weights=False)
    assert calls == [] and len(cache) == 5


def test_convert_to_gqa_keeps_the_layer_class_and_packs_the_fast_one():
    fast = al.FastGroupedQueryAttention(32, 4, 4, bias=True).eval()
    g = al.convert_to_gqa(fast, 2)
    assert type(g) is al.FastGroupedQueryAttention and g.num_kv_heads == 2
    assert g._fused_kv() is not None  # W_k and W_v packed again
    assert type(al.convert_to_gqa(al.MultiHeadAttention(32, 4), 2)) is (
        al.GroupedQueryAttention
    )
    assert type(al.convert_to_gqa(al.MultiHeadAttention(32, 4), 4)) is (
        al.MultiHeadAttention
    )
    x = torch.randn(2, 5, 32)
    slow = al.convert_to_gqa(al.GroupedQueryAttention(32, 4, 4, bias=True), 2)
    slow.load_state_dict(g.state_dict())
    cache = al.KVCache()
    with torch.no_grad():
        g(x[:, :4], x[:, :4], x[:, :4], is_causal=True, kv_cache=cache)
        x1 = x[:, 4:]
        step = g(x1, x1, x1, kv_cache=cache, need_weights=False)
        full = slow(x, x, x, is_causal=True)
    torch.testing.assert_close(step, full[:, 4:], **TOL[torch.float32])


class ShiftByPosition(torch.nn.Module):
    """A stand-in for a rotary embedding: adds each token's position to q and k."""

    def forward(self, q, k, start):
        pos_q = torch.arange(start, start + q.shape[-2], dtype=q.dtype)[:, None]
        pos_k = torch.arange(start, start + k.shape[-2], dtype=k.dtype)[:, None]
        return q + pos_q, k + pos_k


@pytest.mark.parametrize(
    "layer_class", ["GroupedQueryAttention", "FastGroupedQueryAttention"]
)
def test_rotary_hook_sees_the_positions_of_the_new_tokens(layer_class):
    torch.manual_seed(0)
    layer = getattr(al, layer_class)(32, 4, 2, rotary=ShiftByPosition()).eval()
    assert isinstance(layer.rotary, torch.nn.Module)  # registered as a submodule
    x = torch.randn(2, 6, 32)
    with torch.no_grad():
        full = layer(x, x, x, is_causal=True, need_weights=False)
        # the hook is applied: by hand, without it
        q = al.split_heads(layer.W_q(x), 4) + torch.arange(6.0)[:, None]
        k = al.split_heads(layer.W_k(x), 2) + torch.arange(6.0)[:, None]
        v = al.split_heads(layer.W_v(x), 2)
        by_hand = layer.W_o(al.merge_heads(F.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=True)))  # fmt: skip
        torch.testing.assert_close(full, by_hand, **TOL[torch.float32])
        cache = al.KVCache()
        steps = [layer(x[:, :3], x[:, :3], x[:, :3], is_causal=True, kv_cache=cache)]
        for t in range(3, 6):  # each new token at position len(cache)
            xt = x[:, t : t + 1]
            steps.append(layer(xt, xt, xt, kv_cache=cache, need_weights=t % 2 == 0))
    torch.testing.assert_close(torch.cat(steps, dim=1), full, **TOL[torch.float32])
    with pytest.raises(ValueError, match="rotary: expected a callable"):
        al.GroupedQueryAttention(32, 4, 2, rotary=3)


def test_kv_cache_bytes_is_what_the_cache_holds():
    B, T, E, H, Hkv, layers = 2, 12, 64, 8, 2, 3
    caches = [al.KVCache(capacity=T) for _ in range(layers)]
    x = torch.randn(B, T, E, dtype=torch.float16)
    with torch.no_grad():
        for cache in caches:
            gqa(E, H, Hkv, dtype=torch.float16)(
                x, x, x, is_causal=True, kv_cache=cache, need_weights=False
            )
    held = sum(t.numel() * t.element_size() for c in caches for t in (c.keys, c.values))
    assert held == al.kv_cache_bytes(
        layers, Hkv, E // H, T, batch_size=B, bytes_per_element=2
    )


# --- converting multi-head to grouped-query attention
# ---------------------------------------------------------
@pytest.mark.parametrize("bias", [False, True])
def test_convert_to_gqa_mean_pools_each_group(bias):
    mha = al.MultiHeadAttention(32, 4, bias=bias)
    g = al.convert_to_gqa(mha, 2)
    assert (
        isinstance(g, al.GroupedQueryAttention)
        and g.num_kv_heads == 2
        and g.num_heads == 4
    )
    Wk = mha.W_k.weight.reshape(4, 8, 32)  # (H, d, E)
    torch.testing.assert_close(
        g.W_k.weight, Wk.reshape(2, 2, 8, 32).mean(1).reshape(16, 32)
    )
    torch.testing.assert_close(g.W_q.weight, mha.W_q.weight)
    torch.testing.assert_close(g.W_o.weight, mha.W_o.weight)
    first = al.convert_to_gqa(mha, 1, method="first")
    torch.testing.assert_close(first.W_v.weight, mha.W_v.weight[:8])
    if bias:
        torch.testing.assert_close(
            g.W_v.bias, mha.W_v.bias.reshape(2, 2, 8).mean(1).reshape(16)
        )


def test_convert_to_gqa_is_exact_when_the_heads_of_a_group_agree():
    mha = al.MultiHeadAttention(32, 4)
    with torch.no_grad():  # heads 0,1 and 2,3 share their key/value projections
        for W in (mha.W_k.weight, mha.W_v.weight):
            W[8:16] = W[0:8]
            W[24:32] = W[16:24]
    x = torch.randn(2, 5, 32)
    g = al.convert_to_gqa(mha, 2)
    torch.testing.assert_close(
        g(x, x, x, is_causal=True), mha(x, x, x, is_causal=True), **TOL[torch.float32]
    )


def test_convert_to_gqa_on_a_model_leaves_the_input_alone():
    model = torch.nn.Sequential(al.MultiHeadAttention(16, 4), torch.nn.Linear(16, 16))
    model.add_module(
        "inner", torch.nn.ModuleDict({"attn": al.MultiHeadAttention(16, 4)})
    )
    before = {k: v.clone() for k, v in model.state_dict().items()}
    converted = al.convert_to_gqa(model, 1, method="mean")
    assert converted[0].num_kv_heads == 1 and converted.inner["attn"].num_kv_heads == 1
    assert model[0].num_kv_heads == 4 and all(
        torch.equal(before[k], v) for k, v in model.state_dict().items()
    )
    torch.testing.assert_close(converted[1].weight, model[1].weight)


class TiedAttention(torch.nn.Module):
    """One attention layer registered under two names, as weight tying does."""

    def __init__(self):
        super().__init__()
        self.encoder_attention = al.MultiHeadAttention(16, 4)
        self.decoder_attention = self.encoder_attention  # the same module
        self.blocks = torch.nn.ModuleList([al.MultiHeadAttention(16, 4)])
        self.blocks.append(self.blocks[0])  # tied inside a container too
        self.other = al.MultiHeadAttention(16, 4)


@pytest.mark.parametrize("method", ["mean", "first"])
def test_convert_to_gqa_converts_every_registration_and_keeps_ties(method):
    # Issue 14, bug 3: named_modules() lists a tied layer once, so only its first name
    # was converted and the second still held the 4-kv-head layer.
    model = TiedAttention()
    converted = al.convert_to_gqa(model, 2, method=method)
    assert converted.encoder_attention is converted.decoder_attention
    assert converted.blocks[0] is converted.blocks[1]
    assert converted.other is not converted.encoder_attention
    for layer in (converted.encoder_attention, converted.blocks[0], converted.other):
        assert isinstance(layer, al.GroupedQueryAttention) and layer.num_kv_heads == 2
    assert all(
        m.num_kv_heads == 2
        for m in converted.modules()
        if isinstance(m, al.GroupedQueryAttention)
    )
    assert model.decoder_attention.num_kv_heads == 4  # the input is untouched
    assert model.encoder_attention is model.decoder_attention
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(
        converted.decoder_attention(x, x, x),
        al.convert_to_gqa(model.encoder_attention, 2, method=method)(x, x, x),
    )
    # parameters are shared, not copied: one set per tied layer
    names = {name for name, _ in converted.named_parameters()}
    assert len(list(converted.parameters())) == 3 * 4 and len(names) == 3 * 4


def test_convert_to_gqa_bad_input():
    mha = al.MultiHeadAttention(32, 4)
    with pytest.raises(
        ValueError, match="divide the layer's current 4 key/value heads, got 3"
    ):
        al.convert_to_gqa(mha, 3)
    with pytest.raises(
        ValueError, match="expected method 'mean' or 'first', got 'random'"
    ):
        al.convert_to_gqa(mha, 2, method="random")
    with pytest.raises(ValueError, match="contains no GroupedQueryAttention"):
        al.convert_to_gqa(torch.nn.Linear(2, 2), 1)
    with pytest.raises(
        ValueError, match="num_kv_heads to be a positive integer, got 0"
    ):
        al.convert_to_gqa(mha, 0)


def test_positional_encoding_offset():
    pe = al.PositionalEncoding(8, max_len=20)
    X = torch.zeros(1, 10, 8)
    torch.testing.assert_close(pe(X[:, :3], offset=7), pe(X)[:, 7:10])
    with pytest.raises(
        ValueError, match=r"max_len=20 positions, got positions 18 .. 20"
    ):
        pe(X[:, :3], offset=18)
    with pytest.raises(ValueError, match="offset: expected a non-negative int"):
        pe(X, offset=-1)
