"""The website as a reader gets it, checked in headless Chromium.

For every page of ``_toc.yml``: it loads with status 200, logs no console error, every
request it makes is for the site itself (a request to any other host fails the test) and
succeeds, its math is typeset by the site's own MathJax with no raw TeX left, and every
image loads. Chapter pages carry a Colab link to the chapter's notebook in the
repository. Search finds each chapter. A screenshot of every page, in light and in dark
mode, is saved under ``artifacts/screenshots/``.
"""

import json
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
ARTIFACTS = ROOT / "artifacts" / "screenshots"

TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
PAGES = [TOC["root"]] + [c["file"] for part in TOC["parts"] for c in part["chapters"]]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPO = CONFIG["repository"]["url"].removeprefix("https://github.com/")


def visit(browser, url: str, scheme: str = "light"):
    """Open ``url`` and collect everything that went wrong while it loaded."""
    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, color_scheme=scheme
    )
    problems = []

    def route(r):
        host = urlparse(r.request.url).hostname
        if host not in ("127.0.0.1", "localhost"):
            problems.append(f"request to another host: {r.request.url}")
            return r.abort()
        return r.continue_()

    context.route("**/*", route)
    page = context.new_page()
    page.on(
        "console",
        lambda m: m.type == "error" and problems.append(f"console error: {m.text}"),
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on(
        "requestfailed",
        lambda r: problems.append(f"request failed: {r.url} ({r.failure})"),
    )
    page.on(
        "response",
        lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"),
    )
    response = page.goto(url, wait_until="networkidle")
    assert response is not None and response.status == 200, (
        f"{url}: status {response and response.status}"
    )
    page.wait_for_function(
        "() => window.MathJax === undefined || (MathJax.startup && MathJax.startup.promise)"
    )
    page.evaluate("() => window.MathJax ? MathJax.startup.promise : null")
    return context, page, problems


@pytest.mark.parametrize("doc", PAGES)
def test_page(browser, site_url, doc):
    url = f"{site_url}/{doc}.html"
    context, page, problems = visit(browser, url)
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
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        name = doc.replace("/", "__")
        page.screenshot(path=str(ARTIFACTS / f"{name}.light.png"), full_page=True)
        assert not problems, f"{doc}: " + "\n".join(problems)
    finally:
        context.close()
    context, page, problems = visit(browser, url, scheme="dark")
    try:
        assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
        page.screenshot(path=str(ARTIFACTS / f"{name}.dark.png"), full_page=True)
        assert not problems, f"{doc} (dark): " + "\n".join(problems)
    finally:
        context.close()


def test_site_root_redirects_to_the_introduction(browser, site_url):
    context, page, problems = visit(browser, f"{site_url}/")
    try:
        page.wait_for_url("**/book/intro.html")
        page.wait_for_load_state("networkidle")
        assert not problems, "\n".join(problems)
        for url in (f"{site_url}/favicon.ico", f"{site_url}/_static/favicon.svg"):
            response = page.request.get(url)
            assert response.status == 200, f"{url}: {response.status}"
        assert page.query_selector("link[rel='icon']"), "no favicon link"
    finally:
        context.close()


SEARCH = {
    "chapters/01_queries_keys_values": "Zachary",
    "chapters/02_nadaraya_watson": "Epanechikov",
    "chapters/03_masked_softmax": "repeat_interleave",
    "chapters/04_additive_attention": "Bahdanau",
    "chapters/05_scaled_dot_product": "Gram",
    "chapters/06_self_attention": "permutation",
    "chapters/07_multi_head": "MultiheadAttention",
    "chapters/08_grouped_query": "Mistral",
    "chapters/09_watch_attention_learn": "uptraining",
}


@pytest.mark.parametrize("doc, word", SEARCH.items())
def test_search_finds_chapter(browser, site_url, doc, word):
    context, page, problems = visit(browser, f"{site_url}/search.html?q={word}")
    try:
        page.wait_for_selector("#search-results ul li a", timeout=20_000)
        hits = page.eval_on_selector_all(
            "#search-results ul li a", "els => els.map(e => e.getAttribute('href'))"
        )
        assert any(doc in h for h in hits), (
            f"search for {word!r} did not return {doc}: {json.dumps(hits[:10])}"
        )
        assert not problems, "\n".join(problems)
    finally:
        context.close()


def test_every_toc_page_was_built():
    for doc in PAGES:
        assert (HTML / f"{doc}.html").exists(), doc
