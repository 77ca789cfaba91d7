"""Sphinx: links on the site that would otherwise be dead.

* The footer of the Chinese edition (``locales/zh_CN/config.yml``) writes the repository's
  address as ``{repository_url}``; it is filled in from ``_config.yml``'s ``repository: url``
  (Jupyter Book passes it to the theme as ``repository_url``).
* The landing page's "Download the whole book (PDF)" links to ``attention-course.pdf`` at the
  site's root, which only ``make pdf`` (and the pages workflow) writes. When the file is not
  there, the link is written without its ``href`` (``data-course-pdf`` keeps the address and
  ``hidden`` hides it), so a ``make book`` site has no dead link; ``tools/build_pdf.py`` turns
  it back into a link when it copies the PDF into the site. The Chinese landing page links
  the Chinese PDF, ``attention-course.zh_CN.pdf``, beside it, the same way.
* A chapter's launch menu (sphinx-book-theme's "launch-buttons" group) gets one more entry,
  "Practice copy": the chapter's practice copy in Colab (tools/make_practice.py:
  chapters/practice/NN_name.ipynb, the Chinese edition's chapters/zh_CN/practice/), next to
  the theme's Colab button, whose address it follows.
"""

from __future__ import annotations

import re
from pathlib import Path

PDF = "attention-course.pdf"  # and the Chinese edition's attention-course.zh_CN.pdf
PDF_LINK = re.compile(r'<a href="((?:\.\./)+)(attention-course(?:\.zh_CN)?\.pdf)"')


def fill_repository_url(app, config) -> None:
    options = config.html_theme_options or {}
    footer = options.get("extra_footer")
    url = options.get("repository_url")
    if (
        not url
    ):  # the edition's overrides may replace the theme options Jupyter Book wrote
        import yaml

        with open(Path(app.srcdir) / "_config.yml", encoding="utf-8") as f:
            url = yaml.safe_load(f)["repository"]["url"]
    if footer and url and "{repository_url}" in footer:
        options["extra_footer"] = footer.replace("{repository_url}", url)


def site_root(app) -> Path:
    """The root of the published site: _build/html for English, _build/html for the Chinese
    edition too (it is built into _build/zh and copied to _build/html/zh)."""
    if app.config.language and app.config.language != "en":
        return Path(app.srcdir) / "_build" / "html" / "zh"
    return Path(app.outdir)


def pdf_link_only_when_present(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body") or ""
    if not PDF_LINK.search(body):
        return
    page_dir = (site_root(app) / pagename).parent

    def replace(match):
        target = (page_dir / (match.group(1) + match.group(2))).resolve()
        if target.exists():
            return match.group(0)
        return f'<a data-course-pdf="{match.group(1)}{match.group(2)}" hidden'

    context["body"] = PDF_LINK.sub(replace, body)


CHAPTER_NOTEBOOK = re.compile(r"/chapters/(\d\d_\w+\.ipynb)$")


def practice_button(app, pagename, templatename, context, doctree) -> None:
    """The launch menu of a chapter page: its practice copy in Colab."""
    from sphinx.locale import get_translation

    translate = get_translation("booktheme")
    for group in context.get("header_buttons") or []:
        if group.get("label") != "launch-buttons":
            continue
        colab = next(
            (b for b in group.get("buttons", []) if "colab" in str(b.get("url"))), None
        )
        match = CHAPTER_NOTEBOOK.search(str((colab or {}).get("url", "")))
        if match is None:
            return
        chinese = bool(app.config.language) and app.config.language.startswith("zh")
        folder = "chapters/zh_CN/practice/" if chinese else "chapters/practice/"
        group["buttons"].append(
            {
                "type": "link",
                "text": translate("Practice copy"),
                "tooltip": translate(
                    "Open this chapter's practice copy (no solutions) in Colab"
                ),
                "icon": colab.get("icon"),
                "url": colab["url"][: match.start()] + "/" + folder + match.group(1),
            }
        )


def setup(app):
    app.connect("config-inited", fill_repository_url)
    app.connect("html-page-context", pdf_link_only_when_present)
    # after sphinx-book-theme's launch buttons (500), before course_zh_notebooks (900)
    app.connect("html-page-context", practice_button, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
