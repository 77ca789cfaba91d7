"""Plotting helpers for the chapters; the only module that imports matplotlib.

Every helper returns a matplotlib ``Figure`` with an opaque white background (readable
in the book's dark mode too). In Jupyter a figure returned as a cell's last value is
shown once; the helpers close it in pyplot so that it is not shown a second time when
the cell ends.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

__all__ = ["show_heatmaps", "plot", "subplots", "heatmap", "sharp_png", "sharp_figures"]


def _numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        return (
            x if x.dtype == torch.float64 else x.float()
        ).numpy()  # keep float64; half/bf16 -> float32
    return np.asarray(x)


def _figure(nrows: int, ncols: int, figsize, **kwargs):
    fig, axes = plt.subplots(
        nrows, ncols, figsize=figsize, squeeze=False, facecolor="white", **kwargs
    )
    plt.close(fig)  # owned by the caller; Jupyter shows it when it is returned
    return fig, axes


def subplots(nrows: int = 1, ncols: int = 1, figsize=(3.5, 2.5), **kwargs):
    """``(fig, axes)`` with ``axes`` always a 2-D array, for chapters that compose
    several panels."""
    return _figure(nrows, ncols, figsize, **kwargs)


MASKED_COLOUR = "#d9d9d9"  # light grey: a masked cell, not a small weight
_MASKED_NOTE = "grey: masked"


def _masked(m: np.ndarray, mask, name: str) -> np.ndarray:
    """``m`` as a masked array hiding the cells where ``mask`` (bool, True = keep,
    broadcastable to ``m``) is False; ``m`` itself when ``mask`` is None."""
    if mask is None:
        return m
    keep = (
        mask.detach().cpu().numpy()
        if isinstance(mask, torch.Tensor)
        else np.asarray(mask)
    )
    if keep.dtype != np.bool_:
        raise ValueError(
            f"{name}: expected a bool mask (True = keep) broadcastable to "
            f"{tuple(m.shape)}, got dtype {keep.dtype}"
        )
    try:
        keep = np.broadcast_to(keep, m.shape)
    except ValueError:
        raise ValueError(
            f"{name}: expected a mask broadcastable to {tuple(m.shape)}, got shape "
            f"{tuple(keep.shape)}"
        ) from None
    return np.ma.masked_array(m, mask=~keep)


def _colormap(cmap, mask):
    """``cmap`` as given without a mask; with one, a copy drawing masked ("bad")
    cells in ``MASKED_COLOUR`` (light grey)."""
    if mask is None:
        return cmap
    return plt.get_cmap(cmap).with_extremes(bad=MASKED_COLOUR)  # a copy


def heatmap(
    ax,
    matrix,
    *,
    xlabel: str | None = None,
    ylabel: str | None = None,
    title: str | None = None,
    cmap: str = "Reds",
    colorbar: bool = True,
    vmin=None,
    vmax=None,
    xticklabels=None,
    yticklabels=None,
    cbar_label: str = "attention weight",
    mask=None,
):
    """Draw one matrix ``(rows, cols)`` on ``ax`` (labels, optional tick labels and a
    labelled colorbar).

    ``cbar_label`` names what the colours measure (pass e.g. ``"score"`` for scores).
    ``vmin``/``vmax`` fix the colour scale (None: the data's min/max; pass ``vmin=0,
    vmax=1`` for attention weights). ``mask`` (bool, True = keep, broadcastable to the
    matrix) draws the masked cells in light grey (``MASKED_COLOUR`` (light grey)), so
    that a masked zero and a small weight differ; the colorbar label then says so.
    Returns the image.
    """
    m = _numpy(matrix)
    if m.ndim != 2:
        raise ValueError(f"heatmap: expected a 2-D matrix, got shape {m.shape}")
    m = _masked(m, mask, "heatmap: mask")
    image = ax.imshow(
        m,
        cmap=_colormap(cmap, mask),
        vmin=vmin,
        vmax=vmax,
        aspect="auto" if m.shape[1] > 3 * m.shape[0] else None,
    )
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if xticklabels is not None:
        ax.set_xticks(range(len(xticklabels)), labels=list(xticklabels), rotation=90)
    if yticklabels is not None:
        ax.set_yticks(range(len(yticklabels)), labels=list(yticklabels))
    if colorbar:
        label = cbar_label if mask is None else f"{cbar_label} ({_MASKED_NOTE})"
        ax.figure.colorbar(image, ax=ax, shrink=0.8, label=label)
    return image


def show_heatmaps(
    matrices,
    xlabel: str,
    ylabel: str,
    titles: Sequence[str] | None = None,
    figsize=(2.5, 2.5),
    cmap: str = "Reds",
    cbar_label: str = "attention weight",
    vmin: float | None = 0.0,
    vmax: float | None = 1.0,
    mask=None,
):
    """Heatmaps of a grid of matrices -- d2l's ``show_heatmaps`` signature.

    Args:
        matrices: ``(rows, cols, Q, K)``: ``rows x cols`` panels, each a ``(Q, K)``
            weight matrix.
        xlabel, ylabel: on the bottom row and the left column.
        titles: one per column.
        figsize: of the whole figure.
        cmap: a matplotlib colormap name.
        cbar_label: what the colours measure, written on the colorbar.
        vmin, vmax: the colour scale, shared by every panel. Attention weights are
            probabilities, so the default is 0 to 1 (near-uniform weights then look
            pale, not sharp); pass other values, or ``None`` for the data's min/max,
            to plot something else (scores, say).
        mask: optional bool, True = keep, broadcastable to ``matrices`` (e.g. a ``(Q,
            K)`` causal mask); masked cells are drawn in light grey (``MASKED_COLOUR``
            (light grey)), not in the colour of a zero weight, and the colorbar label
            says so.

    Returns:
        The ``Figure``, with one shared, labelled colorbar.
    """
    m = _numpy(matrices)
    if m.ndim != 4:
        raise ValueError(
            "show_heatmaps: expected a 4-D tensor (rows, cols, Q, K), got shape "
            f"{tuple(m.shape)}"
        )
    num_rows, num_cols = m.shape[:2]
    if titles is not None and len(titles) != num_cols:
        raise ValueError(
            f"show_heatmaps: expected {num_cols} titles (one per column), got "
            f"{len(titles)}"
        )
    m = _masked(m, mask, "show_heatmaps: mask")
    vmin = float(m.min()) if vmin is None else vmin
    vmax = float(m.max()) if vmax is None else vmax
    fig, axes = _figure(num_rows, num_cols, figsize, sharex=True, sharey=True)
    colormap = _colormap(cmap, mask)
    for i in range(num_rows):
        for j in range(num_cols):
            ax = axes[i, j]
            image = ax.imshow(m[i, j], cmap=colormap, vmin=vmin, vmax=vmax)
            if i == num_rows - 1:
                ax.set_xlabel(xlabel)
            if j == 0:
                ax.set_ylabel(ylabel)
            if titles:
                ax.set_title(titles[j])
    label = cbar_label if mask is None else f"{cbar_label} ({_MASKED_NOTE})"
    fig.colorbar(image, ax=axes, shrink=0.6, label=label)
    return fig


def plot(
    X,
    Y=None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    legend: Sequence[str] | None = None,
    xlim=None,
    ylim=None,
    xscale: str = "linear",
    yscale: str = "linear",
    fmts: Sequence[str] = ("-", "m--", "g-.", "r:", "c-", "y--"),
    figsize=(3.5, 2.5),
    title: str | None = None,
    ax=None,
):
    """Line plot of one or more curves (d2l's ``plot``).

    ``X`` and ``Y`` are 1-D arrays/tensors or lists of them; with ``Y=None`` the curves
    in ``X`` are drawn against their index. ``fmts`` are matplotlib format strings
    (``'o'`` for dots). Draws on ``ax`` if given, otherwise on a new figure; returns the
    figure.
    """

    def has_one_axis(v):
        return (
            hasattr(v, "ndim")
            and v.ndim == 1
            or isinstance(v, list)
            and not hasattr(v[0], "__len__")
        )

    if has_one_axis(X):
        X = [X]
    if Y is None:
        X, Y = [[]] * len(X), X
    elif has_one_axis(Y):
        Y = [Y]
    if len(X) != len(Y):
        X = X * len(Y)
    if ax is None:
        fig, axes = _figure(1, 1, figsize)
        ax = axes[0, 0]
    else:
        fig = ax.figure
    for x, y, fmt in zip(X, Y, list(fmts) * len(Y)):
        x, y = _numpy(x), _numpy(y)
        ax.plot(x, y, fmt) if len(x) else ax.plot(y, fmt)
    ax.set_xscale(xscale)
    ax.set_yscale(yscale)
    if xlim:
        ax.set_xlim(xlim)
    if ylim:
        ax.set_ylim(ylim)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if legend:
        ax.legend(legend)
    ax.grid(True, alpha=0.3)
    return fig


def sharp_png(fig, scale: int = 2, colors: int = 256) -> tuple[bytes, dict]:
    """``fig`` as a PNG at ``scale`` times its pixel density, shown at its own size.

    Returns ``(png_bytes, {"width": w, "height": h})`` in CSS pixels, the form an
    IPython formatter returns (Jupyter, nbconvert and the website then draw ``scale``
    image pixels per screen pixel: sharp on high-density screens). The image is reduced
    to a palette of ``colors`` colours, which keeps a 2x plot about as light as a 1x one
    (plots have few distinct colours; the antialiased edges lose nothing visible). A
    figure that holds an image or a colour mesh (a heatmap, a colorbar) stays in full
    colour: a palette would band its gradients (about 30 steps in a colorbar).
    """
    import io

    from PIL import Image

    if not (isinstance(scale, int) and scale >= 1):
        raise ValueError(f"sharp_png: expected scale to be an int >= 1, got {scale!r}")
    if not (isinstance(colors, int) and 2 <= colors <= 256):
        raise ValueError(f"sharp_png: expected colors in 2 .. 256, got {colors!r}")
    buf = io.BytesIO()
    fig.savefig(
        buf,
        format="png",
        dpi=fig.dpi * scale,
        bbox_inches="tight",
        facecolor=fig.get_facecolor(),
    )
    image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    if not _has_gradients(fig):
        image = image.quantize(colors=colors, dither=Image.Dither.NONE)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    width, height = image.size
    return out.getvalue(), {"width": width // scale, "height": height // scale}


def _has_gradients(fig) -> bool:
    """Whether ``fig`` draws an image or a colour mesh (heatmaps, colorbars)."""
    from matplotlib.collections import QuadMesh

    return any(
        ax.images or any(isinstance(c, QuadMesh) for c in ax.collections)
        for ax in fig.axes
    )


def sharp_figures(scale: int = 2) -> None:
    """In Jupyter, show every figure through :func:`~attention_lib.sharp_png`.

    Call it once, after the imports; outside IPython it does nothing.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is None:
        return
    from matplotlib.figure import Figure

    # Load the backend first (pyplot loads it with the first figure): Jupyter's inline
    # backend registers its own PNG formatter when it loads, replacing any earlier one.
    plt.close(plt.figure())
    ip.display_formatter.formatters["image/png"].for_type(
        Figure, lambda fig: sharp_png(fig, scale)
    )
