"""Diagram of chapter 12 (multi-head latent attention): what one token leaves in the
cache of one layer under MHA, GQA, MQA and MLA."""

from __future__ import annotations

from tools.diagrams.style import FONT_SIZE, SHAPE_SIZE, Diagram

H, D = 4, 1.5  # query heads; the drawn width of one head's key or value (d numbers)


def draw_what_is_cached(path):
    """One row per scheme, for H = 4 heads of width d: the vectors cached per token and
    layer, drawn with widths proportional to their number of entries (MLA with r = 2d,
    dr = d/2), and how many numbers that is."""
    x0, gap, row_h, bh = 6.2, 0.15, 3.1, 1.1
    rows = [
        ("MHA", "Hkv = H = 4", H, r"$8d$"),
        ("GQA", "Hkv = 2", 2, r"$4d$"),
        ("MQA", "Hkv = 1", 1, r"$2d$"),
    ]
    width, height = 26.0, 4.2 + row_h * 4 + 2.4
    d = Diagram(width, height)
    d.title("What one token leaves in the cache of one layer")
    d.text(
        width / 2, height - 1.75, "H = 4 query heads of width d", size=SHAPE_SIZE + 0.5
    )
    count_x = width - 1.0
    d.text(count_x, height - 2.75, "numbers", ha="right", weight="bold")
    for i, (name, knob, hkv, count) in enumerate(rows):
        y = height - 3.2 - (i + 1) * row_h + 0.6  # bottom of this row's boxes
        d.text(
            0.6, y + bh / 2 + 0.35, name, ha="left", weight="bold", size=FONT_SIZE + 1
        )
        d.text(0.6, y + bh / 2 - 0.5, knob, ha="left", size=SHAPE_SIZE + 0.5)
        x = x0
        for role, letter in (("key", "k"), ("value", "v")):
            for j in range(hkv):
                d.box(x, y, D, bh, rf"${letter}_{j + 1}$", role=role)
                x += D + gap
            x += 0.4
        d.text(count_x, y + bh / 2, count, ha="right", size=FONT_SIZE + 1)
    # MLA: the latent c (r = 2d) and the rotary key (dr = d / 2), shared by all heads
    y = height - 3.2 - 4 * row_h + 0.6
    d.text(0.6, y + bh / 2 + 0.35, "MLA", ha="left", weight="bold", size=FONT_SIZE + 1)
    d.text(0.6, y + bh / 2 - 0.5, "r = 2d, dr = d/2", ha="left", size=SHAPE_SIZE + 0.5)
    c = d.box(x0, y, 2 * D, bh, r"latent $c$", role="output")
    d.box(x0 + 2 * D + gap + 0.4, y, D / 2, bh, r"$k^R$", role="key")
    d.text(count_x, y + bh / 2, r"$r + d_r = 2.5d$", ha="right", size=FONT_SIZE + 1)
    d.text(
        x0,
        y - 0.6,
        r"every head rebuilds its key and value from $c$:",
        ha="left",
        size=SHAPE_SIZE + 0.5,
    )
    d.text(
        x0,
        y - 1.35,
        r"$k_h = W_{UK,h}\, c$, $v_h = W_{UV,h}\, c$; $k^R$ carries the positions",
        ha="left",
        size=SHAPE_SIZE + 0.5,
    )
    d.legend(
        x0,
        0.7,
        [("key", "key"), ("value", "value"), ("output", "latent (MLA)")],
    )
    del c
    d.save(path)


