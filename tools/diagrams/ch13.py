"""Diagrams of chapter 13 (linear attention): the same causal sum as a kernel smoother
over a KV cache and as a recurrence with a fixed-size state; the delta-rule update."""

from __future__ import annotations

from tools.diagrams.style import SHAPE_SIZE, Diagram


def draw_smoother_vs_state(path):
    """Left: softmax attention reads every cached key through exp(q.k / sqrt(D)) and sums
    the weighted values; the cache grows by a row a token. Right: linear attention folds
    each new key and value into a state S (Dv, F) and a normaliser z (F), and reads the
    output from them; nothing grows."""
    width, height = 34.0, 16.4
    d = Diagram(width, height)
    d.title("One causal step, two ways")
    mid = width / 2
    d.line([(mid, 1.0), (mid, height - 1.8)], dashed=True, lw=0.9)
    # -- left: kernel smoother over the KV cache
    x0 = 1.0
    d.text(x0, height - 2.5, "softmax attention: a kernel smoother", ha="left",
           weight="bold")  # fmt: skip
    q = d.box(x0, height - 4.6, 1.6, 1.0, r"$q_t$", role="query")
    top, row, gap = height - 6.2, 0.85, 0.15
    d.text(x0 + 3.6, top + 0.55, "KV cache", weight="bold", size=SHAPE_SIZE + 0.5)
    names = ("1", "2", "j", "t")
    ys = []
    for i, name in enumerate(names):
        y = top - (i + 1) * row - i * gap
        d.box(x0 + 2.6, y, 1.6, row, rf"$k_{name}$", role="key")
        d.box(x0 + 4.35, y, 1.6, row, rf"$v_{name}$", role="value")
        ys.append(y + row / 2)
    d.arrow(q["bottom"], (x0 + 2.5, ys[0]), rad=0.25)
    d.text(x0 + 0.2, ys[-1] - 2.0, "grows by one row a token: (T, d) keys and values",
           ha="left", size=SHAPE_SIZE + 0.5)  # fmt: skip
    xw = x0 + 8.4
    for name, y in zip(names, ys):
        d.arrow((x0 + 6.1, y), (xw - 0.1, y), lw=1.0)
        d.box(xw, y - row / 2, 1.5, row, rf"$a_{name}$", role="weight")
    d.text(xw + 0.75, ys[-1] - 0.95, "weights", size=SHAPE_SIZE + 0.5)
    d.text((x0 + 6.1 + xw) / 2 + 0.3, top + 0.55, r"$\exp(q_t \cdot k_j/\sqrt{D})$",
           size=SHAPE_SIZE + 0.5)  # fmt: skip
    y_out = (ys[1] + ys[2]) / 2
    out = d.box(xw + 4.2, y_out - 0.5, 2.2, 1.0, r"$o_t$", role="output")
    d.arrow((xw + 1.6, y_out), out["left"])
    d.text(out["bottom"][0], y_out - 1.1, r"$\Sigma_j\, a_j v_j \,/\, \Sigma_j\, a_j$",
           size=SHAPE_SIZE + 0.5)  # fmt: skip
    # -- right: recurrence with a state
    x1 = mid + 1.0
    d.text(x1, height - 2.5, "linear attention: a recurrence", ha="left", weight="bold")
    S = d.box(x1, height - 10.6, 4.4, 3.4, r"state $S$", role="output",
              shape="(Dv, F)")  # fmt: skip
    z = d.box(x1 + 5.6, height - 10.6, 1.2, 3.4, r"$z$", role="output", shape="(F)")
    vt = d.box(x1 + 0.6, height - 4.6, 1.6, 1.0, r"$v_t$", role="value")
    kt = d.box(x1 + 3.6, height - 4.6, 1.6, 1.0, r"$k_t$", role="key")
    qt = d.box(x1 + 10.2, height - 4.6, 1.6, 1.0, r"$q_t$", role="query")
    d.arrow(vt["bottom"], (vt["bottom"][0], S["top"][1] + 0.05))
    d.arrow((kt["bottom"][0] - 0.3, kt["bottom"][1]), (x1 + 3.4, S["top"][1] + 0.05),
            label=r"$\phi(k_t)$", side="left")  # fmt: skip
    d.arrow((kt["bottom"][0] + 0.3, kt["bottom"][1]), (z["top"][0], z["top"][1] + 0.05),
            label=r"$\phi(k_t)$", side="right")  # fmt: skip
    ot = d.box(x1 + 9.7, height - 9.4, 2.6, 1.0, r"$o_t$", role="output")
    d.arrow(qt["bottom"], ot["top"], label=r"$\phi(q_t)$", side="right")
    # the read: S phi(q_t) from the state, divided by z . phi(q_t) from the normaliser
    d.arrow((S["right"][0] - 0.6, S["top"][1]), (ot["left"][0], ot["left"][1] + 0.3),
            rad=-0.35)  # fmt: skip
    d.text(x1 + 8.4, height - 6.2, r"$S\,\phi(q_t)$", size=SHAPE_SIZE + 0.5)
    d.arrow((z["right"][0] + 0.1, ot["left"][1] - 0.3), (ot["left"][0], ot["left"][1] - 0.3),
            label=r"$\div\, z \cdot \phi(q_t)$", side="below")  # fmt: skip
    d.text(x1, height - 11.6, r"write: $S \leftarrow S + v_t\,\phi(k_t)^\top$, "
           r"$z \leftarrow z + \phi(k_t)$", ha="left", size=SHAPE_SIZE + 0.5)  # fmt: skip
    d.text(x1, height - 12.5, r"read: $o_t = S\,\phi(q_t)\,/\,(z \cdot \phi(q_t))$",
           ha="left", size=SHAPE_SIZE + 0.5)  # fmt: skip
    d.text(x1, height - 13.4, "fixed size: the same after 10 tokens or a million",
           ha="left", size=SHAPE_SIZE + 0.5)  # fmt: skip
    d.legend(
        1.0,
        1.0,
        [
            ("query", "query"),
            ("key", "key"),
            ("value", "value"),
            ("weight", "weight"),
            ("output", "state and output"),
        ],
    )
    d.save(path)


