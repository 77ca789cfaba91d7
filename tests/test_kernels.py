import math

import pytest
import torch

import attention_lib as al


def test_kernel_values():
    d = torch.tensor([0.0, 0.5, 1.0, 2.0, -0.5])
    torch.testing.assert_close(al.gaussian(d), torch.exp(-(d**2) / 2))
    torch.testing.assert_close(al.boxcar(d), torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0]))
    torch.testing.assert_close(al.constant(d), torch.ones(5))
    torch.testing.assert_close(
        al.triangular(d), torch.tensor([1.0, 0.5, 0.0, 0.0, 0.5])
    )
    torch.testing.assert_close(
        al.epanechnikov(d), torch.tensor([0.75, 0.5625, 0.0, 0.0, 0.5625])
    )


def test_the_misspelt_kernel_name_is_gone():
    # "epanechikov" (the notes' spelling) named the triangular kernel; one letter from
    # "epanechnikov" it was a trap
    assert not hasattr(al, "epanechikov")


def test_epanechnikov_integrates_to_one():
    d = torch.linspace(-1.5, 1.5, 30001, dtype=torch.float64)
    assert abs(torch.trapezoid(al.epanechnikov(d), d).item() - 1.0) < 1e-6


@pytest.mark.parametrize("bandwidth", [1e-3, 1e-25, 1e-300])
def test_gaussian_with_vanishing_bandwidth_is_the_nearest_neighbour(bandwidth):
    x_train = torch.tensor([0.0, 1.0, 2.0, 3.0])
    y_train = torch.tensor([10.0, 20.0, 30.0, 40.0])
    x_query = torch.tensor([0.2, 2.9, 1.4, 100.0])
    y_hat, w = al.nadaraya_watson(x_train, y_train, x_query, bandwidth=bandwidth)
    assert not torch.isnan(w).any()
    torch.testing.assert_close(y_hat, torch.tensor([10.0, 40.0, 20.0, 40.0]))
    # a query exactly between two keys splits its weight between them
    y_mid, w_mid = al.nadaraya_watson(
        x_train, y_train, torch.tensor([0.5]), bandwidth=bandwidth
    )
    torch.testing.assert_close(w_mid, torch.tensor([[0.5, 0.5, 0.0, 0.0]]))
    torch.testing.assert_close(y_mid, torch.tensor([15.0]))


@pytest.mark.parametrize(
    "kernel", [al.gaussian, al.boxcar, al.constant, al.triangular, al.epanechnikov]
)
def test_weights_rows_sum_to_one_and_match_definition(kernel):
    x_train = torch.linspace(0, 5, 40, dtype=torch.float64)
    y_train = 2 * torch.sin(x_train) + x_train
    x_query = torch.linspace(0.1, 4.9, 7, dtype=torch.float64)
    y_hat, w = al.nadaraya_watson(
        x_train, y_train, x_query, kernel=kernel, bandwidth=0.7
    )
    assert w.shape == (7, 40) and y_hat.shape == (7,)
    torch.testing.assert_close(w.sum(-1), torch.ones(7, dtype=torch.float64))
    k = kernel((x_query[:, None] - x_train[None, :]).abs() / 0.7)
    torch.testing.assert_close(w, k / k.sum(-1, keepdim=True))
    torch.testing.assert_close(y_hat, w @ y_train)


def test_constant_kernel_is_the_mean():
    y_hat, _ = al.nadaraya_watson(
        torch.arange(5.0),
        torch.arange(5.0) ** 2,
        torch.tensor([0.3, 9.0]),
        kernel=al.constant,
    )
    torch.testing.assert_close(y_hat, torch.full((2,), 6.0))


def test_vector_keys_and_one_hot_values():
    x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [5.0, 5.0]])
    y = torch.eye(2)[torch.tensor([0, 0, 1])]  # one-hot classes
    probs, w = al.nadaraya_watson(
        x, y, torch.tensor([[0.0, 0.5], [5.0, 4.8]]), bandwidth=0.5
    )
    assert probs.shape == (2, 2) and w.shape == (2, 3)
    assert probs.argmax(-1).tolist() == [0, 1]
    torch.testing.assert_close(probs.sum(-1), torch.ones(2))


