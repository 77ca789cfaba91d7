"""The website as a reader gets it, checked in headless Chromium.

For every page of ``_toc.yml``: it loads with status 200, logs no console error, every
request it makes is for the site itself (a request to any other host fails the test) and
succeeds, its math is typeset by the site's own MathJax with no raw TeX left and no
formula in the Tab order, every image loads, Chinese text is marked ``lang="zh-Hans"``,
the footer names the licence, and axe-core finds no serious or critical accessibility
violation (in dark mode too, for the front matter and three chapters). Chapter pages carry a Colab link to the chapter's
notebook in the repository and weigh at most 2.6 MB with everything they load. On a
phone (390 px) the navigation and contents drawers open; on a desktop the sidebar
collapses; the search field stays reachable; a figure too wide for the column scrolls
with a hint (one that fits does not; checked at 1280 and 390 px); nothing makes a page
wider than a 390 px phone; choosing a section closes the contents drawer; print wraps code. Search finds each chapter. A screenshot of the first
screen of every page (1280 and 390 px, light; dark where checked) is saved under
``artifacts/screenshots/``.
"""

import gzip
import json
import re
from pathlib import Path
from urllib.parse import quote, urlparse

import pytest
import yaml
from make_test_share import PAGES_IN_MAKE_TEST, in_make_test

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
ARTIFACTS = ROOT / "artifacts" / "screenshots"

TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
PAGES = [TOC["root"]] + [c["file"] for part in TOC["parts"] for c in part["chapters"]]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPO = CONFIG["repository"]["url"].removeprefix("https://github.com/")
CHAPTERS = [p for p in PAGES if p.startswith("chapters/")]
# Dark mode changes only colours, and the stylesheet is the same on every page: its
# contrast check runs on every front-matter page and on the chapters with the most kinds
# of content (tables, code listings and outputs, plots, diagrams), not on all ten.
DARK_PAGES = [p for p in PAGES if not p.startswith("chapters/")] + [
    CHAPTERS[0],
    CHAPTERS[2],
    CHAPTERS[-1],
]
AXE = ROOT / ".vendor" / "npm" / "node_modules" / "axe-core" / "axe.min.js"
PHONE = 390
# About 1.3 MB of it is the theme and MathJax; chapter 2 (twelve plots, heat maps in full colour since
# the palette banded their colour bars) weighs 2.51 MB.
EXPLORER = re.compile(r'<div class="attention-explorer .*?</script></div>', re.S)
MAX_EXPLORER_GZIP = 450_000
MAX_PAGE_BYTES = 2_600_000
HAN = r"[\u3400-\u9fff]"

# make test's share of the browser checks (tests/make_test_share.py): the pages of
# IN_MAKE_TEST, or the first case of a parametrized check; make long-tests the others.
IN_MAKE_TEST = PAGES_IN_MAKE_TEST


