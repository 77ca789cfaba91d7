"""Chapter 11's head explorer (attention_lib/explorer.py) on the built site, in both
editions, at 1280 and 390 px, light and dark: it draws, a click and a hover change what
is shown, the keyboard reaches every control, the numbers the page shows are the ones
its data holds (decoded here in Python, as tests/test_explorer.py decodes them and
checks them against the model), print shows the static picture, and nothing is
requested off the site. axe-core runs on the page in test_site_pages.py."""

import base64
import html as htmllib
import json
import re
import zlib

import pytest
import torch
from test_site import HTML, check_accessibility, in_make_test, visit

DOC = "chapters/11_attention_in_a_real_model"
READY = ".attention-explorer[data-ready]"


def page_data(edition: str) -> dict:
    """The explorer's data as the built page holds it, decoded in Python."""
    text = (HTML / edition / f"{DOC}.html").read_text(encoding="utf-8")
    found = re.findall(
        r'<script type="application/json" class="ae-data">(.*?)</script>', text, re.S
    )
    assert len(found) == 1, (
        f"{edition or 'en'}: expected one explorer, got {len(found)}"
    )
    data = json.loads(htmllib.unescape(found[0]) if "&quot;" in found[0] else found[0])
    raw = torch.frombuffer(
        bytearray(zlib.decompress(base64.b64decode(data["weights"]))), dtype=torch.uint8
    )
    L, H, at, weights = data["layers"], data["heads"], 0, []
    for t in data["texts"]:
        T = len(t["tokens"])
        tri = T * (T + 1) // 2
        w = torch.zeros(L, H, T, T)
        rows, cols = torch.tril_indices(T, T)
        w[:, :, rows, cols] = raw[at : at + L * H * tri].view(L, H, tri).float() / 255
        at += L * H * tri
        weights.append(w)
    data["decoded"] = weights
    return data


def open_explorer(browser, site_url, edition="", width=1280, scheme="light"):
    context, page, problems = visit(
        browser, f"{site_url}/{edition}{DOC}.html", scheme=scheme, width=width
    )
    page.wait_for_selector(READY, timeout=10_000)
    page.locator(".attention-explorer").scroll_into_view_if_needed()
    return context, page, problems


def state(page) -> dict:
    return page.eval_on_selector(
        ".attention-explorer",
        """r => ({layer: +r.dataset.layer, head: +r.dataset.head, query: +r.dataset.query,
                  text: +r.dataset.text, desc: r.querySelector('.ae-desc').textContent,
                  marked: r.querySelector('.ae-marked').textContent})""",
    )


@pytest.mark.parametrize("edition", in_make_test(["", "zh/"]))
def test_the_page_shows_the_numbers_its_data_holds(browser, site_url, edition):
    data = page_data(edition)
    context, page, problems = open_explorer(browser, site_url, edition)
    try:
        for p, w in enumerate(data["decoded"]):
            L, H, T, _ = w.shape
            g = torch.Generator().manual_seed(p)
            picks = [
                [int(torch.randint(0, n, (1,), generator=g)) for n in (L, H, T, T)]
                for _ in range(200)
            ]
            shown = page.eval_on_selector(
                ".attention-explorer",
                "(r, [p, picks]) => picks.map(([l, h, i, j]) => r.explorer.w(p, l, h, i, j))",
                [p, picks],
            )
            expected = [float(w[l, h, i, j]) for l, h, i, j in picks]
            assert shown == pytest.approx(expected, abs=1e-6)
            # the scores the page marks heads by: chapter 11's, from the same numbers
            scores = page.eval_on_selector(
                ".attention-explorer", "(r, p) => r.explorer.scores(p)", p
            )
            queries = torch.arange(1, T)
            sink = w[:, :, 1:, 0].mean(-1).flatten()
            prev = w[:, :, queries, queries - 1].mean(-1).flatten()
            assert scores["sink"] == pytest.approx(sink.tolist(), abs=1e-5)
            assert scores["previous"] == pytest.approx(prev.tolist(), abs=1e-5)
        assert not problems, "\n".join(problems)
    finally:
        context.close()


