"""Build the whole book as one PDF, in each edition: `make pdf`.

English: _build/pdf/attention-course.pdf; Chinese (中文版, from the catalogs in locales/zh_CN,
set in the Noto CJK fonts the diagrams use, which Chromium embeds): attention-course.zh_CN.pdf.

Jupyter Book builds the book as a single HTML page (Sphinx's singlehtml builder, the
site's own theme, templates and print CSS), and the Chromium the browser tests already
use prints it (Playwright's page.pdf). Before printing, the page is made a book:

* a title page and a table of contents (every chapter and section, with its page number:
  the book is printed twice, the second time with the numbers the first one measured);
* every chapter (every page of the website) starts on a new page;
* links: one to a place in the book goes there, one to another page of the site goes to
  the published site (never to the throw-away print server), one around a figure is
  dropped;
* web-only labels go (the permalink "#", "Show solution" / "Hide solution": a solution is
  printed open under a plain "Solution" label, 答案 in Chinese);
* MathJax typesets the formulas first; a displayed formula wider than the page is scaled
  down; a wrapped code line continues indented under its own line (course.css: @media
  print wraps code at the margin).

Then pypdf writes the outline (bookmarks): one per chapter, one per section under it,
named by the heading's text with its math as plain text (TeX's spacing: `\\sqrt d` is
"√d", `\\mathbf q^\\top` is "qᵀ"), each going to its heading. Every page of the site has its
own ids "summary", "exercises" ...: in the single page a repeated id gets its page's name in
front, and that page's links follow it. ``check_pdf`` reads the result back and lists what
is wrong (an outline that does not match the contents, an entry or bookmark that lands
outside its own chapter -- chapters found by their title pages in the printed text --, a
stray space or raw TeX in a title, a Chinese outline that is not Chinese, a font not
embedded, a link to a local address, a web-only label); `make pdf` fails on any.

    python tools/build_pdf.py [--edition en|zh_CN] [--no-build]   # default: both editions
    python tools/build_pdf.py --check [--edition en|zh_CN]         # only check the PDFs

--no-build prints the existing single pages (_build/singlehtml, _build/zh-pdf/singlehtml)
again. Each PDF is also copied to the site's root (_build/html/attention-course.pdf,
_build/html/attention-course.zh_CN.pdf) when the website has been built, and the landing
page's "Download the whole book (PDF)" link of that edition is turned on
(book/_ext/course_links.py writes it hidden while its PDF is not there).
"""

import functools
import http.server
import json
import logging
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
SINGLE = BUILD / "singlehtml"
DEFAULT_OUT = BUILD / "pdf" / "attention-course.pdf"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
# Where the site is published: _config.yml's html.baseurl, the one place it is written.
SITE = CONFIG["html"]["baseurl"]
ZH_CONFIG = yaml.safe_load(
    (ROOT / "locales" / "zh_CN" / "config.yml").read_text(encoding="utf-8")
)
CJK = re.compile(r"[\u3400-\u9fff]")
# two or more English words in a row (not a name: "conda", "Colab", "GQA")
ENGLISH_WORDS = re.compile(r"(?<![\w.])[A-Za-z][a-z]+(?:\s+[A-Za-z]?[a-z]+)+(?![\w(])")
CHAPTERS = sum(
    entry["file"].startswith("chapters/")
    for part in yaml.safe_load((ROOT / "_toc.yml").read_text())["parts"]
    for entry in part["chapters"]
)


def chinese_subtitle() -> str:
    """The landing page's heading, from its Chinese catalog."""
    from babel.messages.pofile import read_po

    english = book_titles("en")["subtitle"]
    po = ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / "book" / "intro.po"
    with open(po, "rb") as f:
        message = read_po(f).get(english)
    return message.string if message and message.string else english


# What differs between the editions' books.
EDITIONS = {
    "en": {
        "single": SINGLE,
        "out": DEFAULT_OUT,
        "site": SITE,
        "labels": {
            "solution": "Solution",
            "explanation": "Explanation",
            "contents": "Contents",
            "online": "Read online, with the notebooks: ",
        },
        # a chapter's bookmark ("Chapter 3. Masked softmax ...")
        "chapter": re.compile(r"Chapter \d+\. \S"),
        "web_labels": [
            "Show solution",
            "Hide solution",
            "Show code cell",
            "Hide code cell",
        ],
    },
    "zh_CN": {
        "single": BUILD / "zh-pdf" / "singlehtml",
        "out": BUILD / "pdf" / "attention-course.zh_CN.pdf",
        "site": SITE + "zh/",
        "labels": {
            "solution": "答案",
            "explanation": "答案解析",
            "contents": "目录",
            "online": "在线阅读（附可运行的笔记本）：",
        },
        "chapter": re.compile(r"第 \d+ 章 \S"),
        "web_labels": [
            "Show solution",
            "Hide solution",
            ZH_CONFIG["course_cell_prompts"]["Show solution"],
            ZH_CONFIG["course_cell_prompts"]["Hide solution"],
            ZH_CONFIG["togglebutton_hint"],
            ZH_CONFIG["togglebutton_hint_hide"],
        ],
    },
}

FOOTER = (
    '<div style="font-size:8px;width:100%;text-align:center;color:#666">'
    '<span class="pageNumber"></span> / <span class="totalPages"></span></div>'
)

