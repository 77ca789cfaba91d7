"""Write favicon.ico (the same 3x3 attention-heatmap drawing as
book/_static/favicon.svg) for the site root.

Browsers ask for /favicon.ico on pages without an icon link, such as Jupyter Book's root
redirect page. Usage: python tools/make_favicon.py OUT_DIR
"""

import sys
from pathlib import Path

from PIL import Image, ImageDraw

COLOURS = [
    ["#67000d", "#fcbba1", "#fee0d2"],
    ["#fc9272", "#a50f15", "#fcbba1"],
    ["#fee0d2", "#fc9272", "#67000d"],
]

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
image = Image.new("RGB", (48, 48), "#fff5f0")
draw = ImageDraw.Draw(image)
for i, row in enumerate(COLOURS):
    for j, colour in enumerate(row):
        draw.rectangle([2 + 15 * j, 2 + 15 * i, 15 + 15 * j, 15 + 15 * i], fill=colour)
image.save(out / "favicon.ico", sizes=[(16, 16), (32, 32), (48, 48)])
