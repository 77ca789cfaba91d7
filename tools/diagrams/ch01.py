"""Diagrams of chapter 1 (queries, keys and values): attention pooling for one query.

The query is scored against every key, the softmax over the keys turns the scores into
weights, and the output is the weighted sum of the values. Below the flow, the four
special cases of the weights (non-negative, convex, one-hot, uniform) are drawn as
weight rows, on the same 0..1 colour scale, with what each makes of the output.
"""

from __future__ import annotations

from matplotlib.patches import FancyBboxPatch

from tools.diagrams.style import FONT_SIZE, SHAPE_SIZE, Diagram, _mix, colours

WEIGHTS = [
    0.10,
    0.60,
    0.25,
    0.05,
]  # the example weights of the main flow (a convex combination)
CASES = [  # name, weights of the four keys, what the output becomes (two lines)
    (
        "non-negative",
        [0.9, 0.7, 0.0, 0.4],
        r"in the convex cone of the $\mathbf{v}_i$",
        "(the weights sum to 2 here)",
    ),
    (
        "convex",
        [0.1, 0.6, 0.25, 0.05],
        r"in the convex hull of the $\mathbf{v}_i$",
        "(a weighted mean)",
    ),
    ("one-hot", [0.0, 1.0, 0.0, 0.0], r"$= \mathbf{v}_2$", "(a database lookup)"),
    (
        "uniform",
        [0.25, 0.25, 0.25, 0.25],
        r"$=$ the mean of the $\mathbf{v}_i$",
        "(average pooling)",
    ),
]
# a weight of 1 is drawn in 85 % of the weight colour, so that text on it stays readable
DARKEST = 0.85


def _fmt(w: float) -> str:
    return f"{w:g}"


def _weight_box(d, x, y, w, h, t, text):
    """A box whose fill deepens with the weight t in [0, 1] (like the heatmaps' colour
    scale), text inside."""
    edge, _ = colours("weight")
    d.ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=0.25",
            facecolor=_mix("#FFFFFF", edge, t * DARKEST),
            edgecolor=edge,
            linewidth=1.4,
            zorder=2,
        )
    )
    d.text(x + w / 2, y + h / 2, text, color="#FFFFFF" if t > 0.55 else "#222222")