def visit(
    browser,
    url: str,
    scheme: str = "light",
    width: int = 1280,
    loaded=None,
    wait="load",
):
    """Open ``url`` and collect everything that went wrong while it loaded; ``loaded``: a
    list that receives (bytes, url) of every response the page receives."""
    phone = width <= PHONE
    context = browser.new_context(
        viewport={"width": width, "height": 844 if phone else 900},
        color_scheme=scheme,
        is_mobile=phone,
        has_touch=phone,
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

    def failed(r):
        # The browser fetches the favicon after "load"; a test that navigates on cancels
        # it (net::ERR_ABORTED). That is not the site's failure: a missing favicon is an
        # HTTP 404 (below), and test_site_root_redirects_to_the_introduction fetches it.
        if r.failure == "net::ERR_ABORTED" and "/favicon." in r.url:
            return
        problems.append(f"request failed: {r.url} ({r.failure})")

    page.on("requestfailed", failed)
    page.on(
        "response",
        lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"),
    )
    if loaded is not None:
        page.on(
            "requestfinished",
            lambda r: loaded.append((r.sizes()["responseBodySize"], r.url)),
        )
    # "load": the page and everything it links; MathJax's own components come after it,
    # and the promise below waits for them (networkidle would add half a second a page).
    response = page.goto(url, wait_until=wait)
    assert response is not None and response.status == 200, (
        f"{url}: status {response and response.status}"
    )
    wait_for_mathjax(page)
    return context, page, problems


def wait_for_mathjax(page):
    """Until MathJax has loaded its components (its font file among them) and typeset the
    page. "networkidle" alone is not enough on a busy machine: MathJax requests its
    components one after another, and a pause of 500 ms between two of them let a test
    navigate on and abort the next (net::ERR_ABORTED, a failure of the test, not the site)."""
    page.wait_for_function(
        "() => window.MathJax === undefined || (MathJax.startup && MathJax.startup.promise)"
    )
    page.evaluate("() => window.MathJax ? MathJax.startup.promise : null")


def as_phone(context, page):
    """Turn an open page into the phone ``visit(..., width=PHONE)`` opens, without loading
    it again (a chapter's load costs seconds): the same Chromium emulation a Playwright
    context with ``is_mobile`` and ``has_touch`` applies -- the meta viewport honoured,
    overlay scrollbars, touch -- at 390 x 844. Measured on every page of the book: the same
    layout, figures and pixels as a fresh phone visit."""
    page.set_viewport_size({"width": PHONE, "height": 844})  # what screenshots use
    cdp = context.new_cdp_session(page)
    cdp.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": PHONE, "height": 844, "deviceScaleFactor": 1, "mobile": True},
    )
    cdp.send(
        "Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 1}
    )
    assert page.evaluate("() => matchMedia('(pointer: coarse)').matches")


# What course.js calls legible: a figure is not shown below this scale of its intended
# width (a plot: half its 2x pixel width; a diagram: the SVG's own size).
MIN_SCALE = {"diagram": 0.7, "plot": 0.65}

FIGURES = """(minScale) => [...document.querySelectorAll('.bd-article img')]
    .filter(i => i.naturalWidth && !i.closest('.btn, .attention-explorer'))  // (its own)
    .map(i => {
        const wide = i.closest('.course-wide');
        const strip = wide && wide.querySelector('.course-wide-strip');
        const hint = wide && wide.querySelector('.course-wide-hint');
        const kind = i.closest('.cell_output, .output') ? 'plot' : 'diagram';
        const meant = parseFloat(i.dataset.courseWidth || i.getAttribute('width') || i.style.width)
            || (kind === 'plot' ? i.naturalWidth / 2 : i.naturalWidth);
        let box = (wide || i).parentElement;
        while (box && (getComputedStyle(box).display.startsWith('inline') || !box.clientWidth)) box = box.parentElement;
        const cs = getComputedStyle(box);
        const column = box.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
        const stops = wide ? [...wide.querySelectorAll('a[href], [tabindex]')]
            .filter(e => e.tabIndex >= 0).length : 0;
        return {name: i.src.split('/').pop().slice(0, 24), kind, meant, column,
                shown: i.getBoundingClientRect().width,
                fits: column >= meant * minScale[kind] - 0.5,
                wrapped: !!wide, scrolls: !!strip && strip.scrollWidth > strip.clientWidth + 1,
                hintInLink: !!(hint && hint.closest('a')), hasHint: !!hint, stops,
                region: !!(wide && wide.querySelector('[role=region]'))};
    })"""


def check_figures(page, doc, width):
    """Every figure at its intended width, or narrowed to the column down to a legible
    scale; only one that does not fit then scrolls in a strip, with a hint after it (not
    inside the image's link) and one Tab stop (the link); one that fits carries no hint
    and does not scroll."""
    figures = page.evaluate(FIGURES, MIN_SCALE)
    where = f"{doc} at {width} px"
    for f in figures:
        assert f["shown"] <= f["meant"] + 0.5, (
            f"{where}: {f['name']} drawn wider than meant: {f}"
        )
        if f["fits"]:
            assert not f["wrapped"] and not f["scrolls"], (
                f"{where}: {f['name']} fits the column but carries a hint or scrolls: {f}"
            )
            assert f["shown"] >= min(f["meant"], f["column"]) - 1, f"{where}: {f}"
        else:
            assert f["wrapped"] and f["hasHint"] and not f["hintInLink"], (
                f"{where}: {f}"
            )
            assert abs(f["shown"] - f["meant"] * MIN_SCALE[f["kind"]]) <= 1, (
                f"{where}: {f}"
            )
            assert f["stops"] <= 1 and not f["region"], f"{where}: {f}"
    return figures


