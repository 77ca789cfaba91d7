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


DIAGRAMS = {"ch12_what_is_cached": draw_what_is_cached}
