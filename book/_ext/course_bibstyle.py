"""The bibliography labelled as the chapters cite: "Vaswani et al., 2017", not [VSP+17].

The chapters cite with plain links whose text is the author and year ("[Vaswani et al.,
2017](https://arxiv.org/abs/1706.03762)"), so that a notebook opened alone reads the same;
pybtex's ``alpha`` labels on the references page did not match them. This registers the
pybtex formatting style ``course_author_year`` (``_config.yml``: ``bibtex_default_style``):
the ``unsrt`` entries, sorted by author, year and title, each labelled

* one author: "Nadaraya, 1964"; two: "Jain and Wallace, 2019"; more: "Vaswani et al., 2017"
  (the Chinese edition as its chapters write them: "Vaswani 等人，2017", and so are its
  pages' {cite} citations, which sphinxcontrib-bibtex's ``author_year`` wrote in English);
* a letter after the year where two entries would get the same label ("DeepSeek-AI, 2024a",
  "DeepSeek-AI, 2024b", in the order of the list).

tests/test_portable.py checks that every citation link's text names its entry's authors and
year as this label does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pybtex.plugin import find_plugin, register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting.author_year_title import SortingStyle
from sphinxcontrib.bibtex.plugin import register_plugin as register_reference_style
from sphinxcontrib.bibtex.style.referencing import BracketStyle, PersonStyle
from sphinxcontrib.bibtex.style.referencing.author_year import (
    AuthorYearReferenceStyle,
)


# One plain-text backend for every label: ``Text.render_as("text")`` looks the backend up
# among the installed packages' entry points on each call, 65 ms each, which was about 38 s
# of every build of the site (566 calls).
_TEXT = find_plugin("pybtex.backends", "text")()


def _plain(latex: str) -> str:
    return Text.from_latex(latex).render(_TEXT)


# How each edition's chapters write a citation (the Chinese catalogs: "Vaswani 等人，2017").
FORMATS = {
    "en": ("{0}, {year}", "{0} and {1}, {year}", "{0} et al., {year}"),
    "zh_CN": ("{0}，{year}", "{0} 和 {1}，{year}", "{0} 等人，{year}"),
}
language = "en"  # the edition being built: set from Sphinx's config (setup below)


def author_year(entry, language: str | None = None) -> str:
    """The label of one entry without its letter: "Vaswani et al., 2017"."""
    one, two, more = FORMATS.get(language or globals()["language"], FORMATS["en"])
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_plain(" ".join(p.prelast_names + p.last_names)) for p in people]
    year = entry.fields.get("year", "n.d.")
    if not names:
        names = [_plain(entry.fields.get("organization", entry.key))]
    form = one if len(names) == 1 else two if len(names) == 2 else more
    return form.format(*names[:2], year=year)


class AuthorYearLabels(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        labels = [author_year(e) for e in entries]
        counts = Counter(labels)
        seen = Counter()
        for label in labels:
            if counts[label] > 1:
                seen[label] += 1
                yield label + "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
            else:
                yield label


class AuthorYearSorting(SortingStyle):
    """pybtex's author, year, title order, on the names as printed: "{DeepSeek-AI}"
    sorts under D, not after Z."""

    def person_key(self, person):
        return _plain(super().person_key(person)).lower()


class AuthorYearStyle(UnsrtStyle):
    default_label_style = "course_author_year"
    default_sorting_style = "course_author_year"


def register() -> None:
    for kind, klass in (
        ("pybtex.style.labels", AuthorYearLabels),
        ("pybtex.style.sorting", AuthorYearSorting),
        ("pybtex.style.formatting", AuthorYearStyle),
    ):
        register_plugin(kind, "course_author_year", klass)  # False if already there


register()


@dataclass
class ChineseAuthorYearReferences(AuthorYearReferenceStyle):
    """sphinxcontrib-bibtex's ``author_year`` citations ({cite}`vaswani2017` in the book's
    pages) written as the Chinese edition's labels: "[Vaswani 等人，2017]"."""

    bracket_parenthetical: BracketStyle = field(
        default_factory=lambda: BracketStyle(sep="；")
    )
    person: PersonStyle = field(
        default_factory=lambda: PersonStyle(
            sep="、", sep2=" 和 ", last_sep=" 和 ", other=" 等人"
        )
    )
    author_year_sep: str = "，"
    post_text_sep: str = "，"


register_reference_style(
    "sphinxcontrib.bibtex.style.referencing",
    "course_author_year_zh_CN",
    ChineseAuthorYearReferences,
)


def _language(app, config) -> None:
    globals()["language"] = config.language or "en"
    if language == "zh_CN" and config.bibtex_reference_style == "author_year":
        config.bibtex_reference_style = "course_author_year_zh_CN"


def setup(app):
    app.connect("config-inited", _language)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
