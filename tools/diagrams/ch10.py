"""Diagrams of chapter 10 (how attention runs fast): the tiling with its running state,
the causal tiles that are skipped, and split-K decoding."""

from __future__ import annotations

from matplotlib.patches import Rectangle

from tools.diagrams.style import INK, ROLES, SHAPE_SIZE, Diagram, colours


def _tile(d, x, y, size, *, face, edge, hatch=None, lw=0.9, dashed=False):
    d.ax.add_patch(
        Rectangle(
            (x, y),
            size,
            size,
            facecolor=face,
            edgecolor=edge,
            linewidth=lw,
            hatch=hatch,
            linestyle="--" if dashed else "-",
            zorder=2,
        )
    )


def draw_tiling(path):
    """Query block Q1 walks through key blocks K0..K3; the running state (m, l, acc)."""
    width, height = 36.0, 17.2
    d = Diagram(width, height)
    d.title("Tiled attention: one query block walks through the key blocks")
    T, cell = 4, 2.0  # blocks per side, size of a tile
    gx, gy = 5.0, 2.6  # lower-left corner of the grid of score tiles
    row, current = 1, 2  # the query block shown, the tile being computed
    q_edge, q_fill = colours("query")
    k_edge, k_fill = colours("key")
    v_edge, v_fill = colours("value")
    s_edge, s_fill = colours("score")
    for i in range(T):  # i: query block (top to bottom), j: key block
        y = gy + (T - 1 - i) * cell
        for j in range(T):
            x = gx + j * cell
            if i != row:
                _tile(d, x, y, cell, face="#FFFFFF", edge="#BBBBBB")
            elif j < current:
                _tile(d, x, y, cell, face=s_fill, edge=s_edge)
                d.text(x + cell / 2, y + cell / 2, "done", size=SHAPE_SIZE, color=INK)
            elif j == current:
                _tile(d, x, y, cell, face=s_edge, edge=INK, lw=2.0)
                d.text(x + cell / 2, y + cell / 2 + 0.3, "$S_{12}$", color="#FFFFFF")
                d.shape(x + cell / 2, y + cell / 2 - 0.45, "(b, b)", color="#FFFFFF")
            else:
                _tile(d, x, y, cell, face="#FFFFFF", edge=s_edge, dashed=True)
                d.text(x + cell / 2, y + cell / 2, "next", size=SHAPE_SIZE)
        # query blocks on the left
        qx = gx - 2.2
        _tile(d, qx, y + 0.25, 1.5, face=q_edge if i == row else q_fill, edge=q_edge)
        d.text(
            qx + 0.75,
            y + 1.0,
            f"$Q_{i}$",
            color="#FFFFFF" if i == row else INK,
            size=SHAPE_SIZE + 1,
        )
    d.text(gx - 1.45, gy + T * cell + 0.5, "queries", size=SHAPE_SIZE, color=q_edge)
    for j in range(T):  # key blocks on top, value blocks on the right of the grid
        x = gx + j * cell
        _tile(
            d,
            x + 0.25,
            gy + T * cell + 0.3,
            1.5,
            face=k_edge if j == current else k_fill,
            edge=k_edge,
        )
        d.text(
            x + 1.0,
            gy + T * cell + 1.05,
            f"$K_{j}$",
            color="#FFFFFF" if j == current else INK,
            size=SHAPE_SIZE + 1,
        )
    d.text(
        gx + T * cell + 0.3,
        gy + T * cell + 1.05,
        "keys",
        ha="left",
        size=SHAPE_SIZE,
        color=k_edge,
    )
    vx = gx + T * cell + 1.6
    for j in range(T):
        y = gy + (T - 1 - j) * cell
        _tile(
            d,
            vx,
            y + 0.25,
            1.5,
            face=v_edge if j == current else v_fill,
            edge=v_edge,
        )
        d.text(
            vx + 0.75,
            y + 1.0,
            f"$V_{j}$",
            color="#FFFFFF" if j == current else INK,
            size=SHAPE_SIZE + 1,
        )
    d.text(vx + 0.75, gy - 0.5, "values", size=SHAPE_SIZE, color=v_edge)
    d.text(
        gx + T * cell / 2,
        gy - 1.4,
        "only the current (b × b) tile of scores exists",
        size=SHAPE_SIZE + 0.5,
    )
    # the running state of query block Q1
    sx, sy, sw, sh = 18.2, 2.0, 16.8, 13.6
    d.box(sx, sy, sw, sh, "", role="output")
    d.text(
        sx + sw / 2,
        sy + sh - 0.8,
        "running state of query block $Q_1$",
        weight="bold",
    )
    lines = [
        ("m", "running maximum", "(b,)"),
        ("ℓ", "running sum", "(b,)"),
        ("acc", "unnormalised output", "(b, Dv)"),
    ]
    for k, (name, what, shape) in enumerate(lines):
        y = sy + sh - 2.0 - 0.85 * k
        d.text(sx + 0.6, y, name, ha="left", weight="bold")
        d.text(sx + 2.6, y, what, ha="left", size=SHAPE_SIZE + 0.5)
        d.shape(sx + sw - 0.6, y, shape, ha="right")
    steps = [
        "for the tile $S_{12} = Q_1 K_2^\\top / \\sqrt{d}$:",
        "$m' = \\max(m, \\mathrm{rowmax}\\, S_{12})$",
        "$P = \\exp(S_{12} - m')$",
        "$\\ell \\leftarrow \\ell\\, e^{m - m'} + \\mathrm{rowsum}\\, P$",
        "$acc \\leftarrow acc\\, e^{m - m'} + P\\, V_2$",
        "$m \\leftarrow m'$",
    ]
    for k, s in enumerate(steps):
        d.text(sx + 0.6 + (0 if k == 0 else 0.6), sy + 8.3 - 0.95 * k, s, ha="left")
    d.text(
        sx + 0.6,
        sy + 1.6,
        "after $K_3$:  $O_1 = acc\\, /\\, \\ell$,   lse $= m + \\log \\ell$",
        ha="left",
    )
    d.line([(sx + 0.4, sy + 2.5), (sx + sw - 0.4, sy + 2.5)], lw=0.8)
    d.line([(sx + 0.4, sy + 9.1), (sx + sw - 0.4, sy + 9.1)], lw=0.8)
    d.save(path)


