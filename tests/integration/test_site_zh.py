"""The Chinese edition (中文版, ``_build/html/zh/``) in headless Chromium, and what it shares
with the English one: every page in Chinese (``lang="zh-CN"``), math typeset, images with
Chinese alt text, no console error, Chinese search, and the "中文 / English" switch, which
keeps the reader's section because both editions keep the English section ids."""

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from test_site import (
    ARTIFACTS,
    IN_MAKE_TEST,
    PAGES,
    PHONE,
    ROOT,
    check_fits_a_phone,
    in_make_test,
    settle,
    visit,
    wait_for_mathjax,
)

HTML = ROOT / "_build" / "html"
ZH = HTML / "zh"
ZH_CONFIG = ROOT / "locales" / "zh_CN" / "config.yml"
CJK = re.compile(r"[\u3400-\u9fff]")
ENGLISH_ONLY = {"book/api"}  # the API reference stays English (README)
CHAPTERS = [p for p in PAGES if p.startswith("chapters/")]


def section_ids(path: Path) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', path.read_text(encoding="utf-8"))


def test_every_page_has_a_chinese_edition():
    missing = [doc for doc in PAGES if not (ZH / f"{doc}.html").exists()]
    assert not missing, (
        f"no Chinese page for {missing} (make book builds _build/html/zh)"
    )


@pytest.mark.parametrize("doc", PAGES)
def test_both_editions_have_the_same_section_ids(doc):
    """The switch keeps #anchors: a translated heading keeps its English id."""
    assert section_ids(ZH / f"{doc}.html") == section_ids(HTML / f"{doc}.html")


# Every Chinese page on a phone is about 100 s of one test worker: make test checks the
# pages of IN_MAKE_TEST (test_site.py), make long-tests every other one.
@pytest.mark.parametrize("doc", in_make_test(PAGES, keep=IN_MAKE_TEST))
def test_chinese_page(browser, site_url, doc):
    """Each Chinese page, on a phone (390 px: Chinese tables and the header's switch must
    fit too; the English pages are checked at 1280 px, dark and 390 px by test_site_pages)."""
    context, page, problems = visit(browser, f"{site_url}/zh/{doc}.html", width=PHONE)
    try:
        assert page.evaluate("() => document.documentElement.lang") == "zh-CN"
        math = page.evaluate(
            """() => {
                const nodes = [...document.querySelectorAll('.math')];
                return {raw: nodes.filter(n => !n.querySelector('mjx-container')).length,
                        errors: document.querySelectorAll('mjx-merror').length};
            }"""
        )
        assert math == {"raw": 0, "errors": 0}, f"zh/{doc}: math not typeset: {math}"
        images = page.eval_on_selector_all(
            ".bd-article img",
            "els => els.map(e => [e.getAttribute('src'), e.alt, e.complete && e.naturalWidth > 0])",
        )
        assert all(ok for _, _, ok in images), f"zh/{doc}: images that did not load"
        if doc not in ENGLISH_ONLY:
            english_alt = [(src, alt) for src, alt, _ in images if not CJK.search(alt)]
            assert not english_alt, (
                f"zh/{doc}: images without a Chinese alt text: {english_alt[:3]}"
            )
            diagrams = [src for src, _, _ in images if src.endswith(".svg")]
            assert all(src.endswith(".zh_CN.svg") for src in diagrams), (
                f"zh/{doc}: English diagrams on a Chinese page: {diagrams}"
            )
            prose = page.evaluate(
                """() => [...document.querySelectorAll('.bd-article p, .bd-article li, .bd-article h1')]
                    .filter(e => !e.closest('.cell_output, pre, table, .citation'))
                    .map(e => e.innerText).join(' ')"""
            )
            assert len(CJK.findall(prose)) > 0.3 * len(
                re.findall(r"[A-Za-z]", prose)
            ), f"zh/{doc}: the text is mostly not Chinese"
            # collapsed solutions: their label comes from cell metadata (course_cell_prompts)
            summaries = page.eval_on_selector_all(
                "summary .admonition-title", "els => els.map(e => e.textContent.trim())"
            )
            assert not [t for t in summaries if not CJK.search(t)], summaries[:3]
        # what course.js writes (a wide figure's hint) is in the page's language too
        hints = page.eval_on_selector_all(
            ".course-wide-hint", "els => els.map(e => e.textContent)"
        )
        assert not [h for h in hints if not CJK.search(h)], hints[:2]
        captions = page.eval_on_selector_all(
            ".bd-sidebar-primary p.caption", "els => els.map(e => e.textContent.trim())"
        )
        assert captions and all(CJK.search(c) for c in captions), (
            f"zh/{doc}: untranslated part captions in the navigation: {captions}"
        )
        assert "注意力" in page.title()
        placeholder = page.eval_on_selector_all(
            "input[name=q]", "els => els.map(e => e.placeholder)"
        )
        assert placeholder and all(CJK.search(p) for p in placeholder), placeholder
        english = page.locator(".course-lang-switch a[hreflang=en]")
        href = english.get_attribute("href")
        status = page.evaluate("async (h) => (await fetch(h)).status", href)
        assert status == 200 and href.endswith(f"{doc}.html"), (href, status)
        # every aria-label, title, alt, placeholder: Chinese or a code name, once the
        # scripts ran (sphinx-togglebutton's buttons, Bootstrap's tooltips)
        english = english_labels(page, doc)
        assert not english, f"zh/{doc}: English labels: {english[:8]}"
        check_fits_a_phone(page, f"zh/{doc}")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(
            path=str(ARTIFACTS / f"zh__{doc.replace('/', '__')}.{PHONE}.png")
        )
        assert not problems, "\n".join(problems)
    finally:
        context.close()