def check_fits_a_phone(page, doc):
    """At 390 px nothing makes the page wider than the screen (a phone's browser widens its
    layout viewport to the content instead of scrolling, so the page is measured against
    390 px, not innerWidth), and the figures are as check_figures says."""
    page.wait_for_timeout(200)
    check_figures(page, doc, PHONE)
    overflow = page.evaluate(
        "(w) => Math.max(document.documentElement.scrollWidth, window.innerWidth) - w",
        PHONE,
    )
    assert overflow <= 1, (
        f"{doc}: the page is {overflow} px wider than the {PHONE} px screen"
    )


def check_accessibility(page, doc, rules=None):
    """axe-core (no serious or critical violation), formulas out of the Tab order, and
    every run of Chinese characters inside an element with lang="zh-Hans"."""
    assert AXE.exists(), f"{AXE} is missing: `make` installs axe-core with npm"
    page.add_script_tag(path=str(AXE))
    options = {"resultTypes": ["violations"]}
    if rules:
        options["runOnly"] = {"type": "rule", "values": rules}
    result = page.evaluate("(o) => axe.run(document, o)", options)
    bad = [
        f"{v['impact']} {v['id']}: {v['help']} -- {[n['target'] for n in v['nodes'][:3]]}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical") or v["id"] == "landmark-unique"
    ]
    assert not bad, f"{doc}: axe-core violations:\n" + "\n".join(bad)
    # A displayed formula wider than the column scrolls, so it may be a Tab stop; no
    # other formula is.
    stops = page.evaluate(
        """() => [...document.querySelectorAll('mjx-container')].filter(m =>
               m.tabIndex >= 0 && m.hasAttribute('tabindex')
               && !(m.scrollWidth > m.clientWidth + 1)).length"""
    )
    assert stops == 0, f"{doc}: {stops} formulas are Tab stops"
    untagged = page.evaluate(
        """(han) => {
            const re = new RegExp(han);
            const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
            const out = [];
            while (walker.nextNode()) {
                const n = walker.currentNode, p = n.parentElement;
                if (!re.test(n.data) || !p || p.closest('script, style')) continue;
                const lang = p.closest('[lang]');
                if (!lang || !lang.lang.startsWith('zh')) out.push(n.data.trim().slice(0, 30));
            }
            return out;
        }""",
        HAN,
    )
    assert not untagged, f"{doc}: Chinese text without lang='zh-Hans': {untagged[:5]}"


def test_site_root_redirects_to_the_introduction(browser, site_url):
    # (networkidle: the redirect has happened before the MathJax checks of visit run)
    context, page, problems = visit(browser, f"{site_url}/", wait="networkidle")
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


@pytest.mark.parametrize("doc, word", in_make_test(list(SEARCH.items())))
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


