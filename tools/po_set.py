"""Small maintainer's helper: set translations in a catalog from a JSON file.

    python tools/po_set.py PAGE FILE.json     FILE: {"English msgid": "译文", ...}

Each message must exist in the catalog; its fuzzy flag is cleared. For fixing a few messages
after `make translations` without a PO editor.
"""

import json
import sys
from pathlib import Path

from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[1]


def main(page: str, table: str) -> int:
    path = ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / f"{page}.po"
    with open(path, "rb") as f:
        catalog = read_po(f, locale="zh_CN")
    updates = json.loads(Path(table).read_text(encoding="utf-8"))
    missing = [k for k in updates if catalog.get(k) is None]
    if missing:
        raise SystemExit(f"not in {path.name}: {missing}")
    for msgid, msgstr in updates.items():
        message = catalog.get(msgid)
        message.string = msgstr
        message.flags.discard("fuzzy")
    with open(path, "wb") as f:
        write_po(f, catalog, width=0, ignore_obsolete=True)
    print(f"{len(updates)} messages set in {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
