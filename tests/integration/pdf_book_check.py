"""The PDFs of `make pdf` are books, in English and in Chinese (run by `make pdf` after
printing them; not part of `make test`, which does not print the PDFs -- the file name keeps
pytest from collecting it there).

``tools/build_pdf.py``'s ``check_pdf`` reads ``_build/pdf/attention-course.pdf`` and
``attention-course.zh_CN.pdf`` back with pypdf: one top-level bookmark per chapter (as many
as _toc.yml has chapters) and front-matter page with its sections under it, exactly as the
printed table of contents lists them (clean titles: no doubled words, no raw TeX such as
"mathbfq", no stray space such as "√ d"; in the Chinese PDF, Chinese titles), a title page
and the contents before the first chapter, every font embedded (the Chinese text's CJK
fonts), no link to a local address (the print server), no web-only label ("Show solution",
显示答案, the browser's own "Details") in the text.

And every entry of the printed contents and every bookmark lands on a page of its own
chapter, no two of different chapters on the same place (``check_targets``): the chapters'
pages are found in the printed text (the page that starts with "Chapter 3. ..." / "第 3 章
..."), not taken from the outline or the contents, which both came from the same ids. (The
outline once matched the contents while both sent every chapter's "Terms", "Summary" and
"Exercises" to chapter 1: twelve pages of the single-page book had the same ids.)
"""

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import build_pdf  # noqa: E402


@pytest.mark.parametrize("edition", list(build_pdf.EDITIONS))
def test_the_pdf_is_a_book(edition):
    pdf = build_pdf.EDITIONS[edition]["out"]
    assert pdf.exists(), f"{pdf} is missing: run `make pdf`"
    assert pdf.with_suffix(".toc.json").exists(), "no contents beside the PDF"
    problems = build_pdf.check_pdf(pdf, edition)
    assert not problems, "\n".join(problems)


def test_the_chinese_pdf_is_the_english_book_in_chinese():
    """The same book: the same chapters and sections in the same order (the Chinese
    edition keeps the English section ids), each chapter's bookmark in Chinese."""
    english, chinese = (
        json.loads(
            build_pdf.EDITIONS[e]["out"].with_suffix(".toc.json").read_text("utf-8")
        )
        for e in ("en", "zh_CN")
    )
    assert [(e["level"], e["id"]) for e in chinese] == [
        (e["level"], e["id"]) for e in english
    ]
    chapters = [
        e["title"]
        for e in chinese
        if e["level"] == 1 and build_pdf.EDITIONS["zh_CN"]["chapter"].match(e["title"])
    ]
    assert len(chapters) == build_pdf.CHAPTERS, chapters
    assert [re.match(r"第 (\d+) 章", t)[1] for t in chapters] == [
        str(n) for n in range(1, build_pdf.CHAPTERS + 1)
    ]


def test_the_check_finds_a_stray_space():
    """The bookmark the print once wrote from `$\\sqrt d$` ("Why divide by √ d") fails."""
    assert build_pdf.STRAY_SPACE.search("5.2 Why divide by √ d")
    assert build_pdf.STRAY_SPACE.search("Chapter 3.  Masked softmax")
    assert not build_pdf.STRAY_SPACE.search("5.2 Why divide by √d")
    assert not build_pdf.STRAY_SPACE.search("第 5 章 缩放点积注意力")


@pytest.mark.parametrize("edition", list(build_pdf.EDITIONS))
def test_every_chapter_names_its_closing_sections_alike(edition):
    """The sections every chapter ends with ("Terms (English – 中文)", "Summary",
    "Exercises": one id in every page, prefixed by its page's name in the book) have the
    same title in every chapter (the Chinese edition once had 术语（English – 中文） in one
    chapter and 术语（英文 – 中文） in the others)."""
    toc = json.loads(
        build_pdf.EDITIONS[edition]["out"].with_suffix(".toc.json").read_text("utf-8")
    )
    titles = {}
    for entry in toc:
        if entry["level"] == 2:
            titles.setdefault(entry["id"].split("--")[-1], []).append(entry["title"])
    shared = {i: t for i, t in titles.items() if len(t) >= 3}
    assert shared, "no section that several chapters share"
    differ = {i: sorted(set(t)) for i, t in shared.items() if len(set(t)) > 1}
    assert not differ, differ