@pytest.mark.parametrize(
    "query, doc",
    in_make_test(
        [
            ("delta rule", "chapters/13_linear_attention"),
            ("sliding window", "chapters/11_attention_in_a_real_model"),
            ("KVCache", "chapters/08_grouped_query"),
        ]
    ),
)
def test_a_concept_search_ranks_its_chapter_above_the_reference_pages(
    browser, site_url, query, doc
):
    """A learner searching a concept lands on the chapter that teaches it first, not on
    the API reference or the bibliography, which name it too (book/_ext/search_scorer.js);
    they still come, below."""
    context, page, problems = visit(browser, f"{site_url}/search.html?q={quote(query)}")
    try:
        page.wait_for_function(
            "() => document.querySelectorAll('#search-results ul li a').length > 1"
            " && !document.querySelector('#search-progress')?.textContent.includes('Prep')",
            timeout=20_000,
        )
        page.wait_for_timeout(500)  # the list is filled one hit at a time
        hits = page.eval_on_selector_all(
            "#search-results ul li a", "els => els.map(e => e.getAttribute('href'))"
        )
        found = [i for i, h in enumerate(hits) if doc in h]
        refs = [
            i for i, h in enumerate(hits) if "book/api" in h or "book/references" in h
        ]
        assert found, f"{query!r} did not find {doc}: {json.dumps(hits[:10])}"
        assert refs, (
            f"{query!r}: the reference pages should still be listed: {hits[:10]}"
        )
        assert found[0] < refs[0], f"{query!r}: {json.dumps(hits[:10])}"
        assert not problems, "\n".join(problems)
    finally:
        context.close()


@pytest.mark.parametrize(
    "word, edition",
    in_make_test(
        [("rotary", ""), ("rotary", "zh/"), ("softmax", ""), ("softmax", "zh/")]
    ),
)
def test_search_snippets_show_the_text_around_the_match(
    browser, site_url, edition, word
):
    """Each hit's snippet is the page's text around the word, not the page's top: the
    header's "中文 / English" switch or the print-only contents ("Contents 10.1 The online
    softmax ..."). Sphinx looks for the stemmed word ("rotari"), which the text does not
    contain, and then showed the start of [role=main] (course.js, 6)."""
    context, page, problems = visit(
        browser, f"{site_url}/{edition}search.html?q={word}"
    )
    try:
        page.wait_for_function(
            """() => {
                const status = document.querySelector('#search-results .search-summary');
                const items = [...document.querySelectorAll('#search-results ul li')];
                return status && /\\d/.test(status.textContent) && items.length &&
                    items.every(li => li.querySelector('span, p.context'));
            }""",
            timeout=30_000,
        )
        # each hit's snippet, and the text of its page's print-only contents
        snippets = page.evaluate(
            """async () => {
                const out = [];
                for (const li of document.querySelectorAll('#search-results ul li')) {
                    const p = li.querySelector('p.context');
                    if (!p) continue;
                    const href = li.querySelector('a').getAttribute('href');
                    const html = await (await fetch(href)).text();
                    const doc = new DOMParser().parseFromString(html, 'text/html');
                    const toc = doc.querySelector('#jb-print-toc');
                    out.push([href, p.textContent, toc ? toc.textContent : '']);
                }
                return out;
            }"""
        )
        assert len(snippets) >= 2, snippets
        for href, text, contents in snippets:
            text = " ".join(text.split())
            contents = " ".join(contents.split()).lower()
            at = text.lower().find(word)
            around = text.lower()[max(at - 15, 0) : at + len(word) + 15]
            assert at < 0 or around not in contents, (
                f"the snippet of {href} is the page's print-only contents: {text!r}"
            )
            assert "中文 / English" not in text and "English / 中文" not in text, (
                href,
                text,
            )
            assert word in text.lower(), (
                f"{edition}search.html?q={word}: the snippet of {href} does not show "
                f"the word: {text!r}"
            )
        assert not problems, "\n".join(problems)
    finally:
        context.close()


def test_every_toc_page_was_built():
    for doc in PAGES:
        assert (HTML / f"{doc}.html").exists(), doc


def settle(page):
    """Scroll to the bottom and back so that everything a reader would see has loaded."""
    page.evaluate(
        """async () => {
            for (let y = 0; y < document.body.scrollHeight; y += 800) {
                window.scrollTo(0, y);
                await new Promise(r => setTimeout(r, 20));
            }
            window.scrollTo(0, 0);
        }"""
    )
    page.wait_for_load_state("networkidle")


