"""Diagrams of chapter 11 (attention in a real model): the rotary rotation of one pair of
features (the score depends only on the offset i - j), the Llama decoder block, and which
keys each query sees under a sliding window with attention sinks (al.visible_keys), and
what the cache keeps."""

from __future__ import annotations

import math

from matplotlib.patches import Arc, Circle, Rectangle

from tools.diagrams.style import FONT_SIZE, INK, SHAPE_SIZE, Diagram, colours

T, W, S = 12, 4, 2  # positions, window, sink tokens


def _cell(d, x, y, size, face, edge, lw=0.8):
    d.ax.add_patch(
        Rectangle((x, y), size, size, facecolor=face, edgecolor=edge, linewidth=lw)
    )


def draw_window_with_sinks(path):
    """Query i (row) sees key j (column) when j <= i and (j > i - W or j < S)."""
    width, height = 33.0, 16.6
    d = Diagram(width, height)
    d.title("A sliding window of W = 4 keys plus S = 2 sink tokens")
    cell, gx, gy = 1.0, 5.0, 1.0
    k_edge, k_fill = colours("key")
    for i in range(T):
        y = gy + (T - 1 - i) * cell
        d.text(gx - 0.5, y + cell / 2, f"{i}", size=SHAPE_SIZE, ha="right")
        for j in range(T):
            x = gx + j * cell
            if j > i:
                _cell(d, x, y, cell, "#FFFFFF", "#DDDDDD")
            elif j < S:
                _cell(d, x, y, cell, k_edge, INK)
            elif j > i - W:
                _cell(d, x, y, cell, k_fill, k_edge)
            else:
                _cell(d, x, y, cell, "#E6E6E6", "#BBBBBB")
    for j in range(T):
        d.text(gx + j * cell + cell / 2, gy + T * cell + 0.45, f"{j}", size=SHAPE_SIZE)
    d.text(gx + T * cell / 2, gy + T * cell + 1.3, "key position j")
    d.text(gx - 2.6, gy + T * cell / 2, "query position i", rotation=90)
    lx = gx + T * cell + 1.6
    rows = [
        (k_edge, INK, "sink tokens: always seen"),
        (k_fill, k_edge, "window: the last W keys"),
        ("#E6E6E6", "#BBBBBB", "dropped from the cache"),
        ("#FFFFFF", "#DDDDDD", "future: the causal mask"),
    ]
    for n, (face, edge, label) in enumerate(rows):
        y = gy + T * cell - 1.5 - 1.6 * n
        _cell(d, lx, y, 0.8, face, edge)
        d.text(lx + 1.2, y + 0.4, label, ha="left", size=SHAPE_SIZE + 1)
    d.text(
        lx,
        gy + 2.6,
        "the cache keeps S + W - 1 = 5",
        ha="left",
        size=SHAPE_SIZE + 1,
        weight="bold",
    )
    d.text(
        lx,
        gy + 1.5,
        "keys rotated at absolute positions",
        ha="left",
        size=SHAPE_SIZE + 0.5,
    )
    d.save(path)


# -- the rotation ---------------------------------------------------------------------
# degrees per position; the angles at position 0: q and k start in the same direction,
# so the angle between them is (i - j) * omega exactly (otherwise that plus their
# angle at position 0, the same in both panels)
OMEGA, Q0, K0 = 20.0, 10.0, 10.0


