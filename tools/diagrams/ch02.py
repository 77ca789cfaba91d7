"""Diagrams of chapter 2 (Nadaraya–Watson kernel regression)."""

from __future__ import annotations

import math

from tools.diagrams.style import FONT_SIZE, INK, SHAPE_SIZE, Diagram

# The worked example drawn in ch02_nw_as_attention: one query, six training points,
# Gaussian kernel.
QUERY, BANDWIDTH = 2.0, 0.5
KEYS = (0.5, 1.3, 1.9, 2.4, 3.1, 4.0)  # training inputs x_i
VALUES = (1.5, 3.1, 4.0, 3.5, 3.2, 2.5)  # training targets y_i (noisy 2 sin x + x)


def _worked_example():
    """Kernel values, weights, weighted values and output of the example, as the
    strings the diagram shows."""
    scores = [math.exp(-(((QUERY - k) / BANDWIDTH) ** 2) / 2) for k in KEYS]
    weights = [s / sum(scores) for s in scores]
    products = [w * v for w, v in zip(weights, VALUES)]
    output = sum(products)
    # The rounded numbers must add up as the picture claims: weights to 1.00, weighted
    # values to the output.
    assert f"{sum(round(w, 2) for w in weights):.2f}" == "1.00"
    assert f"{sum(round(p, 2) for p in products):.2f}" == f"{output:.2f}"
    fmt = (
        [f"{v:.2f}" for v in scores],
        [f"{v:.2f}" for v in weights],
        [f"{v:.2f}" for v in products],
    )
    return fmt, weights, f"{output:.2f}"


def nw_as_attention(path):
    (scores, weights, products), raw_weights, output = _worked_example()
    n, cell = len(KEYS), 1.5
    d = Diagram(29, 27)
    d.title("Nadaraya–Watson regression is attention pooling")
    d.text(
        14.5,
        24.9,
        rf"one query $x = {QUERY}$, six training points, Gaussian kernel, "
        rf"$h = {BANDWIDTH}$:  score $a_i = -(x - x_i)^2 / 2h^2$",
        size=SHAPE_SIZE + 0.5,
    )

    x0 = 9.0  # left edge of the six columns; column i is the i-th training point
    x1 = x0 + n * cell
    cx = (x0 + x1) / 2
    lx = x1 + 0.6  # row names, to the right of the columns

    def row(y, role, values, name, shape, formula, shade=None):
        """One row of six cells, named on the right: bold name, its shape for Q queries,
        the formula."""
        a = d.vector(
            x0, y, n, role=role, vertical=False, cell=cell, values=values, shade=shade
        )
        d.text(lx, y + cell / 2 + 0.36, name, ha="left", weight="bold")
        d.shape(
            lx + 6.4, y + cell / 2 + 0.36, shape, ha="left"
        )  # the shapes form one aligned column
        d.text(lx, y + cell / 2 - 0.4, formula, ha="left")
        return a

    # column headers i = 1..6
    for i in range(n):
        d.text(x0 + (i + 0.5) * cell, 22.55, f"$i = {i + 1}$", size=SHAPE_SIZE)

    keys = row(
        20.3, "key", [f"{k}" for k in KEYS], "keys", "(K,)", r"$x_i$ = training inputs"
    )
    scores_row = row(
        16.8,
        "score",
        scores,
        "kernel values",
        "(Q, K)",
        r"$\kappa_i = \kappa\left((x - x_i)/h\right) = e^{a_i}$",
    )
    top = max(raw_weights)
    weights_row = row(
        13.3,
        "weight",
        weights,
        "weights",
        "(Q, K)",
        r"$\alpha(x, x_i) = \kappa_i\,/\,\Sigma_j\,\kappa_j$",
        shade=[0.15 + 0.6 * w / top for w in raw_weights],
    )
    values_row = row(
        10.8,
        "value",
        [f"{v}" for v in VALUES],
        "values",
        "(K,)",
        r"$y_i$ = training targets",
    )
    products_row = row(
        7.3, "output", products, "weighted values", "(Q, K)", r"$\alpha(x, x_i)\,y_i$"
    )

    # query -> kernel values, keys -> kernel values
    q = d.box(0.7, 16.55, 5.0, 2.0, rf"query $x = {QUERY}$", role="query", shape="(Q,)")
    d.arrow(q["right"], scores_row["left"], label="compare", side="above")
    d.arrow(
        keys["bottom"],
        scores_row["top"],
        label="with every key",
        side="right",
        offset=0.3,
    )
    # kernel values -> weights: divide each row by its sum (= softmax of the scores)
    d.arrow(
        scores_row["bottom"],
        weights_row["top"],
        label="÷ their sum",
        side="right",
        offset=0.3,
    )
    # weights x values, column by column (written like long multiplication)
    d.text(x0 - 0.7, 11.55, "×", size=FONT_SIZE + 6)
    d.line([(x0 - 1.3, 10.45), (x1 + 0.1, 10.45)], lw=1.3)
    d.arrow(
        (cx, 10.35),
        products_row["top"],
        label="column by column",
        side="right",
        offset=0.3,
    )
    # sum over the keys -> output
    out = d.box(
        cx - 4.8,
        2.9,
        9.6,
        2.0,
        rf"output $f(x) = \Sigma_i\,\alpha(x, x_i)\,y_i = {output}$",
        role="output",
        shape="(Q,)",
    )
    d.arrow(
        products_row["bottom"], out["top"], label="add up", side="right", offset=0.3
    )
    d.text(
        out["right"][0] + 0.4,
        out["right"][1],
        rf"(truth ${2 * math.sin(QUERY) + QUERY:.2f}$)",
        ha="left",
        size=SHAPE_SIZE + 0.5,
        color=INK,
    )

    roles = [
        ("query", "query"),
        ("key", "key"),
        ("score", "kernel value"),
        ("weight", "weight"),
        ("value", "value"),
        ("output", "output"),
    ]
    d.legend(4.3, 1.15, roles)
    d.save(path)


DIAGRAMS = {"ch02_nw_as_attention": nw_as_attention}