# Run in the page once it is laid out for print; returns the table of contents as
# [{id, title, level}] (level 1: a chapter or front-matter page, 2: a section).
PREPARE = r"""(opts) => {
    const article = document.querySelector('.bd-article') || document.body;
    // --- the TeX source of every typeset formula, for plain-text titles
    const tex = new Map();
    try {
        for (const item of MathJax.startup.document.math) {
            if (item.typesetRoot) tex.set(item.typesetRoot, item.math);
        }
    } catch (e) {}
    const GREEK = {alpha:'α',beta:'β',gamma:'γ',delta:'δ',epsilon:'ε',varepsilon:'ε',theta:'θ',
        kappa:'κ',lambda:'λ',mu:'μ',pi:'π',rho:'ρ',sigma:'σ',tau:'τ',phi:'φ',omega:'ω',
        Omega:'Ω',Sigma:'Σ',top:'⊤',cdot:'·',times:'×',le:'≤',leq:'≤',ge:'≥',geq:'≥',
        ldots:'…',dots:'…',to:'→',rightarrow:'→',infty:'∞',approx:'≈',sqrt:'√',in:'∈'};
    // superscripts and subscripts as Unicode's small letters where every character has one
    // (n^2: n², H_{kv}: Hₖᵥ, q^\top: qᵀ), else as written (W^Q)
    const SUP = {'0':'⁰','1':'¹','2':'²','3':'³','4':'⁴','5':'⁵','6':'⁶','7':'⁷','8':'⁸','9':'⁹',
        '+':'⁺','-':'⁻','⊤':'ᵀ','T':'ᵀ','n':'ⁿ','i':'ⁱ'};
    const SUB = {'0':'₀','1':'₁','2':'₂','3':'₃','4':'₄','5':'₅','6':'₆','7':'₇','8':'₈','9':'₉',
        '+':'₊','-':'₋','a':'ₐ','e':'ₑ','h':'ₕ','i':'ᵢ','j':'ⱼ','k':'ₖ','l':'ₗ','m':'ₘ','n':'ₙ',
        'o':'ₒ','p':'ₚ','r':'ᵣ','s':'ₛ','t':'ₜ','u':'ᵤ','v':'ᵥ','x':'ₓ'};
    const FONTS = new Set(['mathbf', 'mathrm', 'mathit', 'mathcal', 'mathbb', 'boldsymbol']);
    const script = (mark, x, table) =>
        [...x].every(c => table[c]) ? [...x].map(c => table[c]).join('') : mark + x;
    const plainTex = (t) => t
        .replace(/\\(?:mathbf|mathrm|mathit|mathcal|mathbb|text|textrm|operatorname|boldsymbol)\s*\{([^{}]*)\}/g, '$1')
        .replace(/\\sqrt\s*\{([^{}]*)\}/g, (m, x) => '√' + (x.length > 1 ? '(' + x + ')' : x))
        // a control word ends at its last letter and TeX drops the spaces after it
        // (\sqrt d is √d, not √ d); a font command without braces applies to the next
        // letter (\mathbf q is q)
        .replace(/\\([A-Za-z]+)\s*/g, (m, w) => GREEK[w] !== undefined ? GREEK[w] : FONTS.has(w) ? '' : w)
        .replace(/\\[,;!]/g, ' ')
        .replace(/\^\s*(?:\{([^{}]*)\}|(\S))/g, (m, a, b) => script('^', a ?? b, SUP))
        .replace(/_\s*(?:\{([^{}]*)\}|(\S))/g, (m, a, b) => script('_', a ?? b, SUB))
        .replace(/[{}]/g, '');
    const textOf = (node) => {
        if (node.nodeType === Node.TEXT_NODE) return node.data;
        if (node.nodeType !== Node.ELEMENT_NODE) return '';
        if (node.matches('a.headerlink, .headerlink, mjx-assistive-mml, script, style')) return '';
        if (node.tagName.toLowerCase() === 'mjx-container') return plainTex(tex.get(node) || node.textContent);
        return [...node.childNodes].map(textOf).join('');
    };
    const clean = (el) => textOf(el).replace(/\s+/g, ' ').replace(/\s+([,.:;)])/g, '$1').trim();

    // --- web-only things (the theme's print-only page title: the title page replaces it)
    document.getElementById('jb-print-docs-body')?.remove();
    document.querySelectorAll('a.headerlink').forEach(a => a.remove());
    // a solution is printed open under a plain label: its <summary> stays (a <details> without
    // one gets the browser's own "▼ Details" above it), with the label as its only text
    document.querySelectorAll('details').forEach(d => {
        d.open = true;
        let summary = d.querySelector(':scope > summary');
        if (!summary) {
            summary = document.createElement('summary');
            d.prepend(summary);
        }
        summary.className = 'course-print-label';
        summary.removeAttribute('aria-label');
        summary.textContent = d.classList.contains('explanation') ? opts.labels.explanation : opts.labels.solution;
    });

    // --- one element per id. Every page has its own sections "terms-english", "summary",
    // "exercises", and the single page holds every page after the other (each after a
    // <span id="document-NAME">): the contents, the outline and the links all went to the
    // first page's. A repeated id gets its page's name in front ("chapters-02_x--summary"),
    // and the links of that page to it follow. (Sphinx's single page writes every link to
    // another page's section as "#id": which page it meant is lost there; a link of a page
    // to an id it does not hold itself goes to the first element with it.)
    const pageOfLink = new Map();
    const renamed = new Map();  // page -> Map(id -> its new id)
    const seen = new Set();
    let current = '';
    article.querySelectorAll('[id], a[href]').forEach(e => {
        if (e.closest('svg, mjx-container')) return;
        if (e.id.startsWith('document-')) {
            current = e.id.slice('document-'.length);
            seen.add(e.id);
        }
        if (e.tagName === 'A' && e.hasAttribute('href')) pageOfLink.set(e, current);
        if (!e.id || e.id.startsWith('document-')) return;
        if (seen.has(e.id)) {
            const fresh = current.replace(/[^A-Za-z0-9_-]+/g, '-') + '--' + e.id;
            if (!renamed.has(current)) renamed.set(current, new Map());
            renamed.get(current).set(e.id, fresh);
            e.id = fresh;
        }
        seen.add(e.id);
    });
    const everyRename = new Map();  // id -> its new ids, all pages
    renamed.forEach(ids => ids.forEach((fresh, id) => {
        everyRename.set(id, [...(everyRename.get(id) || []), fresh]);
    }));
    pageOfLink.forEach((pageName, a) => {
        let url;
        try { url = new URL(a.getAttribute('href'), location.href); } catch (e) { return; }
        if (url.origin !== location.origin || !url.hash) return;
        const id = decodeURIComponent(url.hash.slice(1));
        let fresh = renamed.get(pageName)?.get(id);
        // a link to an id that the first page holding it gives to a citation in its text
        // (the landing page's "[Nadaraya, 1964]" spans are id1-id5, as are the bibliography's
        // entries) means the bibliography's entry
        const first = document.getElementById(id);
        if (!fresh && first && first.matches('.bibtex-citation')) {
            const entries = (everyRename.get(id) || []).filter(
                other => document.getElementById(other)?.matches('.citation'));
            if (entries.length === 1) fresh = entries[0];
        }
        if (fresh) a.setAttribute('href', '#' + fresh);
    });
    document.querySelectorAll('.copybtn, .course-wide-hint, .toggle-details').forEach(e => e.remove());

    // --- links: into the book, to the published site, or none (around a figure)
    const here = location.origin;
    document.querySelectorAll('a[href]').forEach(a => {
        let url;
        try { url = new URL(a.getAttribute('href'), location.href); } catch (e) { return; }
        if (url.origin !== here) return;
        const id = decodeURIComponent(url.hash.slice(1));
        if (a.querySelector('img') || /\/_images\//.test(url.pathname)) {
            a.replaceWith(...a.childNodes);
        } else if (id && document.getElementById(id)) {
            a.setAttribute('href', '#' + id);
        } else {
            let path = url.pathname.replace(/^\//, '');
            if (path === 'book.html') path = opts.root + '.html';
            a.setAttribute('href', opts.site + path + url.hash);
        }
    });

    // --- wrapped code lines continue indented under their own line
    document.querySelectorAll('.bd-article pre').forEach(pre => {
        const open = [];
        const lines = pre.innerHTML.replace(/\n$/, '').split('\n').map(line => {
            const head = open.join('');
            for (const tag of line.match(/<\/?span[^>]*>/g) || []) {
                if (tag.startsWith('</')) open.pop(); else open.push(tag);
            }
            const lead = (line.replace(/<[^>]*>/g, '').match(/^ */) || [''])[0].length;
            const body = head + line + '</span>'.repeat(open.length);
            return '<span class="course-line" style="padding-left:' + (lead + 4) + 'ch;text-indent:-' +
                (lead + 4) + 'ch">' + (body.replace(/<[^>]*>/g, '') ? body : '\u200b') + '</span>';
        });
        pre.innerHTML = lines.join('');
    });
    // a short code cell or output is not split over two pages (a box split before its first
    // line left an empty box at the foot of a page and the code on the next)
    document.querySelectorAll('.bd-article pre').forEach(pre => {
        // the whole bordered box: a notebook cell's input or output, else the code block
        const box = pre.closest('.cell_input, .cell_output') || pre.closest('div[class*="highlight-"]') || pre;
        if (pre.querySelectorAll('.course-line').length <= opts.keepLines) box.classList.add('course-keep');
    });

    // --- the contents: every page of the site and its sections. The single page nests the
    // pages the landing page lists under it (a chapter's title is an h2 there, its sections
    // h3), each after a <span id="document-NAME">: a page's first heading is level 1, the
    // headings one step below it level 2.
    const toc = [];
    let top = null, pending = true, doc = null;
    article.querySelectorAll('span[id^="document-"], h1, h2, h3, h4').forEach(e => {
        if (e.tagName === 'SPAN') { pending = true; doc = e.id.slice('document-'.length); return; }
        const rank = Number(e.tagName[1]);
        let level;
        if (pending) { level = 1; top = rank; pending = false; }
        else if (top !== null && rank === top + 1) level = 2;
        else return;
        const section = e.closest('section[id]');
        const id = e.id || (section && section.id);
        // a page the edition leaves in English is named in the edition's language
        // (locales/zh_CN/config.yml course_page_titles: "API 参考（英文）")
        const title = (level === 1 && opts.pageTitles[doc]) || clean(e);
        if (!id || !title) return;
        const entry = {id, title, level};
        if (title !== clean(e)) entry.heading = clean(e);  // the title printed on its page
        toc.push(entry);
        if (level === 1 && section && toc.length > 1) section.classList.add('course-new-page');
    });

    // --- a title page and the table of contents, before everything
    const front = document.createElement('div');
    front.className = 'course-front';
    const title = document.createElement('section');
    title.className = 'course-title-page';
    title.innerHTML = '<p class="course-title"></p><p class="course-subtitle"></p>' +
        '<p class="course-author"></p><p class="course-site"></p>';
    title.querySelector('.course-title').textContent = opts.title;
    title.querySelector('.course-subtitle').textContent = opts.subtitle;
    title.querySelector('.course-author').textContent = opts.author;
    const site = document.createElement('a');
    site.href = opts.site;
    site.textContent = opts.site;
    title.querySelector('.course-site').append(opts.labels.online, site);
    const contents = document.createElement('nav');
    contents.className = 'course-contents';
    contents.innerHTML = '<p class="course-contents-title"></p>';
    contents.querySelector('.course-contents-title').textContent = opts.labels.contents;
    const list = document.createElement('ol');
    for (const entry of toc) {
        const li = document.createElement('li');
        li.className = 'course-toc-' + entry.level;
        const a = document.createElement('a');
        a.href = '#' + entry.id;
        a.textContent = entry.title;
        const page = document.createElement('span');
        page.className = 'course-toc-page';
        page.dataset.id = entry.id;
        page.textContent = '000';
        li.append(a, page);
        list.append(li);
    }
    contents.append(list);
    front.append(title, contents);
    article.prepend(front);
    return toc;
}"""

