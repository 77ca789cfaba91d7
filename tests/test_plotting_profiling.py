import pytest
import torch
from matplotlib.figure import Figure

import attention_lib as al


def test_show_heatmaps_identity_grid():
    fig = al.show_heatmaps(
        torch.eye(10).reshape(1, 1, 10, 10), xlabel="Keys", ylabel="Queries"
    )
    assert isinstance(fig, Figure)
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 1 and len(fig.axes) == 2  # one panel plus its colorbar
    assert panels[0].get_xlabel() == "Keys" and panels[0].get_ylabel() == "Queries"
    assert fig.get_facecolor()[:3] == (
        1.0,
        1.0,
        1.0,
    )  # opaque white: readable in dark mode


def test_show_heatmaps_grid_and_titles():
    fig = al.show_heatmaps(
        torch.rand(2, 3, 4, 5), "k", "q", titles=["a", "b", "c"], figsize=(6, 4)
    )
    assert len(fig.axes) == 7
    assert [ax.get_title() for ax in fig.axes[:3]] == ["a", "b", "c"]


def test_show_heatmaps_bad_input():
    with pytest.raises(
        ValueError, match=r"4-D tensor \(rows, cols, Q, K\), got shape \(10, 10\)"
    ):
        al.show_heatmaps(torch.eye(10), "k", "q")
    with pytest.raises(ValueError, match="expected 2 titles"):
        al.show_heatmaps(torch.rand(1, 2, 3, 3), "k", "q", titles=["only one"])
    fig, axes = al.subplots(1, 1)
    with pytest.raises(ValueError, match="2-D matrix"):
        al.heatmap(axes[0, 0], torch.rand(2, 2, 2))


def test_plot_draws_every_curve():
    x = torch.linspace(0, 1, 5)
    fig = al.plot(x, [x, x**2], xlabel="x", ylabel="y", legend=["x", "x^2"], title="t")
    ax = fig.axes[0]
    assert len(ax.lines) == 2 and ax.get_title() == "t" and ax.get_xlabel() == "x"
    torch.testing.assert_close(torch.tensor(ax.lines[1].get_ydata()), x**2)


def test_time_ms_is_positive():
    assert (
        al.time_ms(
            torch.mm, torch.randn(32, 32), torch.randn(32, 32), min_run_time=0.01
        )
        > 0
    )


def test_peak_memory_sees_an_allocation():
    one_hundred_mib = al.peak_memory_bytes(
        "x = torch.ones(25 * 2**20)"
    )  # 25 Mi float32 = 100 MiB
    assert 95 * 2**20 < one_hundred_mib < 140 * 2**20
    assert al.peak_memory_bytes("y = 1 + 1") < 8 * 2**20
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        al.peak_memory_bytes("1 / 0")


def test_colorbars_are_labelled():
    fig = al.show_heatmaps(torch.rand(1, 2, 3, 3), "k", "q")
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_label() == "<colorbar>"] == [
        "attention weight"
    ]
    fig, axes = al.subplots(1, 1)
    al.heatmap(axes[0, 0], torch.rand(3, 3), cbar_label="score")
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_label() == "<colorbar>"] == [
        "score"
    ]
