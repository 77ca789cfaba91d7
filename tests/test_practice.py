"""The practice copies (tools/make_practice.py): current, without answers, and runnable.

Each chapter's practice copy, in both editions, is the chapter with its solutions, their
nbconvert toggles and their explanations taken out and every output cleared. make test
checks that the committed copies are what the chapters give and that nothing of an
answer is left, that their instructions are true (no "folded under it") and that every
exercise has a cell to write in; make long-tests runs every copy of both editions top to
bottom (slow): a copy whose code needed a removed solution would fail there, and every
exercise check in it must say "not written yet" (in the copy's language).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_practice  # noqa: E402

TARGETS = make_practice.targets()
NOT_WRITTEN_YET = {"en": "not written yet", "zh_CN": "尚未完成"}


def test_the_practice_copies_are_current():
    assert make_practice.main(["--check"]) == 0, "run make practice"


@pytest.mark.parametrize(
    ("chapter", "copy", "language"),
    TARGETS,
    ids=[t[1].relative_to(ROOT).as_posix() for t in TARGETS],
)
def test_a_practice_copy_holds_no_answer(chapter, copy, language):
    original = json.loads(chapter.read_text(encoding="utf-8"))
    practice = json.loads(copy.read_text(encoding="utf-8"))
    solutions = [
        "".join(c["source"])
        for c in original["cells"]
        if c["cell_type"] == "code" and "hide-cell" in c["metadata"].get("tags", [])
    ]
    assert solutions, f"{chapter.name} has no solution to take out"
    text = "\n".join("".join(c["source"]) for c in practice["cells"])
    for solution in solutions:
        assert solution not in text
    assert 'class="explanation"' not in text and "answer-toggle" not in text
    assert all(
        not c.get("outputs") for c in practice["cells"] if c["cell_type"] == "code"
    )
    note = "".join(practice["cells"][1]["source"])
    assert (
        f"](../{chapter.name})" in note and (copy.parent.parent / chapter.name).exists()
    )
    kept = [c for c in original["cells"] if "".join(c["source"]) not in solutions]
    assert len(practice["cells"]) >= len(kept) - sum(
        "answer-toggle" in c["metadata"].get("tags", []) for c in original["cells"]
    )
    folded, instead = make_practice.SOLUTION_SENTENCE[language]
    assert folded not in text
    assert (instead in text) == (
        folded in "\n".join("".join(c["source"]) for c in original["cells"])
    )
    # every exercise has somewhere to write: its stub, or a cell where its solution was
    answers = [c for c in practice["cells"] if c.get("id", "").endswith("-answer")]
    without_stub = [s for s in solutions if "al.exercises.check(" not in s]
    assert len(answers) == len(without_stub)
    assert all(
        "".join(c["source"]) == make_practice.ANSWER_CELL[language] for c in answers
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("chapter", "copy", "language"),
    TARGETS,
    ids=[t[1].relative_to(ROOT).as_posix() for t in TARGETS],
)
def test_a_practice_copy_runs_top_to_bottom(chapter, copy, language, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
    notebook = nbformat.read(copy, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(copy.parent)}},
    )
    client.execute()  # raises CellExecutionError on the first cell that fails
    for cell in notebook.cells:
        if cell.cell_type == "code" and "al.exercises.check(" in cell.source:
            shown = "".join(
                o.get("text", "") + o.get("data", {}).get("text/plain", "")
                for o in cell.outputs
            )
            assert NOT_WRITTEN_YET[language] in shown, cell.source
