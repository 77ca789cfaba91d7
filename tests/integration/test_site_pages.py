"""Every page of the book in headless Chromium: what ``test_site.py`` describes for each
page (its own module, so that the two test workers share the browser checks)."""

import pytest
from test_site import (  # noqa: F401
    ARTIFACTS,
    CONFIG,
    DARK_PAGES,
    HTML,
    IN_MAKE_TEST,
    PAGES,
    PHONE,
    REPO,
    ROOT,
    as_phone,
    check_accessibility,
    check_figures,
    check_fits_a_phone,
    check_page_weight,
    in_make_test,
    visit,
)


@pytest.mark.parametrize("doc", in_make_test(PAGES, keep=IN_MAKE_TEST))
def test_page(browser, site_url, doc):
    """The page at 1280 px, then (DARK_PAGES) dark, then the same load turned into a phone
    at 390 px (as_phone)."""
    url = f"{site_url}/{doc}.html"
    loaded = []
    context, page, problems = visit(browser, url, loaded=loaded)
    try:
        math = page.evaluate(
            """() => {
                const nodes = [...document.querySelectorAll('.math')];
                return {total: nodes.length,
                        raw: nodes.filter(n => !n.querySelector('mjx-container')).map(n => n.textContent.slice(0, 60)),
                        errors: document.querySelectorAll('mjx-merror').length,
                        mathjax: !!window.MathJax};
            }"""
        )
        if math["total"]:
            assert math["mathjax"], f"{doc}: the page has math but no MathJax"
            assert not math["raw"], f"{doc}: math left as raw TeX: {math['raw'][:3]}"
            assert math["errors"] == 0, f"{doc}: {math['errors']} MathJax errors"
        broken = page.evaluate(
            "() => [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
        )
        assert not broken, f"{doc}: images that did not load: {broken}"
        # Every image says what it shows: a screen reader reads the alt text (myst-nb's
        # default is a file path).
        alts = page.eval_on_selector_all(
            ".bd-article img", "els => els.map(e => [e.getAttribute('src'), e.alt])"
        )
        undescribed = [
            (src, alt)
            for src, alt in alts
            if len(alt.split()) < 4
            or alt.endswith((".png", ".svg"))
            or "/" in alt.split()[0]
        ]
        assert not undescribed, (
            f"{doc}: images without a meaningful alt text: {undescribed[:5]}"
        )
        # One search field, and no header bar above the page (it held only a second
        # search field).
        searches = page.eval_on_selector_all(
            "button.search-button-field, .bd-search input",
            "els => els.filter(e => e.offsetParent !== null && e.getBoundingClientRect().width > 0).length",
        )
        assert searches == 1, f"{doc}: {searches} visible search fields at 1280 px"
        assert (
            page.evaluate(
                "() => document.querySelector('#pst-header').getBoundingClientRect().height"
            )
            == 0
        )
        if doc.startswith(
            "chapters/"
        ):  # the Colab install cell is in the notebook (and the download), not the page
            assert "google.colab" not in page.inner_text(".bd-article"), (
                f"{doc}: the Colab install cell is shown"
            )
        if doc.startswith("chapters/"):
            colab = page.eval_on_selector_all(
                "a[href*='colab.research.google.com']", "els => els.map(e => e.href)"
            )
            expected = (
                f"https://colab.research.google.com/github/{REPO}/blob/main/{doc}.ipynb"
            )
            assert expected in colab, (
                f"{doc}: no Colab link to {expected} (found {colab})"
            )
            assert (ROOT / f"{doc}.ipynb").exists()
            binder = page.eval_on_selector_all(
                "a[href*='mybinder.org']", "els => els.map(e => e.href)"
            )
            assert any(f"{doc}.ipynb" in b for b in binder), f"{doc}: no Binder link"
            assert page.query_selector(
                f"a[href$='{doc.split('/')[-1]}.ipynb'][download], a[href*='_sources/{doc}.ipynb']"
            ), f"{doc}: no .ipynb download button"
        assert page.query_selector(f"a[href='{CONFIG['repository']['url']}']"), (
            f"{doc}: no repository button"
        )
        assert page.query_selector("a[href*='/issues/new']"), f"{doc}: no issues button"
        check_accessibility(page, doc)
        # At 1280 px every plot and diagram fits: none carries a hint or scrolls.
        check_figures(page, doc, 1280)
        # Code is formatted to 88 columns and the code font fits 88 to the column, so at
        # 1280 px no code cell or printed output hides part of a line.
        clipped = page.evaluate(
            """() => [...document.querySelectorAll('.bd-article pre')]
                .filter(p => p.scrollWidth > p.clientWidth + 1)
                .map(p => p.textContent.trim().slice(0, 50))"""
        )
        assert not clipped, f"{doc}: code lines cut at 1280 px: {clipped[:3]}"
        footer = page.inner_text(".bd-footer-content")
        assert "CC BY-SA 4.0" in footer and "MIT" in footer, (
            f"{doc}: no licence in the footer"
        )
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        name = doc.replace("/", "__")
        # The first screen (a full-page shot of a 30,000 px chapter costs seconds).
        page.screenshot(path=str(ARTIFACTS / f"{name}.light.png"))
        assert not problems, f"{doc}: " + "\n".join(problems)
        as_phone(context, page)
        check_fits_a_phone(page, doc)
        if doc.startswith("chapters/"):
            check_page_weight(page, doc, loaded)
        page.screenshot(path=str(ARTIFACTS / f"{name}.light.{PHONE}.png"))
        assert not problems, f"{doc} ({PHONE} px): " + "\n".join(problems)
    finally:
        context.close()
    if doc in DARK_PAGES:
        context, page, problems = visit(browser, url, scheme="dark")
        try:
            dark = page.evaluate("() => document.documentElement.dataset.theme")
            assert dark == "dark"
            # In dark mode only the colours change: axe's contrast rule alone.
            check_accessibility(page, f"{doc} (dark)", rules=["color-contrast"])
            page.screenshot(path=str(ARTIFACTS / f"{name}.dark.png"))
            assert not problems, f"{doc} (dark): " + "\n".join(problems)
        finally:
            context.close()


def other_pages() -> list[str]:
    """The pages of both editions that are not in _toc.yml (the general index, search,
    the module index): the toc's pages are checked at 390 px above and in test_site_zh."""
    found = sorted(
        str(p.relative_to(HTML).with_suffix(""))
        for p in HTML.rglob("*.html")
        if not {"_static", "_sources", "_images"} & set(p.relative_to(HTML).parts)
    )
    toc = set(PAGES) | {f"zh/{d}" for d in PAGES} | {"index", "zh/index"}  # redirects
    return [d for d in found if d not in toc]


@pytest.mark.slow  # make long-tests (IN_MAKE_TEST in test_site.py)
def test_every_other_page_fits_a_phone(browser, site_url):
    """Together with test_page and test_site_zh's test_chinese_page (two Chinese pages in
    make test, the others in make long-tests), every page of both editions is measured
    at 390 px."""
    docs = other_pages()
    assert any(d.endswith("genindex") for d in docs), docs
    context, page, problems = visit(browser, f"{site_url}/{docs[0]}.html", width=PHONE)
    try:
        for doc in docs:
            # networkidle: a page's late requests (its favicon) finish before the next
            # page is opened; "load" let the next goto abort them (net::ERR_ABORTED)
            page.goto(f"{site_url}/{doc}.html", wait_until="networkidle")
            check_fits_a_phone(page, doc)
        assert not problems, "\n".join(problems)
    finally:
        context.close()
