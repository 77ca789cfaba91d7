"""A chapter's own code, read by a test: the seed sweeps (tests/test_ch*_seeds.py) re-check
a chapter's claims over other seeds with the functions the chapter defines, not a copy."""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from IPython.core.inputtransformer2 import TransformerManager
from torch import nn

import attention_lib as al


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


class SeedSweep(dict):
    """``{(model, seed): {step: test accuracy}}`` of a seed sweep, with its seeds."""

    def __init__(self, accuracies: dict, seeds: Iterable[int]):
        super().__init__(accuracies)
        self.seeds = tuple(seeds)

    def at(self, name: str, step: int) -> list[float]:
        """Model ``name``'s test accuracy after ``step`` steps, one per seed, in order."""
        return [self[name, s][step] for s in self.seeds]


def train_every_model(
    notebook: Path,
    functions: set[str],
    wanted: Callable[[ast.stmt], bool],
    seeds: Iterable[int],
    check_budget: Callable[[dict], None],
    *,
    steps: int = 200,
    test_at: tuple[int, ...] = (100, 200),
) -> tuple[SeedSweep, dict]:
    """The body of a module-scoped seed-sweep fixture (chapters 12 and 13): run the
    chapter's definitions chosen by ``wanted`` in a namespace holding ``torch``, ``nn``,
    ``al`` and ``math``; check that every function and class of ``functions`` was found;
    call ``check_budget(namespace)``, the test's own asserts on the chapter's budget and
    models (its claims are about these); then, single-threaded, train every model of the
    chapter's ``MODELS`` with every seed by the chapter's
    ``train(name, seed, steps=steps, test_at=test_at)``, which returns the test accuracy
    at each step of ``test_at``. Returns the sweep and the chapter's namespace."""
    torch.set_num_threads(1)
    ch = {"torch": torch, "nn": nn, "al": al, "math": math}
    found = run_definitions(notebook, ch, wanted)
    assert found == functions, f"missing in the chapter: {functions - found}"
    check_budget(ch)
    seeds = tuple(seeds)
    accuracies = {
        (name, seed): ch["train"](name, seed, steps=steps, test_at=test_at)
        for seed in seeds
        for name in ch["MODELS"]
    }
    return SeedSweep(accuracies, seeds), ch
