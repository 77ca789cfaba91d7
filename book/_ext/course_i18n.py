"""Sphinx: what the Chinese edition needs beyond Sphinx's own gettext support.

Display math (``$$ ... $$``) is not a message: a formula is the same in every language, and
a translated math block renders as ``\\[::\\]``. ``KeepMathOutOfCatalogs`` marks math blocks
untranslatable, so the gettext builder does not extract them and the Chinese build shows
the English source's formula.

``SearchChinese`` makes Sphinx's Chinese search index (jieba) fast enough to build it on
every `make book`.

The part captions of ``_toc.yml`` ("Getting started", "Chapters", ...) are extracted into
the root page's catalog, but sphinx-external-toc inserts its toctrees after Sphinx's
``Locale`` transform has run, so they are never translated. This transform translates
them from the same catalog, after the insertion and before Sphinx collects the toctrees.
"""

from __future__ import annotations

from os import path

import sphinx.search.zh
from docutils import nodes
from sphinx import addnodes
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.util.i18n import docname_to_domain


class _WordSet(set):
    extend = set.update


class SearchChinese(sphinx.search.zh.SearchChinese):
    """Sphinx 7.4's Chinese search, with the Latin words seen so far in a set: Sphinx keeps
    them in a list and looks every word it stems up in it, which took half of the Chinese
    build's time (16 of 33 s). The index it writes is the same."""

    def init(self, options) -> None:
        super().init(options)
        self.latin_terms = _WordSet()


class KeepMathOutOfCatalogs(SphinxTransform):
    default_priority = 5  # before Sphinx's i18n transforms (10, 20)

    def apply(self, **kwargs) -> None:
        for block in self.document.findall(nodes.math_block):
            block["translatable"] = False


class TranslateCellPrompts(SphinxTransform):
    """The labels of collapsed cells ("Show solution") come from the notebooks' cell
    metadata (``mystnb: code_prompt_show``), and the label of an explanation's
    ``<details>`` is raw HTML; gettext extracts neither: the ``course_cell_prompts`` table
    of the edition's config translates them."""

    default_priority = 101

    def apply(self, **kwargs) -> None:
        table = self.config.course_cell_prompts
        if not table:
            return
        for node in self.document.findall(nodes.Element):
            for key in ("prompt_show", "prompt_hide"):
                if node.get(key) in table:
                    node[key] = table[node[key]]
        # The label of an explanation's <details> (tools/hide_answers.py) is raw HTML.
        for node in self.document.findall(nodes.raw):
            text = node.astext()
            for english, translated in table.items():
                tag = f"<summary>{english}</summary>"
                if tag in text:
                    text = text.replace(tag, f"<summary>{translated}</summary>")
            if text != node.astext():
                node.replace_self(nodes.raw(text, text, format=node.get("format")))


class TranslateTocCaptions(SphinxTransform):
    default_priority = 101  # after sphinx_external_toc's InsertToctrees (100)

    def apply(self, **kwargs) -> None:
        if not self.config.language or self.config.language == "en":
            return
        toctrees = [
            t for t in self.document.findall(addnodes.toctree) if t.get("caption")
        ]
        if not toctrees:
            return
        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        dirs = [path.join(self.env.srcdir, d) for d in self.config.locale_dirs]
        catalog, has_catalog = init_locale(dirs, self.config.language, domain)
        if not has_catalog:
            return
        for toctree in toctrees:
            translated = catalog.gettext(toctree["caption"])
            toctree["caption"] = translated
            toctree["rawcaption"] = translated


def setup(app):
    app.add_search_language(SearchChinese)
    app.add_transform(KeepMathOutOfCatalogs)
    app.add_transform(TranslateTocCaptions)
    app.add_config_value("course_cell_prompts", {}, "env", types=[dict])
    app.add_transform(TranslateCellPrompts)
    # Chinese pages launch and download the Chinese notebooks (chapters/zh_CN/)
    app.setup_extension("course_zh_notebooks")
    # the theme's strings (menus, tooltips, footer) in Chinese too
    app.setup_extension("course_zh_theme")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
