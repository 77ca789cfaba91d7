"""Tests of attention by tiles (``al.tiled_attention``) and of ``al.merge_attention``.

Oracles: the library's readable ``dot_product_attention`` and PyTorch's
``F.scaled_dot_product_attention`` (SDPA), in float64 to 1e-10, and the log-sum-exp of
the masked scores computed in one piece.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import attention_lib as al
from tolerances import TOL

F64 = TOL[torch.float64]


def keep_mask(B, heads, Q, K, valid_lens, mask, is_causal):
    """The combined keep-mask (B, *heads, Q, K), built in one piece (the oracle's)."""
    keep = torch.ones((B, *heads, Q, K), dtype=torch.bool)
    if valid_lens is not None:
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(B, Q)
        lens = lens.reshape((B,) + (1,) * len(heads) + (Q, 1))  # (B, 1.., Q, 1)
        keep = keep & (torch.arange(K) < lens)
    if mask is not None:
        keep = keep & mask
    if is_causal:
        keep = keep & al.causal_mask(Q, K)
    return keep


def oracle_lse(queries, keys, keep, scale=None):
    """log-sum-exp of each query's scaled, masked scores, in one piece."""
    scale = 1 / math.sqrt(queries.shape[-1]) if scale is None else scale
    scores = queries @ keys.transpose(-2, -1) * scale  # (B, ..., Q, K)
    return scores.masked_fill(~keep, -math.inf).logsumexp(dim=-1)  # (B, ..., Q)


def make(B, heads, Q, K, D, Dv, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn((B, *heads, Q, D), generator=g, dtype=dtype)
    k = torch.randn((B, *heads, K, D), generator=g, dtype=dtype)
    v = torch.randn((B, *heads, K, Dv), generator=g, dtype=dtype)
    return q, k, v


def check_against_oracles(q, k, v, valid_lens, mask, is_causal, block_size, scale=None):
    B, heads, Q, K = q.shape[0], tuple(q.shape[1:-2]), q.shape[-2], k.shape[-2]
    out, lse = al.tiled_attention(
        q, k, v, valid_lens, mask, scale=scale, is_causal=is_causal,
        block_size=block_size, return_lse=True,
    )  # fmt: skip
    assert out.shape == q.shape[:-1] + v.shape[-1:] and lse.shape == q.shape[:-1]
    assert out.dtype == lse.dtype == q.dtype
    readable, _ = al.dot_product_attention(
        q, k, v, valid_lens, mask, scale=scale, is_causal=is_causal
    )
    torch.testing.assert_close(out, readable, **TOL[q.dtype])
    keep = keep_mask(B, heads, Q, K, valid_lens, mask, is_causal)
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=scale)
    sdpa = sdpa.masked_fill(~keep.any(dim=-1, keepdim=True), 0.0)  # fully masked: 0
    torch.testing.assert_close(out, sdpa, **TOL[q.dtype])
    torch.testing.assert_close(lse, oracle_lse(q, k, keep, scale), **TOL[q.dtype])
    # a query that sees no key: output exactly 0 and lse -inf, never NaN
    none = ~keep.any(dim=-1)  # (B, ..., Q)
    assert out[none].eq(0).all() and lse[none].eq(-math.inf).all()
    assert not out.isnan().any() and not lse.isnan().any()


# -- equal to the readable path and to SDPA --------------------------------------------


@pytest.mark.parametrize("block_size", [1, 3, 4, 8, 12, 64])
@pytest.mark.parametrize("Q, K", [(12, 12), (8, 12), (12, 8), (1, 12), (5, 7)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_block_sizes_that_do_and_do_not_divide(block_size, Q, K, is_causal):
    q, k, v = make(2, (3,), Q, K, 6, 5)
    check_against_oracles(q, k, v, None, None, is_causal, block_size)


masks = st.sampled_from(["none", "lens1", "lens2", "bool", "bool_keys", "lens+bool"])


@settings(max_examples=80, deadline=None)
@given(
    B=st.integers(1, 3),
    heads=st.sampled_from([(), (2,), (2, 3)]),
    Q=st.integers(1, 13),
    K=st.integers(1, 13),
    D=st.integers(1, 5),
    Dv=st.integers(1, 4),
    block_size=st.integers(1, 9),
    kind=masks,
    is_causal=st.booleans(),
    scale=st.sampled_from([None, 0.3, -1.5]),
    seed=st.integers(0, 10_000),
)
def test_equals_the_readable_path_and_sdpa(
    B, heads, Q, K, D, Dv, block_size, kind, is_causal, scale, seed
):
    q, k, v = make(B, heads, Q, K, D, Dv, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    valid_lens = mask = None
    if kind in ("lens1", "lens+bool"):
        valid_lens = torch.randint(0, K + 1, (B,), generator=g)  # 0: a fully masked row
    if kind == "lens2":
        valid_lens = torch.randint(0, K + 1, (B, Q), generator=g)
    if kind in ("bool", "lens+bool"):
        mask = torch.rand((B, *heads, Q, K), generator=g) > 0.4  # (B, ..., Q, K)
    if kind == "bool_keys":  # broadcast over queries and heads: (B, 1.., 1, K)
        mask = torch.rand((B,) + (1,) * len(heads) + (1, K), generator=g) > 0.3
    check_against_oracles(q, k, v, valid_lens, mask, is_causal, block_size, scale)


@pytest.mark.parametrize("mask_shape", [(7,), (1, 7), (5, 7), (5, 1), (2, 1, 5, 7)])
def test_masks_that_broadcast(mask_shape):
    q, k, v = make(2, (3,), 5, 7, 4, 3)
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(1)) > 0.3
    for block_size in (2, 3, 8):
        check_against_oracles(q, k, v, None, mask, False, block_size)


@pytest.mark.parametrize("Q, K", [(4, 9), (9, 9), (9, 4)])
def test_causal_with_fewer_and_more_queries_than_keys(Q, K):
    # Q > K: the first Q - K queries see no key at all (bottom-right alignment)
    q, k, v = make(1, (2,), Q, K, 4, 4)
    out, lse = al.tiled_attention(
        q, k, v, is_causal=True, block_size=2, return_lse=True
    )
    check_against_oracles(q, k, v, None, None, True, 2)
    unseen = max(0, Q - K)
    assert out[..., :unseen, :].eq(0).all() and lse[..., :unseen].eq(-math.inf).all()
    assert torch.isfinite(lse[..., unseen:]).all()


def test_fully_masked_rows_and_empty_sizes():
    q, k, v = make(2, (), 4, 6, 3, 2)
    out, lse = al.tiled_attention(q, k, v, torch.tensor([0, 6]), return_lse=True)
    assert out[0].eq(0).all() and lse[0].eq(-math.inf).all()
    assert torch.isfinite(lse[1]).all()
    out, lse = al.tiled_attention(q, k[:, :0], v[:, :0], return_lse=True)  # K = 0
    assert out.shape == (2, 4, 2) and out.eq(0).all() and lse.eq(-math.inf).all()
    out, lse = al.tiled_attention(q[:, :0], k, v, return_lse=True)  # Q = 0
    assert out.shape == (2, 0, 2) and lse.shape == (2, 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_lower_precision_matches_sdpa(dtype):
    q, k, v = make(2, (4,), 33, 40, 16, 16, dtype=torch.float64)
    ref = F.scaled_dot_product_attention(q, k, v)  # float64
    out = al.tiled_attention(q.to(dtype), k.to(dtype), v.to(dtype), block_size=8)
    assert out.dtype == dtype
    torch.testing.assert_close(out, ref.to(dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_error_does_not_grow_with_the_number_of_keys(dtype):
    # The running state is float32 (as in FlashAttention's kernels): at K = 16384 the
    # error against float64 is SDPA's own (kept in 16 bits, it was 20x SDPA's in
    # bfloat16).
    g = torch.Generator().manual_seed(0)
    Q, K, D = 16, 16384, 64
    q = torch.randn(1, Q, D, generator=g, dtype=torch.float64)
    k = torch.randn(1, K, D, generator=g, dtype=torch.float64)
    v = torch.randn(1, K, D, generator=g, dtype=torch.float64) + 1  # values N(1, 1)
    exact = F.scaled_dot_product_attention(q, k, v)  # float64
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    out, lse = al.tiled_attention(q, k, v, block_size=256, return_lse=True)
    assert out.dtype == dtype and lse.dtype == torch.float32
    sdpa = F.scaled_dot_product_attention(q, k, v)
    err = (out.double() - exact).abs().max().item()
    err_sdpa = (sdpa.double() - exact).abs().max().item()
    assert err <= 1.5 * err_sdpa + 1e-4, (err, err_sdpa)
    torch.testing.assert_close(
        lse.double(), oracle_lse(q.double(), k.double(), torch.ones(1, Q, K, dtype=bool)),
        atol=1e-3, rtol=1e-4,
    )  # fmt: skip


def test_float16_running_sum_does_not_overflow():
    # 70,000 equal scores: the running sum reaches 70,000 > 65504, float16's largest
    # value; kept in float16 it became inf, and the output inf / inf = NaN.
    K = 70_000
    q = torch.zeros(1, 2, 8, dtype=torch.float16)
    k = torch.zeros(1, K, 8, dtype=torch.float16)
    v = torch.ones(1, K, 4, dtype=torch.float16)
    out, lse = al.tiled_attention(q, k, v, block_size=4096, return_lse=True)
    assert out.dtype == torch.float16 and torch.equal(out, torch.ones_like(out))
    torch.testing.assert_close(lse, torch.full((1, 2), math.log(K)))


def test_merge_of_16_bit_chunks():
    # float16 outputs with their float32 lses merge in float32 and come back in float16
    q, k, v = make(1, (2,), 5, 24, 8, 4)
    whole = F.scaled_dot_product_attention(q, k, v)
    outputs, lses = [], []
    for a in (0, 8, 16):  # three chunks of 8 keys
        k16, v16 = k[..., a : a + 8, :].half(), v[..., a : a + 8, :].half()
        out, lse = al.tiled_attention(q.half(), k16, v16, return_lse=True)
        outputs.append(out)
        lses.append(lse)
    merged, lse = al.merge_attention(outputs, lses)
    assert merged.dtype == torch.float16 and lse.dtype == torch.float32
    torch.testing.assert_close(merged, whole.half(), **TOL[torch.float16])


def test_large_scores_do_not_overflow():
    # scores of about 1e4: exp overflows without the running maximum, even in float64
    q, k, v = make(1, (), 6, 20, 4, 3)
    q, k = 100 * q, 100 * k
    check_against_oracles(q, k, v, None, None, False, 7)
    out = al.tiled_attention(q.float(), k.float(), v.float(), block_size=7)
    assert torch.isfinite(out).all()


# -- gradients -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, is_causal, Q, K",
    [
        ("none", False, 7, 9),
        ("none", True, 9, 9),
        ("lens", True, 9, 5),
        ("bool", False, 6, 6),
    ],
)
def test_gradients_equal_those_of_the_readable_path(kind, is_causal, Q, K):
    q, k, v = make(2, (2,), Q, K, 4, 3)
    valid_lens = torch.tensor([0, 3]) if kind == "lens" else None  # batch 0: no key
    mask = torch.rand(2, 2, Q, K, generator=torch.Generator().manual_seed(3)) > 0.5
    mask = mask if kind == "bool" else None
    grads = []
    for attention in ("tiled", "readable"):
        inputs = [t.clone().requires_grad_() for t in (q, k, v)]
        if attention == "tiled":
            out = al.tiled_attention(
                *inputs, valid_lens, mask, is_causal=is_causal, block_size=4
            )
        else:
            out, _ = al.dot_product_attention(
                *inputs, valid_lens, mask, is_causal=is_causal
            )
        (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
        grads.append([t.grad for t in inputs])
    for tiled, readable in zip(*grads):
        assert torch.isfinite(tiled).all()
        torch.testing.assert_close(tiled, readable, **F64)


def test_gradcheck_of_output_and_lse():
    q, k, v = (t.requires_grad_() for t in make(1, (2,), 5, 6, 3, 2))

    def both(q, k, v):
        return al.tiled_attention(
            q, k, v, block_size=2, is_causal=True, return_lse=True
        )

    assert torch.autograd.gradcheck(both, (q, k, v))


# -- the tiles -------------------------------------------------------------------------


class Recorder(TorchDispatchMode):
    """Counts matrix products and remembers the largest tensor an operation creates."""

    def __init__(self):
        super().__init__()
        self.products, self.largest = 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in (torch.ops.aten.bmm.default, torch.ops.aten.mm.default):
            self.products += 1
        if isinstance(out, torch.Tensor):
            self.largest = max(self.largest, out.numel())
        return out


@pytest.mark.parametrize("n, block", [(64, 8), (60, 8), (64, 64), (10, 3)])
def test_causal_skips_the_tiles_above_the_diagonal(n, block):
    q, k, v = make(1, (2,), n, n, 4, 4, dtype=torch.float32)
    tiles = math.ceil(n / block)
    with Recorder() as full:
        al.tiled_attention(q, k, v, block_size=block)
    with Recorder() as causal:
        al.tiled_attention(q, k, v, block_size=block, is_causal=True)
    assert full.products == 2 * tiles**2  # two products per tile: q k^T and p v
    assert causal.products == 2 * tiles * (tiles + 1) // 2  # the diagonal and below


def test_never_more_than_one_tile_of_scores():
    B, H, n, d, block = 1, 2, 256, 8, 32
    q, k, v = make(B, (H,), n, n, d, d, dtype=torch.float32)
    with torch.no_grad(), Recorder() as rec:
        out = al.tiled_attention(q, k, v, block_size=block)
    assert rec.largest == out.numel() == B * H * n * d  # the output itself, then ...
    with torch.no_grad(), Recorder() as rec:
        out = al.tiled_attention(q, k, v[..., :1], block_size=block)  # ... Dv = 1
    assert out.numel() < B * H * block * block  # the output is smaller than a tile
    assert rec.largest == B * H * block * block  # one tile of scores; n x n never


# -- merge_attention -------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    K=st.integers(1, 20),
    Q=st.integers(1, 6),
    cuts=st.lists(st.integers(0, 20), max_size=4),
    is_causal=st.booleans(),
    with_lens=st.booleans(),
    seed=st.integers(0, 10_000),
)
def test_merging_any_split_equals_the_whole(K, Q, cuts, is_causal, with_lens, seed):
    q, k, v = make(2, (2,), Q, K, 4, 3, seed=seed)
    valid_lens = torch.tensor([0, K]) if with_lens else None  # batch 0 sees no key
    mask = al.causal_mask(Q, K) if is_causal else None
    whole, whole_lse = al.tiled_attention(
        q, k, v, valid_lens, mask, block_size=4, return_lse=True
    )
    bounds = sorted({0, K, *(c for c in cuts if c < K)})
    outputs, lses = [], []
    for a, b in zip(bounds, bounds[1:]):  # disjoint chunks of keys, in order
        chunk_lens = None if valid_lens is None else (valid_lens - a).clamp(0, b - a)
        chunk_mask = None if mask is None else mask[:, a:b]
        out, lse = al.tiled_attention(
            q, k[..., a:b, :], v[..., a:b, :], chunk_lens, chunk_mask,
            block_size=3, return_lse=True,
        )  # fmt: skip
        outputs.append(out)
        lses.append(lse)
    merged, merged_lse = al.merge_attention(outputs, lses)
    torch.testing.assert_close(merged, whole, **F64)
    torch.testing.assert_close(merged_lse, whole_lse, **F64)
    # the order of the chunks does not matter
    again, _ = al.merge_attention(outputs[::-1], lses[::-1])
    torch.testing.assert_close(again, whole, **F64)


def test_merge_of_chunks_that_see_nothing_and_its_gradient():
    q, k, v = make(1, (), 3, 8, 4, 2)
    out = [t.requires_grad_() for t in (torch.randn(1, 3, 2), torch.zeros(1, 3, 2))]
    lse = [torch.randn(1, 3), torch.full((1, 3), -math.inf)]
    merged, merged_lse = al.merge_attention(out, lse)
    torch.testing.assert_close(merged, out[0])  # a chunk with no key has weight 0
    torch.testing.assert_close(merged_lse, lse[0])
    nothing, nothing_lse = al.merge_attention(out[1:], lse[1:])
    assert nothing.eq(0).all() and nothing_lse.eq(-math.inf).all()
    (merged.sum() + nothing.sum()).backward()
    assert all(torch.isfinite(t.grad).all() for t in out)
    # a producer may write NaN (or inf) for a query that saw no key: weight 0 is 0
    for junk in (math.nan, math.inf):
        poisoned = [out[0].detach(), torch.full((1, 3, 2), junk)]
        merged, _ = al.merge_attention(poisoned, lse)
        torch.testing.assert_close(merged, out[0].detach())


# -- bad input and state ---------------------------------------------------------------


def _qkv():
    return torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)


BAD_CALLS = {
    "queries 1-D": (lambda q, k, v: al.tiled_attention(q[0, 0], k, v), "queries"),
    "K differs": (lambda q, k, v: al.tiled_attention(q, k, v[:, :4]), "same number"),
    "D differs": (lambda q, k, v: al.tiled_attention(q, k[..., :3], v), "same width"),
    "batch differs": (lambda q, k, v: al.tiled_attention(q[:1], k, v), "leading"),
    "integer dtype": (
        lambda q, k, v: al.tiled_attention(q.long(), k.long(), v.long()),
        "floating",
    ),
    "mixed dtypes": (lambda q, k, v: al.tiled_attention(q, k.double(), v), "dtype"),
    "block 0": (
        lambda q, k, v: al.tiled_attention(q, k, v, block_size=0),
        "block_size",
    ),
    "block 2.0": (
        lambda q, k, v: al.tiled_attention(q, k, v, block_size=2.0),
        "block_size",
    ),
    "block True": (
        lambda q, k, v: al.tiled_attention(q, k, v, block_size=True),
        "block_size",
    ),
    "scale nan": (lambda q, k, v: al.tiled_attention(q, k, v, scale=math.nan), "scale"),
    "scale str": (lambda q, k, v: al.tiled_attention(q, k, v, scale="0.5"), "scale"),
    "valid_lens batch": (
        lambda q, k, v: al.tiled_attention(q, k, v, torch.tensor([1, 2, 3])),
        "valid_lens",
    ),
    "valid_lens negative": (
        lambda q, k, v: al.tiled_attention(q, k, v, torch.tensor([1, -2])),
        "valid_lens",
    ),
    "valid_lens 2-D": (
        lambda q, k, v: al.tiled_attention(q, k, v, torch.ones(2, 4, dtype=torch.long)),
        "valid_lens",
    ),
    "valid_lens no batch": (
        lambda q, k, v: al.tiled_attention(q[0], k[0], v[0], torch.tensor([1])),
        "valid_lens",
    ),
    "mask float": (
        lambda q, k, v: al.tiled_attention(q, k, v, mask=torch.ones(3, 5)),
        "mask",
    ),
    "mask shape": (
        lambda q, k, v: al.tiled_attention(q, k, v, mask=torch.ones(3, 4).bool()),
        "mask",
    ),
    "merge empty": (lambda q, k, v: al.merge_attention([], []), "at least one"),
    "merge lengths": (
        lambda q, k, v: al.merge_attention([q, q], [q[..., 0]]),
        "as many",
    ),
    "merge shapes": (
        lambda q, k, v: al.merge_attention([q, q[:1]], [q[..., 0], q[:1, :, 0]]),
        "outputs\\[1\\]",
    ),
    "merge lse shape": (
        lambda q, k, v: al.merge_attention([q], [q[..., :2]]),
        "lses\\[0\\]",
    ),
    "merge tensor": (lambda q, k, v: al.merge_attention(q, q[..., 0]), "lists"),
    "merge integer": (
        lambda q, k, v: al.merge_attention([q.long()], [q[..., 0]]),
        "floating",
    ),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_bad_input_raises_value_error_and_changes_nothing(name):
    call, match = BAD_CALLS[name]
    q, k, v = _qkv()
    before = [t.clone() for t in (q, k, v)]
    with pytest.raises(ValueError, match=match):
        call(q, k, v)
    for t, b in zip((q, k, v), before):
        assert torch.equal(t, b)


def test_error_messages_name_expected_and_actual():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"positive integer, got 0"):
        al.tiled_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match=r"expected shape \(2, 3\).*got \(2, 3, 2\)"):
        al.merge_attention([q], [q[..., :2]])


def test_state_free():
    q, k, v = make(2, (3,), 6, 9, 4, 5)
    lens, mask = torch.tensor([2, 9]), torch.rand(6, 9) > 0.3
    inputs = [t.clone() for t in (q, k, v, lens, mask)]
    first = al.tiled_attention(q, k, v, lens, mask, block_size=4, return_lse=True)
    second = al.tiled_attention(q, k, v, lens, mask, block_size=4, return_lse=True)
    for t, b in zip((q, k, v, lens, mask), inputs):
        assert torch.equal(t, b)  # inputs untouched
    for a, b in zip(first, second):
        assert torch.equal(a, b)  # the same call, the same result
    outs, lses = [first[0], second[0]], [first[1], second[1]]
    al.merge_attention(outs, lses)
    assert len(outs) == 2 and torch.equal(outs[0], first[0])  # lists untouched
    # merging a chunk with itself: the same output, lse + log 2
    out, lse = al.merge_attention(outs, lses)
    torch.testing.assert_close(out, first[0], **F64)
    finite = torch.isfinite(first[1])
    torch.testing.assert_close(lse[finite], first[1][finite] + math.log(2), **F64)
