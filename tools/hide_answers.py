"""Keep every exercise's answer closed until the reader opens it, wherever the notebook is read.

An answer is a code cell tagged ``hide-cell`` (the solution: code and its output), plus, where
the text explains it, the explanation right after it. This script sets

* on the solution cell: ``jupyter.source_hidden`` and ``jupyter.outputs_hidden`` (JupyterLab
  and Notebook 7 fold the code *and* its output), ``collapsed: true`` (the older name of
  ``outputs_hidden``, which JupyterLab adds on opening such a cell: stored here, opening a
  chapter leaves it unmodified), ``cellView: form`` (Colab shows "Show code" instead of
  the code) and the website's labels (``mystnb.code_prompt_show/hide``; myst-nb closes the
  whole cell, code and output, behind "Show solution");
* the solution's first line: a folded cell still shows its first line in JupyterLab (and
  Colab its first comment), so a solution starts with a comment that gives nothing away,
  ``FIRST_LINE``; one that starts with ``# Solution`` already keeps its own;
* on an explanation: a markdown cell directly after a solution that starts with an indented
  paragraph (the continuation of the exercise's list item, as chapters write it) gets that
  paragraph wrapped in ``<details class="explanation"><summary>Explanation of the
  solution</summary> ... </details>``, which JupyterLab, Colab, nbconvert and the website
  all show closed. The text itself is unchanged, indentation included (so its message in the
  Chinese catalog is too); the rest of the cell (usually the next exercise) stays as it is;
* before each solution, a markdown cell of its own (tags ``answer-toggle`` and
  ``remove-cell``) for a notebook rendered alone to HTML: ``jupyter nbconvert --to html``
  takes no option from the notebook and shows every cell's code and output, so this cell
  carries a toggle, ``<details class="course-answer" hidden style="display: none">``
  labelled "Show solution", and a ``<style>`` that, in nbconvert's page only
  (``body.jp-Notebook``, its lab template), shows that toggle and hides the solution cell
  after it (``celltag_hide-cell``) while the toggle is closed. JupyterLab and Colab drop
  the ``<style>`` and keep the toggle hidden (JupyterLab's sanitizer drops ``hidden`` but
  keeps ``display: none``), as they close the solution themselves (see above); the
  website removes the cell (``remove-cell``); a browser without ``:has()`` keeps the
  toggle hidden and the solution shown, as before. The code and output stay where they
  are: one copy.

Nothing else changes (no code, no output), and running it twice changes nothing.

Usage: python tools/hide_answers.py [--check] [NOTEBOOK ...]   (default: chapters/*.ipynb)
With --check nothing is written; the exit status is 1 if a notebook is out of date.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = "Explanation of the solution"
OPEN = f'<details class="explanation">\n<summary>{SUMMARY}</summary>\n\n'
CLOSE = "\n\n</details>"
PROMPTS = {"code_prompt_show": "Show solution", "code_prompt_hide": "Hide solution"}
TOGGLE_TAGS = ["answer-toggle", "remove-cell"]
# The first line of every solution (a chapter may write its own "# Solution ..." line).
FIRST_LINE = "# Solution (run the cell to check it)"
HAS_FIRST_LINE = re.compile(r"#\s*Solution\b")
# The toggle cell, exactly (--check compares it). Its label is course_cell_prompts' "Show
# solution", which tools/make_zh_notebooks.py translates in the Chinese notebooks.
TOGGLE = """\
<!-- A notebook rendered alone to HTML (jupyter nbconvert) shows the solution below only
when "Show solution" is opened; JupyterLab, Colab and the website hide this cell and
close the solution themselves. Written by tools/hide_answers.py: do not edit. -->
<style>
@supports selector(:has(*)) {
  body.jp-Notebook details.course-answer { display: block !important; }
  body.jp-Notebook .jp-Cell:has(details.course-answer:not([open])) + .celltag_hide-cell {
    display: none;
  }
}
</style>
<details class="course-answer" hidden style="display: none"><summary>Show solution</summary>
</details>"""


def is_solution(cell) -> bool:
    return cell["cell_type"] == "code" and "hide-cell" in cell["metadata"].get(
        "tags", []
    )


def is_toggle(cell) -> bool:
    return cell["cell_type"] == "markdown" and "answer-toggle" in cell["metadata"].get(
        "tags", []
    )


def first_line(source) -> str:
    """The line a folded cell shows: the first, or the one after a cell magic ``%%...``
    (which must stay first)."""
    if isinstance(source, list):  # a notebook read as plain JSON
        source = "".join(source)
    lines = source.split("\n")
    return lines[1] if lines[0].startswith("%%") and len(lines) > 1 else lines[0]


def starts_with_first_line(cell) -> bool:
    """Does the solution's code start with a ``# Solution ...`` comment?"""
    return HAS_FIRST_LINE.match(first_line(cell["source"]).strip()) is not None