def check_page_weight(page, doc, loaded):
    """Everything a chapter page loads (HTML, CSS, scripts, fonts, images; uncompressed,
    as served here), once scrolled through, is at most 2.6 MB (test_site_pages.py runs it
    on every chapter)."""
    settle(page)
    total = sum(n for n, _ in loaded)
    # A head explorer (al.explore_heads, chapter 11) is the page's interactive part, with
    # its own budget: at most 450 kB gzipped each; the rest of the page keeps this one.
    source = (HTML / f"{doc}.html").read_text(encoding="utf-8")
    for fragment in EXPLORER.findall(source):
        packed = len(gzip.compress(fragment.encode(), 9))
        assert packed <= MAX_EXPLORER_GZIP, (
            f"{doc}: a head explorer of {packed:,d} B gzipped"
        )
        total -= len(fragment.encode())
    heaviest = sorted(loaded, reverse=True)[:5]
    assert total <= MAX_PAGE_BYTES, (
        f"{doc}: {total / 1e6:.2f} MB > {MAX_PAGE_BYTES / 1e6} MB; heaviest: {heaviest}"
    )
    assert not any("fontawesome" in u or u.endswith(".woff2") for _, u in loaded), (
        "Font Awesome's script or web fonts were loaded: icons come from icons.css"
    )


def dialog_visible(page, dialog_id):
    return page.evaluate(
        """(id) => {
            const d = document.getElementById(id);
            const r = d.getBoundingClientRect();
            return d.open && r.width > 150 && r.height > 300
                && getComputedStyle(d).visibility === 'visible';
        }""",
        dialog_id,
    )


def test_drawers_open_on_a_phone(browser, site_url):
    doc = CHAPTERS[0]
    context, page, problems = visit(browser, f"{site_url}/{doc}.html", width=PHONE)
    try:
        nav = page.locator(".bd-header-article .primary-toggle")
        assert nav.is_visible(), "no navigation (☰) button at 390 px"
        nav.tap()
        page.wait_for_timeout(300)
        assert dialog_visible(page, "pst-primary-sidebar-modal"), (
            "☰ did not open the navigation"
        )
        link = page.locator(
            "#pst-primary-sidebar-modal a[href$='02_nadaraya_watson.html']"
        )
        assert link.is_visible(), "the navigation drawer does not list chapter 2"
        page.keyboard.press("Escape")
        page.wait_for_timeout(300)
        assert not page.evaluate(
            "() => document.getElementById('pst-primary-sidebar-modal').open"
        )
        contents = page.locator(".bd-header-article .secondary-toggle")
        assert contents.is_visible(), "no contents button at 390 px"
        contents.tap()
        page.wait_for_timeout(300)
        assert dialog_visible(page, "pst-secondary-sidebar-modal"), (
            "the contents drawer did not open"
        )
        assert page.locator(
            "#pst-secondary-sidebar-modal a.nav-link"
        ).first.is_visible()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "drawer.contents.390.png"))
        # Choosing a section closes the drawer, and the page does not shift sideways.
        page.locator("#pst-secondary-sidebar-modal a.nav-link").nth(2).tap()
        page.wait_for_timeout(400)
        assert not page.evaluate(
            "() => document.getElementById('pst-secondary-sidebar-modal').open"
        ), "the contents drawer stays open after a section is chosen"
        assert page.evaluate("() => window.scrollY") > 0, "the page did not go there"
        assert page.evaluate("() => window.visualViewport.offsetLeft") == 0
        # A tap leaves no tooltip over the neighbouring buttons.
        tooltips = page.evaluate(
            """() => [...document.querySelectorAll('.tooltip')]
                .filter(t => getComputedStyle(t).display !== 'none').length"""
        )
        assert tooltips == 0, f"{tooltips} tooltips shown after a tap"
        assert not problems, "\n".join(problems)
    finally:
        context.close()