def draw_absorbed_decode(path):
    """One decode step of one head h in the absorbed form: W_UK,h moves into the query,
    the query scores the cached latents themselves, the weights sum the latents, and
    W_UV,h acts once on that sum. No cached token's key or value is ever built."""
    width, height = 30.0, 17.2
    d = Diagram(width, height)
    d.title("Absorbed decoding: one head attends to the cached latents")
    bh, T, rw, kw = 1.0, 4, 4.4, 1.1  # box height, cached tokens, widths of c and k^R
    # the new token's query, W_UK,h folded into it
    yq = height - 3.6
    qc = d.box(0.8, yq, 1.8, bh, r"$q^C_h$", role="query")
    wuk = d.box(4.0, yq - 0.2, 2.4, bh + 0.4, r"$W_{UK,h}^\top$", role="param")
    d.arrow(qc["right"], wuk["left"], shape="dn")
    xc = 8.6  # left edge of the latent column
    qt = d.box(xc, yq, rw, bh, r"$W_{UK,h}^\top q^C_h$", role="query")
    qr = d.box(xc + rw + 0.15, yq, kw, bh, r"$q^R_h$", role="query")
    d.arrow(wuk["right"], qt["left"], shape="r")
    # the cache: T rows of [c_j | k^R_j]
    row, gap = 0.85, 0.12
    top = yq - 2.3
    d.text(xc - 0.4, top - 0.1, "latent cache", ha="right", weight="bold")
    d.shape(xc - 0.4, top - 0.75, "(T, r + dr)", ha="right")
    ys, names = [], ("1", "2", "j", "T")
    for j, name in enumerate(names):
        y = top - (j + 1) * row - j * gap
        d.box(xc, y, rw, row, rf"$c_{name}$", role="output")
        d.box(xc + rw + 0.15, y, kw, row, rf"$k^R_{name}$", role="key")
        ys.append(y + row / 2)
    d.arrow(
        (xc + rw / 2 + 0.6, yq), (xc + rw / 2 + 0.6, top + 0.05),
        label="dot product with every row", side="left",
    )  # fmt: skip
    # scores and weights, one per cached token
    xs, xw = xc + rw + kw + 2.4, xc + rw + kw + 6.0
    for name, y in zip(names, ys):
        d.arrow((xc + rw + kw + 0.3, y), (xs - 0.1, y), lw=1.0)
        d.box(xs, y - row / 2, 1.6, row, rf"$s_{name}$", role="score")
        d.box(xw, y - row / 2, 1.6, row, rf"$a_{name}$", role="weight")
    d.text(xs + 0.8, top + 0.45, "scores", size=SHAPE_SIZE + 0.5)
    d.text(xw + 0.8, top + 0.45, "weights", size=SHAPE_SIZE + 0.5)
    d.arrow((xs + 1.8, top + 0.45), (xw - 0.65, top + 0.45), lw=1.0)
    d.text((xs + xw + 1.15) / 2, top + 1.05, "softmax", size=SHAPE_SIZE + 0.5)
    # the weighted sum of latents, then W_UV,h once, then W_o
    yo = ys[-1] - row / 2 - 3.0
    osum = d.box(xc, yo, rw, bh, r"$\Sigma_j\, a_j\, c_j$", role="output")
    d.arrow((xc + rw / 2, ys[-1] - row / 2 - 0.1), osum["top"], shape="r",
            side="left")  # fmt: skip
    d.arrow((xw + 0.8, ys[-1] - row / 2 - 0.1), (xc + rw - 0.4, yo + bh + 0.05))
    wuv = d.box(xc + rw + 2.2, yo - 0.2, 2.2, bh + 0.4, r"$W_{UV,h}$", role="param")
    d.arrow(osum["right"], wuv["left"])
    oh = d.box(wuv["right"][0] + 1.8, yo, 1.8, bh, r"$o_h$", role="value")
    d.arrow(wuv["right"], oh["left"], shape="dv")
    d.arrow(oh["right"], (oh["right"][0] + 1.5, oh["right"][1]))
    d.text(oh["right"][0] + 1.7, oh["right"][1], r"$W_o$ (all heads)", ha="left")
    d.text(
        0.8,
        yo - 1.3,
        "never built: a key or a value of any cached token",
        ha="left",
        size=SHAPE_SIZE + 0.5,
    )
    d.legend(
        0.8,
        0.8,
        [
            ("query", "query"),
            ("output", "latent"),
            ("key", "rotary key"),
            ("score", "score"),
            ("weight", "weight"),
            ("param", "weight matrix"),
            ("value", "head output"),
        ],
    )
    d.save(path)


DIAGRAMS = {
    "ch12_what_is_cached": draw_what_is_cached,
    "ch12_absorbed_decode": draw_absorbed_decode,
}
