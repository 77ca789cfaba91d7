"""Build the website's editions from the one English source.

    python tools/build_book.py en        English site          -> _build/html
    python tools/build_book.py gettext   message catalogs      -> _build/gettext/*.pot
    python tools/build_book.py zh        Chinese site          -> _build/zh/html, copied to _build/html/zh
    python tools/build_book.py update-po catalogs updated      -> locales/zh_CN/LC_MESSAGES/*.po

Every build goes through Jupyter Book 1.x's own `build_sphinx` with `_config.yml` and `_toc.yml`,
plus, for Chinese, the overrides in `locales/zh_CN/config.yml` (language, title, search).
Each build has its own doctree folder: gettext and html must not share one (a doctree read for
one builder is not re-read for the other), and myst-nb writes `<outdir>/../jupyter_execute`,
so the Chinese site is built in its own folder and copied into `_build/html/zh`.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
LOCALES = ROOT / "locales"
UNTRANSLATED = ["book/api"]  # pages the Chinese edition shows in English


def build(builder: str, outdir: Path, doctrees: Path, overrides: dict | None = None) -> int:
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


def zh_overrides() -> dict:
    return yaml.safe_load((LOCALES / "zh_CN" / "config.yml").read_text(encoding="utf-8"))


def main(argv: list[str]) -> int:
    what = argv[1] if len(argv) > 1 else "en"
    if what == "en":
        return build("html", BUILD / "html", BUILD / ".doctrees")
    if what == "gettext":
        shutil.rmtree(BUILD / "gettext", ignore_errors=True)
        code = build("gettext", BUILD / "gettext", BUILD / ".doctrees-gettext")
        # The API reference stays English: its messages are the docstrings, whose reST roles
        # (:func:, :class:) break when a translation is parsed as MyST (see README).
        for page in UNTRANSLATED:
            (BUILD / "gettext" / f"{page}.pot").unlink(missing_ok=True)
        return code
    if what == "update-po":
        # Run `gettext` first. Each English message keeps its translation; a changed one is
        # marked fuzzy (make test then fails until it is translated again); line_width 0: one
        # line per message, so a diff shows which message changed.
        from sphinx_intl.basic import update

        update(str(LOCALES), str(BUILD / "gettext"), ("zh_CN",), line_width=0)
        return 0
    if what == "zh":
        # --out DIR: build into DIR alone (a translator's check), not into the site.
        folder = Path(argv[3]).resolve() if argv[2:3] == ["--out"] else BUILD / "zh"
        out = folder / "html"
        code = build("html", out, folder / ".doctrees", zh_overrides())
        if code == 0 and folder == BUILD / "zh":
            shutil.rmtree(BUILD / "html" / "zh", ignore_errors=True)
            shutil.copytree(out, BUILD / "html" / "zh")
        return code
    raise SystemExit(f"unknown edition {what!r}: expected en, gettext, zh or update-po")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