@pytest.mark.slow  # make long-tests (IN_MAKE_TEST)
def test_sidebar_collapses_on_a_desktop(browser, site_url):
    context, page, problems = visit(browser, f"{site_url}/{CHAPTERS[0]}.html")
    try:
        shown = """() => {
            const s = document.getElementById('pst-primary-sidebar');
            return s.getBoundingClientRect().right > 150
                && getComputedStyle(s).visibility === 'visible';
        }"""
        article = (
            "() => document.querySelector('.bd-article').getBoundingClientRect().left"
        )
        assert page.evaluate(shown)
        left = page.evaluate(article)
        page.click(".bd-header-article .primary-toggle")
        page.wait_for_timeout(800)
        assert not page.evaluate(shown), (
            "the collapse-sidebar button did not collapse it"
        )
        assert page.evaluate(article) < left - 100, "the page did not take the room"
        page.click(".bd-header-article .primary-toggle")
        page.wait_for_timeout(800)
        assert page.evaluate(shown), "the sidebar did not come back"
        assert not problems, "\n".join(problems)
    finally:
        context.close()


@pytest.mark.parametrize("width", in_make_test([1280, PHONE], keep=0))
def test_search_stays_reachable_on_a_long_chapter(browser, site_url, width):
    context, page, problems = visit(
        browser, f"{site_url}/{CHAPTERS[0]}.html", width=width
    )
    try:
        page.evaluate("() => window.scrollTo(0, document.body.scrollHeight / 2)")
        page.wait_for_timeout(300)
        search = page.locator(
            ".search-button-field:visible, .bd-header-article .search-button:visible"
        ).first
        box = search.bounding_box()
        assert box and 0 <= box["y"] < 900 and box["width"] > 0, (
            f"no search field in view at {width} px after scrolling: {box}"
        )
        search.click()
        page.wait_for_timeout(300)
        assert page.locator("#pst-search-dialog input").is_visible(), (
            "search did not open"
        )
        assert not problems, "\n".join(problems)
    finally:
        context.close()


@pytest.mark.slow  # make long-tests (IN_MAKE_TEST)
def test_no_chapter_line_peeks_above_the_sidebar_search(browser, site_url):
    """The sidebar scrolls to the current chapter (chapter 8); its sticky search field then
    covers the sidebar's top padding too: no half-cut line of the list shows above it."""
    context, page, problems = visit(browser, f"{site_url}/{CHAPTERS[7]}.html")
    try:
        page.wait_for_timeout(300)
        from io import BytesIO

        from PIL import Image

        above = []
        for offset in range(200, 260, 6):  # wherever a line of the list may fall
            strip = page.evaluate(
                """(offset) => {
                    const side = document.querySelector('.bd-sidebar-primary');
                    side.scrollTop = offset;
                    side.dispatchEvent(new Event('scroll'));
                    const r = side.getBoundingClientRect();
                    const pad = parseFloat(getComputedStyle(side).paddingTop);
                    return {x: r.left + 8, y: r.top, width: r.width - 16, height: pad - 1};
                }""",
                offset,
            )
            page.wait_for_timeout(50)
            shot = Image.open(BytesIO(page.screenshot(clip=strip))).convert("RGB")
            if len(set(shot.getdata())) > 1:
                above.append(offset)
        assert not above, f"text shows above the sticky search at scrollTop {above}"
        assert not problems, "\n".join(problems)
    finally:
        context.close()


@pytest.mark.parametrize("doc", in_make_test([TOC["root"], CHAPTERS[0]], keep=0))
def test_phone_in_dark_mode(browser, site_url, doc):
    context, page, problems = visit(browser, f"{site_url}/{doc}.html", "dark", PHONE)
    try:
        check_fits_a_phone(page, doc)
        # plots keep a white background behind their black labels
        backgrounds = page.eval_on_selector_all(
            ".bd-article .cell_output img",
            "els => [...new Set(els.map(e => getComputedStyle(e).backgroundColor))]",
        )
        assert backgrounds in ([], ["rgb(255, 255, 255)"]), backgrounds
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        name = doc.replace("/", "__")
        page.screenshot(path=str(ARTIFACTS / f"{name}.dark.{PHONE}.png"))
        assert not problems, "\n".join(problems)
    finally:
        context.close()


