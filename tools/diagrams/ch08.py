"""Diagrams of chapter 8 (grouped-query attention): which query heads share which
key/value head, and the KV cache growing by one column per generated token."""

from __future__ import annotations

from matplotlib.patches import Rectangle

from tools.diagrams.style import FONT_SIZE, INK, SHAPE_SIZE, Diagram

H = 8  # query heads in the sharing diagram


def draw_kv_sharing(path):
    """MHA (Hkv = 8), GQA (Hkv = 2) and MQA (Hkv = 1) for H = 8 query heads: one row
    each, query heads at the same x in every row, each key/value head drawn under (and
    as wide as) the group of query heads it serves."""
    pitch, qw = 1.6, 1.2  # distance between query heads, width of a query box
    x0 = 7.4  # x of the first query head
    row_h = 5.2  # height of one row
    settings = [
        ("MHA", 8, "Hkv = H = 8", "g = 1"),
        ("GQA", 2, "Hkv = 2", "g = 4"),
        ("MQA", 1, "Hkv = 1", "g = 8"),
    ]
    width = x0 + H * pitch + 0.8
    height = 3.0 + row_h * len(settings) + 0.6
    d = Diagram(width, height)
    d.title("H = 8 query heads share Hkv key/value heads")
    d.text(
        width / 2,
        height - 1.75,
        "query head h uses key/value head h // g, with g = H / Hkv",
        size=SHAPE_SIZE + 0.5,
    )
    for r, (name, hkv, hkv_text, g_text) in enumerate(settings):
        top = height - 2.6 - r * row_h  # top of this row
        g = H // hkv
        # left column: the name, the knob and the shape of the cached keys/values
        d.text(0.6, top - 1.1, name, ha="left", weight="bold", size=FONT_SIZE + 1)
        d.text(0.6, top - 2.0, hkv_text, ha="left")
        d.text(0.6, top - 2.8, g_text, ha="left")
        d.shape(0.6, top - 3.7, f"k, v: (B, {hkv}, K, d)", ha="left")
        # query heads
        qy = top - 1.3
        for h in range(H):
            d.box(x0 + h * pitch, qy, qw, 0.9, rf"$q_{h}$", role="query")
        # key/value heads, each spanning its group of query heads
        ky, kh = top - 3.3, 0.8
        for j in range(hkv):
            left = x0 + j * g * pitch
            w = (g - 1) * pitch + qw
            klabel = rf"$k_{j}$" if g == 1 else rf"key head $k_{j}$"
            vlabel = rf"$v_{j}$" if g == 1 else rf"value head $v_{j}$"
            d.box(left, ky, w, kh, klabel, role="key")
            d.box(left, ky - kh - 0.1, w, kh, vlabel, role="value")
            for h in range(j * g, (j + 1) * g):
                cx = x0 + h * pitch + qw / 2
                d.arrow((cx, qy), (cx, ky + kh))
        if r < len(settings) - 1:  # a thin rule between rows
            d.line(
                [(0.5, top - row_h + 0.35), (width - 0.5, top - row_h + 0.35)],
                role="mask",
                lw=0.6,
            )
    d.legend(
        x0,
        0.75,
        [("query", "query head"), ("key", "key head"), ("value", "value head")],
    )
    d.save(path)