# The print stylesheet of the book (on top of course.css's @media print).
BOOK_CSS = """
@page { size: A4; }
.course-title-page { break-after: page; padding-top: 30vh; text-align: center; }
.course-title { font-size: 2.1rem; font-weight: 700; line-height: 1.25; margin-bottom: 1.5rem; }
.course-subtitle { font-size: 1.2rem; color: #444; margin-bottom: 3rem; }
.course-author { font-size: 1.1rem; }
.course-site { font-size: 0.9rem; margin-top: 8rem; }
.course-contents { break-after: page; }
.course-contents-title { font-size: 1.6rem; font-weight: 700; margin: 0 0 1rem; }
.course-contents ol { list-style: none; padding: 0; margin: 0; }
.course-contents li { display: flex; gap: 0.5rem; align-items: baseline; break-inside: avoid; }
.course-contents li a { color: inherit; text-decoration: none; flex: 1 1 auto; }
.course-contents li::after { content: none; }
.course-toc-1 { font-weight: 700; margin-top: 0.55rem; }
.course-toc-2 { padding-left: 1.5rem; font-size: 0.9rem; }
.course-toc-page { flex: 0 0 auto; min-width: 2.5rem; text-align: right; font-variant-numeric: tabular-nums; }
section.course-new-page { break-before: page; }
.course-print-label { font-weight: 700; font-size: 0.85rem; margin: 0.4rem 0 0.2rem; }
details > summary.course-print-label { display: block !important; list-style: none !important;
    border: 0 !important; padding: 0 !important; background: none !important;
    color: inherit !important; font-weight: 700 !important; }
details > summary.course-print-label::before,
details > summary.course-print-label::after { content: none !important; display: none !important; }
details > summary.course-print-label::-webkit-details-marker { display: none; }
pre .course-line { display: block; white-space: pre-wrap; }
.course-keep { break-inside: avoid; }
"""