def test_the_switch_keeps_the_section(browser, site_url):
    doc = CHAPTERS[2]
    anchor = section_ids(HTML / f"{doc}.html")[3]
    context, page, problems = visit(browser, f"{site_url}/{doc}.html#{anchor}")
    try:
        page.click(".course-lang-switch a[hreflang=zh-CN]")
        page.wait_for_load_state("networkidle")
        assert page.url.endswith(f"/zh/{doc}.html#{anchor}"), page.url
        assert page.locator(f"section#{anchor}").count() == 1
        assert page.evaluate("() => document.documentElement.lang") == "zh-CN"
        # And back: the link to the English page takes the anchor along (the click itself
        # is cancelled after the page's own handler has run; that page was loaded above).
        back = page.evaluate(
            """() => {
                const a = document.querySelector('.course-lang-switch a[hreflang=en]');
                document.addEventListener('click', e => e.preventDefault(), {once: true});
                a.click();
                return a.href;
            }"""
        )
        assert back == f"{site_url}/{doc}.html#{anchor}", back
        assert not problems, "\n".join(problems)
    finally:
        context.close()


SECTION_AT_TOP = """() => {
    // the reader's section: the last one whose heading has reached the reading area's top,
    // 2 rem under the sticky top bar (where a link to a section puts its heading: 64 px)
    const bar = document.querySelector('.bd-header-article').getBoundingClientRect().bottom;
    const top = Math.max(bar, 64) + 32;
    let here = null;
    for (const s of document.querySelectorAll('.bd-article section[id]')) {
        if (s.querySelector('h1, h2, h3, h4').getBoundingClientRect().top < top) here = s.id;
    }
    return here;
}"""


