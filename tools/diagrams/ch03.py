"""Diagrams of chapter 3 (masked softmax): a padded batch becomes a keep-mask, and the
mask acts on the *scores* before the softmax (the weights of padding keys are then
exactly 0); the values are never touched."""

from __future__ import annotations

import math

from tools.diagrams.style import FONT_SIZE, SHAPE_SIZE, Diagram, colours

SENTENCES = [
    ["Dive", "into", "Deep", "Learning"],
    ["Learn", "to", "code", "<pad>"],
    ["Hello", "world", "<pad>", "<pad>"],
]
VALID_LENS = [4, 3, 2]
B_SHOWN = 2  # the example traced through the softmax: "Hello world <pad> <pad>"
# illustrative scores of that example, as the chapter's model makes them (Q = K = 4,
# self-attention): dot products of the tokens' embeddings, so the matrix is symmetric
# (and a Gram matrix: its eigenvalues are positive), and the two <pad> tokens share one
# embedding, so their two rows are equal and so are their two columns
_HELLO, _WORLD, _PAD = 0, 1, 2
_GRAM = [  # scores between the three distinct embeddings: Hello, world, <pad>
    [1.2, -0.3, 0.6],
    [-0.3, 0.9, -0.7],
    [0.6, -0.7, 1.5],
]
_TOKENS = [_HELLO, _WORLD, _PAD, _PAD]  # "Hello world <pad> <pad>"
SCORES = [[_GRAM[i][j] for j in _TOKENS] for i in _TOKENS]


def _masked_softmax_row(row, length):
    """softmax over the first ``length`` entries; the rest exactly 0 (what
    al.masked_softmax returns)."""
    m = max(row[:length])
    e = [math.exp(a - m) for a in row[:length]]
    return [x / sum(e) for x in e] + [0.0] * (len(row) - length)


def _num(x):
    return f"{x:.1f}".replace("-", "\u2212")


