import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import attention_lib as al
from tolerances import TOL

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def notes_example():
    return torch.arange(1, 17, dtype=torch.float32).reshape(2, 2, 4), torch.tensor(
        [2, 3]
    )


def test_notes_worked_example():
    X, valid_lens = notes_example()
    W = al.masked_softmax(X, valid_lens)
    e = torch.exp
    first = torch.stack([e(torch.tensor(1.0)), e(torch.tensor(2.0))])
    second = torch.stack(
        [e(torch.tensor(9.0)), e(torch.tensor(10.0)), e(torch.tensor(11.0))]
    )
    torch.testing.assert_close(W[0, 0, :2], first / first.sum())
    torch.testing.assert_close(W[1, 0, :3], second / second.sum())
    assert (W[0, :, 2:] == 0).all() and (W[1, :, 3:] == 0).all()
    torch.testing.assert_close(W.sum(-1), torch.ones(2, 2))


def test_notes_sequence_mask_step():
    X, _ = notes_example()
    flat = X.reshape(-1, 4)
    lens = torch.repeat_interleave(torch.tensor([2, 3]), 2)
    out = al.sequence_mask(flat, lens, value=-1e6)
    expected = torch.tensor(
        [
            [1.0, 2, -1e6, -1e6],
            [5, 6, -1e6, -1e6],
            [9, 10, 11, -1e6],
            [13, 14, 15, -1e6],
        ]
    )
    torch.testing.assert_close(out, expected)
    assert flat[0, 3] == 4  # input untouched


def test_sequence_mask_trailing_dims():
    X = torch.ones(2, 3, 2)
    out = al.sequence_mask(X, torch.tensor([1, 2]))
    assert (
        out[0, 1:].eq(0).all()
        and out[0, 0].eq(1).all()
        and out[1, :2].eq(1).all()
        and out[1, 2].eq(0).all()
    )


def test_two_d_valid_lens():
    X = torch.randn(2, 3, 5)
    lens = torch.tensor([[1, 2, 3], [5, 4, 0]])
    W = al.masked_softmax(X, lens)
    counts = (W > 0).sum(-1)
    torch.testing.assert_close(counts, lens)
    assert W[1, 2].eq(0).all()


def test_mask_and_valid_lens_combine():
    X = torch.randn(2, 4, 4)
    W = al.masked_softmax(X, torch.tensor([3, 4]), mask=al.causal_mask(4))
    keep = al.causal_mask(4) & al.valid_lens_to_mask(torch.tensor([3, 4]), 4, 4)
    assert ((W > 0) == keep).all()


def test_valid_lens_broadcast_over_heads():
    X = torch.randn(2, 3, 4, 5)  # (B, H, Q, K)
    W = al.masked_softmax(X, torch.tensor([2, 5]))
    assert W[0, :, :, 2:].eq(0).all() and (W[1] > 0).all()


def test_matches_sdpa_weights_with_bool_mask():
    X = torch.randn(2, 3, 4, 6)
    mask = torch.rand(2, 1, 4, 6) > 0.3
    mask[..., 0] = True  # SDPA's reference: no fully masked rows
    expected = torch.softmax(X.masked_fill(~mask, float("-inf")), dim=-1)
    torch.testing.assert_close(al.masked_softmax(X, mask=mask), expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fully_masked_rows_are_zero_not_nan(dtype):
    X = torch.randn(2, 3, 4).to(dtype)
    W = al.masked_softmax(X, torch.tensor([0, 2]))
    assert not W.isnan().any()
    assert W[0].eq(0).all()
    torch.testing.assert_close(W[1].sum(-1).float(), torch.ones(3), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_causal_mask_with_more_queries_than_keys_gives_zero_rows(dtype):
    W = al.masked_softmax(torch.randn(1, 4, 2).to(dtype), mask=al.causal_mask(4, 2))
    assert W[0, :2].eq(0).all() and not W.isnan().any()


def test_does_not_mutate_input():
    X, lens = notes_example()
    before = X.clone()
    al.masked_softmax(X, lens)
    al.sequence_mask(X.reshape(-1, 4), torch.tensor([1, 1, 1, 1]))
    torch.testing.assert_close(X, before)


def test_d2l_parity(d2l):
    X = torch.randn(2, 3, 5)
    for lens in (torch.tensor([2, 4]), torch.tensor([[1, 2, 3], [5, 4, 2]])):
        torch.testing.assert_close(
            al.masked_softmax(X, lens), d2l.masked_softmax(X.clone(), lens)
        )
    torch.testing.assert_close(
        al.masked_softmax(X), d2l.masked_softmax(X.clone(), None)
    )


def test_d2l_differs_on_fully_masked_rows(d2l):
    X = torch.randn(1, 2, 4)
    ours, theirs = (
        al.masked_softmax(X, torch.tensor([0])),
        d2l.masked_softmax(X.clone(), torch.tensor([0])),
    )
    assert ours.eq(0).all()
    torch.testing.assert_close(
        theirs, torch.full((1, 2, 4), 0.25)
    )  # d2l: uniform over padding


def test_causal_mask_values():
    assert al.causal_mask(3).equal(
        torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    )
    m = al.causal_mask(2, 4)  # bottom-right aligned: the last query sees every key
    assert m.equal(torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool))
    assert m.dtype == torch.bool


def test_mask_conversions_agree_with_sdpa_and_mha():
    q, k, v = torch.randn(2, 1, 3, 4), torch.randn(2, 1, 5, 4), torch.randn(2, 1, 5, 4)
    keep = al.valid_lens_to_mask(torch.tensor([2, 5]), 3, 5)[:, None]  # (B, 1, 1, K)
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    b = F.scaled_dot_product_attention(q, k, v, attn_mask=al.keep_to_additive(keep))
    torch.testing.assert_close(a, b)
    assert al.keep_to_blocked(keep).equal(~keep)
    additive = al.keep_to_additive(torch.tensor([True, False]))
    assert additive[0] == 0 and additive[1] == float("-inf")


# --- property tests
# ---------------------------------------------------------------------------------------
shapes = st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 6))


