"""Diagrams of chapter 6 (self-attention): one input X is projected three times into
queries, keys and values; one token's query is scored against every key (itself
included), the softmax turns the scores into weights, and the weights average the
values; the causal mask keeps the pairs (query i, key j) with j <= i.

The numbers in ``ch06_one_token`` are those of the chapter's 4-token example (section
6.1, token 1).
"""

from __future__ import annotations

from tools.diagrams import style
from tools.diagrams.style import INK, SHAPE_SIZE, Diagram, colours

# Section 6.1's example, token 1: scaled scores q_1 . k_j / sqrt(d_k) and weights
# alpha_1j (rounded as printed).
SCALED_1 = [-0.92, -0.33, -1.09, -1.52]
ALPHA_1 = [0.24, 0.43, 0.20, 0.13]


def _num(x, digits=2):
    return f"{x:.{digits}f}".replace("-", "\u2212")


def draw_qkv_projections(path):
    """X (B, n, d_in) -> learned W^Q, W^K, W^V -> Q, K (B, n, d_k) and V (B, n, d_v),
    one row per token."""
    width, height = 24.0, 14.6
    d = Diagram(width, height)
    d.title("One input, three projections")
    n, d_in, d_k = 4, 4, 3
    c = 0.62

    # X: one row per token
    xx, xy = 2.2, 5.0
    X = d.matrix(xx, xy, n, d_in, cell=c, role="neutral")
    d.text(X["top"][0], X["top"][1] + 0.5, r"$X$", weight="bold")
    d.shape(X["bottom"][0], X["bottom"][1] - 0.45, "(B, n, d_in)")
    for i in range(n):
        d.text(
            xx - 0.25,
            xy + (n - 1 - i) * c + c / 2,
            rf"$\mathbf{{x}}_{i + 1}$",
            ha="right",
            size=SHAPE_SIZE + 1,
        )
    d.text(X["bottom"][0], X["bottom"][1] - 1.15, "one row per token", size=SHAPE_SIZE)

    rows = [
        ("query", r"$W^Q$", "(d_in, d_k)", r"$Q$", "queries", "(B, n, d_k)", d_k),
        ("key", r"$W^K$", "(d_in, d_k)", r"$K$", "keys", "(B, n, d_k)", d_k),
        ("value", r"$W^V$", "(d_in, d_v)", r"$V$", "values", "(B, n, d_v)", d_k),
    ]
    ys = [10.0, 6.25, 2.5]  # centre line of each branch
    bx, bw, bh = 8.0, 3.9, 1.7  # the learned matrices
    mx = 17.0  # lower-left x of the results
    for (role, w_label, w_shape, m_label, m_name, m_shape, cols), y in zip(rows, ys):
        W = d.box(bx, y - bh / 2, bw, bh, w_label, role="param", shape=w_shape)
        d.arrow((X["right"][0] + 0.15, X["right"][1]), W["left"])
        M = d.matrix(mx, y - n * c / 2, n, cols, cell=c, role=role)
        d.arrow(W["right"], (mx - 0.15, y), shape=m_shape, side="above", role=role)
        d.text(M["right"][0] + 0.45, y + 0.3, m_label, ha="left", weight="bold")
        d.text(M["right"][0] + 0.45, y - 0.35, m_name, ha="left", size=SHAPE_SIZE)
    d.text(
        width / 2,
        0.75,
        r"the same $W^Q, W^K, W^V$ for every token:  row $i$ of $Q$ is "
        r"$\mathbf{q}_i = \mathbf{x}_i W^Q$",
        size=SHAPE_SIZE + 1,
    )
    d.legend(
        1.0,
        height - 2.0,
        [
            ("query", "query"),
            ("key", "key"),
            ("value", "value"),
            ("param", "learned matrix"),
        ],
    )
    d.save(path)


