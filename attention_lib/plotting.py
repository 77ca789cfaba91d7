"""Plotting helpers for the chapters; the only module that imports matplotlib.

Every helper returns a matplotlib ``Figure`` with an opaque white background (readable
in the book's dark mode too). In Jupyter a figure returned as a cell's last value is
shown once; the helpers close it in pyplot so that it is not shown a second time when
the cell ends.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

__all__ = [
    "heatmap",
    "plot",
    "plot_language",
    "sharp_figures",
    "sharp_png",
    "show_heatmaps",
    "subplots",
    "untranslated_plot_strings",
]


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


# -- plots in another language (the Chinese notebooks)
# The plotting code stays English. ``plot_language("zh_CN")`` translates the text of
# every figure (titles, axis and colour-bar labels, legends, annotations, suptitles)
# right before it is drawn, from the catalog shipped with the package
# (attention_lib/locales/LANG/plots.po, the one place these translations are written).
# A catalog message may hold placeholders (``"head %1"``; %1 to %9, not {0}: braces are
# LaTeX's): they stand for any text, which is itself translated (a number stays).
# Tick labels are data (tokens, numbers): they change only where the catalog has them.

_LOCALES = Path(__file__).resolve().parent / "locales"
# Candidate CJK fonts: Debian/Ubuntu's fonts-noto-cjk (registered by file, so that a
# font installed after matplotlib built its font cache is found too), then by family
# name.
CJK_FONT_FILES = (
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Bold.ttc",
    "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
)
CJK_FAMILIES = (
    "Noto Sans CJK SC",
    "Source Han Sans SC",
    "Noto Sans SC",
    "PingFang SC",
    "Microsoft YaHei",
    "WenQuanYi Zen Hei",
    "SimHei",
)
_CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
_MATH = re.compile(r"\$[^$]*\$")
_WORD = re.compile(r"[A-Za-z]{2,}")
_PLACEHOLDER = re.compile(r"%([1-9])(?!\d)")


def _unquote(s: str) -> str:
    import json

    return json.loads(s)  # a PO string: C escapes (\" \\ \n \t), all JSON's too


def read_po(path) -> dict[str, str | None]:
    """msgid -> msgstr of a gettext ``.po`` file; None where the message is empty or
    fuzzy (not translated yet). A small reader (no babel on a learner's machine)."""
    messages: dict[str, str | None] = {}
    entry: dict[str, str] = {}
    fuzzy, field = False, None

    def flush():
        nonlocal entry, fuzzy, field
        if entry.get("msgid"):
            messages[entry["msgid"]] = (
                (entry.get("msgstr") or None) if not fuzzy else None
            )
        entry, fuzzy, field = {}, False, None

    for line in Path(path).read_text(encoding="utf-8").splitlines() + [""]:
        line = line.strip()
        if not line:
            flush()
        elif line.startswith("#,"):
            fuzzy = fuzzy or "fuzzy" in line
        elif line.startswith("#"):
            continue
        elif line.startswith('"') and field:
            entry[field] += _unquote(line)
        else:
            keyword, _, rest = line.partition(" ")
            if keyword == "msgid" and "msgid" in entry:
                flush()
            field = keyword
            entry[field] = _unquote(rest)
    return messages


def needs_translation(s: str) -> bool:
    """Whether ``s`` holds a word (two letters or more) outside ``$...$`` math: labels
    that are only math, numbers or symbols (``"$\\tau$ = 0.5"``) stay as they are."""
    return bool(_WORD.search(_MATH.sub("", s)))


def _fill(msgstr: str, values: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], msgstr)


class PlotCatalog:
    """The plot strings of one language: ``translate(s)`` returns ``(text, missing)``,
    ``missing`` the (sub)strings that need a translation and have none."""

    def __init__(self, language: str, path=None):
        po = Path(path) if path is not None else _LOCALES / language / "plots.po"
        if not po.exists():
            known = sorted(p.name for p in _LOCALES.iterdir() if p.is_dir())
            raise ValueError(
                f"plot_language: expected one of {known} or None, got {language!r}"
            )
        self.language = language
        self.path = po
        messages = read_po(po)
        self.exact = {k: v for k, v in messages.items() if not _PLACEHOLDER.search(k)}
        patterns = [(k, v) for k, v in messages.items() if _PLACEHOLDER.search(k)]
        # the most specific first: most literal characters
        patterns.sort(key=lambda kv: -len(_PLACEHOLDER.sub("", kv[0])))
        self.patterns = [
            (re.compile(self._regex(k), re.DOTALL), v) for k, v in patterns
        ]

    @staticmethod
    def _regex(msgid: str) -> str:
        parts, at = [], 0
        for m in _PLACEHOLDER.finditer(msgid):
            parts += [re.escape(msgid[at : m.start()]), f"(?P<p{m.group(1)}>.+?)"]
            at = m.end()
        return "".join(parts) + re.escape(msgid[at:]) + r"\Z"

    def translate(self, s: str) -> tuple[str, list[str]]:
        if s in self.exact:
            return (self.exact[s], []) if self.exact[s] else (s, [s])
        if not needs_translation(s):
            return s, []
        if "\n" in s:  # line by line
            lines = [self.translate(line) for line in s.split("\n")]
            return "\n".join(t for t, _ in lines), [m for _, ms in lines for m in ms]
        for regex, msgstr in self.patterns:
            match = regex.match(s)
            if match is None or s in match.groupdict().values():  # ("%1": no end)
                continue
            if msgstr is None:
                return s, [s]
            missing: list[str] = []
            values = {}
            for name, value in match.groupdict().items():
                values[name[1:]], lost = self.translate(value)
                missing += lost
            return _fill(msgstr, values), missing
        return s, [s]

    def translate_tick(self, s: str) -> str:
        return self.exact.get(s) or s