def draw_kv_cache(path):
    """One decoding step for one sequence and one key/value head, the cache drawn as the
    code holds it, one row per token: the new token's key and value are appended as row
    T, (B, Hkv, T, d) -> (B, Hkv, T+1, d), and its query attends to all T + 1 keys."""
    T, dh, c = 6, 4, 0.6  # cached tokens, head width drawn, cell size
    width, height = 23.0, 24.0
    d = Diagram(width, height)
    d.title("One decoding step with a KV cache")
    d.text(
        width / 2,
        height - 1.75,
        "the new key and value become row T of the cache;",
        size=SHAPE_SIZE + 0.5,
    )
    d.text(
        width / 2,
        height - 2.35,
        "the new query reads all T + 1 keys",
        size=SHAPE_SIZE + 0.5,
    )

    kx, vx = 6.6, 14.2  # left edges of the key cache and the value cache
    cy = 8.6  # bottom of both caches: row T, the newest token
    rows_h = (T + 1) * c
    # the new token and its three projections, each a row of d numbers
    tok = d.box(8.8, 18.9, 6.4, 1.5, r"new token $x_T$", shape="(B, 1, E)")
    q = d.vector(1.3, 14.4, dh, role="query", vertical=False, cell=c)
    kn = d.vector(kx + dh * c + 2.0, cy, dh, role="key", vertical=False, cell=c)
    vn = d.vector(vx + dh * c + 2.0, cy, dh, role="value", vertical=False, cell=c)
    d.arrow(
        (tok["left"][0] + 0.8, tok["bottom"][1]),
        (q["top"][0] + 0.3, q["top"][1] + 0.1),
        label=r"$W_q$",
        side="left",
        offset=0.2,
    )
    d.arrow(
        (kn["top"][0], tok["bottom"][1]),
        (kn["top"][0], kn["top"][1] + 0.1),
        label=r"$W_k$",
        side="left",
        offset=0.2,
    )
    d.arrow(
        tok["right"],
        (vn["top"][0], vn["top"][1] + 0.1),
        label=r"$W_v$",
        side="right",
        offset=0.2,
    )
    d.text(q["left"][0] + dh * c / 2, q["top"][1] + 0.4, r"$q_T$")
    d.shape(q["bottom"][0], q["bottom"][1] - 0.45, "(B, H, 1, d)")
    for a, lab in ((kn, r"$k_T$"), (vn, r"$v_T$")):
        d.text(a["bottom"][0], a["bottom"][1] - 0.45, lab)

    # the two caches: T + 1 token rows x d columns; row T (dashed outline) was just
    # appended
    shade = [[0.0] * dh for _ in range(T)] + [[0.4] * dh]
    K = d.matrix(kx, cy, T + 1, dh, cell=c, role="key", shade=shade)
    V = d.matrix(vx, cy, T + 1, dh, cell=c, role="value", shade=shade)
    for x0, name, new in ((kx, "key cache", kn), (vx, "value cache", vn)):
        d.text(x0 + dh * c / 2, cy + rows_h + 1.15, name, weight="bold")
        d.brace_label(x0, x0 + dh * c, cy + rows_h + 0.2, "d", below=False)
        d.ax.add_patch(
            Rectangle(
                (x0 - 0.07, cy - 0.07),
                dh * c + 0.14,
                c + 0.14,
                fill=False,
                edgecolor=INK,
                linewidth=1.5,
                linestyle="--",
                zorder=4,
            )
        )
        tail = x0 + dh * c + 0.15  # the arrow's head, just right of the cache
        d.arrow(new["left"], (tail, cy + c / 2))
        # its label above the arrow, clear of the cache and of the new row: the gap
        # between them is narrower than the word at full size
        d.text(
            (tail + new["left"][0]) / 2 + 0.1,
            cy + c + 0.2,
            "append",
            size=SHAPE_SIZE + 0.5,
            va="bottom",
        )
        for i in range(T + 1):
            d.text(
                x0 - 0.3,
                cy + (T - i + 0.5) * c,
                str(i) if i < T else "T",
                size=SHAPE_SIZE,
            )
        d.shape(x0 + dh * c / 2, cy - 1.15, "(B, Hkv, T+1, d)")

    # q_T scores every cached key; the softmax gives one weight per key row; the
    # output mixes the value rows
    d.arrow(
        (q["bottom"][0], q["bottom"][1] - 0.85),
        (kx - 0.75, cy + rows_h / 2),
        rad=0.3,
        role="query",
    )
    d.text(q["bottom"][0] + 0.2, cy + 0.7, "scores with", size=SHAPE_SIZE + 0.5)
    d.text(q["bottom"][0] + 0.2, cy + 0.1, "all T + 1 keys", size=SHAPE_SIZE + 0.5)
    wy = 4.9
    W = d.vector(
        kx - 0.9,
        wy,
        T + 1,
        role="weight",
        vertical=False,
        cell=c,
        shade=[0.15, 0.1, 0.3, 0.2, 0.45, 0.25, 0.6],
    )
    d.arrow(
        (K["bottom"][0], cy - 1.55),
        (K["bottom"][0], wy + c + 0.1),
        label=r"softmax$(q_T K^\top/\sqrt{d})$",
        side="left",
        offset=0.3,
    )
    d.text(W["bottom"][0], wy - 0.45, "weights, one per key", size=SHAPE_SIZE + 0.5)
    d.shape(W["bottom"][0], wy - 1.05, "(B, H, 1, T+1)")
    out = d.vector(vx, wy, dh, role="output", vertical=False, cell=c)
    d.arrow((V["bottom"][0], cy - 1.55), (V["bottom"][0], wy + c + 0.1))
    d.arrow(
        W["right"],
        (out["left"][0] - 0.1, out["left"][1]),
        label="weighted sum",
        side="above",
    )
    d.text(out["bottom"][0], wy - 0.45, "output of the head", size=SHAPE_SIZE + 0.5)
    d.shape(out["bottom"][0], wy - 1.05, "(B, H, 1, d)")

    d.text(
        width / 2,
        2.75,
        "All g query heads of a group read this same key/value head.",
        size=SHAPE_SIZE + 0.5,
    )
    d.text(
        width / 2,
        2.15,
        "Next step: T + 1 tokens cached, one more row.",
        size=SHAPE_SIZE + 0.5,
    )
    d.legend(
        3.8,
        1.0,
        [
            ("query", "query"),
            ("key", "key"),
            ("value", "value"),
            ("weight", "weight"),
            ("output", "output"),
        ],
    )
    d.save(path)


DIAGRAMS = {
    "ch08_kv_sharing": draw_kv_sharing,
    "ch08_kv_cache": draw_kv_cache,
}