def draw_one_token(path):
    """Token 1's query against every key (itself included): scaled scores -> softmax
    over j -> weights that average the values into o_1."""
    width, height = 28.0, 14.4
    d = Diagram(width, height)
    d.title("Token 1 against all four tokens")
    n = 4
    c = 0.6  # cells of the key / value / query vectors (d_k = d_v = 3)
    dy = 1.5  # row spacing
    ys = [8.4 - j * dy for j in range(n)]  # centre line of row j (top row = token 1)
    kx = 2.3  # keys
    opx = 6.1  # dot-product operators
    sx, sw, sh = 7.9, 1.9, 0.95  # scaled scores
    fx, fw = 11.1, 1.4  # softmax box
    wx = 13.8  # weights
    tx = 16.55  # the times sign
    vx = 17.4  # values
    gx = 21.9  # sum
    ox = 23.6  # output

    # column headers
    hy = ys[0] + 1.55
    d.text(kx + 1.5 * c, hy, r"keys $\mathbf{k}_j$", size=SHAPE_SIZE + 1)
    # Chinese glyphs reach lower than "scaled score": lift the label clear of the root below
    lift = 0.1 if style.LABELS is not None else 0.0
    d.text(sx + sw / 2, hy + 0.15 + lift, "scaled score", size=SHAPE_SIZE + 1)
    d.text(
        sx + sw / 2,
        hy - 0.45,
        r"$\mathbf{q}_1\cdot\mathbf{k}_j/\sqrt{d_k}$",
        size=SHAPE_SIZE + 1,
    )
    d.text(wx + sw / 2, hy, r"weight $\alpha_{1j}$", size=SHAPE_SIZE + 1)
    d.text(vx + 1.5 * c, hy, r"values $\mathbf{v}_j$", size=SHAPE_SIZE + 1)

    # the query, above the operators, feeding all of them
    qy = ys[0] + 2.6
    q = d.vector(opx - 1.5 * c, qy, 3, role="query", vertical=False, cell=c)
    d.text(q["left"][0] - 0.25, q["left"][1], r"$\mathbf{q}_1$", ha="right")
    d.shape(q["right"][0] + 0.25, q["right"][1], "(d_k,)", ha="left")
    # the query feeds every operator at once: a bus line beside the operators with one
    # branch to each (not a chain through them, which would read as sequential steps)
    bus_x, branch = opx - 1.3, 0.55
    d.line(
        [
            (opx, qy - c / 2),
            (opx, qy - 0.85),
            (bus_x, qy - 0.85),
            (bus_x, ys[-1] + branch),
        ],
        role="query",
    )
    for y in ys:
        d.arrow((bus_x, y + branch), (opx - 0.33, y + 0.27), role="query", lw=1.2)

    for j, y in enumerate(ys):
        k = d.vector(kx, y - c / 2, 3, role="key", vertical=False, cell=c)
        d.text(kx - 0.25, y, rf"$j = {j + 1}$", ha="right", size=SHAPE_SIZE + 0.5)
        op = d.op(opx, y, r"$\cdot$", role="query", size=SHAPE_SIZE + 14)
        d.arrow(k["right"], op["left"], role="key")
        s = d.box(sx, y - sh / 2, sw, sh, role="score", rounded=False)
        d.shape(s["center"][0], y, _num(SCALED_1[j]))
        d.arrow(op["right"], s["left"])
        d.arrow(s["right"], (fx, y))
        a = d.box(wx, y - sh / 2, sw, sh, role="weight", rounded=False)
        d.shape(a["center"][0], y, _num(ALPHA_1[j]))
        d.arrow((fx + fw, y), a["left"], role="weight")
        d.text(tx, y, r"$\times$", size=SHAPE_SIZE + 3)
        v = d.vector(vx, y - c / 2, 3, role="value", vertical=False, cell=c)
        d.arrow(
            (v["right"][0] + 0.1, y),
            (gx - 0.45, ys[1] - dy / 2 + (1.5 - j) * 0.25),
            lw=1.1,
        )
    d.text(
        kx + 1.5 * c,
        ys[0] + 0.6,
        "itself",
        size=SHAPE_SIZE - 0.5,
        color=colours("key")[0],
    )

    # softmax over j: one box across the four rows
    top, bottom = ys[0] + sh / 2 + 0.15, ys[-1] - sh / 2 - 0.15
    d.box(fx, bottom, fw, top - bottom, role="neutral")
    d.text(fx + fw / 2, (top + bottom) / 2, "softmax over j", rotation=90)
    # the sum and the output
    mid = ys[1] - dy / 2
    g = d.op(gx, mid, r"$\Sigma$", role="output")
    o = d.vector(ox, mid - c / 2, 3, role="output", vertical=False, cell=c)
    d.arrow(g["right"], (ox - 0.1, mid), role="output")
    d.text(o["top"][0], o["top"][1] + 0.45, r"$\mathbf{o}_1$", weight="bold")
    d.shape(o["bottom"][0], o["bottom"][1] - 0.4, "(d_v,)")

    # shapes of the whole columns
    by = bottom - 0.55
    d.shape(kx + 1.5 * c, by, "K (n, d_k)")
    d.shape(sx + sw / 2, by, "(n,)")
    d.shape(wx + sw / 2, by, "(n,)")
    d.text(wx + sw / 2, by - 0.6, "sum = 1", size=SHAPE_SIZE)
    d.shape(vx + 1.5 * c, by, "V (n, d_v)")
    d.text(
        width / 2,
        0.75,
        r"$\mathbf{o}_1 = \sum_j \alpha_{1j}\,\mathbf{v}_j$ : every token "
        "(itself included) contributes, in proportion to its weight",
        size=SHAPE_SIZE + 1,
    )
    d.legend(
        1.0,
        height - 2.0,
        [
            ("query", "query"),
            ("key", "key"),
            ("score", "score"),
            ("weight", "weight"),
            ("value", "value"),
            ("output", "output"),
        ],
    )
    d.save(path)


