"""A chapter's own code, read by a test: the seed sweeps (tests/test_ch0*_seeds.py) re-check
a chapter's claims over other seeds with the functions the chapter defines, not a copy."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path

from IPython.core.inputtransformer2 import TransformerManager


def run_definitions(
    notebook: Path,
    namespace: dict,
    wanted: Callable[[ast.stmt], bool],
    skip_unbound_assignments: bool = True,
) -> set[str]:
    """Execute in ``namespace``, in notebook order, the top-level statements of the
    chapter's code cells for which ``wanted(node)`` is true, and return the names of the
    functions and classes among them. IPython's input transformer first turns magics (the
    Colab install, a continued ``%pip`` line) into Python. With
    ``skip_unbound_assignments`` an assignment that raises ``NameError`` (a constant
    built from a tensor the test did not make) is skipped; a definition never is."""
    found = set()
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        python = TransformerManager().transform_cell("".join(cell["source"]))
        for node in ast.parse(python).body:
            if not wanted(node):
                continue
            code = ast.Module(body=[node], type_ignores=[])
            try:
                exec(compile(code, str(notebook), "exec"), namespace)  # noqa: S102
            except NameError:
                if not (skip_unbound_assignments and isinstance(node, ast.Assign)):
                    raise
                continue
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.add(node.name)
    return found


def definitions(
    functions: set[str],
    names: set[str] = frozenset(),
    *,
    constants: bool = True,
    prefixes: tuple[str, ...] = (),
) -> Callable[[ast.stmt], bool]:
    """A ``wanted`` for :func:`run_definitions`: the chapter's top-level functions and
    classes named in ``functions``, and the assignments (one target, a name or a tuple of
    names) each of whose names is in ``names``, starts with one of ``prefixes`` or, with
    ``constants``, is upper-case."""

    def wanted(node) -> bool:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            return node.name in functions
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            targets = target.elts if isinstance(target, ast.Tuple) else [target]
            ids = [n.id for n in targets if isinstance(n, ast.Name)]
            return len(ids) == len(targets) and all(
                i in names or i.startswith(prefixes) or (constants and i.isupper())
                for i in ids
            )
        return False

    return wanted
