"""Build the whole book as one PDF: `make pdf`.

Jupyter Book builds the book as a single HTML page (Sphinx's singlehtml builder, the
site's own theme, templates and print CSS), and the Chromium the browser tests already
use prints it (Playwright's page.pdf): MathJax typesets the formulas first, every
collapsed solution is opened, code lines wrap at the margin (course.css, @media print),
figures are fitted to the page, a displayed formula wider than the page is scaled down,
and the PDF gets an outline (bookmarks) from the headings.

    python tools/build_pdf.py [OUT.pdf] [--no-build]   # default: _build/pdf/attention-course.pdf

--no-build prints the existing _build/singlehtml again. The PDF is also copied to
_build/html/attention-course.pdf when the website has been built: the landing page links
to it there.
"""

import functools
import http.server
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

FOOTER = (
    '<div style="font-size:8px;width:100%;text-align:center;color:#666">'
    '<span class="pageNumber"></span> / <span class="totalPages"></span></div>'
)

# Run in the page once it is laid out for print.
PREPARE = """() => {
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    // bookmarks are named by the heading's text alone, without the "#" permalink
    document.querySelectorAll('a.headerlink').forEach(a => a.remove());
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


def print_pdf(out: Path) -> None:
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
            page.wait_for_timeout(500)
            page.evaluate(PREPARE)
            out.parent.mkdir(parents=True, exist_ok=True)
            page.pdf(
                path=str(out),
                format="A4",
                margin={
                    "top": "16mm",
                    "bottom": "16mm",
                    "left": "14mm",
                    "right": "14mm",
                },
                print_background=True,
                display_header_footer=True,
                header_template="<span></span>",
                footer_template=FOOTER,
                outline=True,
                tagged=True,
            )
            browser.close()
    finally:
        server.shutdown()


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = Path(args[0]) if args else DEFAULT_OUT
    start = time.perf_counter()
    if "--no-build" not in sys.argv:
        build_single_html()
    print_pdf(out)
    site = ROOT / "_build" / "html"
    if site.is_dir():
        shutil.copy(out, site / out.name)
    size = out.stat().st_size / 1e6
    print(f"{out}: {size:.1f} MB in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