def draw_delta_rule(path):
    """The (gated) delta rule on a state S (Dv, F): decay S by a, read what it returns
    for the key, subtract that from the new value, and add beta times the error, as an
    outer product with the key, to the decayed state."""
    width, height = 34.0, 11.6
    d = Diagram(width, height)
    d.title("The delta rule: read, compare, write the correction")
    y = height - 5.0  # the middle of the row
    S = d.box(0.8, y - 1.5, 3.0, 3.0, r"$S$", role="output", shape="(Dv, F)")
    aS = d.box(6.2, y - 0.5, 1.8, 1.0, r"$a\,S$", role="output")
    d.arrow(S["right"], aS["left"], label=r"$\times\, a$", side="above")
    d.text((S["right"][0] + aS["left"][0]) / 2, y - 0.75, "decay gate", size=SHAPE_SIZE)
    d.text((S["right"][0] + aS["left"][0]) / 2, y - 1.3, "(optional)", size=SHAPE_SIZE)
    k = d.box(10.0, y + 1.6, 1.4, 0.9, r"$k$", role="key")
    read = d.box(9.6, y - 0.5, 2.2, 1.0, r"$a\,S\,k$", role="output")
    d.arrow(aS["right"], read["left"], label="read", side="above")
    d.arrow(k["bottom"], (k["bottom"][0], read["top"][1] + 0.05))
    v = d.box(13.1, y + 1.6, 1.4, 0.9, r"$v$", role="value")
    minus = d.op(13.8, y, "−")
    d.arrow(read["right"], minus["left"])
    d.arrow(v["bottom"], minus["top"])
    err = d.box(15.8, y - 0.5, 3.2, 1.0, r"$v - a\,S\,k$", role="weight")
    d.arrow(minus["right"], err["left"], label="error", side="above")
    outer = d.box(21.6, y - 0.5, 5.0, 1.0, r"$\beta\,(v - a\,S\,k)\,k^\top$",
                  role="weight")  # fmt: skip
    d.arrow(err["right"], outer["left"], label=r"$\times\,\beta\,k^\top$", side="above")
    plus = d.op(28.2, y, "+")
    d.arrow(outer["right"], plus["left"])
    new = d.box(29.8, y - 0.5, 3.4, 1.0, r"new $S$", role="output")
    d.arrow(plus["right"], new["left"])
    below = y - 2.6
    d.line([aS["bottom"], (aS["bottom"][0], below), (28.2, below)])
    d.arrow((28.2, below), plus["bottom"])
    d.text(9.6, below - 0.8, "with a = 1, β = 1 and |k| = 1, the new S returns exactly v for k",
           ha="left", size=SHAPE_SIZE + 0.5)  # fmt: skip
    d.text(9.6, below - 1.7, r"additive rule instead: $a\,S + v\,k^\top$ (nothing is read)",
           ha="left", size=SHAPE_SIZE + 0.5)  # fmt: skip
    d.legend(
        0.8,
        0.9,
        [("output", "state"), ("key", "key"), ("value", "value"),
         ("weight", "correction")],
    )  # fmt: skip
    d.save(path)


DIAGRAMS = {
    "ch13_smoother_vs_state": draw_smoother_vs_state,
    "ch13_delta_rule": draw_delta_rule,
}
