"""Build the website's editions from the one English source.

    python tools/build_book.py gettext   message catalogs      -> _build/gettext/*.pot
    python tools/build_book.py zh        Chinese site          -> _build/zh/html, copied to _build/html/zh
    python tools/build_book.py update-po catalogs updated      -> locales/zh_CN/LC_MESSAGES/*.po

The English site is `jupyter-book build .` (make book). These builds go through Jupyter Book
1.x's own `build_sphinx` with the same `_config.yml` and `_toc.yml`,
plus, for Chinese, the overrides in `locales/zh_CN/config.yml` (language, title, search).
Each build has its own doctree folder: gettext and html must not share one (a doctree read for
one builder is not re-read for the other), and myst-nb writes `<outdir>/../jupyter_execute`,
so the Chinese site is built in its own folder and copied into `_build/html/zh`.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
LOCALES = ROOT / "locales"
UNTRANSLATED = ["book/api"]  # pages the Chinese edition shows in English


def build(
    builder: str, outdir: Path, doctrees: Path, overrides: dict | None = None
) -> int:
    from jupyter_book.sphinx import build_sphinx

    config = {
        "external_toc_path": (ROOT / "_toc.yml").as_posix(),
        "nitpicky": True,
        "latex_individualpages": False,
    }
    config.update(overrides or {})
    result = build_sphinx(
        ROOT,
        outdir,
        use_external_toc=True,
        noconfig=True,
        path_config=ROOT / "_config.yml",
        confoverrides=config,
        doctreedir=doctrees,
        builder=builder,
        freshenv=True,
        warningiserror=True,
        keep_going=True,
    )
    return 0 if result in (0, None) else 1


def update_catalogs(pages: list[str]) -> None:
    """Bring locales/zh_CN/LC_MESSAGES/<page>.po in step with _build/gettext/<page>.pot (run
    `gettext` first): a new English message comes in empty, a changed one keeps its old
    translation marked fuzzy (make test fails on both until they are translated), a removed
    one is dropped. One line per message (width 0), so a diff shows which message changed.
    ``pages``: only these (e.g. chapters/05_scaled_dot_product); none: every page."""
    from babel.messages.pofile import read_po, write_po

    pot_dir = BUILD / "gettext"
    for pot in sorted(pot_dir.rglob("*.pot")):
        page = pot.relative_to(pot_dir).with_suffix("").as_posix()
        if pages and page not in pages:
            continue
        with open(pot, "rb") as f:
            template = read_po(f)
        po = LOCALES / "zh_CN" / "LC_MESSAGES" / f"{page}.po"
        if po.exists():
            with open(po, "rb") as f:
                catalog = read_po(f, locale="zh_CN")
            catalog.update(template)
        else:
            po.parent.mkdir(parents=True, exist_ok=True)
            catalog = template
            catalog.locale = "zh_CN"
        catalog.obsolete.clear()
        with open(po, "wb") as f:
            write_po(f, catalog, width=0, ignore_obsolete=True)
        print("updated", po.relative_to(ROOT))


def zh_overrides(folder: Path) -> dict:
    config = yaml.safe_load(
        (LOCALES / "zh_CN" / "config.yml").read_text(encoding="utf-8")
    )
    # Chinese search: Sphinx splits Chinese text into words with jieba. jieba does not know the
    # course's terms (注意力汇聚, 键值缓存 ...), so the glossary's Chinese column is its user dictionary.
    folder.mkdir(parents=True, exist_ok=True)
    words = folder / "jieba_userdict.txt"
    words.write_text(
        "".join(f"{term} 1000 n\n" for term in glossary_chinese()), encoding="utf-8"
    )
    config["html_search_options"] = {"dict": str(words)}
    # The Chinese site is published under the English one's zh/ (its canonical links).
    site = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["html_baseurl"] = site["html"]["baseurl"] + "zh/"
    return config


def glossary_chinese() -> list[str]:
    """The Chinese terms of book/glossary.md (split at / and ，, parentheticals dropped) that are
    Chinese words only: jieba splits at spaces and Latin letters anyway."""
    sys.path.insert(0, str(ROOT / "tools"))
    from check_translations import CJK, glossary_terms

    terms = {zh for _, zh in glossary_terms()}
    return sorted(t for t in terms if len(t) > 1 and re.fullmatch(f"[{CJK}]+", t))


def main(argv: list[str]) -> int:
    what = argv[1] if len(argv) > 1 else ""
    if what == "gettext":
        shutil.rmtree(BUILD / "gettext", ignore_errors=True)
        # A fixed POT-Creation-Date, so that updating the catalogs does not rewrite every header.
        os.environ.setdefault("SOURCE_DATE_EPOCH", "1767225600")
        code = build("gettext", BUILD / "gettext", BUILD / ".doctrees-gettext")
        # The API reference stays English: its messages are the docstrings, whose reST roles
        # (:func:, :class:) break when a translation is parsed as MyST (see MAINTAINERS.md).
        for page in UNTRANSLATED:
            (BUILD / "gettext" / f"{page}.pot").unlink(missing_ok=True)
        # sphinx.pot: the templates' own strings (the sidebar toggles' titles); the
        # Chinese edition translates theme strings from locales/zh_CN/config.yml
        # (course_theme_translations, book/_ext/course_zh_theme.py), not from a catalog.
        (BUILD / "gettext" / "sphinx.pot").unlink(missing_ok=True)
        return code
    if what == "update-po":
        update_catalogs(argv[2:])
        return 0
    if what == "zh":
        # --out DIR: build into DIR alone (a translator's check), not into the site.
        folder = Path(argv[3]).resolve() if argv[2:3] == ["--out"] else BUILD / "zh"
        out = folder / "html"
        code = build("html", out, folder / ".doctrees", zh_overrides(folder))
        if code == 0 and folder == BUILD / "zh":
            shutil.rmtree(BUILD / "html" / "zh", ignore_errors=True)
            shutil.copytree(out, BUILD / "html" / "zh")
        return code
    raise SystemExit(f"unknown step {what!r}: expected gettext, zh or update-po")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
