"""Check the Chinese edition's catalogs against the English source.

    python tools/check_translations.py [PAGE ...]     e.g. chapters/03_masked_softmax

Reads the message templates of the last gettext build (`_build/gettext`, made by
`python tools/build_book.py gettext`, which `make book` runs) and the catalogs in
`locales/zh_CN/LC_MESSAGES/`. Exit 1 and one line per problem, naming the page and the
start of the English message, when a message

- is missing from the catalog, untranslated or fuzzy (the English changed: translate again);
- changes what must not change: inline math `$...$`, code spans, roles like {cite}`x`,
  link and image targets (math stays math, code stays code, a citation still cites);
- keeps English prose (no Chinese at all), unless it is a name, a formula or code;
- breaks Markdown: emphasis markers that no longer parse (`**“x”**字` does not;
  `“**x**”字` does), or display math (`$$`), which a translation turns into `\\[::\\]`;
- puts ASCII punctuation (, ; : ? ! ( ) or a quote) next to Chinese text instead of the
  full-width forms （，；：？！（）“”）;
- leaves out the Chinese term of a glossary term (book/glossary.md) that its English has,
  apart from the few exceptions in GLOSSARY_EXCEPTIONS below, each with its reason.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

from babel.messages.pofile import read_po
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
POT = ROOT / "_build" / "gettext"
PO = ROOT / "locales" / "zh_CN" / "LC_MESSAGES"
GLOSSARY = ROOT / "book" / "glossary.md"

CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
HAS_CJK = re.compile(f"[{CJK}]")
MATH = re.compile(r"(?<![\\$])\$(?!\$)(?:\\.|[^$\\])+?\$")
ROLE = re.compile(r"\{[a-z:-]+\}`[^`]*`")
CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
TARGET = re.compile(r"\]\(([^()\s]*(?:\([^()\s]*\)[^()\s]*)*)\)")
WORD = re.compile(r"[A-Za-z][a-z]{2,}")

# English glossary terms whose Chinese term a translation need not contain, and why.
GLOSSARY_EXCEPTIONS = {
    "value": "also a number's value (数值, 取值), not only the value of a key-value pair",
    "key": "also a dictionary key or a key of a table",
    "mask": "掩码 (the tensor) and 掩蔽 (the act) are both right, depending on the sentence",
    "padding": "padding of a tensor to a length is 填充, padding tokens 填充词元: either form",
    "decoding": "autoregressive decoding (解码) and the decode phase (解码阶段) read naturally either way",
    "hidden state": "隐状态 (d2l-zh's other form) is also accepted",
    "tile": "a tile is 分块 or 块 depending on the sentence",
    "kernel": "a GPU kernel is 内核 or 核函数, a smoothing kernel 核: all contain 核 except 算子",
}


def glossary_terms() -> list[tuple[str, str]]:
    """(English, Chinese) pairs from the glossary table, parentheticals dropped, a / b split."""
    pairs = []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not HAS_CJK.search(cells[1]) or cells[0] == "English":
            continue
        en = " ".join(re.sub(r"\([^)]*\)", " ", cells[0]).split())
        zh = re.sub(r"（[^）]*）", "", cells[1])
        ens = [e.strip() for e in re.split(r" / |, ", en)]
        zhs = [z.strip() for z in re.split(r" / |，", zh)]
        if len(ens) != len(zhs):
            zhs = [zh.strip()] * len(ens)
        pairs += [(e, z) for e, z in zip(ens, zhs) if e and z]
    return pairs


def strip_literal(text: str) -> str:
    """Prose only: roles, code spans, math and link targets removed."""
    for pattern in (ROLE, CODE, MATH, TARGET):
        text = pattern.sub(" ", text)
    return text


def fixed_parts(text: str) -> Counter:
    """What a translation must keep as it is: math, code, roles, link targets."""
    roles = ROLE.findall(text)
    rest = ROLE.sub(" ", text)
    codes = [m.group(0) for m in CODE.finditer(rest)]
    rest = CODE.sub(" ", rest)
    return Counter(
        [("role", r) for r in roles]
        + [("code", c) for c in codes]
        + [("math", m) for m in MATH.findall(rest)]
        + [("target", t) for t in TARGET.findall(rest)]
    )


_MD = MarkdownIt("commonmark")


def broken_emphasis(text: str) -> bool:
    """True when `*` or `_` emphasis markers survive parsing as literal text."""
    for token in _MD.parseInline(ROLE.sub("R", MATH.sub("M", text))):
        for child in token.children or []:
            if child.type == "text" and (
                "**" in child.content or "__" in child.content
            ):
                return True
    return False


ASCII_PUNCT = re.compile(
    f"[{CJK}]\\s?[,;:?!()\"']|[,;:?!()\"']\\s?[{CJK}]|[{CJK}\\ue000]\\s?[,;:?!]\\s|[{CJK}\\ue000]\\s?\\.(?=\\s|$)"
)
# A shape or other tuple of Latin letters and digits, "(B, Q, D)" or "(D,)", is code-like and
# keeps its ASCII brackets and commas beside Chinese (the zh review: "（D,）" reads as a typo).
TUPLE = re.compile(r"\((?:[A-Za-z0-9_.+\-*/ ]*,)+[A-Za-z0-9_.+\-*/ ]*\)")


def problems_of(
    page: str, msgid: str, msgstr: str, fuzzy: bool, terms, term_cell: bool = False
) -> list[str]:
    """What is wrong with one translation. ``term_cell``: a cell of a terms table
    (English – 中文), which may stay as it is (its English column stays English)."""
    if fuzzy:
        return ["fuzzy (the English changed since it was translated)"]
    if not msgstr:
        return ["untranslated"]
    found = []
    if fixed_parts(msgid) != fixed_parts(msgstr):
        lost = fixed_parts(msgid) - fixed_parts(msgstr)
        added = fixed_parts(msgstr) - fixed_parts(msgid)
        found.append(
            "math/code/role/link changed: "
            + "; ".join(
                [f"missing {k} {v}" for (k, v) in lost]
                + [f"extra {k} {v}" for (k, v) in added]
            )
        )
    prose_en = strip_literal(msgid)
    kept = term_cell and msgstr == msgid
    if not HAS_CJK.search(msgstr) and len(WORD.findall(prose_en)) >= 2 and not kept:
        found.append("no Chinese in the translation")
    if "$$" in msgstr:
        found.append("display math ($$) in a translation renders as \\[::\\]")
    if broken_emphasis(msgstr) and not broken_emphasis(msgid):
        found.append("emphasis that does not parse (write “**x**”字, not **“x”**字)")
    # Math and code count as part of a Chinese sentence: "$h$." should end "$h$。".
    sentence = ROLE.sub("\ue000", msgstr)
    for pattern in (CODE, MATH, TUPLE):
        sentence = pattern.sub("\ue000", sentence)
    sentence = TARGET.sub("]", sentence)
    bad = ASCII_PUNCT.findall(sentence) if HAS_CJK.search(msgstr) else []
    if bad:
        found.append(
            "ASCII punctuation beside Chinese: " + " ".join(repr(b) for b in bad[:5])
        )
    if page != "book/glossary" and not kept:
        for en, zh in terms:
            if en in GLOSSARY_EXCEPTIONS:
                continue
            # (a hyphen and an en dash are the same here: key-value, key–value)
            pattern = re.sub(r"\\-|–", "[-–]", re.escape(en))
            used = re.search(rf"(?<![\w-]){pattern}(?:s|es)?(?![\w-])", prose_en, re.I)
            if used and zh not in msgstr:
                found.append(f"glossary: “{en}” is {zh}")
    return found


def check(pages: list[str] | None = None) -> list[str]:
    terms = glossary_terms()
    report = []
    pots = sorted(POT.rglob("*.pot"))
    if not pots:
        return [
            f"no message templates in {POT}: run python tools/build_book.py gettext"
        ]
    for pot in pots:
        page = pot.relative_to(POT).with_suffix("").as_posix()
        if pages and page not in pages:
            continue
        po_path = PO / f"{page}.po"
        if not po_path.exists():
            report.append(
                f"{page}: no catalog {po_path.relative_to(ROOT)} (run update-po)"
            )
            continue
        with open(pot, "rb") as f:
            template = read_po(f)
        with open(po_path, "rb") as f:
            catalog = read_po(f)
        in_terms_table = False
        for message in template:
            if not message.id:
                continue
            # Table cells are located at line 0; a terms table's header is "English | 中文".
            at_zero = all(line == 0 for _, line in message.locations)
            in_terms_table = at_zero and (in_terms_table or message.id == "English")
            entry = catalog.get(message.id, message.context)
            msgstr = entry.string if entry is not None else ""
            fuzzy = entry is not None and entry.fuzzy
            problems = (
                ["missing from the catalog (run update-po)"]
                if entry is None
                else problems_of(page, message.id, msgstr, fuzzy, terms, in_terms_table)
            )
            english = " ".join(message.id.split())
            english = english if len(english) <= 70 else english[:67] + "..."
            report += [f"{page}: {p}: “{english}”" for p in problems]
    return report


def main(argv: list[str]) -> int:
    report = check(argv or None)
    print("\n".join(report) if report else "every message translated and checked")
    return 1 if report else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