# The Chinese text's font: Noto Sans CJK SC (Debian's fonts-noto-cjk, as the diagrams), as
# a single OpenType file without the Kangxi radicals' and compatibility ideographs' code
# points. Chromium embeds a CFF font's glyphs as outlines (a Type 3 font: every reader
# shows them, no font needed) and maps each glyph back to the lowest code point that
# shows it: from the system's font 力 shared a glyph with the radical ⼒ (U+2F12), and the
# PDF's 注意力 copied and searched as 注意⼒.
CJK_FONTS = {
    400: Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),
    700: Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Bold.ttc"),
}
# where the font is used: CJK punctuation and ideographs, full-width forms (Latin text
# keeps the English book's fonts)
CJK_RANGE = "U+3000-303F, U+3400-4DBF, U+4E00-9FFF, U+FF00-FFEF"
RADICALS = re.compile(r"[\u2e80-\u2fdf\uf900-\ufaff]")


def cjk_font(source: Path, target: Path) -> None:
    from fontTools.ttLib import TTCollection, TTFont

    names = [f["name"].getDebugName(1) for f in TTCollection(source, lazy=True).fonts]
    font = TTFont(source, fontNumber=names.index("Noto Sans CJK SC"), lazy=True)
    for table in font["cmap"].tables:
        for code in [c for c in table.cmap if RADICALS.match(chr(c))]:
            del table.cmap[code]
    target.parent.mkdir(parents=True, exist_ok=True)
    font.save(target)