def draw_causal_mask(path):
    """The (n, n) causal keep-mask for n = 6, positions counted from 0 as in the code:
    query i may attend to keys 0..i; the pairs above the diagonal are masked."""
    n = 6
    width, height = 20.0, 12.4
    d = Diagram(width, height)
    d.title("The causal mask: no query sees the future")
    c = 1.0
    gx, gy = 4.6, 2.3
    masked = [[j > i for j in range(n)] for i in range(n)]
    G = d.matrix(gx, gy, n, n, cell=c, role="mask", masked=masked)
    for i in range(n):  # the kept cells in the weight colour: these pairs get a weight
        for j in range(i + 1):
            d.matrix(
                gx + j * c,
                gy + (n - 1 - i) * c,
                1,
                1,
                cell=c,
                role="weight",
                values=[["T"]],
            )
    for i in range(n):
        d.text(
            gx - 0.3,
            gy + (n - 1 - i) * c + c / 2,
            str(i),
            ha="right",
            size=SHAPE_SIZE + 0.5,
        )
        d.text(gx + i * c + c / 2, gy + n * c + 0.35, str(i), size=SHAPE_SIZE + 0.5)
    d.text(gx + n * c / 2, gy + n * c + 1.05, "key position j")
    d.text(gx - 1.3, gy + n * c / 2, "query position i", rotation=90)
    d.shape(G["bottom"][0], gy - 0.55, "(n, n) bool, True = keep")

    # read one row: query 2 sees keys 0..2
    row = 2
    ry = gy + (n - 1 - row) * c + c / 2
    d.ax.add_patch(_outline(gx, ry - c / 2, n * c, c))
    ax_ = G["right"][0] + 0.9
    d.arrow((ax_ + 0.6, ry), (G["right"][0] + 0.15, ry))
    d.text(
        ax_ + 0.8, ry + 0.3, "row 2: query 2 attends", ha="left", size=SHAPE_SIZE + 0.5
    )
    d.text(
        ax_ + 0.8, ry - 0.35, "to keys 0, 1, 2 only", ha="left", size=SHAPE_SIZE + 0.5
    )
    ly = gy + 1.6
    d.text(
        ax_ + 0.8,
        ly + 0.35,
        "al.causal_mask(6)",
        ha="left",
        family="DejaVu Sans Mono",
        size=SHAPE_SIZE,
    )
    d.text(
        ax_ + 0.8,
        ly - 0.3,
        "or is_causal=True",
        ha="left",
        family="DejaVu Sans Mono",
        size=SHAPE_SIZE,
    )
    d.legend(
        1.0,
        height - 2.0,
        [("weight", "T = kept (j \u2264 i)"), ("mask", "masked (j > i)")],
    )
    d.save(path)


def _outline(x, y, w, h):
    from matplotlib.patches import Rectangle

    return Rectangle(
        (x, y), w, h, facecolor="none", edgecolor=INK, linewidth=2.0, zorder=4
    )


DIAGRAMS = {
    "ch06_qkv_projections": draw_qkv_projections,
    "ch06_one_token": draw_one_token,
    "ch06_causal_mask": draw_causal_mask,
}
