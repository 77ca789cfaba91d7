"""Sphinx, Chinese edition only: what a reader runs from a Chinese page is the Chinese notebook.

The Chinese notebooks are chapters/zh_CN/NN_name.ipynb (tools/make_zh_notebooks.py: the English
code cells and outputs, the catalogs' Chinese markdown, Chinese diagrams). On a Chinese page

* the theme's Colab and Binder buttons (sphinx-book-theme builds them from the page name) and any
  Colab/Binder link in the text (the landing page's "在 Colab 中打开第 1 章") point at
  chapters/zh_CN/NN_name.ipynb in the repository;
* the download button's ``.ipynb`` (the page source Sphinx copies to ``_sources/``) is the
  Chinese notebook: it is copied over the English one when the build finishes;
* the plots are the Chinese notebook's (Chinese titles, axes, legends: its PNGs were drawn by
  the Chinese notebook itself, tools/make_zh_notebooks.py): when Sphinx reads a chapter
  (``source-read``, the raw .ipynb JSON, before myst-nb parses it), each ``image/png`` output
  becomes the Chinese notebook's of the same cell id and rank. Everything else (code, printed
  outputs, the plots' alt text, translated by the catalog) stays the English notebook's;
* except the reports of the exercises' checks (``al.exercises.check``) and the head
  explorers (``al.explore_heads``): the Chinese notebook stores them in Chinese
  (tools/make_zh_notebooks.py), and the page shows those.

The English edition is not touched. Loaded by course_i18n.py (``app.setup_extension``).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

# chapters/NN_name.ipynb in a Colab (/blob/BRANCH/...) or Binder (urlpath=tree/...) address
CHAPTER_IN_URL = re.compile(
    r"((?:colab\.research\.google\.com/github/[^\"'\s)]*?/blob/[^/\"'\s)]+/"
    r"|[?&]urlpath=(?:lab/)?tree/))chapters/(\d\d_\w+\.ipynb)"
)


def chinese(app) -> bool:
    return bool(app.config.language) and app.config.language.startswith("zh")


def to_chinese(url: str) -> str:
    return CHAPTER_IN_URL.sub(r"\1chapters/zh_CN/\2", url)


def rewrite_buttons(buttons: list) -> None:
    for button in buttons:
        if isinstance(button.get("url"), str):
            button["url"] = to_chinese(button["url"])
        rewrite_buttons(button.get("buttons") or [])


def chinese_launch_links(app, pagename, templatename, context, doctree) -> None:
    if not chinese(app):
        return
    rewrite_buttons(context.get("header_buttons") or [])
    if context.get("body"):
        context["body"] = to_chinese(context["body"])


def chinese_downloads(app, exception) -> None:
    if exception is not None or not chinese(app) or app.builder.format != "html":
        return
    source = Path(app.srcdir) / "chapters" / "zh_CN"
    sources = Path(app.outdir) / "_sources" / "chapters"
    for notebook in sorted(source.glob("*.ipynb")):
        target = sources / notebook.name
        if target.exists():  # a chapter of this build
            shutil.copyfile(notebook, target)


def png_outputs(cell: dict) -> list[dict]:
    return [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]


def swap_plots(english: dict, chinese: dict) -> int:
    """Each ``image/png`` of ``english`` (data and size) from ``chinese``'s cell of the same
    id, the k-th for the k-th; returns how many were swapped."""
    cells = {c.get("id"): c for c in chinese.get("cells", [])}
    swapped = 0
    for cell in english.get("cells", []):
        mine = png_outputs(cell)
        theirs = png_outputs(cells.get(cell.get("id"), {}))
        if not mine or len(mine) != len(theirs):
            continue
        for out, new in zip(mine, theirs):
            out["data"]["image/png"] = new["data"]["image/png"]
            size = new.get("metadata", {}).get("image/png")
            if size is not None:
                out.setdefault("metadata", {})["image/png"] = size
            swapped += 1
    return swapped


CHECK_CALL = "al.exercises.check("


def swap_check_reports(english: dict, chinese: dict) -> int:
    """The ``text/plain`` result of each exercise check cell of ``english`` from
    ``chinese``'s cell of the same id; returns how many were swapped."""
    cells = {c.get("id"): c for c in chinese.get("cells", [])}
    swapped = 0
    for cell in english.get("cells", []):
        if cell.get("cell_type") != "code" or CHECK_CALL not in "".join(cell["source"]):
            continue
        theirs = cells.get(cell.get("id"), {}).get("outputs", [])
        for out, new in zip(cell.get("outputs", []), theirs):
            if "text/plain" in out.get("data", {}) and "text/plain" in new.get("data", {}):
                out["data"]["text/plain"] = new["data"]["text/plain"]
                swapped += 1
    return swapped


EXPLORER = 'class="attention-explorer '


def swap_explorers(english: dict, chinese: dict) -> int:
    """The ``text/html`` of each head explorer output (al.explore_heads) of ``english``
    from ``chinese``'s cell of the same id (its interface in Chinese); returns how many
    were swapped."""
    cells = {c.get("id"): c for c in chinese.get("cells", [])}
    swapped = 0
    for cell in english.get("cells", []):
        theirs = cells.get(cell.get("id"), {}).get("outputs", [])
        for out, new in zip(cell.get("outputs", []), theirs):
            mine = "".join(out.get("data", {}).get("text/html", []))
            if EXPLORER in mine and EXPLORER in "".join(
                new.get("data", {}).get("text/html", [])
            ):
                out["data"]["text/html"] = new["data"]["text/html"]
                swapped += 1
    return swapped


def chinese_plots(app, docname, source) -> None:
    if not chinese(app) or not docname.startswith("chapters/"):
        return
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    path = Path(app.srcdir) / "chapters" / "zh_CN" / f"{docname.split('/')[-1]}.ipynb"
    if not path.exists():
        return
    app.env.note_dependency(str(path))  # a new Chinese notebook rebuilds the page
    english = json.loads(source[0])
    wanted = sum(len(png_outputs(c)) for c in english.get("cells", []))
    notebook = json.loads(path.read_text(encoding="utf-8"))
    swapped = swap_plots(english, notebook)
    swap_check_reports(english, notebook)
    swap_explorers(english, notebook)
    if swapped != wanted:
        # not a build error: a stale Chinese notebook fails make test already
        # (tests/test_zh_notebooks.py); the page then shows those plots in English
        logger.info(
            f"{docname}: {wanted - swapped} of {wanted} plots have no Chinese drawing in "
            f"chapters/zh_CN/{path.name} (run make zh-notebooks)"
        )
    source[0] = json.dumps(english, ensure_ascii=False)


def setup(app):
    # after sphinx-book-theme's add_launch_buttons / add_header_buttons (priority 501)
    app.connect("html-page-context", chinese_launch_links, priority=900)
    app.connect("build-finished", chinese_downloads)
    app.connect("source-read", chinese_plots)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
