"""Diagrams of chapter 5 (scaled dot-product attention): the block, with the shape of
every tensor on the arrows.

MatMul (queries with the transposed keys) -> scale by 1/sqrt(d) -> mask (optional) ->
softmax over the keys -> MatMul with the values, as in Vaswani et al.'s figure 2 (left),
drawn top to bottom in the course's colours.
"""

from __future__ import annotations

from tools.diagrams.style import SHAPE_SIZE, Diagram, colours


def draw_sdpa_block(path):
    """queries, keys -> QK^T -> / sqrt(d) -> mask -> softmax -> @ values -> output,
    shapes on every arrow. The scale uses the chapter's d (= D, the query/key width of
    the shapes); the mask step says what the library does (finfo.min, zero rows)."""
    width, height = 22.0, 31.2
    d = Diagram(width, height)
    d.title("Scaled dot-product attention")

    cx = 9.0  # the column of the five steps
    bw, bh = 8.6, 1.5  # step boxes
    x0 = cx - bw / 2

    # inputs
    y_in, w_in, h_in = height - 4.2, 5.0, 1.5
    q = d.box(
        cx - 3.6 - w_in / 2, y_in, w_in, h_in, r"queries $\mathbf{Q}$", role="query"
    )
    k = d.box(cx + 3.6 - w_in / 2, y_in, w_in, h_in, r"keys $\mathbf{K}$", role="key")
    v = d.box(width - 0.9 - 4.6, y_in, 4.6, h_in, r"values $\mathbf{V}$", role="value")

    # 1. MatMul Q K^T
    y1 = y_in - 3.6
    m1 = d.box(x0, y1, bw, bh, r"MatMul: $\mathbf{Q}\,\mathbf{K}^\top$", role="neutral")
    d.arrow(
        q["bottom"], (cx - 1.8, y1 + bh), shape="(B, Q, D)", side="left", role="query"
    )
    d.arrow(
        k["bottom"], (cx + 1.8, y1 + bh), shape="(B, K, D)", side="right", role="key"
    )

    # 2. scale, 3. mask, 4. softmax: every arrow carries a (B, Q, K) tensor
    gap = 2.4
    y2 = y1 - gap - bh
    s2 = d.box(
        x0, y2, bw, bh, r"scale: $\times\; 1/\sqrt{d}$  ($d = D$)", role="neutral"
    )
    d.arrow(m1["bottom"], s2["top"], label="scores", shape="(B, Q, K)", role="score")
    y3 = y2 - gap - bh
    mw = 11.8  # wider than the other steps: its two lines of text must fit inside
    s3 = d.box(cx - mw / 2, y3 - 1.1, mw, bh + 1.1, "", role="mask", dashed=True)
    d.text(cx, y3 + 0.6, "mask (optional)")
    d.text(
        cx,
        y3 - 0.05,
        "masked scores \u2192 finfo.min (lowest float)",
        size=SHAPE_SIZE + 0.5,
    )
    d.text(
        cx,
        y3 - 0.7,
        "fully masked row \u2192 weights 0",
        size=SHAPE_SIZE + 0.5,
    )
    d.arrow(
        s2["bottom"], s3["top"], label="scaled scores", shape="(B, Q, K)", role="score"
    )
    y4 = y3 - 1.1 - gap - bh
    s4 = d.box(x0, y4, bw, bh, "softmax over the K keys", role="neutral")
    d.arrow(
        s3["bottom"], s4["top"], label="masked scores", shape="(B, Q, K)", role="score"
    )

    # 5. MatMul with the values, which come down the right-hand side
    y5 = y4 - gap - bh
    m5 = d.box(x0, y5, bw, bh, r"MatMul: weights $\cdot\, \mathbf{V}$", role="neutral")
    d.arrow(s4["bottom"], m5["top"], label="weights", shape="(B, Q, K)", role="weight")
    vx = v["bottom"][0]
    d.line([v["bottom"], (vx, m5["right"][1])], role="value", lw=1.4)
    d.arrow((vx, m5["right"][1]), m5["right"], role="value")
    d.shape(
        vx - 0.25,
        (v["bottom"][1] + m5["right"][1]) / 2,
        "(B, K, Dv)",
        ha="right",
        color=colours("value")[0],
    )

    # output
    y6 = y5 - gap - bh
    out = d.box(cx - 3.0, y6, 6.0, bh, "output", role="output")
    d.arrow(m5["bottom"], out["top"], shape="(B, Q, Dv)", role="output")

    d.legend(
        1.0,
        1.1,
        [
            ("query", "query"),
            ("key", "key"),
            ("value", "value"),
            ("score", "score"),
            ("weight", "weight"),
            ("output", "output"),
            ("mask", "mask"),
        ],
    )
    d.save(path)


DIAGRAMS = {"ch05_sdpa_block": draw_sdpa_block}