def draw_causal_tiles(path):
    """n_b = 8 blocks per side: above the diagonal skipped, on it masked, below full."""
    T, cell = 8, 1.2
    width, height = 33.0, 14.6
    d = Diagram(width, height)
    d.title("Causal attention: the tiles above the diagonal are never computed")
    gx, gy = 3.2, 1.6
    s_edge, s_fill = colours("score")
    m_edge, m_fill = ROLES["mask"]
    for i in range(T):
        for j in range(T):
            x, y = gx + j * cell, gy + (T - 1 - i) * cell
            if j > i:
                _tile(d, x, y, cell, face=m_fill, edge=m_edge, hatch="////")
            elif j == i:
                _tile(d, x, y, cell, face=s_fill, edge=s_edge)
                # the causal mask inside a diagonal tile: its upper-right triangle
                d.ax.fill(
                    [x + 0.12 * cell, x + cell, x + cell],
                    [y + cell, y + cell, y + 0.12 * cell],
                    facecolor=m_fill,
                    edgecolor=m_edge,
                    hatch="////",
                    linewidth=0.5,
                    zorder=2.5,
                )
            else:
                _tile(d, x, y, cell, face=s_edge, edge=INK, lw=0.6)
    d.text(gx + T * cell / 2, gy + T * cell + 0.5, "key blocks →", size=SHAPE_SIZE)
    d.text(
        gx - 0.6,
        gy + T * cell / 2,
        "query blocks →",
        size=SHAPE_SIZE,
        rotation=-90,
    )
    lx, ly = gx + T * cell + 1.6, gy + T * cell - 1.0
    legend = [
        (
            dict(face=m_fill, edge=m_edge, hatch="////"),
            "skipped: every key after every query",
            "28",
        ),
        (dict(face=s_fill, edge=s_edge), "computed with the mask inside the tile", "8"),
        (dict(face=s_edge, edge=INK, lw=0.6), "computed, no mask needed", "28"),
    ]
    for k, (style, text, count) in enumerate(legend):
        y = ly - 1.6 * k
        _tile(d, lx, y - 0.5, 1.0, **style)
        d.text(lx + 1.5, y, text, ha="left", size=SHAPE_SIZE + 0.5)
        d.text(
            lx + 1.5,
            y - 0.6,
            f"{count} tiles",
            ha="left",
            size=SHAPE_SIZE,
            color="#555555",
        )
    d.text(
        lx,
        ly - 5.3,
        r"computed: 8 + 28 = 36 of 64 tiles = $n_b(n_b + 1)\,/\,2$",
        ha="left",
        weight="bold",
        size=SHAPE_SIZE + 1,
    )
    d.text(
        lx,
        ly - 6.3,
        r"a fraction $(n_b + 1)\,/\,2n_b$ ($n_b$ = 8 blocks), which tends to one half",
        ha="left",
        size=SHAPE_SIZE + 0.5,
    )
    d.save(path)


