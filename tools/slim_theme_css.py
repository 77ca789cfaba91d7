"""Write a copy of pydata-sphinx-theme's stylesheet without Font Awesome's 1,900 icon rules.

The theme's pydata-sphinx-theme.css (397 kB) bundles all of Font Awesome's
`.fa-NAME:before{content:"\\f..."}` rules (86 kB), which map icon names to web-font
glyphs. The site draws its ~30 icons from book/_static/icons.css instead and never
uses the web fonts, so these rules are dead weight on every page. `make book` writes
the slimmed copy to .vendor/static/styles/, which Sphinx copies over the theme's file
(html_static_path comes after the theme's static files).

    python tools/slim_theme_css.py OUT_DIR
"""

import re
import sys
from pathlib import Path

import pydata_sphinx_theme

SOURCE = (
    Path(pydata_sphinx_theme.__file__).parent
    / "theme/pydata_sphinx_theme/static/styles/pydata-sphinx-theme.css"
)
ICON_RULE = re.compile(
    r'\.fa-[a-z0-9-]+:before(?:,\.fa-[a-z0-9-]+:before)*\{content:"[^"]*"\}'
)


def main(out_dir: str) -> None:
    css = SOURCE.read_text()
    slim, count = ICON_RULE.subn("", css)
    if (
        count < 1000
    ):  # the theme changed its bundling: look again rather than ship a broken stylesheet
        sys.exit(f"expected Font Awesome's icon rules in {SOURCE}, found {count}")
    out = Path(out_dir) / "styles" / "pydata-sphinx-theme.css"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(slim)
    print(f"{out}: {len(css)} -> {len(slim)} bytes ({count} icon rules removed)")


if __name__ == "__main__":
    main(sys.argv[1])