@pytest.mark.slow  # make long-tests (IN_MAKE_TEST in test_site.py)
def test_the_switch_keeps_the_section_after_plain_scrolling(browser, site_url):
    """No #anchor in the URL: the reader scrolled half-way down a Chinese chapter, switches to
    English and back, and lands in the same section each time (course.js)."""
    doc = CHAPTERS[2]
    context, page, problems = visit(browser, f"{site_url}/zh/{doc}.html")
    try:
        page.evaluate(
            "() => window.scrollTo(0, document.documentElement.scrollHeight / 2)"
        )
        page.wait_for_timeout(200)
        here = page.evaluate(SECTION_AT_TOP)
        assert here and "#" not in page.url, (here, page.url)
        for lang, prefix in (("en", ""), ("zh-CN", "/zh")):
            page.click(f".course-lang-switch a[hreflang={lang}]")
            page.wait_for_load_state("networkidle")
            wait_for_mathjax(page)  # before the next click navigates away
            assert page.url == f"{site_url}{prefix}/{doc}.html#{here}", (
                lang,
                page.url,
                here,
            )
            top = page.evaluate(
                f"() => document.getElementById({json.dumps(here)}).getBoundingClientRect().top"
            )
            assert 0 <= top < 150, f"{lang}: section {here} not at the top ({top} px)"
        assert not problems, "\n".join(problems)
    finally:
        context.close()


@pytest.mark.parametrize("offset", in_make_test([-8, 4, 30], keep=0))
def test_the_switch_keeps_a_section_whose_heading_sits_at_the_top_bar(
    browser, site_url, offset
):
    """The reader stopped where a section's heading shows just under the sticky top bar
    (the bar's height, 64 px, is also where a link to the section puts it), or is just
    hidden under the bar: the switch keeps that section, not the one before it (the
    section counts from the bar's bottom, not from the window's top)."""
    doc = next(c for c in CHAPTERS if c.startswith("chapters/11_"))
    ids = section_ids(HTML / f"{doc}.html")
    here = ids[4]  # 11.4, with the sections 11.1-11.3 before it
    context, page, problems = visit(browser, f"{site_url}/zh/{doc}.html")
    try:
        settle(
            page
        )  # every image loaded: nothing above the heading moves it afterwards
        page.evaluate(
            """([id, offset]) => {
                const bar = document.querySelector('.bd-header-article').getBoundingClientRect();
                const h = document.getElementById(id).querySelector('h1, h2, h3, h4');
                window.scrollBy(0, h.getBoundingClientRect().top - (bar.bottom + offset));
            }""",
            [here, offset],
        )
        page.wait_for_timeout(200)
        top = page.evaluate(
            """(id) => document.getElementById(id).querySelector('h1, h2, h3, h4')
                .getBoundingClientRect().top -
                document.querySelector('.bd-header-article').getBoundingClientRect().bottom""",
            here,
        )
        assert abs(top - offset) < 2, f"could not scroll the heading there ({top} px)"
        # a click where the link is (page.click would first scroll it "into view", moving
        # the page under the sticky bar by hundreds of pixels)
        box = page.locator(".course-lang-switch a[hreflang=en]").bounding_box()
        with page.expect_navigation():
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_load_state("networkidle")
        assert page.url == f"{site_url}/{doc}.html#{here}", (offset, here, page.url)
        assert not problems, "\n".join(problems)
    finally:
        context.close()


@pytest.mark.parametrize(
    "word, doc",
    in_make_test(
        [
            ("注意力汇聚", "chapters/01_queries_keys_values"),
            ("带宽", "chapters/02_nadaraya_watson"),
            ("键值缓存", "chapters/08_grouped_query"),
            # chapter 13's terms, whole words for jieba because the glossary lists them
            ("线性注意力", "chapters/13_linear_attention"),
            ("衰减门", "chapters/13_linear_attention"),
            ("随机特征", "chapters/13_linear_attention"),
            ("联想记忆", "chapters/13_linear_attention"),
        ]
    ),
)
def test_chinese_search_finds_the_chapter(browser, site_url, word, doc):
    context, page, problems = visit(
        browser, f"{site_url}/zh/search.html?q={quote(word)}"
    )
    try:
        page.wait_for_selector("#search-results ul li a", timeout=20_000)
        hits = page.eval_on_selector_all(
            "#search-results ul li a", "els => els.map(e => e.getAttribute('href'))"
        )
        assert any(doc in h for h in hits[:5]), (
            f"search for {word} did not return {doc} among the first five: {json.dumps(hits[:10])}"
        )
        assert not problems, "\n".join(problems)
    finally:
        context.close()