def _rotation_panel(d, cx, cy, R, i, j):
    """One pair of features (a_r, b_r) as a plane: q at position i, k at position j."""
    d.ax.add_patch(
        Circle((cx, cy), R, facecolor="none", edgecolor="#DDDDDD", lw=0.8, zorder=1)
    )
    d.line([(cx - R - 0.4, cy), (cx + R + 0.4, cy)], lw=0.6)
    d.line([(cx, cy - R - 0.4), (cx, cy + R + 1.5)], lw=0.6)  # above the labels
    d.text(cx + R + 0.5, cy - 0.45, "$a_r$", size=SHAPE_SIZE)
    # b_r at the top: the rotations turn counter-clockwise, from +a_r towards +b_r
    d.text(cx + 0.55, cy + R + 1.3, "$b_r$", size=SHAPE_SIZE)
    q_angle, k_angle = Q0 + i * OMEGA, K0 + j * OMEGA
    for angle0, angle, role, name, pos in (
        (Q0, q_angle, "query", r"\mathbf{q}", i),
        (K0, k_angle, "key", r"\mathbf{k}", j),
    ):
        edge, _ = colours(role)
        r0, r1 = math.radians(angle0), math.radians(angle)
        length = 0.8 if role == "query" else 0.55  # both dashed arrows stay visible
        d.arrow(
            (cx, cy),
            (cx + length * R * math.cos(r0), cy + length * R * math.sin(r0)),
            role=role,
            dashed=True,
            lw=0.9,
        )
        tip = 0.85 * R
        d.arrow((cx, cy), (cx + tip * math.cos(r1), cy + tip * math.sin(r1)), role=role)
        d.text(
            cx + (tip + 0.7) * math.cos(r1),
            cy + (tip + 0.7) * math.sin(r1),
            f"${name}_{{{pos}}}$",
            color=edge,
        )
        # the turn from position 0 to its position: pos * omega
        d.ax.add_patch(
            Arc(
                (cx, cy),
                1.6 * R * (0.55 if role == "query" else 0.75),
                1.6 * R * (0.55 if role == "query" else 0.75),
                theta1=angle0,
                theta2=angle,
                color=edge,
                lw=1.0,
                zorder=3,
            )
        )
    # the angle between them, the only thing the score sees
    d.ax.add_patch(
        Arc(
            (cx, cy),
            2.0 * R * 1.12,
            2.0 * R * 1.12,
            theta1=k_angle,
            theta2=q_angle,
            color=colours("score")[0],
            lw=2.0,
            zorder=3,
        )
    )
    mid = math.radians((q_angle + k_angle) / 2)
    d.text(
        cx + 1.38 * R * math.cos(mid),
        cy + 1.38 * R * math.sin(mid),
        f"$({i} - {j})\\omega$",
        color=colours("score")[0],
        size=SHAPE_SIZE + 0.5,
    )
    d.text(
        cx,
        cy - R - 1.5,
        f"$i = {i}$: q turned by ${i}\\omega$;  $j = {j}$: k turned by ${j}\\omega$",
        size=SHAPE_SIZE + 0.5,
    )


def draw_rotation(path):
    """RoPE on one pair r of a head's features: the query at position i is turned by
    i * omega_r, the key at j by j * omega_r; the angle between them, hence their dot
    product, depends on i - j only. Two panels with the same offset i - j = 3."""
    d = Diagram(34.0, 17.0)
    d.title("RoPE turns each pair of features by position × ω; the score sees i − j")
    R = 4.2
    _rotation_panel(d, 8.5, 8.0, R, 4, 1)
    _rotation_panel(d, 25.5, 8.0, R, 7, 4)
    d.text(
        17.0,
        1.1,
        "the same angle (i − j)ω between q and k, so the same score $\\mathbf{q}_i^\\top"
        "\\mathbf{k}_j$",
        size=SHAPE_SIZE + 1,
        weight="bold",
    )
    d.text(17.0, 9.2, "dashed: position 0", size=SHAPE_SIZE)
    d.text(17.0, 8.3, "arcs: the turn to", size=SHAPE_SIZE)
    d.text(17.0, 7.5, "each position", size=SHAPE_SIZE)
    d.save(path)


# -- the Llama block --------------------------------------------------------------------


