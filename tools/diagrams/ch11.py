"""Diagram of chapter 11 (attention in a real model): which keys each query sees under a
sliding window with attention sinks (al.visible_keys), and what the cache keeps."""

from __future__ import annotations

from matplotlib.patches import Rectangle

from tools.diagrams.style import INK, SHAPE_SIZE, Diagram, colours

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


DIAGRAMS = {"ch11_window_with_sinks": draw_window_with_sinks}
