"""A chapter rendered alone by ``jupyter nbconvert --to html`` -- no options, as a learner
runs it -- keeps every answer closed until the reader opens it, in a real browser.

nbconvert honours none of the metadata that closes a solution in JupyterLab, Colab and on
the website, and shows every cell's code and output; tools/hide_answers.py puts a toggle
cell before each solution (a closed ``<details class="course-answer">`` and a ``<style>``
that hides the next cell while it is closed). tests/test_portable.py checks that markup in
the HTML; this test opens each page in headless Chromium and fails on

* a solution whose code or output is visible before its toggle is opened,
* an explanation (``<details class="explanation">``) open or showing its text,
* a toggle that is not visible, or a solution still hidden after its toggle is opened
  (an answer the reader cannot reach).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

# Renders twelve chapters with nbconvert and opens them in Chromium (~45 s): make long-tests
# (CI), so that make test stays within its budget; test_portable.py checks the toggles
# statically in make test.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))

INSPECT = """() => {
    const visible = (e) => !!e && e.checkVisibility({contentVisibilityAuto: true,
                                                     visibilityProperty: true});
    const solutions = [...document.querySelectorAll('.jp-Cell.celltag_hide-cell')];
    const explanations = [...document.querySelectorAll('details.explanation')];
    return {
        solutions: solutions.map((cell) => {
            const toggle = cell.previousElementSibling
                ?.querySelector('details.course-answer > summary');
            return {
                code: [...cell.querySelectorAll('.jp-InputArea-editor')].some(visible),
                output: [...cell.querySelectorAll('.jp-OutputArea-output')].some(visible),
                outputs: cell.querySelectorAll('.jp-OutputArea-output').length,
                toggle: visible(toggle),
                text: cell.innerText.trim().slice(0, 60),
            };
        }),
        explanations: explanations.map((d) => d.open
            || [...d.children].filter((c) => c.tagName !== 'SUMMARY').some(visible)),
    };
}"""

OPEN_ALL = """() => {
    document.querySelectorAll('.jp-Cell.celltag_hide-cell').forEach((cell) => {
        cell.previousElementSibling
            ?.querySelector('details.course-answer > summary')?.click();
    });
}"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Each chapter copied alone into an empty folder and rendered by nbconvert's
    HTMLExporter with its defaults (what ``jupyter nbconvert --to html`` writes)."""
    from nbconvert import HTMLExporter

    out = tmp_path_factory.mktemp("nbconvert")
    exporter = HTMLExporter()
    rendered = {}
    for path in CHAPTERS:
        lone = out / path.name
        shutil.copy(path, lone)
        html, _ = exporter.from_filename(str(lone))
        page = lone.with_suffix(".html")
        page.write_text(html, encoding="utf-8")
        rendered[path.name] = page
    return rendered


def test_answers_closed_in_the_page_nbconvert_writes(browser, pages):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    # nothing from the network: the page's MathJax and require.js are not needed here
    context.route("http*://**", lambda route: route.abort())
    problems = []
    checked = 0
    try:
        page = context.new_page()
        for name, html in pages.items():
            page.goto(html.as_uri(), wait_until="load")
            before = page.evaluate(INSPECT)
            for i, s in enumerate(before["solutions"]):
                checked += 1
                if s["code"] or s["output"]:
                    problems.append(f"{name}: solution {i + 1} shown: {s['text']!r}")
                if not s["toggle"]:
                    problems.append(f"{name}: solution {i + 1} has no visible toggle")
            if any(before["explanations"]):
                problems.append(f"{name}: an explanation shown before it is opened")
            page.evaluate(OPEN_ALL)
            after = page.evaluate(INSPECT)
            for i, s in enumerate(after["solutions"]):
                if not s["code"] or (s["outputs"] and not s["output"]):
                    problems.append(
                        f"{name}: solution {i + 1} still hidden when opened"
                    )
    finally:
        context.close()
    assert checked, "no solution found in any chapter"
    assert not problems, "\n".join(problems[:20])
