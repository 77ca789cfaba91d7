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
    """One decoding step for one sequence and one key/value head: the new token's key
    and value are appended as column T of the cache, (B, Hkv, T, d) -> (B, Hkv, T+1, d),
    and its query attends to all T + 1 keys."""
    T, dh, c = 6, 4, 0.6  # cached tokens, head width drawn, cell size
    width, height = 23.0, 22.5
    d = Diagram(width, height)
    d.title("One decoding step with a KV cache")
    d.text(
        width / 2,
        height - 1.75,
        "the new key and value become column T of the cache;",
        size=SHAPE_SIZE + 0.5,
    )
    d.text(
        width / 2,
        height - 2.35,
        "the new query reads all T + 1 keys",
        size=SHAPE_SIZE + 0.5,
    )

    kx, vx = 7.4, 15.4  # left edges of the key cache and the value cache
    cy = 8.6  # bottom of both caches
    new_k, new_v = kx + T * c, vx + T * c  # left edges of column T
    # the new token and its three projections
    tok = d.box(9.0, 17.4, 6.4, 1.5, r"new token $x_T$", shape="(B, 1, E)")
    vec_y = 13.2  # bottom of the three new vectors
    q = d.vector(3.2, vec_y, dh, role="query", cell=c)
    kn = d.vector(new_k, vec_y, dh, role="key", cell=c)
    vn = d.vector(new_v, vec_y, dh, role="value", cell=c)
    for a, lab, w in (
        (q, r"$q_T$", r"$W_q$"),
        (kn, r"$k_T$", r"$W_k$"),
        (vn, r"$v_T$", r"$W_v$"),
    ):
        d.arrow(
            (a["top"][0] * 0.25 + tok["center"][0] * 0.75, tok["bottom"][1]),
            (a["top"][0], a["top"][1] + 0.1),
            label=w,
            side="left" if a is q else "right",
            offset=0.2,
        )
        d.text(a["left"][0] - 0.25, a["center"][1], lab, ha="right")
    d.shape(q["bottom"][0], vec_y - 0.45, "(B, H, 1, d)")

    # the two caches: d rows x (T + 1) token columns; column T (dashed outline) was just
    # appended
    shade = [[0.0] * T + [0.4] for _ in range(dh)]
    K = d.matrix(kx, cy, dh, T + 1, cell=c, role="key", shade=shade)
    V = d.matrix(vx, cy, dh, T + 1, cell=c, role="value", shade=shade)
    for x0, name, new in ((kx, "key cache", kn), (vx, "value cache", vn)):
        d.text(x0 - 0.35, cy + dh * c / 2, "d", size=SHAPE_SIZE + 0.5)
        d.text(
            x0 - 0.45, cy + dh * c + 1.2, name, weight="bold", ha="left"
        )  # left-aligned: clear of the append arrow
        d.brace_label(x0, x0 + T * c - 0.05, cy + dh * c + 0.3, "T cached", below=False)
        d.ax.add_patch(
            Rectangle(
                (x0 + T * c - 0.07, cy - 0.07),
                c + 0.14,
                dh * c + 0.14,
                fill=False,
                edgecolor=INK,
                linewidth=1.5,
                linestyle="--",
                zorder=4,
            )
        )
        d.arrow(
            new["bottom"],
            (new["bottom"][0], cy + dh * c + 0.1),
            label="append",
            side="right",
            offset=0.2,
        )
        for j in range(T + 1):
            d.text(
                x0 + (j + 0.5) * c, cy - 0.4, str(j) if j < T else "T", size=SHAPE_SIZE
            )
        d.shape(x0 + (T + 1) * c / 2, cy - 1.05, "(B, Hkv, T+1, d)")

    # q_T scores every cached key; the softmax gives one weight per key column; the
    # output mixes the values
    d.arrow(
        (q["bottom"][0], vec_y - 0.9),
        (kx - 1.0, cy + dh * c / 2),
        rad=0.3,
        role="query",
    )
    d.text(q["bottom"][0] + 0.6, cy + 0.4, "scores with", size=SHAPE_SIZE + 0.5)
    d.text(q["bottom"][0] + 0.6, cy - 0.2, "all T + 1 keys", size=SHAPE_SIZE + 0.5)
    wy = 4.9
    W = d.vector(
        kx,
        wy,
        T + 1,
        role="weight",
        vertical=False,
        cell=c,
        shade=[0.15, 0.1, 0.3, 0.2, 0.45, 0.25, 0.6],
    )
    d.arrow(
        (K["bottom"][0], cy - 1.5),
        (K["bottom"][0], wy + c + 0.1),
        label=r"softmax$(q_T K^\top/\sqrt{d})$",
        side="left",
        offset=0.3,
    )
    d.text(W["bottom"][0], wy - 0.45, "weights, one per key", size=SHAPE_SIZE + 0.5)
    d.shape(W["bottom"][0], wy - 1.05, "(B, H, 1, T+1)")
    out = d.vector(vx + 0.6, wy, dh, role="output", vertical=False, cell=c)
    d.arrow((V["bottom"][0], cy - 1.5), (V["bottom"][0], wy + c + 0.1))
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
        "Next step: T + 1 tokens cached, one more column.",
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