def test_gaussian_far_query_does_not_underflow():
    y_hat, w = al.nadaraya_watson(
        torch.tensor([0.0, 1.0]),
        torch.tensor([1.0, 3.0]),
        torch.tensor([100.0]),
        bandwidth=0.1,
    )
    assert torch.isfinite(y_hat).all()
    torch.testing.assert_close(
        y_hat, torch.tensor([3.0])
    )  # the nearer key takes all the weight


def test_compact_kernel_without_support_gives_zero_row():
    y_hat, w = al.nadaraya_watson(
        torch.tensor([0.0]), torch.tensor([2.0]), torch.tensor([5.0]), kernel=al.boxcar
    )
    assert w.eq(0).all() and y_hat.eq(0).all()


def test_bandwidth_scales_distances():
    x, y, q = torch.randn(10), torch.randn(10), torch.randn(3)
    _, w1 = al.nadaraya_watson(x * 2, y, q * 2, bandwidth=2.0)
    _, w2 = al.nadaraya_watson(x, y, q, bandwidth=1.0)
    torch.testing.assert_close(w1, w2)


def test_module_leave_one_out_excludes_self():
    x = torch.linspace(0, 1, 6)
    model = al.NadarayaWatson(bandwidth=0.3)
    y_hat = model(x, x**2, x, leave_one_out=True)
    assert model.attention_weights.diagonal().eq(0).all()
    torch.testing.assert_close(model.attention_weights.sum(-1), torch.ones(6))
    assert y_hat.shape == (6,)
    torch.testing.assert_close(model.bandwidth, torch.tensor(0.3))


def test_module_matches_function():
    x, y, q = torch.randn(12), torch.randn(12), torch.randn(4)
    model = al.NadarayaWatson(kernel=al.triangular, bandwidth=1.5)
    torch.testing.assert_close(
        model(x, y, q), al.nadaraya_watson(x, y, q, al.triangular, 1.5)[0]
    )


def test_bandwidth_is_learnable():
    x = torch.linspace(0, 5, 30)
    y = 2 * torch.sin(x) + x
    model = al.NadarayaWatson(bandwidth=3.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(20):
        loss = ((model(x, y, x, leave_one_out=True) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert model.bandwidth.item() < 3.0


def test_gradcheck_bandwidth():
    x, y = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    q = torch.randn(3, dtype=torch.float64)
    h = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda h: al.nadaraya_watson(x, y, q, bandwidth=h)[0], (h,)
    )
    model = al.NadarayaWatson(bandwidth=0.8).double()
    assert torch.autograd.gradcheck(
        lambda xq: model(x, y, xq), (q.clone().requires_grad_(),)
    )


def test_bad_input():
    x, y = torch.randn(5), torch.randn(5)
    with pytest.raises(ValueError, match="positive number, got 0"):
        al.nadaraya_watson(x, y, x, bandwidth=0)
    with pytest.raises(ValueError, match="positive number, got -1"):
        al.NadarayaWatson(bandwidth=-1)
    with pytest.raises(ValueError, match="same length: got 5 inputs and 4 targets"):
        al.nadaraya_watson(x, y[:4], x)
    with pytest.raises(ValueError, match="width D=1 like x_train, got width 2"):
        al.nadaraya_watson(x, y, torch.randn(3, 2))
    with pytest.raises(ValueError, match=r"shape \(n,\) for scalar inputs or \(n, D\)"):
        al.nadaraya_watson(torch.randn(5, 1, 1), y, x)
    with pytest.raises(ValueError, match="3 queries for 5 training points"):
        al.NadarayaWatson()(x, y, x[:3], leave_one_out=True)
    assert math.isclose(
        al.NadarayaWatson(bandwidth=2.0).bandwidth.item(), 2.0, rel_tol=1e-6
    )
