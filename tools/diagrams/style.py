"""The course's one visual language for diagrams, drawn with matplotlib and saved as
deterministic SVG.

Every diagram module ``tools/diagrams/chNN.py`` builds its figures from these primitives
only, so that a query is the same blue, a key the same orange, a value the same green
and a weight the same vermillion in every chapter (the Okabe–Ito palette:
distinguishable with the common colour-vision deficiencies), and shapes are written with
the course's legend letters ``B, Q, K, D, Dv, H, Hkv, E, d`` on the arrows.

Coordinates are in "units" (1 unit = 0.25 inch at 100 % zoom); ``Diagram(width,
height)`` spans ``[0, width] x [0, height]`` with y pointing up. The diagram sits on an
opaque white card with a light border, so it reads the same in the website's light and
dark modes (text is never drawn on the page background).

Why matplotlib: the course already depends on it, it renders math with the same TeX-like
notation as the text (``$\\mathbf{q}$``), and with the glyphs saved as paths
(``svg.fonttype = "path"``) and a fixed hash salt the SVG bytes depend only on the
pinned matplotlib version -- so a test can regenerate every diagram and compare bytes.
Graphviz or TikZ would add a system dependency that a learner's ``pip install`` cannot
provide.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
from matplotlib import cbook

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402

# noqa: E402
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

UNIT_INCH = 0.25

# One colour per role, everywhere in the course (Okabe–Ito). ``fill`` is a light tint of
# the same hue.
ROLES = {
    "query": ("#0072B2", "#D6E9F5"),  # blue
    "key": ("#E69F00", "#FBEBC7"),  # orange
    "value": ("#009E73", "#CFEFE5"),  # bluish green
    "weight": ("#D55E00", "#F8DCC9"),  # vermillion (the heatmaps' "Reds" colour map)
    "score": ("#CC79A7", "#F4E0EB"),  # reddish purple: scores before the softmax
    "output": ("#56B4E9", "#DDF0FB"),  # sky blue: what attention returns
    "mask": ("#6E6E6E", "#E4E4E4"),  # grey: masked / padding
    "param": ("#444444", "#F2F2F2"),  # dark grey: learned matrices W_q, W_k, ...
    "neutral": ("#222222", "#FFFFFF"),  # plain boxes and text
}
INK = "#222222"  # text and arrows
CARD = "#FFFFFF"  # the diagram's own background
CARD_EDGE = "#D0D0D0"
FONT_SIZE = (
    11  # body text (points); shapes on arrows are one size smaller, in monospace
)
SHAPE_SIZE = 9.5

plt.rcParams.update(
    {
        # glyphs as paths: identical rendering everywhere, no font lookup
        "svg.fonttype": "path",
        "svg.hashsalt": "attention-course",  # deterministic element ids
        "font.family": "DejaVu Sans",
        "mathtext.fontset": "dejavusans",
        "font.size": FONT_SIZE,
    }
)


# -- the Chinese edition
# The same diagrams with Chinese labels (``NAME.zh_CN.svg``, which Sphinx's Chinese build picks
# instead of ``NAME.svg``): ``make_diagrams.py`` draws every diagram a second time with
# ``use_language("zh_CN")``, and every label goes through ``translate``: the table in
# ``tools/diagrams/labels_zh_CN.py`` gives its Chinese, or lists it as kept (math, code names,
# numbers). A label in neither is recorded in ``UNKNOWN`` and make_diagrams fails naming it.
CJK_FONTS = [  # Debian's fonts-noto-cjk
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Bold.ttc",
]
LABELS: dict[str, str] | None = None
KEEP: set[str] = set()
UNKNOWN: set[str] = set()


def use_language(language: str | None) -> None:
    """Draw the next diagrams in ``language`` (None: English, the source's own labels)."""
    global LABELS, KEEP
    if language is None:
        LABELS, KEEP = None, set()
        plt.rcParams["font.family"] = "DejaVu Sans"
        return
    import importlib

    from matplotlib import font_manager

    for font in CJK_FONTS:
        if not Path(font).exists():
            raise FileNotFoundError(
                f"{font} not found: the Chinese diagrams need Noto Sans CJK "
                "(Debian: apt-get install fonts-noto-cjk)"
            )
        font_manager.fontManager.addfont(font)
    table = importlib.import_module(f"tools.diagrams.labels_{language}")
    LABELS, KEEP = table.LABELS, set(table.KEEP)
    # Latin letters and digits from DejaVu Sans (as in English), Chinese from Noto Sans CJK SC.
    plt.rcParams["font.family"] = ["DejaVu Sans", "Noto Sans CJK SC"]


def translate(s: str) -> str:
    if LABELS is None or not isinstance(s, str):
        return s
    if s in LABELS:
        return LABELS[s]
    # Math, shapes and numbers stay as they are: what is left outside $...$ has no word.
    if s not in KEEP and re.search(r"[A-Za-z]{3,}", re.sub(r"\$[^$]*\$", "", s)):
        UNKNOWN.add(s)
    return s


# Chinese characters and full-width punctuation
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def _cjk_families(s: str, family: str | None) -> list[str]:
    """The font families of a label with Chinese in it.

    Plain text falls back glyph by glyph along the family list, so a monospace label (a
    shape, a code line) gets Noto Sans CJK after DejaVu Sans Mono. A label with math is
    typeset by mathtext, which takes all its text outside ``$...$`` from the first family
    alone: there Noto Sans CJK comes first (its Latin letters stand in for DejaVu Sans'
    outside the math; the math keeps the DejaVu fontset)."""
    if cbook.is_math_text(s):
        return ["Noto Sans CJK SC", "DejaVu Sans"]
    return [family or "DejaVu Sans", "Noto Sans CJK SC"]


def colours(role: str) -> tuple[str, str]:
    """``(edge, fill)`` colours of a role (``query``, ``key``, ``value``, ``weight``,
    ...)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {sorted(ROLES)}")
    return ROLES[role]


class Diagram:
    """A white card of ``width x height`` units to draw on; ``save(path)`` writes the
    SVG.

    Every primitive returns the anchor points you need to connect it (``box`` returns
    its bounds), so a diagram is laid out with plain arithmetic on coordinates, not by
    eye.
    """

    def __init__(self, width: float, height: float):
        self.width, self.height = width, height
        self.fig = plt.figure(figsize=(width * UNIT_INCH, height * UNIT_INCH))
        self.ax = self.fig.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(0, height)
        self.ax.set_axis_off()
        self.fig.patch.set_alpha(0.0)
        self.ax.add_patch(
            FancyBboxPatch(
                (0.08, 0.08),
                width - 0.16,
                height - 0.16,
                boxstyle="round,pad=0,rounding_size=0.4",
                facecolor=CARD,
                edgecolor=CARD_EDGE,
                linewidth=0.8,
                zorder=0,
            )
        )

    # -- text
    # -------------------------------------------------------------------------------------------------
    def text(
        self,
        x,
        y,
        s,
        *,
        size=FONT_SIZE,
        color=INK,
        ha="center",
        va="center",
        weight="normal",
        family=None,
        rotation=0,
        **kw,
    ):
        s = translate(s)
        if LABELS is not None and isinstance(s, str) and CJK.search(s):
            family = _cjk_families(s, family)
        return self.ax.text(
            x,
            y,
            s,
            fontsize=size,
            color=color,
            ha=ha,
            va=va,
            fontweight=weight,
            family=family,
            rotation=rotation,
            zorder=5,
            **kw,
        )

    def shape(self, x, y, s, *, ha="center", va="center", color=INK, rotation=0):
        """A tensor shape such as ``(B, Q, D)`` in monospace, the form used on arrows."""
        return self.text(
            x,
            y,
            s,
            size=SHAPE_SIZE,
            family="DejaVu Sans Mono",
            ha=ha,
            va=va,
            color=color,
            rotation=rotation,
        )

    def title(self, s, *, y=None):
        return self.text(
            self.width / 2,
            self.height - 0.9 if y is None else y,
            s,
            size=FONT_SIZE + 1.5,
            weight="bold",
        )

    # -- boxes
    # ------------------------------------------------------------------------------------------------
    def box(
        self,
        x,
        y,
        w,
        h,
        label="",
        *,
        role="neutral",
        shape=None,
        size=FONT_SIZE,
        dashed=False,
        rounded=True,
    ):
        """A box with lower-left corner ``(x, y)``; ``label`` in the middle, ``shape``
        (monospace) below it.

        Returns a dict of anchors: ``left, right, top, bottom, center`` (each an ``(x,
        y)`` pair).
        """
        edge, fill = colours(role)
        style = "round,pad=0,rounding_size=0.25" if rounded else "square,pad=0"
        self.ax.add_patch(
            FancyBboxPatch(
                (x, y),
                w,
                h,
                boxstyle=style,
                facecolor=fill,
                edgecolor=edge,
                linewidth=1.4,
                linestyle="--" if dashed else "-",
                zorder=2,
            )
        )
        cx, cy = x + w / 2, y + h / 2
        if label and shape:
            self.text(cx, cy + 0.35, label, size=size)
            self.shape(cx, cy - 0.45, shape)
        elif label:
            self.text(cx, cy, label, size=size)
        elif shape:
            self.shape(cx, cy, shape)
        return anchors(x, y, w, h)

    def matrix(
        self,
        x,
        y,
        rows,
        cols,
        *,
        cell=0.6,
        role="neutral",
        values=None,
        shade=None,
        masked=None,
        label=None,
        label_side="top",
    ):
        """A grid of ``rows x cols`` cells (lower-left corner ``(x, y)``), e.g. a tensor
        or a weight matrix.

        ``shade``: optional ``rows x cols`` numbers in [0, 1] giving each cell's tint (0
        = white, 1 = the role's edge colour) -- how a weight matrix shows its weights.
        ``masked``: optional ``rows x cols`` booleans; True cells are drawn grey and
        hatched. ``values``: optional strings drawn in the cells. Returns the anchors of
        the whole grid.
        """
        edge, fill = colours(role)
        for i in range(rows):
            for j in range(cols):
                cx, cy = x + j * cell, y + (rows - 1 - i) * cell
                face = fill
                if shade is not None:
                    face = _mix("#FFFFFF", edge, float(shade[i][j]))
                hatch = None
                if masked is not None and masked[i][j]:
                    face, hatch = ROLES["mask"][1], "////"
                self.ax.add_patch(
                    Rectangle(
                        (cx, cy),
                        cell,
                        cell,
                        facecolor=face,
                        edgecolor=edge,
                        linewidth=0.9,
                        hatch=hatch,
                        zorder=2,
                    )
                )
                if values is not None and values[i][j] != "":
                    self.text(
                        cx + cell / 2, cy + cell / 2, str(values[i][j]), size=SHAPE_SIZE
                    )
        a = anchors(x, y, cols * cell, rows * cell)
        if label:
            lx, ly = {
                "top": (a["top"][0], a["top"][1] + 0.45),
                "bottom": (a["bottom"][0], a["bottom"][1] - 0.45),
                "left": (a["left"][0] - 0.3, a["left"][1]),
                "right": (a["right"][0] + 0.3, a["right"][1]),
            }[label_side]
            ha = {"left": "right", "right": "left"}.get(label_side, "center")
            self.text(lx, ly, label, ha=ha)
        return a

    def vector(
        self,
        x,
        y,
        n,
        *,
        role="neutral",
        vertical=True,
        cell=0.5,
        label=None,
        label_side="left",
        values=None,
        shade=None,
    ):
        """A vector of ``n`` cells: a column (``vertical``) or a row. Returns its
        anchors."""
        rows, cols = (n, 1) if vertical else (1, n)
        vals = (
            None
            if values is None
            else ([[v] for v in values] if vertical else [list(values)])
        )
        sh = (
            None
            if shade is None
            else ([[s] for s in shade] if vertical else [list(shade)])
        )
        return self.matrix(
            x,
            y,
            rows,
            cols,
            cell=cell,
            role=role,
            values=vals,
            shade=sh,
            label=label,
            label_side=label_side,
        )

    def op(self, x, y, symbol, *, r=0.42, role="neutral", size=FONT_SIZE + 2):
        """A small circle with an operator inside (``×``, ``+``, ``⊙``, ``Σ``); returns
        its anchors."""
        edge, fill = colours(role)
        self.ax.add_patch(
            Circle((x, y), r, facecolor=fill, edgecolor=edge, linewidth=1.4, zorder=2)
        )
        self.text(x, y, symbol, size=size)
        return anchors(x - r, y - r, 2 * r, 2 * r)

    def brace_label(self, x0, x1, y, s, *, below=True):
        """A thin bracket from ``x0`` to ``x1`` at height ``y`` with ``s`` under (or
        over) it."""
        d = -0.2 if below else 0.2
        self.ax.plot(
            [x0, x0, x1, x1], [y - d, y, y, y - d], color=INK, linewidth=0.9, zorder=3
        )
        self.text((x0 + x1) / 2, y + (-0.4 if below else 0.4), s, size=SHAPE_SIZE + 0.5)

    # -- arrows
    # -----------------------------------------------------------------------------------------------
    def arrow(
        self,
        start,
        end,
        *,
        shape=None,
        label=None,
        role=None,
        side="right",
        rad=0.0,
        dashed=False,
        offset=0.25,
        lw=1.4,
        head=True,
    ):
        """An arrow from ``start`` to ``end``; ``shape`` (monospace) and/or ``label``
        written beside its middle.

        ``side`` is where the text goes relative to the direction of travel
        (``"left"``/``"right"``, or ``"above"``/``"below"`` for horizontal arrows).
        ``rad`` curves the arrow. ``role`` colours it.
        """
        color = INK if role is None else colours(role)[0]
        self.ax.add_patch(
            FancyArrowPatch(
                start,
                end,
                arrowstyle="-|>,head_length=5,head_width=2.6" if head else "-",
                mutation_scale=1.6,
                color=color,
                linewidth=lw,
                linestyle="--" if dashed else "-",
                connectionstyle=f"arc3,rad={rad}",
                shrinkA=0,
                shrinkB=0,
                zorder=3,
            )
        )
        text = " ".join(t for t in (label, shape) if t)
        if not text:
            return
        mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        horizontal = abs(end[0] - start[0]) >= abs(end[1] - start[1])
        if (
            horizontal
        ):  # text above ("above"/"left") or below ("below"/"right") the arrow
            up = side in ("above", "left")
            ty = my + (offset if up else -offset)
            va = "bottom" if up else "top"
            if label and shape:
                if up:
                    self.shape(mx, ty, shape, va="bottom")
                    self.text(mx, ty + 0.5, label, va="bottom")
                else:
                    self.text(mx, ty, label, va="top")
                    self.shape(mx, ty - 0.5, shape, va="top")
            elif label:
                self.text(mx, ty, label, va=va)
            else:
                self.shape(mx, ty, shape, va=va)
        # text to the right ("right"/"below") or left ("left"/"above") of the arrow
        else:
            right = side in ("right", "below")
            tx = mx + (offset if right else -offset)
            ha = "left" if right else "right"
            if label and shape:
                self.text(tx, my + 0.05, label, ha=ha, va="bottom")
                self.shape(tx, my - 0.05, shape, ha=ha, va="top")
            elif label:
                self.text(tx, my, label, ha=ha)
            else:
                self.shape(tx, my, shape, ha=ha)

    def line(self, points, *, role=None, dashed=False, lw=1.2):
        color = INK if role is None else colours(role)[0]
        xs, ys = zip(*points)
        self.ax.plot(
            xs,
            ys,
            color=color,
            linewidth=lw,
            linestyle="--" if dashed else "-",
            zorder=3,
        )

    def legend(self, x, y, roles):
        """A row of swatches naming the roles used, from ``(x, y)`` rightwards, e.g.
        ``[("query", "query"), ("key", "key"), ("value", "value")]``. Returns the x
        where it ends."""
        for role, name in roles:
            edge, fill = colours(role)
            self.ax.add_patch(
                Rectangle(
                    (x, y - 0.22),
                    0.45,
                    0.45,
                    facecolor=fill,
                    edgecolor=edge,
                    linewidth=1.2,
                    zorder=2,
                )
            )
            self.text(x + 0.65, y, name, ha="left", size=SHAPE_SIZE + 0.5)
            shown = translate(name)  # a Chinese character is about twice as wide
            x += 0.65 + 0.27 * (len(shown) + len(CJK.findall(shown))) + 0.8
        return x

    # -- output
    # -----------------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the SVG deterministically (no date, fixed ids) and close the figure.

        A path ending in ``.png`` writes the bitmap that the notebooks carry (JupyterLab
        does not show SVG attachments): 2x density (192 dpi, twice the 96 CSS pixels per
        inch of the SVG), reduced to a palette of 256 colours as ``al.sharp_png`` does,
        deterministic (no metadata)."""
        if str(path).endswith(".png"):
            import io

            from PIL import Image

            buf = io.BytesIO()
            self.fig.savefig(buf, format="png", dpi=192, metadata={"Software": None})
            image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
            image = image.quantize(colors=256, dither=Image.Dither.NONE)
            image.save(path, format="PNG", optimize=True)
        else:
            self.fig.savefig(
                path, format="svg", metadata={"Date": None, "Creator": None}
            )
        plt.close(self.fig)


def anchors(x, y, w, h) -> dict:
    return {
        "left": (x, y + h / 2),
        "right": (x + w, y + h / 2),
        "top": (x + w / 2, y + h),
        "bottom": (x + w / 2, y),
        "center": (x + w / 2, y + h / 2),
        "x": x,
        "y": y,
        "w": w,
        "h": h,
    }


def _mix(c0: str, c1: str, t: float) -> str:
    t = min(max(t, 0.0), 1.0)
    a = [int(c0[i : i + 2], 16) for i in (1, 3, 5)]
    b = [int(c1[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(u + (v - u) * t):02X}" for u, v in zip(a, b))
