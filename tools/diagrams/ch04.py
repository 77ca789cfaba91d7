"""Diagrams of chapter 4 (additive attention).

``ch04_additive_scoring``: the scoring network ``a(q, k) = w_v^T tanh(W_q q + W_k k)``
drawn top to bottom for a batch, with the shape of every tensor on the arrows, including
the broadcast that pairs every query with every key.

``ch04_bahdanau``: one decoder step of Bahdanau et al.'s encoder--decoder: the encoder's
annotations are the keys and the values, the previous decoder state is the query, and
the context vector enters the decoder's GRU cell and its output layer; the new state is
the next step's query.
"""

from __future__ import annotations

from tools.diagrams.style import SHAPE_SIZE, Diagram, colours


def draw_additive_scoring(path):
    """queries -> W_q, keys -> W_k, broadcast add, tanh, w_v^T -> scores, shapes on
    every arrow."""
    width, height = 22.0, 28.6  # the legend sits below the scores box
    d = Diagram(width, height)
    d.title("Additive attention scores every query\u2013key pair")
    formula = r"$a(\mathbf{q}, \mathbf{k}) = \mathbf{w}_v^\top \tanh(W_q\,\mathbf{q} + W_k\,\mathbf{k})$"
    d.text(width / 2, height - 2.2, formula)

    cx = width / 2
    xq, xk = 5.0, width - 5.0  # the query and the key columns

    # inputs
    y_in, w_in, h_in = height - 5.4, 6.4, 1.9
    q = d.box(
        xq - w_in / 2,
        y_in,
        w_in,
        h_in,
        r"queries $\mathbf{q}$",
        role="query",
        shape="(B, Q, Dq)",
    )
    k = d.box(
        xk - w_in / 2,
        y_in,
        w_in,
        h_in,
        r"keys $\mathbf{k}$",
        role="key",
        shape="(B, K, Dk)",
    )

    # projections into the hidden width h
    y_w, w_w, h_w = y_in - 3.5, 3.6, 1.9
    wq = d.box(xq - w_w / 2, y_w, w_w, h_w, r"$W_q$", role="param", shape="(h, Dq)")
    wk = d.box(xk - w_w / 2, y_w, w_w, h_w, r"$W_k$", role="param", shape="(h, Dk)")
    d.arrow(q["bottom"], wq["top"], role="query")
    d.arrow(k["bottom"], wk["top"], role="key")

    # broadcast add: (B, Q, 1, h) + (B, 1, K, h) -> (B, Q, K, h)
    y_add = y_w - 3.9
    plus = d.op(cx, y_add, "+")
    d.line([wq["bottom"], (xq, y_add)], role="query", lw=1.4)
    d.line([wk["bottom"], (xk, y_add)], role="key", lw=1.4)
    d.shape(
        xq + 0.3,
        (wq["bottom"][1] + y_add) / 2 + 0.3,
        "(B, Q, h)",
        ha="left",
        color=colours("query")[0],
    )
    d.shape(
        xk - 0.3,
        (wk["bottom"][1] + y_add) / 2 + 0.3,
        "(B, K, h)",
        ha="right",
        color=colours("key")[0],
    )
    d.arrow(
        (xq, y_add),
        plus["left"],
        shape="(B, Q, 1, h)",
        side="below",
        role="query",
        offset=0.3,
    )
    d.arrow(
        (xk, y_add),
        plus["right"],
        shape="(B, 1, K, h)",
        side="below",
        role="key",
        offset=0.3,
    )
    d.text(cx, y_add + 1.0, "broadcast", size=SHAPE_SIZE + 0.5)

    # tanh, then w_v^T reads one number per pair
    bw, bh = 4.4, 1.4
    y_t = y_add - 0.42 - 2.6 - bh
    tanh = d.box(cx - bw / 2, y_t, bw, bh, r"$\tanh$", role="neutral")
    bh = 1.9
    d.arrow(plus["bottom"], tanh["top"], shape="(B, Q, K, h)", side="right")
    y_v = y_t - 2.6 - bh
    wv = d.box(
        cx - bw / 2, y_v, bw, bh, r"$\mathbf{w}_v^\top$", role="param", shape="(1, h)"
    )
    d.arrow(
        tanh["bottom"], wv["top"], label="features", shape="(B, Q, K, h)", side="right"
    )
    d.text(
        cx - 0.4,
        (tanh["bottom"][1] + wv["top"][1]) / 2,
        "one hidden vector\nper (query, key) pair",
        ha="right",
        size=SHAPE_SIZE + 0.5,
    )

    # scores
    y_s = y_v - 2.6 - 1.5
    s = d.box(
        cx - 4.0, y_s, 8.0, 1.5, r"scores $a(\mathbf{q}, \mathbf{k})$", role="score"
    )
    d.arrow(wv["bottom"], s["top"], shape="(B, Q, K)", side="right", role="score")
    d.text(
        cx - 0.4,
        (wv["bottom"][1] + s["top"][1]) / 2,
        "squeeze the last axis",
        ha="right",
        size=SHAPE_SIZE + 0.5,
    )

    d.legend(
        2.4,
        1.1,
        [("query", "query"), ("key", "key"), ("param", "learned"), ("score", "score")],
    )
    d.save(path)


