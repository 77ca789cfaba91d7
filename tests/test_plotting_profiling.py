import time

import numpy as np
import pytest
import torch
from matplotlib.colors import to_rgba
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


def test_time_ms_cpu_time_ignores_sleeping():
    # the thread's CPU time does not count a sleep (time another process could hold
    # the core); the wall clock does
    import time

    assert al.time_ms(time.sleep, 0.002, min_run_time=0.02, num_threads=1) > 1.5
    assert (
        al.time_ms(time.sleep, 0.002, min_run_time=0.02, num_threads=1, cpu_time=True)
        < 0.5
    )
    with pytest.raises(ValueError, match="num_threads=1"):
        al.time_ms(time.sleep, 0, num_threads=2, cpu_time=True)


def test_cpu_clock_is_thread_time_except_on_windows(monkeypatch):
    import attention_lib.profiling as profiling

    start = al.cpu_clock()
    time.sleep(0.05)  # sleeping costs no CPU time
    assert al.cpu_clock() - start < 0.04
    # Windows' thread_time ticks every ~15.6 ms: there the clock is perf_counter
    monkeypatch.setattr(profiling.sys, "platform", "win32")
    start = al.cpu_clock()
    time.sleep(0.05)
    assert al.cpu_clock() - start >= 0.05


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


def test_show_heatmaps_scales_weights_from_0_to_1_by_default():
    # Issue 14, bug 4: near-uniform weights (0.148 .. 0.231) were stretched over the
    # whole colour map and looked like sharp attention.
    near_uniform = torch.full((1, 2, 3, 3), 0.2)
    near_uniform[0, 0, 0, 0] = 0.148
    near_uniform[0, 1, 2, 2] = 0.231
    fig = al.show_heatmaps(near_uniform, "k", "q")
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert [ax.images[0].get_clim() for ax in panels] == [(0.0, 1.0)] * 2
    colorbar = next(ax for ax in fig.axes if ax.get_label() == "<colorbar>")
    assert colorbar.get_ylim() == (0.0, 1.0)
    image = panels[0].images[0]
    # 0.231 is drawn pale: closer to the colour of 0 than to the colour of 1
    pale, zero, one = (
        np.array(image.to_rgba(np.array([[v]]))[0, 0, :3], dtype=float)
        for v in (0.231, 0.0, 1.0)
    )
    assert np.linalg.norm(pale - zero) < np.linalg.norm(pale - one)
    # callers may choose the scale, or ask for the data's min/max
    fig = al.show_heatmaps(near_uniform, "k", "q", vmin=0.1, vmax=0.5)
    assert fig.axes[0].images[0].get_clim() == (0.1, 0.5)
    fig = al.show_heatmaps(near_uniform, "k", "q", vmin=None, vmax=None)
    low, high = fig.axes[0].images[0].get_clim()
    assert low == pytest.approx(0.148) and high == pytest.approx(0.231)


