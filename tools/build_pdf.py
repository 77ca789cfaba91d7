"""Build the whole book as one PDF: `make pdf`.

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
  printed open under a plain "Solution" label);
* MathJax typesets the formulas first; a displayed formula wider than the page is scaled
  down; a wrapped code line continues indented under its own line (course.css: @media
  print wraps code at the margin).

Then pypdf writes the outline (bookmarks): one per chapter, one per section under it,
named by the heading's text with its math as plain text. ``check_pdf`` reads the result
back and lists what is wrong (an outline that does not match the contents, a link to a
local address); `make pdf` fails on any.

    python tools/build_pdf.py [OUT.pdf] [--no-build]   # default: _build/pdf/attention-course.pdf
    python tools/build_pdf.py --check [PDF]             # only check an existing PDF

--no-build prints the existing _build/singlehtml again. The PDF is also copied to
_build/html/attention-course.pdf when the website has been built, and the landing page's
"Download the whole book (PDF)" link is turned on (book/_ext/course_links.py writes it
hidden while there is no PDF).
"""

import functools
import http.server
import json
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
SINGLE = ROOT / "_build" / "singlehtml"
DEFAULT_OUT = ROOT / "_build" / "pdf" / "attention-course.pdf"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
REPOSITORY = CONFIG["repository"]["url"]
# GitHub Pages publishes https://github.com/OWNER/NAME at https://OWNER.github.io/NAME/.
_owner, _name = REPOSITORY.removeprefix("https://github.com/").split("/")[:2]
SITE = f"https://{_owner}.github.io/{_name}/"

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
    const plainTex = (t) => t
        .replace(/\\(?:mathbf|mathrm|mathit|text|textrm|operatorname|boldsymbol)\s*\{([^{}]*)\}/g, '$1')
        .replace(/\\sqrt\s*\{([^{}]*)\}/g, (m, x) => '√' + (x.length > 1 ? '(' + x + ')' : x))
        .replace(/\\([A-Za-z]+)/g, (m, w) => GREEK[w] !== undefined ? GREEK[w] : w)
        .replace(/\\[,;!]/g, ' ')
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
    document.querySelectorAll('details').forEach(d => {
        d.open = true;
        const summary = d.querySelector(':scope > summary');
        if (!summary) return;
        const label = document.createElement('p');
        label.className = 'course-print-label';
        label.textContent = d.classList.contains('explanation') ? 'Explanation' : 'Solution';
        summary.replaceWith(label);
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
            if (path === 'book.html') path = 'book/intro.html';
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

    // --- the contents: every page of the site and its sections. The single page nests the
    // pages the landing page lists under it (a chapter's title is an h2 there, its sections
    // h3), each after a <span id="document-NAME">: a page's first heading is level 1, the
    // headings one step below it level 2.
    const toc = [];
    let top = null, pending = true;
    article.querySelectorAll('span[id^="document-"], h1, h2, h3, h4').forEach(e => {
        if (e.tagName === 'SPAN') { pending = true; return; }
        const rank = Number(e.tagName[1]);
        let level;
        if (pending) { level = 1; top = rank; pending = false; }
        else if (top !== null && rank === top + 1) level = 2;
        else return;
        const section = e.closest('section[id]');
        const id = e.id || (section && section.id);
        const title = clean(e);
        if (!id || !title) return;
        toc.push({id, title, level});
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
    title.querySelector('.course-site').append('Read online, with the notebooks: ', site);
    const contents = document.createElement('nav');
    contents.className = 'course-contents';
    contents.innerHTML = '<p class="course-contents-title">Contents</p>';
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
details > summary { display: none !important; }
pre .course-line { display: block; white-space: pre-wrap; }
"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def build_single_html() -> None:
    jb = Path(sys.executable).parent / "jupyter-book"
    subprocess.run(
        [str(jb), "build", str(ROOT), "--builder", "singlehtml", "--keep-going"],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )


def single_page() -> str:
    """The singlehtml builder writes the book to the root document's path
    (book/intro.html) but links its assets and images from the site's root: put a copy
    at the root."""
    root_doc = yaml.safe_load((ROOT / "_toc.yml").read_text())["root"]
    shutil.copy(SINGLE / f"{root_doc}.html", SINGLE / "book.html")
    return "book.html"


def book_titles() -> dict:
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    return {
        "title": CONFIG.get("title", "Attention"),
        "subtitle": intro.splitlines()[0].lstrip("# ").strip(),
        "author": CONFIG.get("author", ""),
        "site": SITE,
    }


def print_pdf(out: Path) -> list[dict]:
    """Print the book into ``out`` (twice: the second print has the page numbers the first
    one measured in its table of contents); return the table of contents with pages."""
    handler = functools.partial(Quiet, directory=str(SINGLE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{single_page()}"
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
            page.wait_for_timeout(500)
            toc = page.evaluate(PREPARE, book_titles())
            page.evaluate(SCALE_WIDE_MATH)
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
    final = destination_pages(out)
    moved = [e["id"] for e in toc if final.get(e["id"]) != pages.get(e["id"])]
    if moved:
        raise SystemExit(f"page numbers moved between the two prints: {moved[:5]}")
    for entry in toc:
        entry["page"] = final.get(entry["id"])
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


def destination_pages(pdf: Path) -> dict[str, int]:
    """The page index (0-based) of every named destination (Chromium names one for each
    #id that a link of the page points to: the table of contents points to every heading)."""
    from pypdf import PdfReader

    reader = PdfReader(pdf)
    out = {}
    for name, dest in reader.named_destinations.items():
        try:
            out[str(name).lstrip("/")] = reader.get_destination_page_number(dest)
        except Exception:
            continue
    return out


def add_outline(pdf: Path, toc: list[dict]) -> None:
    """One bookmark per chapter (and front-matter page), one per section under it."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(pdf))
    parent = None
    for entry in toc:
        if entry.get("page") is None:
            raise SystemExit(f"no page for {entry['title']!r} (#{entry['id']})")
        if entry["level"] == 1:
            parent = writer.add_outline_item(
                title=entry["title"], page_number=entry["page"]
            )
        else:
            writer.add_outline_item(
                title=entry["title"], page_number=entry["page"], parent=parent
            )
    writer.page_mode = "/UseOutlines"
    writer.add_metadata(
        {"/Title": CONFIG.get("title", ""), "/Author": CONFIG.get("author", "")}
    )
    with open(pdf, "wb") as f:
        writer.write(f)
    (pdf.with_suffix(".toc.json")).write_text(
        json.dumps(toc, ensure_ascii=False, indent=1), encoding="utf-8"
    )


LOCAL = re.compile(r"^(file:|https?://(127\.0\.0\.1|localhost|0\.0\.0\.0)[:/])")


def check_pdf(pdf: Path) -> list[str]:
    """What is wrong with the book: an outline that is not one bookmark per chapter with its
    sections under it, as the contents list them (no garbled, doubled or empty title, no
    raw TeX), a link to a local address, a web-only label left in the text."""
    from pypdf import PdfReader

    reader = PdfReader(pdf)
    problems = []
    toc_file = pdf.with_suffix(".toc.json")
    toc = (
        json.loads(toc_file.read_text(encoding="utf-8")) if toc_file.exists() else None
    )

    def walk(items, level, out):
        for item in items:
            if isinstance(item, list):
                walk(item, level + 1, out)
            else:
                out.append(
                    (level, item.title, reader.get_destination_page_number(item))
                )
        return out

    outline = walk(reader.outline, 1, [])
    chapters = [t for lvl, t, _ in outline if lvl == 1]
    if not any(re.match(r"Chapter \d+\.", t) for t in chapters):
        problems.append(f"no top-level bookmark per chapter: {chapters[:5]}")
    for level, title, page in outline:
        if not title.strip() or "\\" in title or "$" in title:
            problems.append(f"bookmark title {title!r}")
        half = len(title) // 2
        if (
            len(title) > 20
            and title[:half].strip()
            and title.count(title[: min(20, half)]) > 1
        ):
            problems.append(f"bookmark title repeats itself: {title!r}")
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
    text = "".join(
        (reader.pages[i].extract_text() or "") for i in range(len(reader.pages))
    )
    for label in (
        "Show solution",
        "Hide solution",
        "Show code cell",
        "Hide code cell",
    ):
        if label in text:
            problems.append(f"web-only label printed: {label!r}")
    return problems


def enable_pdf_link(site: Path) -> None:
    """The landing pages' PDF button, written hidden while there was no PDF
    (book/_ext/course_links.py), becomes a link."""
    for page in site.rglob("intro.html"):
        html = page.read_text(encoding="utf-8")
        fixed = re.sub(r'<a data-course-pdf="([^"]+)" hidden', r'<a href="\1"', html)
        if fixed != html:
            page.write_text(fixed, encoding="utf-8")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = Path(args[0]) if args else DEFAULT_OUT
    if "--check" in sys.argv:
        problems = check_pdf(out)
        print("\n".join(problems) or f"{out}: a book (outline, contents, links)")
        raise SystemExit(1 if problems else 0)
    start = time.perf_counter()
    if "--no-build" not in sys.argv:
        build_single_html()
    toc = print_pdf(out)
    add_outline(out, toc)
    problems = check_pdf(out)
    if problems:
        raise SystemExit("the PDF is not a book yet:\n" + "\n".join(problems))
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
