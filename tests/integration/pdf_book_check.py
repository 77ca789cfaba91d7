"""The PDF of `make pdf` is a book (run by `make pdf` after printing it; not part of
`make test`, which does not print the PDF -- the file name keeps pytest from collecting it
there).

``tools/build_pdf.py``'s ``check_pdf`` reads ``_build/pdf/attention-course.pdf`` back with
pypdf: one top-level bookmark per chapter and front-matter page with its sections under it,
exactly as the printed table of contents lists them (clean titles: no doubled words, no raw
TeX), a title page and the contents before the first chapter, no link to a local address
(the print server), no web-only label ("Show solution") in the text.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import build_pdf  # noqa: E402


def test_the_pdf_is_a_book():
    pdf = build_pdf.DEFAULT_OUT
    assert pdf.exists(), f"{pdf} is missing: run `make pdf`"
    assert pdf.with_suffix(".toc.json").exists(), "no contents beside the PDF"
    problems = build_pdf.check_pdf(pdf)
    assert not problems, "\n".join(problems)