def cjk_css(single: Path) -> str:
    """Put the Chinese fonts beside the single page (made once, ~1.5 min each, kept in
    _build/zh-pdf/fonts) and return the CSS that uses them."""
    css = []
    for weight, source in CJK_FONTS.items():
        if not source.exists():
            raise SystemExit(
                f"{source} not found: the Chinese PDF needs fonts-noto-cjk"
            )
        made = BUILD / "zh-pdf" / "fonts" / f"course-cjk-{weight}.otf"
        if not made.exists() or made.stat().st_mtime < source.stat().st_mtime:
            cjk_font(source, made)
        shutil.copy(made, single / made.name)
        css.append(
            f'@font-face {{ font-family: "Course CJK"; font-weight: {weight}; '
            f'src: url("{made.name}"); unicode-range: {CJK_RANGE}; }}'
        )
    stack = '"Course CJK", var(--pst-font-family-{}-system)'
    css.append(
        f":root {{ --pst-font-family-base: {stack.format('base')}; "
        f"--pst-font-family-heading: {stack.format('base')}; "
        f"--pst-font-family-monospace: {stack.format('monospace')}; }}"
    )
    return "\n".join(css)


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def build_single_html(edition: str) -> None:
    """English: Jupyter Book's own singlehtml build. Chinese: the same build through
    tools/build_book.py's settings of the Chinese site (language, catalogs, overrides of
    locales/zh_CN/config.yml), in its own folder _build/zh-pdf."""
    if edition == "en":
        jb = Path(sys.executable).parent / "jupyter-book"
        subprocess.run(
            [str(jb), "build", str(ROOT), "--builder", "singlehtml", "--keep-going"],
            check=True,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        return
    code = subprocess.run(
        [sys.executable, "-c", ZH_SINGLE_HTML],
        check=False,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    ).returncode
    if code:
        raise SystemExit(f"the Chinese single-page build failed ({code})")


# In a subprocess: Sphinx's translations are process-wide, the two editions must not share them.
ZH_SINGLE_HTML = """
import sys
sys.path.insert(0, 'tools')
import build_book
from jupyter_book.sphinx import build_sphinx
folder = build_book.BUILD / 'zh-pdf'
config = {'external_toc_path': (build_book.ROOT / '_toc.yml').as_posix(),
          'latex_individualpages': False, **build_book.zh_overrides(folder)}
result = build_sphinx(build_book.ROOT, folder / 'singlehtml', use_external_toc=True,
    noconfig=True, path_config=build_book.ROOT / '_config.yml', confoverrides=config,
    doctreedir=folder / '.doctrees', builder='singlehtml', freshenv=True,
    warningiserror=False, keep_going=True)
sys.exit(0 if result in (0, None) else 1)
"""


def root_doc() -> str:
    return yaml.safe_load((ROOT / "_toc.yml").read_text())["root"]


def single_page(single: Path) -> str:
    """The singlehtml builder writes the book to the root document's path
    (book/intro.html) but links its assets and images from the site's root: put a copy
    at the root."""
    shutil.copy(single / f"{root_doc()}.html", single / "book.html")
    return "book.html"


def book_titles(edition: str) -> dict:
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    settings = EDITIONS[edition]
    titles = {
        "title": CONFIG.get("title", "Attention"),
        "subtitle": intro.splitlines()[0].lstrip("# ").strip(),
        "author": CONFIG.get("author", ""),
        "site": settings["site"],
        "labels": settings["labels"],
        "root": root_doc(),
        "pageTitles": {},
        # code cells and outputs up to this many lines are kept on one page
        "keepLines": 30,
    }
    if edition == "zh_CN":
        titles.update(
            title=ZH_CONFIG["html_title"],
            subtitle=chinese_subtitle(),
            author=ZH_CONFIG.get("author", titles["author"]),
            pageTitles=ZH_CONFIG.get("course_page_titles", {}),
        )
    return titles


def print_pdf(edition: str) -> list[dict]:
    """Print the book into ``out`` (twice: the second print has the page numbers the first
    one measured in its table of contents); return the table of contents with pages."""
    single, out = EDITIONS[edition]["single"], EDITIONS[edition]["out"]
    handler = functools.partial(Quiet, directory=str(single))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{single_page(single)}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
            )
            # the printable width of A4 with the margins below (182 mm at 96 dpi), so the
            # page is measured as it will be printed
            context = browser.new_context(
                viewport={"width": 688, "height": 1000}, color_scheme="light"
            )
            page = context.new_page()
            page.goto(url, wait_until="networkidle", timeout=180_000)
            page.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                timeout=180_000,
            )
            page.evaluate("() => MathJax.startup.promise")
            page.emulate_media(media="print", color_scheme="light")
            page.add_style_tag(content=BOOK_CSS)
            # both editions: the English book has Chinese too (the language switch, the
            # glossary's terms), and the system's CJK font maps 力 to the radical ⼒
            page.add_style_tag(content=cjk_css(single))
            page.evaluate("() => document.fonts.ready")
            page.wait_for_timeout(500)
            toc = page.evaluate(PREPARE, book_titles(edition))
            page.evaluate(SCALE_WIDE_MATH)
            page.evaluate(TIGHTEN_SHORT_TAILS)
            out.parent.mkdir(parents=True, exist_ok=True)
            first = out.with_suffix(".pass1.pdf")
            page.pdf(path=str(first), **PDF_OPTIONS)
            pages = destination_pages(first)
            first.unlink()
            page.evaluate(
                """(pages) => document.querySelectorAll('.course-toc-page').forEach(s => {
                    s.textContent = pages[s.dataset.id] ?? '';
                })""",
                {k: v + 1 for k, v in pages.items()},
            )
            page.pdf(path=str(out), **PDF_OPTIONS)
            browser.close()
    finally:
        server.shutdown()
    final = destinations(out)
    moved = [
        e["id"] for e in toc if final.get(e["id"], [None])[0] != pages.get(e["id"])
    ]
    if moved:
        raise SystemExit(f"page numbers moved between the two prints: {moved[:5]}")
    for entry in toc:
        entry["page"], left, top = final.get(entry["id"], (None, None, None))
        if top is not None:
            entry["left"], entry["top"] = float(left or 0), float(top)
    return toc


SCALE_WIDE_MATH = """() => {
    // a displayed formula wider than the page is scaled down to fit instead of cut
    document.querySelectorAll("mjx-container[display='true']").forEach(m => {
        m.style.overflow = 'hidden';
        let size = 100;
        for (let i = 0; i < 8 && m.scrollWidth > m.clientWidth + 1; i++) {
            size *= 0.97 * m.clientWidth / m.scrollWidth;
            m.style.fontSize = size.toFixed(1) + '%';
        }
    });
}"""

TIGHTEN_SHORT_TAILS = r"""() => {
    // a wrapped code line whose last row holds only one or two characters (a lone closing
    // quote under a long string) is set a little tighter, so that they fit on the row before
    const range = document.createRange();
    const tail = (line) => {
        // the non-space characters on the line's last row, counted from its end
        const texts = [];
        const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
        while (walker.nextNode()) texts.push(walker.currentNode);
        let row = null, count = 0;
        for (let i = texts.length - 1; i >= 0; i--) {
            for (let j = texts[i].length - 1; j >= 0; j--) {
                if (/\s/.test(texts[i].data[j])) continue;
                range.setStart(texts[i], j);
                range.setEnd(texts[i], j + 1);
                const top = Math.round(range.getBoundingClientRect().top);
                if (row === null) row = top;
                if (top !== row || count > 2) return count;
                count++;
            }
        }
        return count;
    };
    let tightened = 0;
    document.querySelectorAll('pre .course-line').forEach(line => {
        const height = line.getBoundingClientRect().height;
        const rowHeight = parseFloat(getComputedStyle(line).lineHeight) || 16;
        if (height < 1.5 * rowHeight || tail(line) > 2) return;
        for (const spacing of ['-0.01em', '-0.02em', '-0.03em']) {
            line.style.letterSpacing = spacing;
            if (line.getBoundingClientRect().height < height - rowHeight / 2) { tightened++; return; }
        }
        line.style.letterSpacing = '';
    });
    return tightened;
}"""

PDF_OPTIONS = dict(
    format="A4",
    margin={"top": "16mm", "bottom": "16mm", "left": "14mm", "right": "14mm"},
    print_background=True,
    display_header_footer=True,
    header_template="<span></span>",
    footer_template=FOOTER,
    outline=False,  # written by add_outline from the table of contents
    tagged=True,
)


def destinations(pdf: Path) -> dict[str, tuple]:
    """(page index (0-based), left, top) of every named destination (Chromium names one
    for each #id that a link of the page points to: the table of contents points to every
    heading)."""
    from pypdf import PdfReader

    reader = PdfReader(pdf)
    out = {}
    for name, dest in reader.named_destinations.items():
        try:
            page = reader.get_destination_page_number(dest)
        except Exception:
            continue
        out[str(name).lstrip("/")] = (page, dest.left, dest.top)
    return out


