"""Diagrams of chapter 7 (multi-head attention): one forward pass, with the shape of
every tensor on the arrows.

Project with one full-width layer per role, split the width E into H heads of width d,
run scaled dot-product attention in every head on its own, merge (concatenate) the heads
back to width H * d = E and mix them with W_o.
"""

from __future__ import annotations

from tools.diagrams.style import FONT_SIZE, SHAPE_SIZE, Diagram, colours


def draw_mha_forward(path):
    """queries/keys/values -> W_q/W_k/W_v -> split_heads -> attention per head ->
    merge_heads -> W_o -> output."""
    width, height = 25.0, 34.6
    d = Diagram(width, height)
    d.title("Multi-head attention: split, attend in each head, merge")

    cols = {"query": 4.5, "key": 12.0, "value": 19.5}  # x centre of each role's column
    bw = 5.0  # box width in the three columns
    inputs = {
        "query": ("queries", "(B, Q, E)"),
        "key": ("keys", "(B, K, E)"),
        "value": ("values", "(B, K, E)"),
    }
    proj = {"query": r"$W_q$", "key": r"$W_k$", "value": r"$W_v$"}
    split_shape = {
        "query": "(B, H, Q, d)",
        "key": "(B, H, K, d)",
        "value": "(B, H, K, d)",
    }
    full_shape = {"query": "(B, Q, E)", "key": "(B, K, E)", "value": "(B, K, E)"}

    # container of the per-head attention (drawn first so the arrows end on its top
    # edge)
    cx0, cx1, cy0, cy1 = 1.2, 23.8, 13.6, 19.6
    for role, x in cols.items():
        a = d.box(
            x - bw / 2, 30.0, bw, 1.9, inputs[role][0], role=role, shape=inputs[role][1]
        )
        w = d.box(x - 1.6, 26.6, 3.2, 1.3, proj[role], role="param", size=FONT_SIZE + 1)
        d.arrow(a["bottom"], w["top"], role=role)
        s = d.box(x - bw / 2, 22.6, bw, 1.3, "split_heads", role="neutral")
        d.arrow(w["bottom"], s["top"], shape=full_shape[role], role=role)
        d.arrow(s["bottom"], (x, cy1), shape=split_shape[role], role=role)

    d.box(cx0, cy0, cx1 - cx0, cy1 - cy0, role="neutral", dashed=True)
    d.text(
        width / 2,
        cy1 - 0.75,
        r"attention in each head $h$, on its own (scale $1/\sqrt{d}$):",
    )
    d.text(
        width / 2,
        cy1 - 1.65,
        r"$\mathrm{head}_h = \mathrm{softmax}(q_h k_h^\top / \sqrt{d})\; v_h$",
    )
    hb_w, hb_h, hb_y = 4.3, 1.9, cy0 + 1.25
    heads = [(2.3, "head 0"), (7.5, "head 1"), (18.4, "head H−1")]
    for x, label in heads:
        d.box(x, hb_y, hb_w, hb_h, label, role="output", shape="(B, Q, d)")
    d.text(15.05, hb_y + hb_h / 2, r"$\cdots$", size=FONT_SIZE + 4)
    wx = width / 2
    d.text(
        wx - 0.1,
        cy0 + 0.6,
        "weights of all heads:",
        size=SHAPE_SIZE + 0.5,
        ha="right",
        color=colours("weight")[0],
    )
    d.shape(wx + 0.1, cy0 + 0.6, "(B, H, Q, K)", ha="left", color=colours("weight")[0])

    m = d.box(width / 2 - 4.6, 9.6, 9.2, 1.3, "merge_heads  (= Concat)", role="neutral")
    d.arrow((width / 2, cy0), m["top"], shape="(B, H, Q, d)", role="output")
    wo = d.box(
        width / 2 - 1.6, 6.2, 3.2, 1.3, r"$W_o$", role="param", size=FONT_SIZE + 1
    )
    d.arrow(m["bottom"], wo["top"], shape="(B, Q, H·d = E)", role="output")
    out = d.box(width / 2 - 2.5, 2.8, 5.0, 1.3, "output", role="output")
    d.arrow(wo["bottom"], out["top"], shape="(B, Q, E)", role="output")

    d.legend(
        1.4,
        1.15,
        [
            ("query", "query"),
            ("key", "key"),
            ("value", "value"),
            ("output", "output"),
            ("weight", "weight"),
            ("param", "learned matrix"),
        ],
    )
    d.save(path)


DIAGRAMS = {"ch07_mha_forward": draw_mha_forward}