@pytest.mark.parametrize(
    "edition, width, scheme",
    in_make_test(
        [
            ("", 1280, "light"),
            ("", 390, "dark"),
            ("zh/", 1280, "dark"),
            ("zh/", 390, "light"),
        ]
    ),
)
def test_a_reader_finds_an_induction_head_and_the_sink(
    browser, site_url, edition, width, scheme
):
    data = page_data(edition)
    repeated = next(i for i, t in enumerate(data["texts"]) if t["period"])
    context, page, problems = open_explorer(browser, site_url, edition, width, scheme)
    try:
        root = page.locator(".attention-explorer")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        # the text that repeats itself, induction heads marked: the page lists them
        root.locator("select.ae-text").select_option(str(repeated))
        root.locator("select.ae-mark").select_option("induction")
        marked = state(page)["marked"]
        heads = re.findall(r"L(\d+) H(\d+)", marked)
        assert heads, marked
        w = data["decoded"][repeated]
        N, T = data["texts"][repeated]["period"], w.shape[-1]
        second = torch.arange(N, T)
        induction = w[:, :, second, second - N + 1].mean(-1)
        assert {(int(a), int(b)) for a, b in heads} == {
            tuple(x) for x in (induction > 0.3).nonzero().tolist()
        }
        # a click on the strongest one's thumbnail selects it
        layer, head = divmod(int(induction.flatten().argmax()), w.shape[1])
        at = page.eval_on_selector(
            ".attention-explorer",
            "(r, [l, h]) => r.explorer.center(l, h)",
            [layer, head],
        )
        x, y = at["x"], at["y"]
        page.evaluate(  # the thumbnail on the screen (a phone's grid is long)
            """(y) => { const r = document.querySelector('.ae-grid').getBoundingClientRect();
                        window.scrollBy({top: r.top + y - innerHeight / 2,
                                         behavior: 'instant'}); }""",
            y,
        )
        box = root.locator("canvas.ae-grid").bounding_box()
        if width <= 390:
            page.touchscreen.tap(box["x"] + x, box["y"] + y)
        else:
            page.mouse.click(box["x"] + x, box["y"] + y)
        now = state(page)
        assert (now["layer"], now["head"]) == (layer, head), (now, layer, head)
        # a query of the second copy: the description names the token after the first
        # copy of it as the key this head attends to most
        q = N + 5
        token = root.locator(f".ae-tokens span[data-index='{q}']")
        token.scroll_into_view_if_needed()
        if width <= 390:
            token.tap()
        else:
            token.hover()
        now = state(page)
        assert now["query"] == q
        target = data["texts"][repeated]["tokens"][q - N + 1]
        key = re.escape(target) + r"\s?[(（]" + str(q - N + 1) + r"[)）]"
        assert re.search(key, now["desc"]), now["desc"]
        # the sink: marked on the prose, the first token takes most of the weight
        prose = next(i for i, t in enumerate(data["texts"]) if not t["period"])
        root.locator("select.ae-text").select_option(str(prose))
        root.locator("select.ae-mark").select_option("sink")
        sinks = re.findall(r"L(\d+) H(\d+)", state(page)["marked"])
        assert len(sinks) >= 10, state(page)["marked"]
        zh = bool(edition)
        assert bool(re.search(r"[\u4e00-\u9fff]", now["desc"])) == zh
        assert not problems, "\n".join(problems)
    finally:
        context.close()


@pytest.mark.slow  # make long-tests (IN_MAKE_TEST in test_site.py)
def test_the_keyboard_reaches_every_control(browser, site_url):
    context, page, problems = open_explorer(browser, site_url)
    try:
        root = page.locator(".attention-explorer")
        root.locator("select.ae-text").focus()
        order = []
        for _ in range(4):
            order.append(page.evaluate("document.activeElement.className"))
            page.keyboard.press("Tab")
        assert order == ["ae-text", "ae-mark", "ae-grid", "ae-tokens"], order
        root.locator("canvas.ae-grid").focus()
        before = state(page)
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowDown")
        after = state(page)
        assert (after["layer"], after["head"]) == (
            min(before["layer"] + 1, 29),
            min(before["head"] + 1, 8),
        )
        assert after["desc"] != before["desc"]
        live = root.locator(".ae-desc").get_attribute("aria-live")
        assert live == "polite"
        root.locator(".ae-tokens").focus()
        page.keyboard.press("Home")
        assert state(page)["query"] == 0
        page.keyboard.press("ArrowRight")
        assert state(page)["query"] == 1
        check_accessibility(page, DOC)
        assert not problems, "\n".join(problems)
    finally:
        context.close()


@pytest.mark.slow  # make long-tests (IN_MAKE_TEST in test_site.py)
def test_print_shows_the_static_picture(browser, site_url):
    context, page, problems = open_explorer(browser, site_url)
    try:
        page.emulate_media(media="print")
        shown = page.eval_on_selector(
            ".attention-explorer",
            """r => ({ui: getComputedStyle(r.querySelector('.ae-ui')).display,
                      img: getComputedStyle(r.querySelector('.ae-static')).display,
                      loaded: r.querySelector('.ae-static img').naturalWidth})""",
        )
        assert shown["ui"] == "none" and shown["img"] != "none", shown
        assert shown["loaded"] > 0
        assert not problems, "\n".join(problems)
    finally:
        context.close()