def destination_pages(pdf: Path) -> dict[str, int]:
    return {name: place[0] for name, place in destinations(pdf).items()}


def add_outline(pdf: Path, toc: list[dict], edition: str) -> None:
    """One bookmark per chapter (and front-matter page), one per section under it."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import Fit

    # pypdf, copying Chromium's PDF, warns "Object count 148147 exceeds defined trailer
    # size 148099": the copy counts a few dozen objects more than the /Size of Chromium's
    # trailer. It is a note on the input, not an error: pypdf writes a trailer of its own
    # for the copy, and check_pdf reads the result back (pages, links, outline, fonts).
    # That one message is not shown.
    logging.getLogger("pypdf._writer").addFilter(
        lambda record: "exceeds defined trailer size" not in record.getMessage()
    )
    writer = PdfWriter(clone_from=PdfReader(pdf))
    parent = None
    for entry in toc:
        if entry.get("page") is None:
            raise SystemExit(f"no page for {entry['title']!r} (#{entry['id']})")
        # to the heading itself, as the contents' link does (not the top of its page)
        fit = Fit.xyz(entry["left"], entry["top"]) if "top" in entry else Fit.fit()
        if entry["level"] == 1:
            parent = writer.add_outline_item(
                title=entry["title"], page_number=entry["page"], fit=fit
            )
        else:
            writer.add_outline_item(
                title=entry["title"], page_number=entry["page"], parent=parent, fit=fit
            )
    writer.page_mode = "/UseOutlines"
    titles = book_titles(edition)
    writer.add_metadata({"/Title": titles["title"], "/Author": titles["author"]})
    with open(pdf, "wb") as f:
        writer.write(f)
    (pdf.with_suffix(".toc.json")).write_text(
        json.dumps(toc, ensure_ascii=False, indent=1), encoding="utf-8"
    )


# TeX left in a title: a command's name without its backslash ("mathbfq^⊤mathbfM")
RAW_TEX = re.compile(
    r"math(?:bf|rm|it|cal|bb)|operatorname|boldsymbol|\b(?:frac|sqrt)\b"
)
LOCAL = re.compile(r"^(file:|https?://(127\.0\.0\.1|localhost|0\.0\.0\.0)[:/])")
# A bookmark that reads badly: a doubled or a leading/trailing space, a space after a root
# sign or inside brackets (TeX's spacing lost: "Why divide by √ d"), before punctuation.
STRAY_SPACE = re.compile(r"\s\s|^\s|\s$|√\s|[(\[]\s|\s[)\],.:;?!，。：；）]")


def fonts_not_embedded(reader) -> set[str]:
    """The fonts of the PDF that are not embedded (a reader without them sees another
    font, or boxes: the CJK fonts above all)."""
    missing = set()
    for page in reader.pages:
        resources = page.get("/Resources")
        fonts = resources.get_object().get("/Font") if resources else None
        for font in (fonts.get_object() if fonts else {}).values():
            font = font.get_object()
            if font.get("/Subtype") == "/Type3":  # glyphs drawn in the PDF itself
                continue
            descriptor = font.get("/FontDescriptor")
            if descriptor is None and font.get("/DescendantFonts"):
                descendant = font["/DescendantFonts"][0].get_object()
                descriptor = descendant.get("/FontDescriptor")
            if descriptor is None:  # the 14 standard fonts, Type3: nothing to embed
                continue
            descriptor = descriptor.get_object()
            if not any(
                k in descriptor for k in ("/FontFile", "/FontFile2", "/FontFile3")
            ):
                missing.add(str(font.get("/BaseFont")))
    return missing


def outline_of(pdf: Path) -> list[tuple[int, str, int]]:
    """(level, title, page index) of every bookmark, in order."""
    from pypdf import PdfReader

    reader = PdfReader(pdf)

    def walk(items, level, out):
        for item in items:
            if isinstance(item, list):
                walk(item, level + 1, out)
            else:
                out.append(
                    (level, item.title, reader.get_destination_page_number(item))
                )
        return out

    return walk(reader.outline, 1, [])


FOOTER_LINE = re.compile(r"^\d+ / \d+$")


def first_lines(texts: list[str]) -> list[str]:
    """The first line of text of every page (its page number in the footer left out)."""
    out = []
    for text in texts:
        lines = [
            " ".join(line.split())
            for line in text.splitlines()
            if line.strip() and not FOOTER_LINE.match(line.strip())
        ]
        out.append(lines[0] if lines else "")
    return out


def contents_pages(texts: list[str], edition: str) -> range:
    """The pages of the printed contents: the one after the title page that starts with
    the contents' title, and those after it whose lines mostly end with a page number."""
    firsts = first_lines(texts)
    label = EDITIONS[edition]["labels"]["contents"]
    if len(texts) < 2 or firsts[1] != label:
        return range(1, 1)
    end = 2
    while end < len(texts):
        lines = [
            line.strip()
            for line in texts[end].splitlines()
            if line.strip() and not FOOTER_LINE.match(line.strip())
        ]
        if not lines or sum(bool(re.search(r"\s\d+$", x)) for x in lines) < 0.8 * len(
            lines
        ):
            break
        end += 1
    return range(1, end)


