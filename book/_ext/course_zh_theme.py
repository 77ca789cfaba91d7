"""Sphinx, Chinese edition only: the page around the text in Chinese too.

The theme's own strings come from three catalogs: Sphinx's domain ``sphinx`` (which
pydata-sphinx-theme extends: "Color mode", "© Copyright ..."), sphinx-book-theme's ``booktheme``
("Repository", "Open issue", "Launch on", "Print to PDF", whose zh_CN catalog says 列印成 PDF, the
Taiwan usage) and sphinx-togglebutton's ``togglebutton``. Some are missing in zh_CN, some read as
zh_TW. ``course_theme_translations`` in locales/zh_CN/config.yml overrides them message by
message (domain -> msgid -> Chinese), ahead of the themes' catalogs.

``course_page_titles``: the title a page shows in the sidebar and the previous/next links when
the page itself stays English (the API reference, tools/build_book.py UNTRANSLATED).

The theme's few hard-coded English attributes are passed through ``_()`` by the templates
book/_templates/toggle-*-sidebar.html, sbt-sidebar-nav.html ("Main") and layout.html ("Page"),
and myst-nb's "Toggle hidden content" label is replaced in the page body; sphinx-togglebutton's
script writes the same label on the buttons it adds, which a small script of the Chinese pages
translates once they are there (``togglebutton`` messages). Loaded by course_i18n.py
(``app.setup_extension``).
"""

from __future__ import annotations

import json
from gettext import NullTranslations

import sphinx.locale
from docutils import nodes


class Messages(NullTranslations):
    def __init__(self, messages: dict):
        super().__init__()
        self._messages = dict(messages)

    def gettext(self, message):
        if message in self._messages:
            return self._messages[message]
        return super().gettext(message)

    def ngettext(self, singular, plural, n):
        if n == 1 and singular in self._messages:
            return self._messages[singular]
        return super().ngettext(singular, plural, n)


def chinese(app) -> bool:
    return bool(app.config.language) and app.config.language.startswith("zh")


def override_theme_messages(app) -> None:
    if not chinese(app):
        return
    for domain, messages in (app.config.course_theme_translations or {}).items():
        key = ("general", domain)
        translator = sphinx.locale.translators.get(key)
        if translator is not None and isinstance(
            getattr(translator, "_catalog", None), dict
        ):
            # the object the templates' gettext was installed with: change it in place
            translator._catalog.update(messages)
        else:
            ours = Messages(messages)
            if translator is not None:
                ours.add_fallback(translator)
            sphinx.locale.translators[key] = ours


def page_titles(app, env) -> None:
    if not chinese(app):
        return
    for docname, title in (app.config.course_page_titles or {}).items():
        if docname in env.titles:
            env.titles[docname] = nodes.title(title, title)
        # the sidebar's entry is the first reference of the page's own table of contents
        toc = env.tocs.get(docname)
        first = next(iter(toc.findall(nodes.reference)), None) if toc else None
        if first is not None:
            first.children = []
            first += nodes.Text(title)


def body_labels(app, pagename, templatename, context, doctree) -> None:
    if chinese(app) and context.get("body"):
        label = (app.config.course_theme_translations or {}).get("togglebutton", {})
        if "Toggle hidden content" in label:
            context["body"] = context["body"].replace(
                'aria-label="Toggle hidden content"',
                f'aria-label="{label["Toggle hidden content"]}"',
            )


# Runs after every DOMContentLoaded handler (sphinx-togglebutton adds its buttons in one).
SCRIPT_LABELS = """document.addEventListener('DOMContentLoaded', () => setTimeout(() => {
    const labels = %s;
    for (const name of ['aria-label', 'title']) {
        for (const el of document.querySelectorAll('[' + name + ']')) {
            const value = labels[el.getAttribute(name)];
            if (value) el.setAttribute(name, value);
        }
    }
}));"""


def script_labels(app) -> None:
    """The labels the extensions' scripts write in English, translated on the page."""
    if not chinese(app):
        return
    labels = (app.config.course_theme_translations or {}).get("togglebutton", {})
    if labels:
        app.add_js_file(
            None, body=SCRIPT_LABELS % json.dumps(labels, ensure_ascii=False)
        )


def setup(app):
    app.add_config_value("course_theme_translations", {}, "html", types=[dict])
    app.add_config_value("course_page_titles", {}, "env", types=[dict])
    app.connect("builder-inited", override_theme_messages)
    app.connect("builder-inited", script_labels)
    app.connect("env-updated", page_titles)
    app.connect("html-page-context", body_labels)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