def test_masked_cells_get_their_own_colour():
    weights = al.masked_softmax(torch.zeros(4, 4), mask=al.causal_mask(4))
    weights[3] = torch.tensor([0.0, 0.0, 0.0, 1.0])  # a kept cell with weight 0
    keep = al.causal_mask(4)
    fig = al.show_heatmaps(weights[None, None], "k", "q", mask=keep)
    image = fig.axes[0].images[0]
    rgba = image.to_rgba(image.get_array())  # (4, 4, RGBA) in 0 .. 1
    grey = np.array(to_rgba(al.plotting.MASKED_COLOUR))
    masked, kept_zero = rgba[0, 3], rgba[3, 0]  # above the diagonal; a kept 0
    np.testing.assert_allclose(masked, grey, atol=1e-6)
    assert not np.allclose(kept_zero, grey, atol=1e-6)
    np.testing.assert_allclose(
        kept_zero, np.array(image.cmap(0.0)), atol=1e-6
    )  # a zero weight keeps the colour map's colour of 0
    assert (rgba[~keep.numpy()] == rgba[0, 3]).all()  # every masked cell is grey
    assert not (rgba[keep.numpy()][:, :3] == rgba[0, 3, :3]).all(-1).any()
    labels = [ax.get_ylabel() for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert labels == ["attention weight (grey: masked)"]
    # heatmap takes the same mask; a (B, 1, Q, K)-style mask broadcasts
    fig, axes = al.subplots(1, 1)
    image = al.heatmap(axes[0, 0], weights, mask=keep, vmin=0, vmax=1)
    np.testing.assert_allclose(image.to_rgba(image.get_array())[0, 3], grey, atol=1e-6)
    assert fig.axes[1].get_ylabel() == "attention weight (grey: masked)"
    fig = al.show_heatmaps(torch.rand(2, 3, 4, 4), "k", "q", mask=keep[None, None])
    assert all(ax.images[0].get_array().mask.sum() == 6 for ax in fig.axes[:6])


def test_a_bad_heatmap_mask_is_refused():
    with pytest.raises(ValueError, match="expected a bool mask .* got dtype float32"):
        al.show_heatmaps(torch.rand(1, 1, 3, 3), "k", "q", mask=torch.ones(3, 3))
    with pytest.raises(
        ValueError, match=r"broadcastable to \(1, 1, 3, 3\), got shape \(2, 3\)"
    ):
        al.show_heatmaps(
            torch.rand(1, 1, 3, 3), "k", "q", mask=torch.ones(2, 3, dtype=torch.bool)
        )
    fig, axes = al.subplots(1, 1)
    with pytest.raises(ValueError, match=r"heatmap: mask: expected a mask"):
        al.heatmap(axes[0, 0], torch.rand(3, 3), mask=torch.ones(4, dtype=torch.bool))
    assert not axes[0, 0].images  # nothing was drawn


def test_sharp_png_has_twice_the_pixels_shown_at_the_figure_size():
    import io

    from PIL import Image

    fig, axes = al.subplots(1, 1, figsize=(4, 2))
    axes[0, 0].plot([0, 1, 2], [0, 1, 0])
    one = io.BytesIO()
    fig.savefig(one, format="png", bbox_inches="tight", facecolor="white")
    data, meta = al.sharp_png(fig)
    image, plain = Image.open(io.BytesIO(data)), Image.open(io.BytesIO(one.getvalue()))
    assert image.mode == "P" and len(image.getcolors(256)) <= 256  # a palette image
    # shown at the 1x size, drawn with twice the pixels each way
    assert (
        abs(meta["width"] - plain.size[0]) <= 1
        and abs(meta["height"] - plain.size[1]) <= 1
    )
    assert abs(image.size[0] - 2 * plain.size[0]) <= 2
    assert len(data) < 1.5 * len(one.getvalue())  # about as light as the 1x PNG


def test_sharp_png_keeps_a_heatmaps_gradients():
    # reader-1-5 X4: a 256-colour palette banded colorbars into ~30 steps
    import io

    from PIL import Image

    fig = al.show_heatmaps(torch.rand(1, 1, 6, 8), xlabel="keys", ylabel="queries")
    data, _ = al.sharp_png(fig)
    image = Image.open(io.BytesIO(data))
    assert image.mode == "RGB" and image.getcolors(256) is None  # > 256 colours
    fig, axes = al.subplots(1, 1, figsize=(4, 2))
    axes[0, 0].plot([0, 1, 2], [0, 1, 0])
    assert Image.open(io.BytesIO(al.sharp_png(fig)[0])).mode == "P"  # a line plot


def test_sharp_png_refuses_bad_arguments():
    fig, _ = al.subplots()
    for kwargs in ({"scale": 0}, {"scale": 1.5}, {"colors": 1}, {"colors": 300}):
        with pytest.raises(ValueError, match="expected"):
            al.sharp_png(fig, **kwargs)


def test_sharp_figures_installs_the_formatter_in_ipython():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        al.sharp_figures()
        fig, axes = al.subplots(1, 1, figsize=(4, 2))
        axes[0, 0].plot([0, 1], [1, 0])
        data, metadata = shell.display_formatter.format(fig)
        assert metadata["image/png"]["width"] * 2 - 2 <= (
            int.from_bytes(data["image/png"][16:20], "big")  # the PNG header's width
        )
    finally:
        InteractiveShell.clear_instance()


def test_tensor_recorder_counts_new_memory_products_and_peak():
    a, b = torch.randn(64, 32), torch.randn(32, 64)
    with al.TensorRecorder() as rec:
        view = a.t()  # a view of an input: no new memory
        c = a @ b  # (64, 64): new, 16 KiB
        c.add_(1.0)  # in place: no new memory
        del c
        d = torch.randn(8, 8) @ torch.randn(8, 8)  # (8, 8), after c was freed
    assert view.shape == (32, 64) and d.shape == (8, 8)
    assert rec.products == 2
    assert rec.largest == 64 * 64 and rec.largest_bytes == 64 * 64 * 4
    assert rec.largest_op == "aten.mm.default"
    assert rec.peak == 64 * 64 * 4  # c was freed before the small tensors were made
    assert "aten.add_.Tensor" in rec.ops