@settings(max_examples=60, deadline=None)
@given(
    shape=shapes,
    seed=st.integers(0, 10_000),
    dtype=st.sampled_from(DTYPES),
    big=st.booleans(),
)
def test_property_rows_sum_to_one_or_zero(shape, seed, dtype, big):
    B, Q, K = shape
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(B, Q, K, generator=g) * (1e4 if big else 3.0)
    X = X.clamp(-1e4, 1e4).to(dtype)
    lens = torch.randint(0, K + 1, (B, Q), generator=g)
    W = al.masked_softmax(X, lens)
    assert torch.isfinite(W).all()
    keep = al.valid_lens_to_mask(lens, Q, K)
    assert W[~keep].eq(0).all(), "masked entries must be exactly 0"
    sums = W.float().sum(-1)
    expected = (lens > 0).float()
    torch.testing.assert_close(
        sums,
        expected,
        **TOL[dtype if dtype in (torch.float16, torch.bfloat16) else torch.float32],
    )


@settings(max_examples=40, deadline=None)
@given(shape=shapes, seed=st.integers(0, 10_000), c=st.floats(-100, 100))
def test_property_shift_invariance(shape, seed, c):
    B, Q, K = shape
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(B, Q, K, generator=g, dtype=torch.float64)
    mask = torch.rand(B, Q, K, generator=g) > 0.4
    torch.testing.assert_close(
        al.masked_softmax(X + c, mask=mask), al.masked_softmax(X, mask=mask)
    )


def test_gradcheck_masked_softmax():
    X = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda x: al.masked_softmax(x, torch.tensor([[1, 2, 0], [4, 3, 2]])), (X,)
    )
    assert torch.autograd.gradcheck(
        lambda x: al.masked_softmax(x, mask=al.causal_mask(3, 4)), (X,)
    )


# --- bad input
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "lens, match",
    [
        (torch.tensor([1, 2, 3]), r"batch size B=2"),
        (
            torch.tensor([[1, 2, 3, 1], [1, 1, 1, 1]]),
            r"one length per query, shape \(2, 3\)",
        ),
        (torch.tensor([1, -1]), r"non-negative"),
        (torch.ones(2, 3, 1, dtype=torch.long), r"\(B,\) or \(B, Q\)"),
    ],
)
def test_bad_valid_lens(lens, match):
    with pytest.raises(ValueError, match=match):
        al.masked_softmax(torch.randn(2, 3, 4), lens)


def test_bad_mask():
    with pytest.raises(
        ValueError, match=r"broadcasts to the scores \(2, 3, 4\), got \(3, 3\)"
    ):
        al.masked_softmax(torch.randn(2, 3, 4), mask=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"expected dtype torch.bool"):
        al.masked_softmax(torch.randn(2, 3, 4), mask=torch.ones(3, 4))
    with pytest.raises(ValueError, match="floating-point"):
        al.masked_softmax(torch.ones(2, 3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"valid_len: expected shape \(2,\)"):
        al.sequence_mask(torch.ones(2, 3), torch.tensor([1]))
    with pytest.raises(ValueError, match="non-negative"):
        al.causal_mask(-1)
