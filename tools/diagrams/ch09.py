"""Diagram of chapter 9 (watch attention learn a lookup): the tiny decoder-only model
``al.TinyDecoder``."""

from __future__ import annotations

from matplotlib.patches import FancyBboxPatch

from tools.diagrams import style
from tools.diagrams.style import SHAPE_SIZE, Diagram, colours


def _frame(d, x, y, w, h, label):
    """A dashed, rounded frame around the repeated block, its label at the top left."""
    d.ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=0.35",
            fill=False,
            edgecolor=colours("mask")[0],
            linewidth=1.2,
            linestyle="--",
            zorder=1,
        )
    )
    d.text(x + 0.35, y + h - 0.45, label, ha="left", weight="bold", size=SHAPE_SIZE + 1)


def draw_tiny_decoder(path):
    """tokens -> embedding + positions -> L x [LN -> causal GQA (+ KV cache) -> +; LN ->
    MLP -> +] -> LN -> Linear."""
    width, height = 26.5, 36.0
    cx, bw, bh = 9.4, 12.4, 1.3  # centre of the main column, box width and height
    left = cx - bw / 2
    res_x = left - 1.5  # x of the residual (skip) lines
    d = Diagram(width, height)
    d.title("al.TinyDecoder: a decoder-only Transformer")

    def box(y, label, role="param", shape=None, h=bh):
        return d.box(left, y, bw, h, label, role=role, shape=shape)

    tokens = box(32.7, "tokens (token ids)", role="neutral", shape="(B, n)", h=1.5)
    # the token embedding is learned (grey); the sinusoidal positions are fixed (white)
    embed = box(30.3, "token embedding (learned)", shape="(B, n, E)", h=1.5)
    d.arrow(tokens["bottom"], embed["top"])
    plus = d.op(cx, 28.9, "+")
    d.arrow(embed["bottom"], plus["top"])
    # Chinese glyphs stand taller than Latin ones: 0.2 more height for them, same centre
    grow = 0.2 if style.LABELS is not None else 0.0
    positions = d.box(
        left + bw + 1.0,
        28.2 - grow / 2,
        9.4,
        1.4 + grow,
        "sinusoidal positions (fixed)",
        role="neutral",
        shape="offset .. offset+n-1",
    )
    d.arrow(positions["left"], plus["right"])

    # the repeated block
    top, bottom = 27.2, 8.3
    frame_x = res_x - 0.9
    _frame(d, frame_x, bottom, (width - 0.6) - frame_x, top - bottom, "")
    d.text(
        width - 1.0,
        bottom + 0.5,
        "× L blocks (num_layers)",
        ha="right",
        weight="bold",
        size=SHAPE_SIZE + 1,
    )
    d.arrow(plus["bottom"], (cx, top - 1.0))

    # attention sub-block: X + GQA(LN(X))
    split1 = (cx, top - 1.0)
    ln1 = box(23.6, "LayerNorm")
    attn = box(
        19.9,
        "causal grouped-query attention",
        role="param",
        shape="H query heads, Hkv key/value heads",
        h=1.8,
    )
    add1 = d.op(cx, 17.6, "+")
    d.arrow(split1, ln1["top"])
    d.arrow(ln1["bottom"], attn["top"], shape="(B, n, E)", side="right")
    d.arrow(attn["bottom"], add1["top"], shape="(B, n, E)", side="right")
    d.line([split1, (res_x, split1[1]), (res_x, add1["left"][1])])
    d.arrow((res_x, add1["left"][1]), add1["left"])
    d.text(res_x - 0.3, 21.8, "residual", rotation=90, size=SHAPE_SIZE)

    # the KV cache beside the attention: a frame holding the cached keys and values
    kx, kw = 20.5, 5.1
    _frame(d, kx - 0.4, 17.2, kw + 0.8, 6.6, "")
    d.text(kx + kw / 2, 23.1, "KV cache", weight="bold", size=SHAPE_SIZE + 1)
    d.box(kx, 20.9, kw, 1.2, "cached keys", role="key")
    d.box(kx, 19.1, kw, 1.2, "cached values", role="value")
    d.shape(kx + kw / 2, 18.2, "(B, Hkv, T, d)")
    d.arrow(
        (attn["right"][0], 21.25),
        (kx - 0.4, 21.25),
        dashed=True,
        label="append n",
        side="above",
    )
    d.arrow(
        (kx - 0.4, 20.2),
        (attn["right"][0], 20.2),
        dashed=True,
        label="read all T + n",
        side="below",
    )

    # MLP sub-block: X + MLP(LN(X))
    split2 = (cx, 16.5)
    ln2 = box(14.2, "LayerNorm")
    mlp = box(10.9, "MLP", shape="Linear E→4E, GELU, Linear 4E→E", h=1.9)
    add2 = d.op(cx, 9.2, "+")
    d.arrow(add1["bottom"], ln2["top"], shape="(B, n, E)", side="right")
    d.arrow(ln2["bottom"], mlp["top"], shape="(B, n, E)", side="right")
    d.arrow(mlp["bottom"], add2["top"])
    d.line([split2, (res_x, split2[1]), (res_x, add2["left"][1])])
    d.arrow((res_x, add2["left"][1]), add2["left"])
    d.text(res_x - 0.3, 13.0, "residual", rotation=90, size=SHAPE_SIZE)

    # the head
    ln3 = box(5.5, "LayerNorm")
    head = box(3.3, "Linear E → V")
    logits = d.box(
        left,
        0.9,
        bw,
        1.5,
        "logits: one score per token id",
        role="output",
        shape="(B, n, V)",
    )
    d.arrow(add2["bottom"], ln3["top"], shape="(B, n, E)", side="right")
    d.arrow(ln3["bottom"], head["top"])
    d.arrow(head["bottom"], logits["top"])

    for i, (role, name) in enumerate(
        [
            ("param", "learned layer"),
            ("key", "cached keys"),
            ("value", "cached values"),
            ("output", "output"),
        ]
    ):
        d.legend(18.6, 6.6 - 0.95 * i, [(role, name)])
    d.save(path)