def page_ranges(toc: list[dict], texts: list[str], edition: str) -> dict:
    """Where each top-level page of the book (a chapter, the setup page, ...) starts and
    ends, read from the printed text, not from the contents' or the outline's links: each
    starts on the first page after the contents and after the one before it that has its
    title in its first lines ("Chapter 3. Masked softmax ..." or "第 3 章 ...", a title that
    wraps: the start of it). Returns {index of its entry in toc: (first page, page after
    its last)} for those found (every page of the site starts a new page)."""

    def key(text: str) -> str:  # pypdf spaces CJK and math freely
        return re.sub(r"\s+", "", text)

    # a page's first lines (pypdf reads the bibliography's labels before its title)
    heads = [
        [key(line) for line in text.splitlines() if line.strip()][:10] for text in texts
    ]
    after = contents_pages(texts, edition).stop
    starts = []
    for index, entry in enumerate(toc):
        if entry["level"] != 1:
            continue
        title = key(entry.get("heading") or entry["title"])
        for number in range(after, len(texts)):
            if any(
                len(line) >= min(len(title), 8)
                and (line.startswith(title) or title.startswith(line))
                for line in heads[number]
            ):
                starts.append((index, number))
                after = number + 1
                break
    ranges = {}
    for (index, start), following in zip(starts, starts[1:] + [(None, len(texts))]):
        ranges[index] = (start, following[1])
    return ranges


def check_targets(reader, toc: list[dict], texts: list[str], edition: str) -> list[str]:
    """Every entry of the printed contents and every bookmark goes to a page of its own
    chapter (page ranges from the printed text: ``page_ranges``), and no two entries of
    different chapters (or pages) go to the same place. The contents' links are the
    first internal links after the title page, one per entry in the contents' order."""
    problems = []
    settings = EDITIONS[edition]
    ranges = page_ranges(toc, texts, edition)
    tops = [i for i, e in enumerate(toc) if e["level"] == 1]
    chapters = [i for i in tops if settings["chapter"].match(toc[i]["title"])]
    missing = [toc[i]["title"] for i in chapters if i not in ranges]
    if missing:
        problems.append(f"no page starts with these chapters' titles: {missing[:3]}")
    starts = [ranges[i][0] for i in chapters if i in ranges]
    if starts != sorted(starts) or len(set(starts)) != len(starts):
        problems.append(f"the chapters' title pages are out of order: {starts}")
    owner = {}  # entry index -> its top-level entry's index
    for index, entry in enumerate(toc):
        if entry["level"] == 1:
            top = index
        owner[index] = top

    def position(dest):
        page = reader.get_destination_page_number(dest)
        top = getattr(dest, "top", None)
        return page, None if top is None else round(float(top))

    named = reader.named_destinations
    # the contents' links: internal links of the pages after the title page, in reading
    # order; a title that wraps is one link per line with the same destination
    links = []
    for number in contents_pages(texts, edition):
        page = reader.pages[number]
        annots = [a.get_object() for a in page.get("/Annots") or []]
        annots = [a for a in annots if a.get("/Dest") is not None]
        annots.sort(key=lambda a: -float(a["/Rect"][3]))
        for a in annots:
            name = str(a["/Dest"])
            if links and links[-1][1] == name and links[-1][0] == number:
                continue
            links.append((number, name))
    if len(links) != len(toc):
        problems.append(
            f"{len(links)} links on the contents pages, {len(toc)} entries in the contents"
        )
    places = {}
    for index, (entry, (_, name)) in enumerate(zip(toc, links)):
        if name.lstrip("/") != entry["id"]:
            problems.append(
                f"contents entry {index} ({entry['title']!r}) links to {name}, not #{entry['id']}"
            )
            break
        dest = named.get(name) or named.get("/" + name.lstrip("/"))
        if dest is None:
            problems.append(f"the contents' link to {name} goes nowhere")
            continue
        places.setdefault(position(dest), set()).add(owner[index])
        problems += _outside(
            index, entry, position(dest)[0], ranges, owner, toc, "contents"
        )
    for place, owners in places.items():
        if len(owners) > 1:
            problems.append(
                f"contents entries of {len(owners)} pages go to the same place (page "
                f"{place[0] + 1}): {[toc[o]['title'] for o in sorted(owners)][:4]}"
            )
    # the outline: its top-level bookmarks are toc's top-level entries, in order
    places = {}
    level1 = iter(tops)
    top = None

    def walk(items, level):
        nonlocal top
        for item in items:
            if isinstance(item, list):
                walk(item, level + 1)
                continue
            if level == 1:
                top = next(level1, None)
                index = top
            else:
                index = None
            page = reader.get_destination_page_number(item)
            if top is None:
                problems.append(f"bookmark {item.title!r} beyond the contents' pages")
                continue
            places.setdefault(position(item), set()).add(top)
            problems.extend(
                _outside(
                    index if index is not None else -1,
                    {"title": item.title, "level": level},
                    page,
                    ranges,
                    {-1: top, **owner},
                    toc,
                    "bookmark",
                )
            )

    walk(reader.outline, 1)
    for place, owners in places.items():
        if len(owners) > 1:
            problems.append(
                f"bookmarks under {len(owners)} pages go to the same place (page "
                f"{place[0] + 1}): {[toc[o]['title'] for o in sorted(owners)][:4]}"
            )
    return problems


def _outside(index, entry, page, ranges, owner, toc, what) -> list[str]:
    """``entry`` (of toc's top-level entry ``owner[index]``) goes to ``page`` (0-based):
    outside that entry's pages?"""
    top = owner[index]
    if top not in ranges:
        return []
    first, after = ranges[top]
    if entry["level"] == 1 and page != first:
        return [
            f"{what} {entry['title']!r} goes to page {page + 1}, its title is on page {first + 1}"
        ]
    if not first <= page < after:
        return [
            (
                f"{what} {entry['title']!r} goes to page {page + 1}, outside its chapter "
                f"{toc[top]['title']!r} (pages {first + 1}-{after})"
            )
        ]
    return []