def draw_masked_softmax(path):
    """Top: the padded batch and its keep-mask from valid_lens. Middle: one example's
        scores -> masked scores ->
    weights. Bottom: the weights pool the values, which are not changed."""
    width, height = 28.6, 27.4
    d = Diagram(width, height)
    d.title("Masking acts on the scores, before the softmax")
    l = VALID_LENS[B_SHOWN]
    K = len(SCORES)

    # -- top band: padded batch (tokens) -> keep-mask (B, 1, K)
    # ------------------------------------------------
    tw, th = 2.9, 0.85  # token cell (wide enough for "Learning")
    tx, ty = 2.2, 19.6  # lower-left of the token grid
    d.text(
        tx + 2 * tw, ty + 3 * th + 0.55, "padded batch (B, n) = (3, 4)", weight="bold"
    )
    for b, sent in enumerate(SENTENCES):
        for j, word in enumerate(sent):
            pad = word == "<pad>"
            d.box(
                tx + j * tw,
                ty + (2 - b) * th,
                tw,
                th,
                word,
                role="mask" if pad else "neutral",
                size=SHAPE_SIZE + 0.5,
                rounded=False,
            )
            if pad:  # hatch the padding like every masked cell of the course
                _hatch(d, tx + j * tw, ty + (2 - b) * th, tw, th)
        d.text(  # label each row with its example index
            tx - 0.2,
            ty + (2 - b) * th + th / 2,
            f"b = {b}",
            ha="right",
            size=SHAPE_SIZE,
        )
    grid_right = tx + 4 * tw
    mx, mc = 17.4, 0.85  # keep-mask grid
    keep = [[j < VALID_LENS[b] for j in range(K)] for b in range(3)]
    d.matrix(
        mx,
        ty,
        3,
        K,
        cell=mc,
        role="mask",
        masked=[[not k for k in row] for row in keep],
        values=[["T" if k else "" for k in row] for row in keep],
    )
    d.text(mx + K * mc / 2, ty + 3 * th + 0.55, "keep-mask", weight="bold")
    d.shape(mx + K * mc / 2, ty - 0.45, "(B, 1, K)")
    d.arrow(
        (grid_right + 0.25, ty + 1.5 * th),
        (mx - 0.25, ty + 1.5 * th),
        label="valid_lens",
        side="above",
    )
    d.shape((grid_right + mx) / 2, ty + 1.5 * th - 0.35, "[4, 3, 2]", va="top")
    # per-row valid_len beside the mask
    for b in range(3):
        d.text(
            mx + K * mc + 0.3,
            ty + (2 - b) * mc + mc / 2,
            f"l = {VALID_LENS[b]}",
            ha="left",
            size=SHAPE_SIZE,
        )
    d.text(
        mx + K * mc + 2.2,
        ty + 1.5 * mc,
        "T = keep\nhatched = masked",
        ha="left",
        size=SHAPE_SIZE,
        linespacing=1.5,
    )

    # -- middle band: scores -> masked scores -> weights for example b = 2
    # ---------------------------------------
    c = 1.4
    my = 9.0  # lower edge of the three matrices
    xs = [3.2, 12.2, 21.6]  # lower-left x of scores, masked scores, weights
    d.text(
        1.0,
        my + K * c + 2.3,
        f'example b = {B_SHOWN}, "Hello world":\nQ = 4 queries × K = 4 keys',
        ha="left",
        size=SHAPE_SIZE + 1,
        linespacing=1.4,
    )
    masked_cells = [[j >= l for j in range(K)] for _ in range(K)]
    S = d.matrix(
        xs[0],
        my,
        K,
        K,
        cell=c,
        role="score",
        values=[[_num(v) for v in r] for r in SCORES],
    )
    F = d.matrix(
        xs[1],
        my,
        K,
        K,
        cell=c,
        role="score",
        masked=masked_cells,
        values=[[_num(v) if j < l else "min" for j, v in enumerate(r)] for r in SCORES],
    )
    weights = [_masked_softmax_row(r, l) for r in SCORES]
    W = d.matrix(
        xs[2],
        my,
        K,
        K,
        cell=c,
        role="weight",
        shade=[[0.75 * w for w in r] for r in weights],
        values=[[f"{w:.2f}" if w else "0" for w in r] for r in weights],
    )
    # the rows are the queries: the four tokens of "Hello world <pad> <pad>"
    for i, word in enumerate(SENTENCES[B_SHOWN]):
        d.text(
            xs[0] - 0.15,
            my + (K - 1 - i) * c + c / 2,
            word,
            ha="right",
            size=SHAPE_SIZE,
        )
    d.text(
        0.55, my + K * c / 2, "query", rotation=90, size=SHAPE_SIZE + 0.5, weight="bold"
    )
    for x0 in xs:  # which keys are words and which are padding
        d.brace_label(x0, x0 + l * c, my + K * c + 0.3, "words", below=False)
        d.brace_label(x0 + l * c, x0 + K * c, my + K * c + 0.3, "<pad>", below=False)
    d.arrow(
        (S["right"][0] + 0.2, my + K * c / 2),
        (F["left"][0] - 0.2, my + K * c / 2),
        label="fill",
        side="above",
    )
    d.shape(
        (S["right"][0] + F["left"][0]) / 2, my + K * c / 2 - 0.3, "masked", va="top"
    )
    d.arrow(
        (F["right"][0] + 0.2, my + K * c / 2),
        (W["left"][0] - 0.2, my + K * c / 2),
        label="softmax",
        side="above",
    )
    d.shape(
        (F["right"][0] + W["left"][0]) / 2, my + K * c / 2 - 0.3, "over K", va="top"
    )
    captions = [
        ("scores", "(B, Q, K)"),
        ("masked scores", "(B, Q, K)"),
        ("weights", "(B, Q, K)"),
    ]
    for x0, (name, shp) in zip(xs, captions):
        d.text(x0 + K * c / 2, my - 0.5, name, weight="bold")
        d.shape(x0 + K * c / 2, my - 1.15, shp)
    d.text(xs[1] + K * c / 2, my - 1.85, "min = most negative float", size=SHAPE_SIZE)
    d.text(xs[2] + K * c / 2, my - 1.85, "padding: exactly 0", size=SHAPE_SIZE)
    d.text(xs[2] + K * c / 2, my - 2.45, "each row sums to 1", size=SHAPE_SIZE)
    # the mask of example b = 2 feeds the fill step
    d.arrow(
        (mx + 0.2, ty + 0.2), (F["x"] + F["w"] * 0.8, my + K * c + 1.1), role="mask"
    )
    d.text(
        mx + 0.3,
        ty - 1.55,
        "mask of b = 2,\nbroadcast over Q",
        ha="left",
        size=SHAPE_SIZE,
        color=colours("mask")[0],
        linespacing=1.3,
    )

    # -- bottom band: the weights pool the values, which are not changed
    # ---------------------------------------
    vc, Dv = 0.85, 3
    vy = 1.8
    vx = 11.9
    # the example's padding rows hatched, as in the scores above: present, never read
    padding_rows = [[i >= l] * Dv for i in range(K)]
    V = d.matrix(vx, vy, K, Dv, cell=vc, role="value", masked=padding_rows)
    d.text(vx - 0.3, vy + K * vc / 2 + 0.3, "values", ha="right", weight="bold")
    d.shape(vx - 0.3, vy + K * vc / 2 - 0.35, "(B, K, Dv)", ha="right")
    d.text(vx - 0.3, vy + K * vc / 2 - 1.05, "not changed", ha="right", size=SHAPE_SIZE)
    op = d.op(W["bottom"][0], vy + K * vc / 2, r"$\times$")
    d.arrow((W["bottom"][0], my - 2.85), op["top"])
    d.arrow(V["right"], op["left"], role="value")
    ox = op["right"][0] + 0.9
    out = d.matrix(ox, vy, K, Dv, cell=vc, role="output")
    d.arrow(op["right"], (ox - 0.1, op["right"][1]))
    d.text(ox + Dv * vc / 2, vy + K * vc + 0.45, "output", weight="bold")
    # right-aligned with the matrix, clear of the frame
    d.shape(ox + Dv * vc, vy - 0.45, "(B, Q, Dv)", ha="right")
    d.text(
        1.0,
        vy + K * vc / 2,
        "the <pad> rows of the\nvalues get weight 0:\nthey cannot reach\nthe output",
        ha="left",
        size=SHAPE_SIZE,
        linespacing=1.4,
    )

    d.legend(
        1.0,
        height - 2.1,
        [
            ("score", "score"),
            ("weight", "weight"),
            ("mask", "mask / padding"),
            ("value", "value"),
            ("output", "output"),
        ],
    )
    d.save(path)


def _hatch(d, x, y, w, h):
    from matplotlib.patches import Rectangle

    edge, fill = colours("mask")
    d.ax.add_patch(
        Rectangle(
            (x, y),
            w,
            h,
            facecolor="none",
            edgecolor=edge,
            linewidth=0,
            hatch="////",
            zorder=2.5,
        )
    )


DIAGRAMS = {
    "ch03_masked_softmax": draw_masked_softmax,
}
