"""No dead link on the built site, in either edition.

Every ``href`` and ``src`` of every page under ``_build/html`` (the English site and the
Chinese one in ``zh/``) is followed: a link inside the site must name a file that exists
(a folder: its ``index.html``) and, with a ``#fragment``, an element with that id on the
target page; a link to another site must be a well-formed http(s) or mailto address, not
a local one (``127.0.0.1``, ``localhost``, ``file:``) and not a template left unfilled
(``{repository_url}``). No network is used: external addresses are checked for shape only.
"""

from __future__ import annotations

import re
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
# Sphinx's own pages that are written in JavaScript (search) or only hold hidden copies.
SKIP_FILES = {"_static", "_sources", "_images", ".doctrees", "_downloads"}


class Links(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key) and (key == "id" or tag == "a"):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            value = attrs.get(key)
            if value is not None and not (
                tag == "link" and attrs.get("rel") in ("preconnect", "dns-prefetch")
            ):
                self.links.append((tag, value.strip()))


@cache
def parse(path: Path) -> Links:
    parser = Links()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def pages() -> list[Path]:
    if not (HTML / "index.html").exists():
        return []
    return sorted(
        p
        for p in HTML.rglob("*.html")
        if not SKIP_FILES & set(p.relative_to(HTML).parts)
    )


EXTERNAL = re.compile(
    r"^(https?://[A-Za-z0-9.-]+\.[A-Za-z]{2,}(:\d+)?(/\S*)?|mailto:\S+@\S+)$"
)


def problems_of(page: Path) -> list[str]:
    out = []
    for tag, link in parse(page).links:
        if not link or link.startswith(("javascript:", "data:")):
            continue
        if "{" in link or "}" in link or "%7B" in link:
            out.append(f"unfilled template: {link}")
            continue
        parts = urlsplit(link)
        if parts.scheme in ("http", "https", "mailto", "file") or link.startswith("//"):
            host = parts.hostname or ""
            if parts.scheme == "file" or host in ("127.0.0.1", "localhost", "0.0.0.0"):
                out.append(f"local address: {link}")
            elif not EXTERNAL.match(link):
                out.append(f"malformed address: {link}")
            continue
        if parts.scheme:
            out.append(f"unknown scheme: {link}")
            continue
        if parts.path:
            target = (page.parent / unquote(parts.path)).resolve()
            if parts.path.startswith("/"):
                target = (HTML / unquote(parts.path).lstrip("/")).resolve()
        else:
            target = page
        if target.is_dir():
            target = target / "index.html"
        if not target.exists():
            out.append(f"<{tag}> to a missing file: {link}")
            continue
        if parts.fragment and target.suffix == ".html":
            if unquote(parts.fragment) not in parse(target).ids:
                out.append(f"<{tag}> to a missing anchor: {link}")
    return out


def test_the_site_was_built_with_both_editions():
    found = pages()
    assert found, (
        "_build/html is missing: `make test` builds the book before these checks"
    )
    assert any(p.is_relative_to(HTML / "zh") for p in found), (
        "no Chinese edition in _build/html/zh"
    )


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_no_dead_link(edition):
    found = [p for p in pages() if p.is_relative_to(HTML / "zh") == (edition == "zh")]
    assert found
    dead = {}
    for page in found:
        bad = problems_of(page)
        if bad:
            dead[str(page.relative_to(HTML))] = sorted(set(bad))[:8]
    assert not dead, "dead links:\n" + "\n".join(
        f"{page}: {bad}" for page, bad in sorted(dead.items())
    )