def check_pdf(pdf: Path, edition: str = "en") -> list[str]:
    """What is wrong with the book: an outline that is not one bookmark per chapter with its
    sections under it, as the contents list them (no garbled, doubled or empty title, no
    raw TeX, no stray space; in Chinese, Chinese titles), a font not embedded, a link to a
    local address, a web-only label left in the text."""
    from pypdf import PdfReader

    settings = EDITIONS[edition]
    reader = PdfReader(pdf)
    problems = []
    toc_file = pdf.with_suffix(".toc.json")
    toc = (
        json.loads(toc_file.read_text(encoding="utf-8")) if toc_file.exists() else None
    )
    outline = outline_of(pdf)
    tops = [t for lvl, t, _ in outline if lvl == 1]
    chapters = [t for t in tops if settings["chapter"].match(t)]
    if len(chapters) != CHAPTERS:
        problems.append(
            f"{len(chapters)} top-level chapter bookmarks, _toc.yml has {CHAPTERS} "
            f"chapters: {tops}"
        )
    for level, title, page in outline:
        if not title.strip() or "\\" in title or "$" in title or RAW_TEX.search(title):
            problems.append(f"bookmark title {title!r}")
        if STRAY_SPACE.search(title):
            problems.append(f"bookmark title with a stray space: {title!r}")
        half = len(title) // 2
        if (
            len(title) > 20
            and title[:half].strip()
            and title.count(title[: min(20, half)]) > 1
        ):
            problems.append(f"bookmark title repeats itself: {title!r}")
    if edition == "zh_CN":
        # every chapter's and page's bookmark is Chinese; a section's may be a name
        # ("conda", "Colab"), not English words, but on the English-only API page
        english_page = False
        for level, title, _ in outline:
            if level == 1:
                english_page = "英文" in title
            if CJK.search(title):
                continue
            if level == 1 or (ENGLISH_WORDS.search(title) and not english_page):
                problems.append(
                    f"a bookmark of the Chinese PDF is not Chinese: {title!r}"
                )
    if toc is not None:
        expected = [(e["level"], e["title"], e["page"]) for e in toc]
        if outline != expected:
            diff = [(a, b) for a, b in zip(outline, expected) if a != b][:3]
            problems.append(
                f"outline ({len(outline)}) differs from the contents ({len(expected)}): {diff}"
            )
    pages_of = (
        [reader.get_destination_page_number(reader.outline[0])] if outline else []
    )
    if pages_of and pages_of[0] < 2:
        problems.append(
            "the first chapter starts before the title page and the contents"
        )
    missing = fonts_not_embedded(reader)
    if missing:
        problems.append(f"fonts not embedded: {sorted(missing)[:5]}")
    local = set()
    for number, page in enumerate(reader.pages):
        for annot in page.get("/Annots") or []:
            annot = annot.get_object()
            uri = (annot.get("/A") or {}).get("/URI")
            if uri and LOCAL.match(str(uri)):
                local.add((number + 1, str(uri)))
    if local:
        problems.append(
            f"{len(local)} links to a local address, e.g. {sorted(local)[:3]}"
        )
    texts = [(page.extract_text() or "") for page in reader.pages]
    text = "".join(texts)
    if toc is not None:
        problems += check_targets(reader, toc, texts, edition)
    # (the code and its outputs are English: a fifth of the Chinese book's letters are
    # Chinese characters, none of the English book's)
    if edition == "zh_CN" and len(CJK.findall(text)) < 0.1 * len(
        re.findall(r"[A-Za-z]", text)
    ):
        problems.append("the Chinese PDF's text is mostly not Chinese")
    radicals = sorted(set(RADICALS.findall(text)))
    if radicals:  # the text says 注意⼒ (U+2F12) for 注意力: copying and searching fail
        problems.append(f"the text maps glyphs to radicals: {radicals[:10]}")
    for label in settings["web_labels"]:
        if label in text:
            problems.append(f"web-only label printed: {label!r}")
    # a <details> printed without its <summary>: the browser's own label above it
    default = len(re.findall(r"^\s*[▼▶►]?\s*Details\s*$", text, re.MULTILINE))
    if default:
        problems.append(f"the browser's own label 'Details' printed {default} times")
    return problems


def enable_pdf_link(site: Path) -> None:
    """The landing pages' PDF buttons, written hidden while their PDF was not there
    (book/_ext/course_links.py), become links where the PDF now is."""

    def enable(page: Path):
        def replace(match):
            if (page.parent / match.group(1)).resolve().exists():
                return f'<a href="{match.group(1)}"'
            return match.group(0)

        return replace

    for page in site.rglob("intro.html"):
        html = page.read_text(encoding="utf-8")
        fixed = re.sub(r'<a data-course-pdf="([^"]+)" hidden', enable(page), html)
        if fixed != html:
            page.write_text(fixed, encoding="utf-8")


def main() -> None:
    editions = list(EDITIONS)
    if "--edition" in sys.argv:
        editions = [sys.argv[sys.argv.index("--edition") + 1]]
        if editions[0] not in EDITIONS:
            raise SystemExit(
                f"--edition: expected one of {list(EDITIONS)}, got {editions[0]!r}"
            )
    if "--check" in sys.argv:
        failed = False
        for edition in editions:
            out = EDITIONS[edition]["out"]
            problems = check_pdf(out, edition)
            print("\n".join(problems) or f"{out}: a book (outline, contents, links)")
            failed |= bool(problems)
        raise SystemExit(1 if failed else 0)
    for edition in editions:
        start = time.perf_counter()
        out = EDITIONS[edition]["out"]
        if "--no-build" not in sys.argv:
            build_single_html(edition)
        toc = print_pdf(edition)
        add_outline(out, toc, edition)
        problems = check_pdf(out, edition)
        if problems:
            raise SystemExit(f"{out.name} is not a book yet:\n" + "\n".join(problems))
        site = ROOT / "_build" / "html"
        if site.is_dir():
            shutil.copy(out, site / out.name)
            enable_pdf_link(site)
        size = out.stat().st_size / 1e6
        chapters = sum(e["level"] == 1 for e in toc)
        print(
            f"{out}: {size:.1f} MB, {len(__import__('pypdf').PdfReader(out).pages)} pages, "
            f"{chapters} chapters and {len(toc) - chapters} sections in the outline, "
            f"in {time.perf_counter() - start:.0f} s"
        )


if __name__ == "__main__":
    main()