_catalog: PlotCatalog | None = None
# The language last asked of plot_language, font or not: the exercises' reports (text,
# not plots) follow it (attention_lib.exercises).
_requested_language: str | None = None
_font: str | None = None
_seen: set[str] = set()
_untranslated: set[str] = set()


def plot_catalog(language: str) -> PlotCatalog:
    """The catalog of ``language`` (``"zh_CN"``), read from the package's data."""
    return PlotCatalog(language)


def cjk_font() -> str | None:
    """The family name of a CJK font matplotlib can use (registered first from
    ``CJK_FONT_FILES``), or None."""
    from matplotlib import font_manager

    known = {f.fname for f in font_manager.fontManager.ttflist}
    for path in CJK_FONT_FILES:
        if path not in known and Path(path).exists():
            font_manager.fontManager.addfont(path)
    names = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FAMILIES if name in names), None)


def plot_language(language: str | None = "zh_CN") -> str | None:
    """Draw every figure's text in ``language`` from now on (None: as written, English).

    The catalog's translations are applied to each figure right before it is drawn,
    in a CJK font (Noto Sans CJK SC where installed). Strings that have no translation
    stay English and are listed by :func:`untranslated_plot_strings`. Without any CJK
    font the plots stay English (a warning says so): square boxes would be worse.
    Returns the font family used, or None. The environment variable
    ``ATTENTION_LIB_PLOT_LANG`` sets the language when attention_lib is imported.
    """
    global _catalog, _font, _requested_language
    if language is None:
        _catalog, _font, _requested_language = None, None, None
        return None
    catalog = PlotCatalog(language)  # ValueError before any change
    _requested_language = language
    font = cjk_font()
    if font is None:
        import warnings

        warnings.warn(
            "plot_language: no CJK font found (e.g. Noto Sans CJK SC: apt-get install "
            "fonts-noto-cjk), so the plots stay in English",
            stacklevel=2,
        )
        _catalog, _font = None, None
        return None
    _install_draw_hook()
    _catalog, _font = catalog, font
    return font


def untranslated_plot_strings() -> list[str]:
    """The plot strings drawn since ``plot_language`` was switched on that have no
    translation in its catalog (they were drawn in English)."""
    return sorted(_untranslated)


def plot_strings_seen() -> list[str]:
    """Every plot string (that needed a translation) drawn under ``plot_language``."""
    return sorted(_seen)


def _families(text: str) -> list[str]:
    # As the Chinese diagrams (tools/diagrams/style.py): plain text falls back glyph by
    # glyph, so Latin stays DejaVu Sans; mathtext takes the text outside $...$ from the
    # first family alone, so there the CJK font comes first.
    from matplotlib import cbook

    if cbook.is_math_text(text):
        return [_font, "DejaVu Sans"]
    return ["DejaVu Sans", _font]


def _texts(artist):
    """The Text artists of ``artist``, without tick labels and axis offsets."""
    from matplotlib.axis import Axis, Tick
    from matplotlib.text import Text

    for child in artist.get_children():
        if isinstance(child, Tick):
            continue
        if isinstance(artist, Axis) and child is artist.offsetText:
            continue
        if isinstance(child, Text):
            yield child
        yield from _texts(child)


def translate_figure(fig) -> list[str]:
    """Translate ``fig``'s text in place with the active catalog; returns the strings
    that had no translation. (Called by every draw under ``plot_language``.)"""
    from matplotlib.ticker import FixedFormatter

    if _catalog is None:
        return []
    missing: list[str] = []
    for text in _texts(fig):
        s = text.get_text()
        if not s or getattr(text, "_attention_lib_text", None) == s:
            continue
        new, lost = _catalog.translate(s)
        if needs_translation(s):
            _seen.add(s)
        missing += lost
        if new != s:
            text.set_text(new)
        if _CJK.search(new):
            text.set_fontfamily(_families(new))
        text._attention_lib_text = new
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for which in ("major", "minor"):
                if _translate_tick_labels(axis, which):
                    axis.set_tick_params(
                        which=which, labelfontfamily=["DejaVu Sans", _font]
                    )
    _untranslated.update(missing)
    return missing


def _translate_tick_labels(axis, which: str) -> bool:
    """Tick labels given as strings (``set_xticks(..., labels=...)``: a FuncFormatter
    over a {location: label} dict, or a FixedFormatter), translated where the catalog
    has them; whether one changed."""
    import functools

    from matplotlib.ticker import FixedFormatter, FuncFormatter

    formatter = getattr(axis, f"get_{which}_formatter")()
    if isinstance(formatter, FixedFormatter):
        seq = [_catalog.translate_tick(s) for s in formatter.seq]
        changed = seq != list(formatter.seq)
        formatter.seq = seq
        return changed
    func = (
        getattr(formatter, "func", None)
        if isinstance(formatter, FuncFormatter)
        else None
    )
    if (
        isinstance(func, functools.partial)
        and func.args
        and isinstance(func.args[0], dict)
    ):
        labels = func.args[0]
        changed = False
        for location, label in labels.items():
            if isinstance(label, str) and _catalog.translate_tick(label) != label:
                labels[location] = _catalog.translate_tick(label)
                changed = True
        return changed
    return False


def _install_draw_hook() -> None:
    import functools

    from matplotlib.figure import Figure

    if getattr(Figure.draw, "_attention_lib", False):
        return
    original = Figure.draw

    @functools.wraps(original)
    def draw(self, renderer):
        if _catalog is not None:
            translate_figure(self)
        return original(self, renderer)

    draw._attention_lib = True
    Figure.draw = draw


if os.environ.get("ATTENTION_LIB_PLOT_LANG"):
    plot_language(os.environ["ATTENTION_LIB_PLOT_LANG"])