@pytest.mark.parametrize("doc", CHAPTERS)
def test_chinese_page_runs_the_chinese_notebook(doc):
    """The Chinese page's Colab and Binder buttons open chapters/zh_CN/ (the Chinese notebook,
    tools/make_zh_notebooks.py), its practice copy button chapters/zh_CN/practice/, its .ipynb
    download is that notebook, and the English page's buttons still open the English one
    (book/_ext/course_zh_notebooks.py)."""
    name = doc.split("/")[-1]
    html = (ZH / f"{doc}.html").read_text(encoding="utf-8")
    launch = re.findall(r'href="(https://(?:colab|mybinder)[^"]+)"', html)
    # Colab and Binder open the Chinese notebook, "练习版" its practice copy
    # (book/_ext/course_links.py, tools/make_practice.py)
    assert len(launch) == 3, launch
    assert all(u.endswith(f"chapters/zh_CN/{name}.ipynb") for u in launch[:2]), launch
    assert launch[2].endswith(f"chapters/zh_CN/practice/{name}.ipynb"), launch
    assert (ROOT / "chapters" / "zh_CN" / "practice" / f"{name}.ipynb").exists()
    english = (HTML / f"{doc}.html").read_text(encoding="utf-8")
    english_launch = re.findall(r'href="(https://(?:colab|mybinder)[^"]+)"', english)
    assert "zh_CN" not in " ".join(english_launch)
    assert english_launch[2].endswith(f"chapters/practice/{name}.ipynb"), english_launch
    assert (ROOT / "chapters" / "practice" / f"{name}.ipynb").exists()
    download = ZH / "_sources" / f"{doc}.ipynb"
    assert (
        download.read_bytes()
        == (ROOT / "chapters" / "zh_CN" / f"{name}.ipynb").read_bytes()
    )


def test_chinese_landing_page_opens_the_chinese_notebook():
    html = (ZH / "book" / "intro.html").read_text(encoding="utf-8")
    colab = re.findall(r'href="(https://colab[^"]+)"', html)
    assert colab and all("/chapters/zh_CN/" in u for u in colab), colab


@pytest.mark.parametrize("doc", ["book/intro", CHAPTERS[0]])
def test_the_page_around_the_text_is_chinese_too(doc):
    """Menus, tooltips, footer and sidebar of a Chinese page: the themes' English strings and
    their Taiwan-usage zh_CN messages are overridden (locales/zh_CN/config.yml,
    book/_ext/course_zh_theme.py)."""
    html = (ZH / f"{doc}.html").read_text(encoding="utf-8")
    english = [
        s
        for s in (
            ">Repository<",
            ">Open issue<",
            "Launch on",
            "Color mode",
            "System Settings",
            "Toggle primary sidebar",
            "Toggle secondary sidebar",
            "Link to this heading",
            "© Copyright",
            ">API reference<",
            "列印成",
        )
        if s in html
    ]
    assert not english, f"zh/{doc}: {english}"
    assert "打印为 PDF" in html and "© 版权所有" in html and "API 参考" in html