@pytest.mark.slow  # make long-tests (IN_MAKE_TEST)
def test_as_phone_is_a_fresh_phone_visit(browser, site_url):
    """test_site_pages measures each page on a phone by turning its 1280 px load into one
    (as_phone): that must be what a phone's own load shows -- the same media, layout,
    figures and pixels."""
    doc = CHAPTERS[0]  # long, with formulas, plots and wide diagrams
    probe = """() => ({width: document.documentElement.scrollWidth, inner: innerWidth,
        height: document.documentElement.scrollHeight,
        coarse: matchMedia('(pointer: coarse)').matches,
        hover: matchMedia('(hover: hover)').matches,
        wide: document.querySelectorAll('.course-wide').length})"""
    seen = []
    for switch in (False, True):
        url = f"{site_url}/{doc}.html"
        context, page, problems = visit(browser, url, width=1280 if switch else PHONE)
        try:
            if switch:
                as_phone(context, page)
            page.wait_for_timeout(200)
            seen.append(
                (
                    page.evaluate(probe),
                    page.evaluate(FIGURES, MIN_SCALE),
                    page.screenshot(),
                )
            )
            assert not problems, "\n".join(problems)
        finally:
            context.close()
    (fresh, fresh_figures, fresh_shot), (turned, turned_figures, turned_shot) = seen
    assert fresh["width"] <= PHONE and fresh["coarse"] and not fresh["hover"], fresh
    assert turned == fresh
    assert turned_figures == fresh_figures
    assert turned_shot == fresh_shot, "the first screen differs"


@pytest.mark.slow  # make long-tests (IN_MAKE_TEST)
def test_print_wraps_code_lines(browser, site_url):
    context, page, problems = visit(browser, f"{site_url}/{CHAPTERS[0]}.html")
    try:
        page.emulate_media(media="print")
        modes = page.eval_on_selector_all(
            ".bd-article pre",
            "els => [...new Set(els.map(e => getComputedStyle(e).whiteSpace))]",
        )
        assert modes == ["pre-wrap"], f"code in print is {modes}, not wrapped"
        assert not problems, "\n".join(problems)
    finally:
        context.close()


def test_landing_page_starts_a_reader(browser, site_url):
    for width in (1280, PHONE):
        context, page, problems = visit(
            browser, f"{site_url}/{TOC['root']}.html", width=width
        )
        try:
            start = page.locator("a:has-text('Start with chapter 1')")
            assert start.first.is_visible()
            assert start.first.get_attribute("href").endswith(
                "01_queries_keys_values.html"
            )
            colab = f"https://colab.research.google.com/github/{REPO}/blob/main/chapters/01_queries_keys_values.ipynb"
            assert page.locator(f"a[href='{colab}']").count() >= 1, (
                "no Open in Colab link"
            )
            assert page.locator(".bd-article table").count() == 0, (
                "the chapter map is a table"
            )
            title = CONFIG["title"]
            shown = page.evaluate(
                """(title) => [...document.querySelectorAll('body *')].filter(e =>
                    e.children.length === 0 && e.textContent.trim() === title
                    && e.getBoundingClientRect().top < window.innerHeight
                    && e.getBoundingClientRect().height > 0
                    && e.getBoundingClientRect().width > 0
                    && getComputedStyle(e).visibility === 'visible').length""",
                title,
            )
            assert shown <= 1, f"the course title is shown {shown} times above the fold"
            overflow = page.evaluate(
                "() => document.documentElement.scrollWidth - window.innerWidth"
            )
            assert overflow <= 1, f"the landing page scrolls sideways at {width} px"
            assert not problems, "\n".join(problems)
        finally:
            context.close()
    nxt = page_next(browser, site_url, TOC["root"])
    assert nxt.endswith("setup.html"), f"'Next' from the landing page leads to {nxt}"


def page_next(browser, site_url, doc):
    context, page, _ = visit(browser, f"{site_url}/{doc}.html")
    try:
        return page.get_attribute("a.right-next", "href")
    finally:
        context.close()
