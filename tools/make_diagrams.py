"""Draw every diagram of the course from its source in ``tools/diagrams/chNN.py`` into
``chapters/figures/``: ``NAME.svg`` and ``NAME.zh_CN.svg`` for the website's two editions,
and ``NAME.png`` (2x density) that the notebooks carry as a cell attachment.

Usage:
    python tools/make_diagrams.py            # (re)write every SVG python
    tools/make_diagrams.py --preview DIR [STEM ...]   # PNG previews (to look at),
    nothing committed python tools/make_diagrams.py --check    # draw into a temporary
    folder and compare bytes with the
                                             # committed files (exit 1 and list the
                                             differences)

Each module ``tools/diagrams/chNN.py`` defines ``DIAGRAMS``, a dict mapping a file stem
(``"ch05_sdpa_block"``) to a function that takes the output path and draws it with
:mod:`tools.diagrams.style`. Never edit an SVG by hand: change its source and run ``make
diagrams``.
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "chapters" / "figures"


def all_diagrams() -> dict:
    sys.path.insert(0, str(ROOT))
    found = {}
    for path in sorted((ROOT / "tools" / "diagrams").glob("ch[0-9][0-9]*.py")):
        module = importlib.import_module(f"tools.diagrams.{path.stem}")
        for stem, draw in module.DIAGRAMS.items():
            if stem in found:
                raise ValueError(f"diagram {stem!r} is defined twice")
            found[stem] = draw
    return found


LANGUAGES = [
    None,
    "zh_CN",
]  # English (NAME.svg), then the Chinese edition (NAME.zh_CN.svg)


def draw_all(
    folder: Path, suffix: str = ".svg", only: list[str] | None = None
) -> list[Path]:
    from tools.diagrams import style

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for language in LANGUAGES:
        style.use_language(language)
        for stem, draw in all_diagrams().items():
            if only and stem not in only:
                continue
            path = folder / (
                f"{stem}{suffix}" if language is None else f"{stem}.{language}{suffix}"
            )
            draw(path)
            paths.append(path)
            if suffix == ".svg":
                # The notebooks' attachments: JupyterLab shows no SVG attachment, so a
                # notebook carries NAME.png (2x density, tools/diagrams/style.py); the
                # website shows NAME.svg (book/_ext/course_attachments.py). The Chinese
                # notebooks (tools/make_zh_notebooks.py) carry NAME.zh_CN.png.
                draw(path.with_suffix(".png"))
                paths.append(path.with_suffix(".png"))
    style.use_language(None)
    if style.UNKNOWN:
        raise SystemExit(
            "labels that tools/diagrams/labels_zh_CN.py neither translates nor keeps:\n"
            + "\n".join(f"    {s!r}" for s in sorted(style.UNKNOWN))
        )
    return paths


def check() -> list[str]:
    """The differences between the committed SVGs and PNGs and what their sources draw now (empty
    when in step)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {p.name: p.read_bytes() for p in draw_all(Path(tmp))}
    committed = {
        p.name: p.read_bytes() for p in [*OUT.glob("*.svg"), *OUT.glob("*.png")]
    }
    problems = [
        f"{name}: drawn by a source but not committed (run make diagrams)"
        for name in fresh
        if name not in committed
    ]
    problems += [
        f"{name}: committed but no source draws it (remove it)"
        for name in committed
        if name not in fresh
    ]
    problems += [
        f"{name}: differs from what its source draws (run make diagrams)"
        for name in fresh
        if name in committed and committed[name] != fresh[name]
    ]
    return sorted(problems)


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        problems = check()
        print(
            "\n".join(problems)
            if problems
            else "every diagram is what its source draws"
        )
        return 1 if problems else 0
    if argv[:1] == ["--preview"] and len(argv) >= 2:
        for path in draw_all(Path(argv[1]), ".png", argv[2:]):
            print(path)
        return 0
    if argv:
        print(__doc__)
        return 2
    for path in draw_all(OUT):
        print(path.relative_to(ROOT))
    # The notebooks carry their diagrams as cell attachments (Colab, a download):
    # copy the new drawings into them.
    import embed_diagrams

    # DIAGRAMS_EMBED="chapters/11_x.ipynb ..." limits the embedding to those notebooks.
    only = os.environ.get("DIAGRAMS_EMBED", "").split()
    notebooks = [ROOT / p for p in only] or sorted((ROOT / "chapters").glob("*.ipynb"))
    for nb in notebooks:
        if embed_diagrams.embed(nb, check=False):
            print("embedded in", nb.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