def draw_bahdanau(path):
    """x -> BiGRU -> annotations (keys = values); s_{i-1} queries them; context c_i ->
    GRU cell and output layer."""
    width, height = 29.0, 28.6
    d = Diagram(width, height)
    d.title("Bahdanau attention: decoder step i")

    # ---- encoder (bottom left): tokens -> bidirectional GRU -> annotations
    # -------------------------------------
    xs = [1.5, 4.0, 6.5, 9.0]  # four source positions shown: x_1, x_2, ..., x_T
    names = ["1", "2", None, "T"]
    cw = 2.0
    y_x, y_enc, y_h = 2.6, 5.0, 8.2
    enc = d.box(
        xs[0],
        y_enc,
        xs[-1] + cw - xs[0],
        1.6,
        "bidirectional GRU encoder",
        role="neutral",
    )
    for x, n in zip(xs, names):
        cx = x + cw / 2
        if n is None:
            d.text(cx, y_x + 0.6, r"$\cdots$")
            d.text(cx, y_h + 0.7, r"$\cdots$")
            continue
        d.box(x, y_x, cw, 1.2, rf"$x_{{{n}}}$", role="neutral")
        d.arrow((cx, y_x + 1.2), (cx, y_enc))
        d.box(x, y_h, cw, 1.4, rf"$\mathbf{{h}}_{{{n}}}$", role="key")
        d.arrow((cx, y_enc + 1.6), (cx, y_h))
    right = xs[-1] + cw
    d.text(right + 0.4, y_x + 0.6, "source tokens", ha="left", size=SHAPE_SIZE + 0.5)
    d.shape(right + 0.4, y_x - 0.2, "(B, T)", ha="left")
    d.text(right + 0.4, y_h + 0.45, "annotations", ha="left", size=SHAPE_SIZE + 0.5)
    d.shape(right + 0.4, y_h - 0.35, "(B, T, E)", ha="left")

    # the annotations feed a bus: up to the attention as keys, right to the weighted sum
    # as values
    y_bus = y_h + 2.0
    x_sum = 17.0
    for x, n in zip(xs, names):
        if n is not None:
            d.line([(x + cw / 2, y_h + 1.4), (x + cw / 2, y_bus)], lw=1.2)
    d.line([(xs[0] + cw / 2, y_bus), (xs[-1] + cw / 2, y_bus)], lw=1.2)

    # ---- attention (middle left): query from above, keys from below -> weights alpha_i
    # ------------------------
    y_att, h_att = 12.6, 2.4
    att = d.box(xs[0], y_att, right - xs[0], h_att, "", role="neutral")
    d.text(att["center"][0], y_att + 1.6, "additive attention")
    d.text(
        att["center"][0],
        y_att + 0.7,
        r"$a(\mathbf{s}_{i-1}, \mathbf{h}_j)$, softmax over $j$",
        size=SHAPE_SIZE + 0.5,
    )
    x_keys = 7.0
    d.arrow(
        (x_keys, y_bus),
        (x_keys, y_att),
        label="keys",
        shape="(B, T, E)",
        side="right",
        role="key",
    )
    cell = 0.65
    x_alpha = 12.2
    y_mid = y_att + h_att / 2
    alpha = d.vector(
        x_alpha,
        y_mid - cell / 2,
        4,
        role="weight",
        vertical=False,
        cell=cell,
        shade=[0.15, 0.3, 0.9, 0.2],
    )
    d.text(alpha["top"][0], y_mid + cell / 2 + 0.45, r"$\alpha_{ij}$")
    d.arrow(att["right"], alpha["left"], role="weight")
    d.shape(
        alpha["bottom"][0],
        y_mid - cell / 2 - 0.3,
        "(B, T)",
        va="top",
        color=colours("weight")[0],
    )

    # ---- weighted sum of the values -> context c_i
    # ----------------------------------------------------------------
    total = d.op(x_sum, y_mid, r"$\Sigma$")
    d.arrow(alpha["right"], total["left"], role="weight")
    d.line([(xs[-1] + cw / 2, y_bus), (x_sum, y_bus)], role="value", lw=1.4)
    d.arrow((x_sum, y_bus), total["bottom"], role="value")
    d.text(x_sum + 0.35, y_bus + 0.05, "values", ha="left", va="bottom")
    d.shape(
        x_sum + 0.35,
        y_bus - 0.05,
        "(B, T, E)",
        ha="left",
        va="top",
        color=colours("value")[0],
    )
    y_c = y_mid + 2.1
    ctx = d.box(x_sum - 2.6, y_c, 5.2, 1.4, r"context $\mathbf{c}_i$", role="output")
    d.arrow(total["top"], ctx["bottom"], role="output")
    d.shape(
        x_sum + 0.3,
        (total["top"][1] + y_c) / 2,
        "(B, E)",
        ha="left",
        color=colours("output")[0],
    )
    d.text(
        ctx["right"][0] + 0.3,
        y_c + 0.7,
        r"$=\sum_j \alpha_{ij}\,\mathbf{h}_j$",
        ha="left",
        size=SHAPE_SIZE + 0.5,
    )

    # ---- decoder (top): s_{i-1} -> GRU cell -> s_i -> output layer -> y_i
    # ---------------------------------------
    y_dec, h_dec = y_c + 4.0, 1.8
    s_prev = d.box(xs[0], y_dec, 6.0, h_dec, r"state $\mathbf{s}_{i-1}$", role="query")
    d.arrow(
        (x_keys - 2.5, y_dec),
        (x_keys - 2.5, y_att + h_att),
        label="query",
        shape="(B, 1, E)",
        side="left",
        role="query",
    )
    gru = d.box(10.6, y_dec, 4.0, h_dec, "GRU cell", role="neutral")
    d.arrow(s_prev["right"], gru["left"], role="query")
    out = d.box(19.4, y_dec, 5.8, h_dec, "output layer", role="neutral")
    d.arrow(
        gru["right"],
        out["left"],
        label=r"$\mathbf{s}_i$",
        shape="(B, E)",
        side="above",
        role="query",
    )
    yi = d.box(26.4, y_dec + 0.2, 2.0, h_dec - 0.4, r"$y_i$", role="neutral")
    d.arrow(out["right"], yi["left"])
    # c_i and y_{i-1} enter both the GRU cell and the output layer
    d.arrow(
        (ctx["top"][0] - 0.8, y_c + 1.4), (gru["bottom"][0] + 0.6, y_dec), role="output"
    )
    d.arrow(
        (ctx["top"][0] + 0.8, y_c + 1.4), (out["bottom"][0] - 0.6, y_dec), role="output"
    )
    y_y = y_dec + h_dec + 2.0
    yprev = d.box(x_sum - 1.6, y_y, 3.2, 1.2, r"$y_{i-1}$", role="neutral")
    d.arrow((yprev["bottom"][0] - 0.6, y_y), (gru["top"][0] + 0.6, y_dec + h_dec))
    d.arrow((yprev["bottom"][0] + 0.6, y_y), (out["top"][0] - 0.6, y_dec + h_dec))
    # feedback: s_i becomes the state (and the query) of the next step
    x_fb, y_fb, x_in = gru["right"][0] + 0.7, y_y + 1.2 + 0.9, s_prev["top"][0] + 1.2
    d.line(
        [(x_fb, y_dec + h_dec / 2), (x_fb, y_fb), (x_in, y_fb)],
        role="query",
        dashed=True,
    )
    d.arrow((x_in, y_fb), (x_in, y_dec + h_dec), role="query", dashed=True)
    d.text(
        (x_in + x_fb) / 2 - 1.2,
        y_fb + 0.15,
        r"next step: $\mathbf{s}_i$ becomes the state (the query) of step $i+1$",
        va="bottom",
        size=SHAPE_SIZE + 0.5,
    )

    # the two long names get a little more room than the legend's estimate of their
    # width, which the PNG's font exceeds
    x = d.legend(1.4, 1.1, [("query", "query (state)"), ("key", "keys = annotations")])
    x = d.legend(x + 0.4, 1.1, [("value", "values = annotations")])
    d.legend(x + 0.4, 1.1, [("weight", "weight"), ("output", "context")])
    d.save(path)


DIAGRAMS = {
    "ch04_additive_scoring": draw_additive_scoring,
    "ch04_bahdanau": draw_bahdanau,
}