def draw_llama_block(path):
    """One decoder block of SmolLM2 (Llama): pre-norm, GQA with RoPE on q and k, a
    residual; pre-norm, SwiGLU MLP, a residual. Shapes for B, T, E = 576, H = 9,
    Hkv = 3, d = 64, F = 1536."""
    d = Diagram(30.0, 30.0)
    d.title("A Llama decoder block (SmolLM2: ×30)")
    cx, bw, bh = 11.0, 9.0, 1.5  # the main column
    y_in, y_out = 1.6, 27.4
    d.shape(cx, y_in - 0.7, "x (B, T, E)")
    # attention half
    n1 = d.box(cx - bw / 2, 3.2, bw, bh, "RMSNorm", role="neutral")
    d.arrow((cx, y_in), n1["bottom"])
    pw, px = 2.6, [cx - 3.6, cx, cx + 3.6]
    py = 6.2
    proj = []
    for x, role, label in zip(
        px, ("query", "key", "value"), ("$W_q$", "$W_k$", "$W_v$")
    ):
        proj.append(d.box(x - pw / 2, py, pw, bh, label, role=role))
        d.arrow(n1["top"], proj[-1]["bottom"])
    rope_y = 9.2
    ropes = []
    for k in range(2):
        role = ("query", "key")[k]
        ropes.append(d.box(px[k] - pw / 2, rope_y, pw, bh, "RoPE", role=role))
        d.arrow(proj[k]["top"], ropes[-1]["bottom"])
    att = d.box(cx - bw / 2, 12.4, bw, 1.9, "", role="weight")
    d.text(cx, 13.65, "grouped-query attention", size=FONT_SIZE)
    d.shape(cx, 12.95, "H = 9 query heads, Hkv = 3")
    for k in range(2):
        d.arrow(ropes[k]["top"], (px[k], 12.4))
    d.arrow(proj[2]["top"], (px[2], 12.4))
    wo = d.box(cx - bw / 2, 15.2, bw, bh, "$W_o$", role="param")
    d.arrow(att["top"], wo["bottom"], shape="(B, T, H·d)", side="right")
    add1 = d.op(cx, 17.9, "+")
    d.arrow(wo["top"], add1["bottom"])
    # the first residual: from the input around the attention half
    rx = cx - bw / 2 - 1.4
    d.line([(cx, 2.3), (rx, 2.3), (rx, 17.9)])
    d.arrow((rx, 17.9), add1["left"])
    d.text(rx - 0.3, 10.0, "residual", rotation=90, size=SHAPE_SIZE + 0.5)
    # MLP half
    n2 = d.box(cx - bw / 2, 19.4, bw, bh, "RMSNorm", role="neutral")
    d.arrow(add1["top"], n2["bottom"])
    mlp = d.box(cx - bw / 2, 22.0, bw, 2.2, "", role="param")
    d.text(cx, 23.55, "SwiGLU MLP", size=FONT_SIZE)
    d.shape(cx, 22.7, "down(silu(gate x) ⊙ up x)")
    d.arrow(n2["top"], mlp["bottom"])
    add2 = d.op(cx, 25.6, "+")
    d.arrow(mlp["top"], add2["bottom"])
    d.line([(cx, 18.6), (rx, 18.6), (rx, 25.6)])
    d.arrow((rx, 25.6), add2["left"])
    d.arrow(add2["top"], (cx, y_out), shape="(B, T, E)", side="right")
    # notes on the right
    nx = cx + bw / 2 + 1.2
    notes = [
        (3.95, "x / rms(x) in float32, then × gain"),
        (6.95, "q: 9 heads, k and v: 3 heads"),
        (9.95, "rotate q and k at their positions"),
        (13.35, "each kv head serves g = 3 q heads"),
        (20.15, "x / rms(x) in float32, then × gain"),
        (23.1, "E → F = 1536 → E"),
    ]
    for y, s in notes:
        d.text(nx + 2.2, y, s, ha="left", size=SHAPE_SIZE + 0.5)
    d.legend(nx + 2.2, 1.6, [("query", "query"), ("key", "key"), ("value", "value")])
    d.save(path)


DIAGRAMS = {
    "ch11_rotation": draw_rotation,
    "ch11_llama_block": draw_llama_block,
    "ch11_window_with_sinks": draw_window_with_sinks,
}