def add_first_line(cell) -> bool:
    """Put ``FIRST_LINE`` before the solution's code unless it starts with such a line;
    True if it changed."""
    if starts_with_first_line(cell):
        return False
    source = cell["source"]
    if isinstance(source, list):
        source = "".join(source)
    if source.startswith("%%"):
        magic, _, rest = source.partition("\n")
        cell["source"] = f"{magic}\n{FIRST_LINE}\n{rest}"
    else:
        cell["source"] = f"{FIRST_LINE}\n{source}"
    return True


def toggle_cell(solution):
    cell = nbformat.v4.new_markdown_cell(TOGGLE)
    cell["metadata"]["tags"] = list(TOGGLE_TAGS)
    if solution.get("id"):
        cell["id"] = (solution["id"] + "-toggle")[-64:]
    return cell


def split_explanation(source: str) -> tuple[str, str]:
    """``(explanation, rest)``: the leading indented lines of ``source`` (with the blank lines
    between them) and what follows; ``("", source)`` when it does not start indented."""
    if isinstance(source, list):  # a notebook read as plain JSON
        source = "".join(source)
    lines = source.split("\n")
    if not lines or not lines[0][:1].isspace() or not lines[0].strip():
        return "", source
    end = 0
    for i, line in enumerate(lines):
        if line.strip() and not line[:1].isspace():
            break
        end = i + 1
    explanation = "\n".join(lines[:end]).strip("\n")
    rest = "\n".join(lines[end:]).lstrip("\n")
    # Kept as written, indentation included: the Chinese catalog's message is the paragraph
    # with its line breaks and indentation, so a dedented copy would lose its translation.
    return explanation, rest


def place_toggles(nb) -> bool:
    """One toggle cell, exactly as written here, right before each solution and nowhere
    else; return True if anything changed."""
    old = nb["cells"]
    cells = []
    for i, cell in enumerate(old):
        if is_toggle(cell):
            continue
        if is_solution(cell):
            before = old[i - 1] if i > 0 else None
            if (
                before is not None
                and is_toggle(before)
                and "".join(before["source"]) == TOGGLE
                and before["metadata"].get("tags") == TOGGLE_TAGS
            ):
                cells.append(before)
            else:
                cells.append(toggle_cell(cell))
        cells.append(cell)
    changed = [id(c) for c in cells] != [id(c) for c in old]
    nb["cells"] = cells
    return changed


def hide(nb) -> bool:
    """Hide the answers of ``nb`` in place; return True if anything changed."""
    changed = place_toggles(nb)
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        if not is_solution(cell):
            continue
        meta = cell["metadata"]
        jupyter = meta.setdefault("jupyter", {})
        for key in ("source_hidden", "outputs_hidden"):
            if jupyter.get(key) is not True:
                jupyter[key] = True
                changed = True
        if meta.get("collapsed") is not True:
            meta["collapsed"] = True
            changed = True
        changed |= add_first_line(cell)
        if meta.get("cellView") != "form":
            meta["cellView"] = "form"
            changed = True
        mystnb = meta.setdefault("mystnb", {})
        for key, value in PROMPTS.items():
            if key not in mystnb:
                mystnb[key] = value
                changed = True
        after = cells[i + 1] if i + 1 < len(cells) else None
        if after is None or after["cell_type"] != "markdown":
            continue
        explanation, rest = split_explanation(after["source"])
        if explanation:
            wrapped = OPEN + explanation + CLOSE
            after["source"] = wrapped + ("\n\n" + rest if rest else "")
            changed = True
    return changed


def unwrapped_explanations(nb) -> list[int]:
    """Indices of markdown cells after a solution that still start with an open
    (indented) explanation."""
    cells = nb["cells"]
    return [
        i + 1
        for i, cell in enumerate(cells[:-1])
        if is_solution(cell)
        and cells[i + 1]["cell_type"] == "markdown"
        and split_explanation(cells[i + 1]["source"])[0]
    ]


def process(path: Path, check: bool) -> bool:
    nb = nbformat.read(path, as_version=4)
    changed = hide(nb)
    if changed and not check:
        nbformat.write(nb, path)
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args()
    paths = args.notebooks or sorted((ROOT / "chapters").glob("*.ipynb"))
    stale = [p for p in paths if process(p, args.check)]
    for p in stale:
        print(("out of date: " if args.check else "answers hidden: ") + str(p))
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
