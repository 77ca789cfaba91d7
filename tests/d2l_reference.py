"""Load d2l 1.0.3's reference attention code without importing ``d2l.torch``.

``d2l/torch.py`` imports torchvision, pandas, requests and scipy at module level, and no
torchvision build imports with the CPU torch of this course (d2l only needs it for image
data sets). Instead of stubbing those modules, we read the installed ``d2l/torch.py``
*as source*, pick out the few definitions we compare against (by name, with :mod:`ast`),
and execute just those in a namespace that provides what they use: ``torch``, ``nn``,
``F``, ``math`` and a tiny ``d2l`` namespace (``d2l.Module`` is ``nn.Module`` plus
nothing the attention classes call; ``d2l.zeros``/``d2l.arange`` are the torch functions
they alias).

The code that runs is d2l's own, byte for byte; only its unrelated imports are skipped.
d2l is installed with ``pip install --no-deps d2l==1.0.3`` by the Makefile (its pins
would downgrade numpy) and is never a dependency of ``attention_lib``.
"""

from __future__ import annotations

import ast
import importlib.util
import math
import types
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

NAMES = (
    "masked_softmax",
    "DotProductAttention",
    "AdditiveAttention",
    "MultiHeadAttention",
    "PositionalEncoding",
)


def d2l_source_path() -> Path:
    spec = importlib.util.find_spec("d2l")
    if spec is None or spec.origin is None:
        raise ImportError(
            "d2l is not installed: run `make test` (it installs d2l==1.0.3 with --no-deps)"
        )
    return Path(spec.origin).parent / "torch.py"


def load_d2l() -> types.SimpleNamespace:
    """Return a namespace holding d2l's ``masked_softmax``, ``DotProductAttention``,
    ``AdditiveAttention``, ``MultiHeadAttention`` and ``PositionalEncoding``, executed
    from d2l's installed source."""
    path = d2l_source_path()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    picked = [
        n
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in NAMES
    ]
    missing = set(NAMES) - {n.name for n in picked}
    if missing:
        raise ImportError(f"{path} lacks {sorted(missing)}: expected d2l 1.0.3")
    d2l = types.SimpleNamespace(
        Module=nn.Module, zeros=torch.zeros, arange=torch.arange
    )
    namespace = {"torch": torch, "nn": nn, "F": F, "math": math, "d2l": d2l}
    exec(
        compile(ast.Module(body=picked, type_ignores=[]), str(path), "exec"), namespace
    )
    for name in NAMES:
        setattr(
            d2l, name, namespace[name]
        )  # MultiHeadAttention looks up d2l.DotProductAttention
    return d2l
