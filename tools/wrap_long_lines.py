"""Wrap the lines a formatter leaves long: comments and docstring prose.

``ruff format`` wraps code to 88 columns but never touches comments or strings. This
script rewraps, in ``.py`` files and in the code cells of notebooks,

* a comment-only line: into several comment lines with the same indent;
* a trailing comment (``code  # note``): moved above the code line, same indent;
* a docstring paragraph with a long line: reflowed (bullets and ``name: text`` entries
  keep their hanging indent; literal blocks after ``::`` are left as they are, except
  that a trailing comment moves above its line).

Code and other strings are left alone (``ruff check --select E501`` reports them).

Usage: python tools/wrap_long_lines.py [--width 88] FILE...
"""

from __future__ import annotations

import argparse
import io
import re
import textwrap
import tokenize
from pathlib import Path

QUOTES = ('"' * 3, "'" * 3)
_BULLET = re.compile(r"([*-]|\d+\.) ")
_FIELD = re.compile(r"[\w*]+( \([^)]*\))?: \S")


def _wrap_comment(indent: str, text: str, width: int) -> list[str]:
    body = text.lstrip("#").strip()
    lines = textwrap.wrap(
        body,
        width=width - len(indent) - 2,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [f"{indent}# {line}" for line in lines] or [f"{indent}#"]


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    try:
        return list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []


def _docstring_lines(tokens) -> set[int]:
    """1-based line numbers inside a docstring (a triple-quoted string statement)."""
    lines: set[int] = set()
    prev = None
    starts = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL)
    for tok in tokens:
        if tok.type == tokenize.STRING and tok.string.endswith(QUOTES):
            if prev is None or prev.type in starts:
                lines.update(range(tok.start[0], tok.end[0] + 1))
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            prev = tok
    return lines


def _literal_line(line: str, width: int) -> list[str]:
    """A code line in a docstring's literal block: move a trailing comment above it."""
    if len(line) <= width or "  # " not in line:
        return [line]
    code, comment = line.split("  # ", 1)
    indent = " " * (len(line) - len(line.lstrip()))
    return _wrap_comment(indent, comment, width) + [code.rstrip()]


def _reflow_docstring(lines: list[str], width: int) -> list[str]:
    """Reflow the prose paragraphs of a docstring; literal blocks (after ``::``) stay."""
    out: list[str] = []
    i = 0
    literal_indent: int | None = None
    base = len(lines[0]) - len(lines[0].lstrip())  # the docstring's own indent
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None:
            if stripped and indent <= literal_indent:
                literal_indent = None
            else:
                out.extend(_literal_line(line, width))
                i += 1
                continue
        if not stripped or stripped in QUOTES or stripped.startswith((">>>", "..")):
            out.append(line)
            i += 1
            continue
        first = " " * indent
        lead = ""
        body = stripped
        for q in QUOTES:  # the docstring's first line starts with its quotes
            if body.startswith(q):
                lead, body = q, body[3:]
        if _BULLET.match(body):
            cont = " " * (indent + len(lead) + body.index(" ") + 1)
        elif _FIELD.match(body) and indent > base:
            cont = " " * (indent + 4)
        else:
            cont = first
        para = [stripped]
        j = i + 1
        while j < len(lines):
            nxt = lines[j]
            ns = nxt.strip()
            nind = len(nxt) - len(nxt.lstrip())
            if not ns or para[-1].endswith("::") or _BULLET.match(ns):
                break
            if ns.startswith(QUOTES) or nind != len(cont):
                break
            if cont == first and _FIELD.match(ns) and _FIELD.match(body):
                break
            para.append(ns)
            j += 1
        block = lines[i:j]
        if any(len(b) > width for b in block):
            text = " ".join(para)
            closing = ""
            for q in QUOTES:
                if text.endswith(q) and len(text) > 3:
                    text, closing = text[:-3].rstrip(), q
            wrapped = textwrap.wrap(
                text,
                width=width,
                initial_indent=first,
                subsequent_indent=cont,
                break_long_words=False,
                break_on_hyphens=False,
            )
            if closing:
                if len(wrapped[-1]) + 3 <= width:
                    wrapped[-1] += closing
                else:
                    wrapped.append(first + closing)
            out.extend(wrapped)
        else:
            out.extend(block)
        if para[-1].endswith("::"):
            literal_indent = indent
        i = j
    return out


def wrap_source(source: str, width: int) -> str:
    # Magics (%pip, !cmd) are not Python: hide them from the tokenizer.
    src_lines = source.split("\n")
    masked = "\n".join(
        "#" + ln if ln.lstrip().startswith(("%", "!")) else ln for ln in src_lines
    )
    tokens = _tokens(masked)
    comments = {
        t.start[0]: (t.start[1], t.string) for t in tokens if t.type == tokenize.COMMENT
    }
    docs = _docstring_lines(tokens)
    out: list[str] = []
    no = 0
    while no < len(src_lines):
        no += 1
        line = src_lines[no - 1]
        if no in docs:
            end = no
            while end + 1 in docs:
                end += 1
            out.extend(_reflow_docstring(src_lines[no - 1 : end], width))
            no = end
            continue
        if len(line) <= width or line.lstrip().startswith(("%", "!")):
            out.append(line)
            continue
        if no in comments:
            col, text = comments[no]
            code = line[:col].rstrip()
            indent = re.match(r"\s*", line).group(0)
            if not code:  # a comment block: reflow it with the comment lines after it
                while no < len(src_lines) and no + 1 in comments:
                    nxt = src_lines[no]
                    body = nxt.strip().lstrip("#").strip()
                    if not nxt.startswith(indent + "#") or not body or body[0] in "*-(":
                        break
                    if nxt[: comments[no + 1][0]].strip():
                        break
                    text += " " + body
                    no += 1
            out.extend(_wrap_comment(indent, text, width))
            if code:
                out.append(code)
            continue
        out.append(line)
    return "\n".join(out)


def wrap_file(path: Path, width: int) -> bool:
    if path.suffix == ".ipynb":
        import nbformat

        nb = nbformat.read(path, as_version=4)
        changed = False
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            new = wrap_source(src, width)
            if new != src:
                cell["source"] = new.splitlines(keepends=True)
                changed = True
        if changed:
            nbformat.write(nb, path)
        return changed
    src = path.read_text()
    new = wrap_source(src, width)
    if new != src:
        path.write_text(new)
    return new != src


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=88)
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    for p in args.files:
        if wrap_file(p, args.width):
            print("wrapped", p)


if __name__ == "__main__":
    main()
