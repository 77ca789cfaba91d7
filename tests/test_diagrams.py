"""The course's diagrams: drawn from source, committed as drawn, used by the chapters,
described in words.

Every SVG under ``chapters/figures/`` must be exactly what ``tools/diagrams/chNN.py``
draws (``make diagrams`` rewrites them), so a diagram cannot drift from its source.
Every chapter shows at least one; every image in a chapter -- diagram or plot -- carries
an alt text that says what it shows, which a screen reader reads out.
"""

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import embed_diagrams  # noqa: E402
import make_diagrams  # noqa: E402

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
FIGURES = ROOT / "chapters" / "figures"
IMAGE = re.compile(
    r"!\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)"
)  # alt text may hold [balanced] brackets


def markdown(path: Path) -> str:
    return "\n".join(
        "".join(c["source"])
        for c in json.loads(path.read_text())["cells"]
        if c["cell_type"] == "markdown"
    )


# Redraws every diagram in both languages (~50 s): make long-tests (CI), so make test stays in budget
@pytest.mark.slow
def test_committed_diagrams_are_what_their_sources_draw():
    assert make_diagrams.check() == []


def test_diagrams_are_deterministic_svg_with_glyphs_as_paths():
    for svg in FIGURES.glob("*.svg"):
        text = svg.read_text()
        assert "<dc:date>" not in text, (
            f"{svg.name}: no date in the file (it would change on every run)"
        )
        assert "<text" not in text, (
            f"{svg.name}: glyphs are paths, so the diagram looks the same everywhere"
        )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_shows_a_diagram_and_describes_every_image(path):
    images = IMAGE.findall(markdown(path))
    # attachment:NAME.png: JupyterLab shows no SVG attachment (the website shows NAME.svg)
    diagrams = [
        t for _, t in images if t.startswith("attachment:") and t.endswith(".png")
    ]
    assert diagrams, f"{path.name}: no diagram (attachment:*.png) in the chapter"
    for alt, target in images:
        assert target.startswith("attachment:"), (
            f"{path.name}: {target}: a notebook opened alone (Colab, a download) has no "
            "figures/ folder; refer to diagrams as attachment:NAME.png"
        )
        assert (FIGURES / target.split(":", 1)[1]).is_file(), f"{path.name}: {target}"
        assert len(alt.split()) >= 6 and not alt.endswith((".svg", ".png")), (
            f"{path.name}: alt text of {target}: {alt!r}"
        )
        assert "\n" not in alt, f"{path.name}: alt text on one line (spaces survive)"
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        if any("image/png" in out.get("data", {}) for out in cell.get("outputs", [])):
            alt = cell["metadata"].get("mystnb", {}).get("image", {}).get("alt", "")
            assert len(alt.split()) >= 6, (
                f"{path.name} cell {i}: a plot needs metadata mystnb.image.alt, got {alt!r}"
            )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_notebooks_carry_the_current_drawings_as_attachments(path):
    assert not embed_diagrams.embed(path, check=True), (
        f"{path.name}: attachments differ from chapters/figures/ (run make diagrams)"
    )


def test_every_diagram_is_used_by_a_chapter():
    used = {
        target.split(":", 1)[-1]
        for p in CHAPTERS
        for _, target in IMAGE.findall(markdown(p))
    }
    # NAME.png is in the notebooks, NAME.svg on the website, NAME.zh_CN.svg (Chinese
    # labels) on the Chinese website, NAME.zh_CN.png in the Chinese notebooks
    # (tools/make_zh_notebooks.py): all four are used when the chapter shows NAME.png
    unused = sorted(
        f.name
        for f in [*FIGURES.glob("*.svg"), *FIGURES.glob("*.png")]
        if re.sub(r"(\.[a-z]{2}_[A-Z]{2})?\.(svg|png)$", ".png", f.name) not in used
    )
    assert not unused, f"diagrams no chapter shows: {unused}"
