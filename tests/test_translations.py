"""The Chinese edition's catalogs (locales/zh_CN/LC_MESSAGES/) against the English source.

Every English message of every page (except the API reference, which stays English) has a
reviewed, non-fuzzy translation that keeps its math, code, citations and links, parses as
Markdown, uses full-width punctuation and the glossary's terms. An English edit turns its
message fuzzy or new (``make translations``), and this test fails, naming the page and the
English text, until the translation is updated in the same commit.

The message templates come from the gettext build that ``make book`` runs (_build/gettext).
"""

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import check_translations as ct  # noqa: E402

POT = ROOT / "_build" / "gettext"
PAGES = sorted(
    p.relative_to(POT).with_suffix("").as_posix() for p in POT.rglob("*.pot")
)
TERMS = ct.glossary_terms()


def test_message_templates_were_built():
    assert PAGES, (
        "_build/gettext is empty: `make book` (or `make test`) builds it first"
    )
    assert "book/api" not in PAGES, (
        "the API reference stays English (tools/build_book.py)"
    )
    catalogs = {
        p.relative_to(ct.PO).with_suffix("").as_posix() for p in ct.PO.rglob("*.po")
    }
    assert catalogs == set(PAGES), (
        f"catalogs without a page: {sorted(catalogs - set(PAGES))}; "
        f"pages without a catalog: {sorted(set(PAGES) - catalogs)}"
    )


@pytest.mark.parametrize("page", PAGES)
def test_every_message_is_translated_and_checked(page):
    problems = ct.check([page])
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:40])


@pytest.mark.parametrize(
    "msgid, msgstr, expected",
    [
        ("The bandwidth $h$.", "", "untranslated"),
        ("The bandwidth $h$.", "带宽 $k$。", "math/code/role/link changed"),
        ("Call `f(x)` here.", "在这里调用 `g(x)`。", "math/code/role/link changed"),
        ("As in {cite}`vaswani2017`.", "如文献所述。", "math/code/role/link changed"),
        (
            "See [the glossary](glossary.md).",
            "见[术语表](api.md)。",
            "math/code/role/link",
        ),
        (
            "The “bandwidth” is $h$.",
            "**“带宽”**是 $h$。",
            "emphasis that does not parse",
        ),
        ("The bandwidth is $h$.", "带宽是 $h$.", "ASCII punctuation"),
        ("The bandwidth, $h$.", "带宽, $h$。", "ASCII punctuation"),
        ('A "bandwidth".', '一个"带宽"。', "ASCII punctuation"),
        (
            "The attention pooling of $q$.",
            "$q$ 的加权平均。",
            "glossary: “attention pooling”",
        ),
        ("The KV cache grows.", "缓存增长。", "glossary: “KV cache”"),
        ("The bandwidth grows with n.", "The bandwidth grows with n.", "no Chinese"),
        ("The formula.", "公式：\n\n$$x$$", "display math"),
    ],
)
def test_the_checker_catches(msgid, msgstr, expected):
    problems = ct.problems_of("chapters/x", msgid, msgstr, False, TERMS)
    assert any(p.startswith(expected) for p in problems), problems


def test_the_checker_accepts_a_good_translation():
    msgid = "The **attention pooling** of $q$ uses `softmax` {cite}`b2014`, see [here](a.md)."
    msgstr = "查询 $q$ 的**注意力汇聚**使用 `softmax` {cite}`b2014`，见[此处](a.md)。"
    assert ct.problems_of("chapters/x", msgid, msgstr, False, TERMS) == []
    assert ct.problems_of("chapters/x", msgid, msgstr, True, TERMS) == [
        "fuzzy (the English changed since it was translated)"
    ]


def test_english_search_index_holds_no_translation():
    """The English site is built as before: its search index has no Chinese word that
    the English source does not have (a catalog leaking into the English build would)."""
    index = (ROOT / "_build" / "html" / "searchindex.js").read_text(encoding="utf-8")
    data = json.loads(index[index.index("(") + 1 : index.rindex(")")])
    source = "".join(
        p.read_text(encoding="utf-8")
        for p in [*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("book/*.md")]
    )
    # (a term with no document is a leftover that Sphinx keeps from an earlier build's index)
    chinese = [
        t
        for t, docs in data["terms"].items()
        if docs != [] and re.search(r"[\u3400-\u9fff]", t)
    ]
    foreign = [t for t in chinese if t not in source]
    assert not foreign, f"Chinese words in the English search index: {foreign[:10]}"
    assert all(
        not re.search(r"[\u3400-\u9fff]", t) or t in source for t in data["titles"]
    )