def draw_mqar_example(path):
    """One MQAR sequence: six record tokens (key and value in one token), then
    question/answer pairs; the question k0? attends to the record holding key 0 and the
    model predicts that record's value as the next token."""
    records = [
        ("k2", "v0"),
        ("k3", "v4"),
        ("k4", "v2"),
        ("k6", "v1"),
        ("k0", "v6"),
        ("k5", "v7"),
    ]
    qa = [("k0?", "v6"), ("k2?", "v0")]
    c, gap = 2.0, 0.2  # token width, space between tokens
    x0, y0 = 1.2, 5.4  # lower-left corner of the first token
    width, height = 28.5, 12.2
    d = Diagram(width, height)
    d.title("One MQAR sequence: a database, then questions")

    def tx(
        i,
    ):  # left edge of token i (an extra gap between the records and the questions)
        return x0 + i * (c + gap) + (0.5 if i >= len(records) else 0.0)

    for i, (k, v) in enumerate(records):
        d.box(tx(i), y0 + 1.0, c, 1.0, k, role="key", rounded=False)
        d.box(tx(i), y0, c, 1.0, v, role="value", rounded=False)
    for j, (q, a) in enumerate(qa):
        d.box(tx(len(records) + 2 * j), y0, c, 2.0, q, role="query")
        d.box(tx(len(records) + 2 * j + 1), y0, c, 2.0, a, role="output")
    n_shown = len(records) + 2 * len(qa)
    for i in range(n_shown):
        d.text(tx(i) + c / 2, y0 - 0.45, str(i), size=SHAPE_SIZE)
    end = tx(n_shown)
    d.text(end + 0.1, y0 + 1.0, "…", ha="left", size=16)
    d.text(end + 0.1, y0 - 0.45, "position", ha="left", size=SHAPE_SIZE)

    d.brace_label(
        tx(0),
        tx(len(records) - 1) + c,
        y0 - 1.1,
        "6 records, one token each: (key, value)",
    )
    d.brace_label(
        tx(len(records)), tx(n_shown - 1) + c, y0 - 1.1, "questions and answers"
    )

    # the lookup: question k0? (position 6) attends to the record holding key 0
    # (position 4) ...
    d.arrow(
        (tx(6) + c * 0.35, y0 + 2.0), (tx(4) + c / 2, y0 + 2.05), rad=0.5, role="weight"
    )
    d.text(
        tx(5) + c / 2,
        y0 + 3.75,
        "attends to the record of key 0",
        size=SHAPE_SIZE + 0.5,
        color="#D55E00",
    )
    # ... and the model's next-token prediction at position 6 must be that record's
    # value
    d.arrow((tx(6) + c * 0.7, y0 + 2.0), (tx(7) + c * 0.4, y0 + 2.05), rad=-0.8)
    d.text(tx(7) + c * 0.4, y0 + 3.0, "predicts v6", ha="left", size=SHAPE_SIZE + 0.5)
    d.text(
        width / 2,
        2.45,
        "The loss counts only the answer positions (the next token after each question).",
        size=SHAPE_SIZE + 0.5,
    )
    d.text(
        width / 2,
        1.85,
        "Keys and values are drawn afresh for every sequence: nothing to memorise.",
        size=SHAPE_SIZE + 0.5,
    )
    d.legend(
        4.2,
        0.85,
        [
            ("key", "key"),
            ("value", "value"),
            ("query", "question"),
            ("output", "answer"),
            ("weight", "attention"),
        ],
    )
    d.save(path)


DIAGRAMS = {
    "ch09_mqar_example": draw_mqar_example,
    "ch09_tiny_decoder": draw_tiny_decoder,
}