def draw_attention_pooling(path):
    """keys -> scores a(q, k_i) (with the query) -> softmax -> weights alpha_i -> sum_i
    alpha_i v_i -> output."""
    width, height = 22.0, 38.0
    d = Diagram(width, height)
    d.title(r"Attention pooling of one query")

    xs = [9.4, 12.2, 15.0, 17.8]  # x centre of each key-value pair's column
    bw, bh = 2.2, 1.3
    x_lo, x_hi = xs[0] - bw / 2, xs[-1] + bw / 2
    cx = (x_lo + x_hi) / 2
    label_x = x_lo - 0.5  # row labels end here (right-aligned)

    def row_label(y, name, shape, role):
        d.text(label_x, y + 0.3, name, ha="right", color=colours(role)[0])
        d.shape(label_x, y - 0.4, shape, ha="right")

    # keys, one box per pair
    y = height - 4.4
    y_keys = y
    for i, x in enumerate(xs, start=1):
        d.box(x - bw / 2, y_keys, bw, bh, rf"$\mathbf{{k}}_{i}$", role="key")
    row_label(y_keys + bh / 2, "keys", "(K, D)", "key")
    d.text(
        cx,
        y_keys + bh + 0.6,
        "one column per key-value pair (here K = 4)",
        size=SHAPE_SIZE + 0.5,
    )

    # the scores: one long box fed by the query (from the left) and by every key (from
    # the top)
    h_sc = 1.5
    y_sc = y_keys - 2.4 - h_sc
    d.box(
        x_lo,
        y_sc,
        x_hi - x_lo,
        h_sc,
        r"scores $a(\mathbf{q}, \mathbf{k}_i)$, one per key",
        role="score",
    )
    for x in xs:
        d.arrow((x, y_keys), (x, y_sc + h_sc), role="key")
    q = d.box(0.9, y_sc - 0.15, 3.6, h_sc + 0.3, r"query $\mathbf{q}$", role="query")
    d.arrow(q["right"], (x_lo, q["right"][1]), shape="(D,)", side="above", role="query")

    # softmax over the keys
    h_sm = 1.3
    y_sm = y_sc - 2.4 - h_sm
    d.box(x_lo, y_sm, x_hi - x_lo, h_sm, "softmax over the K keys", role="neutral")
    for x in xs:
        d.arrow((x, y_sc), (x, y_sm + h_sm), role="score")
    d.shape(label_x, (y_sc + y_sm + h_sm) / 2, "(K,)", ha="right")

    # the weights (shaded like the heatmaps, numbers written in)
    y_w = y_sm - 2.4 - bh
    for x, w in zip(xs, WEIGHTS):
        _weight_box(d, x - bw / 2, y_w, bw, bh, w, f"{w:.2f}")
        d.arrow((x, y_sm), (x, y_w + bh), role="weight")
    row_label(y_w + bh / 2, r"weights $\alpha_i$", "(K,)", "weight")

    # times the value of the same pair
    y_v = y_w - 2.3 - bh
    for i, x in enumerate(xs, start=1):
        d.text(x, (y_w + y_v + bh) / 2, r"$\times$", size=FONT_SIZE + 3)
        d.box(x - bw / 2, y_v, bw, bh, rf"$\mathbf{{v}}_{i}$", role="value")
    row_label(y_v + bh / 2, r"values $\mathbf{v}_i$", "(K, Dv)", "value")

    # sum and output
    y_s = y_v - 2.2
    s = d.op(cx, y_s, r"$\Sigma$", role="output")
    for x in xs:
        d.arrow((x, y_v), (cx + (x - cx) * 0.18, s["top"][1] + 0.05), role="value")
    d.text(
        cx + 0.7, y_s - 0.75, r"$\sum_i \alpha_i \mathbf{v}_i$", ha="left"
    )  # below the arrows from the values
    y_out = y_s - 3.5
    out = d.box(cx - 2.4, y_out, 4.8, bh, "output", role="output")
    d.arrow(s["bottom"], out["top"], shape="(Dv,)", side="left", role="output")

    d.legend(
        1.2,
        y_out - 1.1,
        [
            ("query", "query"),
            ("key", "key"),
            ("score", "score"),
            ("weight", "weight"),
            ("value", "value"),
            ("output", "output"),
        ],
    )

    # the four special cases of the weights, as a 2 x 2 grid, on the same 0..1 colour
    # scale
    y_sep = y_out - 2.0
    d.line([(0.9, y_sep), (width - 0.9, y_sep)], lw=0.6)
    d.text(
        width / 2,
        y_sep - 0.8,
        r"Four special cases of the weights $\alpha_1, \ldots, \alpha_4$",
        weight="bold",
    )
    cell = 1.45
    for n, (name, ws, line1, line2) in enumerate(CASES):
        col, row = n % 2, n // 2
        bx = 1.0 + col * 10.5  # left edge of this case's block
        by = y_sep - 2.3 - row * 4.6  # baseline of its name
        d.text(bx + 0.1, by, name, ha="left", weight="bold", color=colours("weight")[0])
        vy = by - 0.55 - cell
        for j, w in enumerate(ws):
            edge, _ = colours("weight")
            d.ax.add_patch(
                FancyBboxPatch(
                    (bx + j * cell, vy),
                    cell,
                    cell,
                    boxstyle="square,pad=0",
                    facecolor=_mix("#FFFFFF", edge, min(w, 1.0) * DARKEST),
                    edgecolor=edge,
                    linewidth=0.9,
                    zorder=2,
                )
            )
            d.text(
                bx + (j + 0.5) * cell,
                vy + cell / 2,
                _fmt(w),
                size=SHAPE_SIZE,
                color="#FFFFFF" if w > 0.55 else "#222222",
            )
        d.text(bx + 0.1, vy - 0.55, line1, ha="left", size=SHAPE_SIZE + 0.5)
        d.text(bx + 0.1, vy - 1.25, line2, ha="left", size=SHAPE_SIZE + 0.5)
    d.save(path)


DIAGRAMS = {"ch01_attention_pooling": draw_attention_pooling}