def draw_split_k(path):
    """One query, the cache split into chunks attended in parallel, merged exactly."""
    width, height = 36.0, 13.0
    d = Diagram(width, height)
    d.title("Split-K decoding: attend to chunks of the cache in parallel, then merge")
    chunks, cx0, cw, gap = 4, 7.0, 5.0, 0.6
    q = d.box(0.8, 6.1, 4.2, 1.8, "new query q", role="query", shape="(B, H, 1, d)")
    merge = d.box(29.0, 3.0, 6.2, 2.2, "merge_attention", role="output", shape="o, lse")
    bus_q, bus_o = 7.0, 2.0  # heights of the query line and of the results line
    d.line([q["right"], (cx0 + (chunks - 1) * (cw + gap) + cw * 0.3, bus_q)])
    for c in range(chunks):
        x = cx0 + c * (cw + gap)
        cache = d.box(x, 8.4, cw, 1.7, f"keys, values {c}", role="key", shape="T / 4")
        att = d.box(
            x,
            3.6,
            cw,
            2.2,
            "attention",
            role="weight",
            shape=f"$\\mathbf{{o}}_{c}$, $L_{c}$",
        )
        d.arrow((x + cw * 0.3, bus_q), (x + cw * 0.3, att["top"][1]))
        d.arrow((x + cw * 0.7, cache["bottom"][1]), (x + cw * 0.7, att["top"][1]))
        d.line([att["bottom"], (att["bottom"][0], bus_o)])
    first, last = cx0 + cw / 2, cx0 + (chunks - 1) * (cw + gap) + cw / 2
    d.line([(first, bus_o), (merge["bottom"][0], bus_o)])
    d.arrow((merge["bottom"][0], bus_o), merge["bottom"])
    d.text(
        (first + last) / 2,
        1.05,
        r"$\mathbf{o} = \sum_c e^{L_c - L}\, \mathbf{o}_c, \quad L = \log \sum_c e^{L_c}$:  exact",
        size=SHAPE_SIZE + 0.5,
    )
    d.text(
        cx0,
        10.9,
        "the cache of T tokens, split into 4 chunks (each attended independently)",
        ha="left",
        size=SHAPE_SIZE + 0.5,
    )
    d.save(path)


DIAGRAMS = {
    "ch10_tiling": draw_tiling,
    "ch10_causal_tiles": draw_causal_tiles,
    "ch10_split_k": draw_split_k,
}
