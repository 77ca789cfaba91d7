"""make test's share of the checks that cost seconds a case (a page in Chromium, a chapter
in JupyterLab or rendered by nbconvert); make long-tests, which CI runs after make test,
runs every other case, so CI still checks them all.

A chapter page in Chromium with axe-core, dark mode and the phone is about 30 s of a worker;
every page, variant and search of the site's checks came to about 17 of make test's 30
minutes of worker time on 2026-11-29 (MAINTAINERS.md, "Measured")."""

import pytest

# Site pages: the front page and a chapter with every kind of content (tables, formulas,
# code and outputs, plots, diagrams, collapsed solutions).
PAGES_IN_MAKE_TEST = ["book/intro", "chapters/03_masked_softmax"]
# Notebooks (JupyterLab, nbconvert): the first chapter, chapter 3 and the newest.
CHAPTERS_IN_MAKE_TEST = ("01_", "03_", "13_")


def in_make_test(cases, keep=1):
    """Parametrize a check: the cases in ``keep`` (a list), or the first ``keep`` (a
    number), run in make test; the others are marked slow (make long-tests)."""
    out = []
    for i, case in enumerate(cases):
        kept = case in keep if isinstance(keep, list) else i < keep
        args = case if isinstance(case, tuple) else (case,)
        out.append(case if kept else pytest.param(*args, marks=pytest.mark.slow))
    return out
