"""Embed each chapter's diagrams in the notebook itself, as markdown cell attachments.

A chapter refers to a diagram as ``![alt text](attachment:ch05_sdpa_block.png)``. Jupyter,
JupyterLab, Colab and nbconvert show a cell's PNG attachments (JupyterLab shows no SVG
attachment: "Cannot render unknown image mime type"), so a notebook opened alone (a
download, Colab) shows every diagram; the website resolves the same reference to the
vector drawing ``chapters/figures/<name>.svg`` (book/_ext/course_attachments.py). The
files are drawn by ``tools/make_diagrams.py`` (``NAME.png`` at 2x density next to
``NAME.svg``); this script

* rewrites an older reference ``attachment:NAME.svg`` to ``attachment:NAME.png``, in the
  notebooks and in the translation catalogs (``locales/*/LC_MESSAGES/**/*.po``: a diagram's
  markdown image is a message, so its English and its translation name the same file),
* copies the PNG into the cells that refer to it, and
* drops attachments no cell refers to.

It changes nothing else (no code, no output), and running it twice changes nothing.

Usage: python tools/embed_diagrams.py [--check] [NOTEBOOK.ipynb | CATALOG.po ...]
       (default: chapters/*.ipynb and locales/*/LC_MESSAGES/**/*.po)
With --check nothing is written; the exit status is 1 if a notebook is out of date.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "chapters" / "figures"
# alt text may hold [balanced] brackets
REFERENCE = re.compile(r"!\[(?:[^\[\]]|\[[^\]]*\])*\]\(attachment:([\w.-]+)\)")


SVG_REFERENCE = re.compile(r"(\]\(attachment:[\w.-]+)\.svg\)")


def png_references(source: str) -> str:
    """``source`` with each ``attachment:NAME.svg`` reference turned into ``NAME.png``."""
    return SVG_REFERENCE.sub(r"\1.png)", source)


def attachments_for(source: str) -> dict:
    out = {}
    for name in REFERENCE.findall(source):
        path = FIGURES / name
        if not path.exists():
            raise FileNotFoundError(f"{name}: no such diagram in {FIGURES}")
        mime = "image/svg+xml" if name.endswith(".svg") else "image/png"
        out[name] = {mime: base64.b64encode(path.read_bytes()).decode("ascii")}
    return out


def embed(path: Path, check: bool) -> bool:
    """Return True if the notebook was (or, with check, would be) changed."""
    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        if png_references(source) != source:
            cell["source"] = source = png_references(source)
            changed = True
        wanted = attachments_for(source)
        if wanted:
            if cell.get("attachments") != wanted:
                cell["attachments"] = wanted
                changed = True
        elif "attachments" in cell:
            del cell["attachments"]
            changed = True
    if changed and not check:
        nbformat.write(nb, path)
    return changed


def png_catalog(path: Path, check: bool) -> bool:
    """Rewrite ``attachment:NAME.svg`` to ``NAME.png`` in a catalog (msgid and msgstr alike);
    return True if it was (or, with check, would be) changed."""
    text = path.read_text(encoding="utf-8")
    fixed = png_references(text)
    if fixed != text and not check:
        path.write_text(fixed, encoding="utf-8")
    return fixed != text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args()
    paths = args.notebooks or [
        *sorted((ROOT / "chapters").glob("*.ipynb")),
        *sorted((ROOT / "locales").glob("*/LC_MESSAGES/**/*.po")),
    ]
    stale = [
        p
        for p in paths
        if (png_catalog(p, args.check) if p.suffix == ".po" else embed(p, args.check))
    ]
    for p in stale:
        print(("out of date: " if args.check else "embedded: ") + str(p))
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