# --- What a screen reader says and a tooltip shows on a Chinese page (issue 25): Chinese too.
LABEL_ATTRIBUTES = (
    "aria-label",
    "aria-description",
    "aria-roledescription",
    "title",
    "alt",
    "placeholder",
    "data-bs-original-title",  # Bootstrap moves a tooltip's title here
    "data-tooltip",
    "data-toggle-hint",
)
# the labels the themes hard-code (no catalog): single words the word-run rule below misses
KNOWN_ENGLISH = {
    "Main",
    "Page",
    "Related",
    "Search",
    "Copy",
    "Copied!",
    "Close",
    "Menu",
}
# two or more English words in a row ("Toggle hidden content", "Colab logo"); a code name
# (attention_lib.KVCache, Hkv, GQA) is not a run of words
ENGLISH_WORDS = re.compile(
    r"(?<![\w.])[A-Za-z][a-z]+(?:[ \u00a0]+[A-Za-z]?[a-z]+)+(?![\w(])"
)
PAGE_LABELS = """(attributes) => {
    const out = [];
    for (const el of document.querySelectorAll('*')) {
        // meant in English: the switch to the English page (lang="en"), a citation's
        // tooltip (the English bibliography entry)
        if (el.closest('[lang^="en"]')) continue;
        for (const name of attributes) {
            const value = el.getAttribute(name);
            if (!value || !value.trim()) continue;
            if (name === 'title' && el.matches('a[href*="references.html#"]')) continue;
            out.push([el.tagName.toLowerCase(), name, value,
                      !!el.closest('.bd-article')]);
        }
    }
    return out;
}"""


def english_labels(page, doc: str) -> list[tuple[str, str, str]]:
    """(tag, attribute, value) of every label on the page (the whole document, hidden parts
    too: drawers, dialogs, what the scripts added) that is English: no Chinese in it, and a
    known theme label or a run of two or more English words. The English-only API page's
    text is exempt, not the page around it."""
    found = []
    for tag, name, value, in_text in page.evaluate(PAGE_LABELS, list(LABEL_ATTRIBUTES)):
        if in_text and doc in ENGLISH_ONLY:
            continue
        if CJK.search(
            value
        ):  # Chinese, quoting English where it must ("Dive into ...")
            continue
        if value.strip() in KNOWN_ENGLISH or ENGLISH_WORDS.search(value):
            found.append((tag, name, value[:80]))
    return sorted(set(found))


def test_the_chinese_landing_page_links_the_chinese_pdf_only_when_present():
    """The landing page's PDF button: the Chinese PDF (make pdf writes it beside the
    English one, _build/html/attention-course.zh_CN.pdf); a link only when the file is
    there, hidden without an address after a plain `make book` (book/_ext/course_links.py,
    tools/build_pdf.py), as on the English landing page."""
    for page, pdf in (
        (ZH / "book" / "intro.html", HTML / "attention-course.zh_CN.pdf"),
        (HTML / "book" / "intro.html", HTML / "attention-course.pdf"),
    ):
        html = page.read_text(encoding="utf-8")
        links = re.findall(r'<a (href|data-course-pdf)="([^"]+\.pdf)"( hidden)?', html)
        assert len(links) == 1, (page, links)
        attribute, address, hidden = links[0]
        assert (page.parent / address).resolve() == pdf.resolve(), (page, address)
        if pdf.exists():
            assert (attribute, hidden) == ("href", ""), (page, links)
        else:
            assert (attribute, hidden) == ("data-course-pdf", " hidden"), (page, links)


PLOT_IMAGE = re.compile(r'<img[^>]+src="[^"]*_images/([0-9a-f]{64}\.png)"')


@pytest.mark.parametrize("doc", CHAPTERS[:2])
def test_chinese_page_shows_the_chinese_plots(doc):
    """The plots of a Chinese page are the Chinese notebook's (Chinese titles, axes and
    legends, drawn by attention_lib.plot_language): each plot image differs from the
    English page's (book/_ext/course_zh_notebooks.py swaps them when Sphinx reads the
    chapter). myst-nb names an output image by the hash of its bytes."""
    english = PLOT_IMAGE.findall((HTML / f"{doc}.html").read_text(encoding="utf-8"))
    chinese = PLOT_IMAGE.findall((ZH / f"{doc}.html").read_text(encoding="utf-8"))
    assert english and len(chinese) == len(english), (doc, len(english), len(chinese))
    same = set(english) & set(chinese)
    assert not same, (
        f"zh/{doc}: {len(same)} of {len(english)} plots are the English ones"
    )
    assert all((ZH / "_images" / name).exists() for name in chinese)
