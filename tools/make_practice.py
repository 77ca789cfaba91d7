"""Practice copies of the chapters: chapters/practice/NN_name.ipynb (and the Chinese
edition's, chapters/zh_CN/practice/NN_name.ipynb), generated from the chapters, never
edited by hand.

A practice copy is its chapter with the answers taken out, for a learner who wants to
write each exercise before seeing a solution:

* every solution cell (a code cell tagged ``hide-cell``, see tools/hide_answers.py) and
  the nbconvert toggle before it (``answer-toggle``) are removed; a solution of an
  exercise that has no stub of its own (the "Exercises" section's) is replaced by an
  empty code cell to write the answer in (ANSWER_CELL);
* the "write it yourself" introduction's "The solution is folded under it." says where
  the solutions are instead (SOLUTION_SENTENCE);
* every explanation of a solution (``<details class="explanation"> ... </details>`` in
  the markdown after it) is removed;
* every output is cleared (the learner runs the copy; a copy without outputs is a
  fraction of the size, and gives nothing away); the diagrams, cell attachments, stay;
* a first markdown cell says what the copy is and links the chapter with its solutions;
* links out of chapters/ (``../book/setup.md``) get one more ``../``; links to other
  chapters (``NN_name.ipynb``) stay relative, so they open the sibling practice copies.

Everything else -- the text, the code, the "write it yourself" stubs and their checks
(``al.exercises.check``, which say "not written yet" until the learner fills a stub in)
-- stays as it is. ``make practice`` writes them; ``--check`` (in make test) fails if a
committed copy is not what the chapter gives; make long-tests runs every copy top to
bottom.

    python tools/make_practice.py            every chapter of _toc.yml, both editions
    python tools/make_practice.py --check    exit 1 if a committed copy is stale
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_zh_notebooks import PARENT_LINK, chapters_in_toc, dumps  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXPLANATION = re.compile(r"\n*<details class=\"explanation\">.*?</details>", re.DOTALL)
NOTE = {
    "en": (
        "> **Practice copy.** The solutions of this chapter's exercises are taken out "
        "(and every output is cleared): write your answers in the stubs and in the "
        "empty cells under the exercises, and run the cells. The chapter with its "
        "solutions and outputs: [{name}](../{name})."
    ),
    "zh_CN": (
        "> **练习版。** 本章练习的参考答案已删去（所有输出也已清除）："
        "请在函数的空壳和练习下面的空单元格里写出答案，并运行这些单元格。"
        "带答案和输出的完整章节：[{name}](../{name})。"
    ),
}
# The "write it yourself" introduction of a chapter, and what a practice copy says.
SOLUTION_SENTENCE = {
    "en": (
        "The solution is folded under it.",
        "This practice copy has no solutions: the chapter linked at the top has them.",
    ),
    "zh_CN": (
        "参考答案折叠在它下面。",
        "练习版里没有参考答案：它们在完整章节里（见开头的链接）。",
    ),
}
# The cell that takes the place of a removed solution of an exercise without a stub.
ANSWER_CELL = {
    "en": "# Your answer (the chapter linked at the top has a solution)\n",
    "zh_CN": "# 在这里写你的答案（开头链接的完整章节里有参考答案）\n",
}
CHECK = "al.exercises.check("


def practice_copy(chapter: dict, name: str, language: str) -> dict:
    """The practice copy of the notebook ``chapter`` (a dict, not changed)."""
    notebook = json.loads(json.dumps(chapter))
    cells = []
    for cell in notebook["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and "hide-cell" in tags:
            if CHECK not in "".join(cell["source"]):  # no stub above it: room to write
                cells.append(
                    {
                        "cell_type": "code",
                        "execution_count": None,
                        "id": f"{cell.get('id', 'solution')}-answer"[:64],
                        "metadata": {},
                        "outputs": [],
                        "source": ANSWER_CELL[language].splitlines(keepends=True),
                    }
                )
            continue  # a solution
        if cell["cell_type"] == "markdown" and "answer-toggle" in tags:
            continue  # nbconvert's toggle for the solution
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            source = EXPLANATION.sub("", source)
            source = PARENT_LINK.sub("](../../", source)
            source = source.replace(*SOLUTION_SENTENCE[language])
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            cell["metadata"].pop("execution", None)
        cell["source"] = source.splitlines(keepends=True)
        cells.append(cell)
    note = {
        "cell_type": "markdown",
        "id": "practice-copy",
        "metadata": {},
        "source": NOTE[language].format(name=name).splitlines(keepends=True),
    }
    title = 1 if cells and cells[0]["cell_type"] == "markdown" else 0
    notebook["cells"] = cells[:title] + [note] + cells[title:]
    return notebook


def targets() -> list[tuple[Path, Path, str]]:
    """(chapter, practice copy, language) for every chapter in both editions."""
    found = []
    for english in chapters_in_toc():
        found.append((english, english.parent / "practice" / english.name, "en"))
        chinese = english.parent / "zh_CN" / english.name
        if chinese.exists():
            found.append((chinese, chinese.parent / "practice" / english.name, "zh_CN"))
    return found


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for chapter, target, language in targets():
        notebook = json.loads(chapter.read_text(encoding="utf-8"))
        text = dumps(practice_copy(notebook, chapter.name, language))
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        if check:
            stale.append(target.relative_to(ROOT).as_posix())
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print("wrote", target.relative_to(ROOT).as_posix())
    if stale:
        print("stale practice copies (run make practice):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
