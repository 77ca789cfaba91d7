"""Re-execute chapters in place, top to bottom in a fresh kernel, so their stored
outputs are what nbval checks.

Usage: python tools/execute_notebooks.py chapters/NN_name.ipynb ...
       python tools/execute_notebooks.py --no-execute chapters/*.ipynb
Runs from each notebook's own folder, with the kernel of this Python (the course
environment). With --no-execute nothing runs: each notebook is only rewritten in the form
below (its outputs as they are).

A notebook is stored as JupyterLab writes it, so that opening a chapter in JupyterLab
leaves it unmodified (``git status`` clean, no unsaved-changes dot, nothing for autosave
to write): the kernelspec's ``display_name`` is ipykernel's, "Python 3 (ipykernel)",
which JupyterLab writes once the kernel starts (``KERNELSPEC``), and the JSON is
nbformat's (sorted keys, one space of indent), which jupyter_server writes. The cells keep
no per-cell timing (nbclient's ``execution`` metadata, four time stamps a cell that change
on every run), so re-executing a chapter changes only what its cells print.
tests/test_portable.py checks that every chapter is stored so.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat

KERNELSPEC = {
    "display_name": "Python 3 (ipykernel)",
    "language": "python",
    "name": "python3",
}


def jupyterlab_form(nb) -> None:
    """``nb`` in place as it is stored: JupyterLab's kernelspec, no widget state, no
    per-cell timing."""
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)


def execute(path: Path) -> float:
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    elapsed = time.perf_counter() - start
    jupyterlab_form(nb)
    nbformat.write(nb, path)
    return elapsed


def reformat(path: Path) -> bool:
    """Rewrite ``path`` in the stored form without running it; True if it changed."""
    text = path.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    jupyterlab_form(nb)
    new = nbformat.writes(nb) + "\n"
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def main(args: list[str]) -> int:
    paths = [a for a in args if a != "--no-execute"]
    if not paths:
        print(__doc__)
        return 2
    for p in paths:
        if "--no-execute" in args:
            if reformat(Path(p)):
                print(f"{p}: rewritten as JupyterLab stores it", flush=True)
        else:
            print(f"{p}: executed in {execute(Path(p)):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
