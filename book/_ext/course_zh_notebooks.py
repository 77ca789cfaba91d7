"""Sphinx, Chinese edition only: what a reader runs from a Chinese page is the Chinese notebook.

The Chinese notebooks are chapters/zh_CN/NN_name.ipynb (tools/make_zh_notebooks.py: the English
code cells and outputs, the catalogs' Chinese markdown, Chinese diagrams). On a Chinese page

* the theme's Colab and Binder buttons (sphinx-book-theme builds them from the page name) and any
  Colab/Binder link in the text (the landing page's "在 Colab 中打开第 1 章") point at
  chapters/zh_CN/NN_name.ipynb in the repository;
* the download button's ``.ipynb`` (the page source Sphinx copies to ``_sources/``) is the
  Chinese notebook: it is copied over the English one when the build finishes.

The English edition is not touched. Loaded by course_i18n.py (``app.setup_extension``).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

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


def setup(app):
    # after sphinx-book-theme's add_launch_buttons / add_header_buttons (priority 501)
    app.connect("html-page-context", chinese_launch_links, priority=900)
    app.connect("build-finished", chinese_downloads)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
