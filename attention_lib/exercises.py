"""Exercises that check themselves: ``al.exercises.check("3.1", masked_softmax)``.

A learner writes a mechanism (a masked softmax, a GQA layer, an online softmax, ...) in
a notebook cell and runs one line. The check calls the learner's function on small
random inputs and edge cases, compares each result with the library's (the oracle), and
prints either what was checked, or the first case that fails with

* a **diagnosis** of the likely mistake, in plain words: each exercise lists the
  mistakes learners make (``Mistake``), each written as a wrong implementation -- a
  mutant of the solution. When the learner's output equals a mutant's output on the
  failing case (and the mutant's differs from the reference), that mutant's diagnosis is
  named;
* the failing case's inputs (shapes, dtype) and the expected vs received values.

A stub that is not written yet (it raises ``NotImplementedError`` or returns None)
gets a short "not written yet" and raises nothing, so "Run all" and nbval work.

A check never changes the caller's random state (it runs under
``torch.random.fork_rng`` and draws its inputs from its own ``torch.Generator``), never
touches the network, and never changes its inputs. The exercises themselves are data,
in :mod:`attention_lib.exercise_data`; their messages are translated in
``attention_lib/locales/<language>/exercises.po`` (the language follows
:func:`attention_lib.plot_language`, or :func:`set_language`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import plotting

_LOCALES = Path(__file__).parent / "locales"


@dataclass(frozen=True)
class Case:
    """One input to check: ``make(generator) -> (args, kwargs)``."""

    description: str
    make: Callable[[torch.Generator], tuple[tuple, dict]]


@dataclass(frozen=True)
class Mistake:
    """A mistake learners make: its ``diagnosis`` and the ``wrong`` implementation
    that makes it (same signature as the exercise)."""

    name: str
    diagnosis: str
    wrong: Callable


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    signature: str
    reference: Callable
    cases: tuple[Case, ...]
    mistakes: tuple[Mistake, ...] = ()
    tolerance: dict = field(default_factory=lambda: {"rtol": 1e-6, "atol": 1e-8})


@dataclass
class Report:
    """What a check found. Shown as text when it is a cell's last value.

    ``status``: ``"passed"``, ``"todo"`` (not written yet) or ``"failed"``;
    ``mistake``: the name of the diagnosed mistake, or None."""

    exercise: str
    status: str
    text: str
    mistake: str | None = None
    case: str | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __repr__(self) -> str:
        return self.text

    def __bool__(self) -> bool:
        return self.passed


# -- language -------------------------------------------------------------------------

_language: str | None = None


def set_language(language: str | None) -> None:
    """The language of the checks' messages (``"zh_CN"``, or None: the language of
    :func:`attention_lib.plot_language` if it was switched on, else English)."""
    if language is not None and not (_LOCALES / language / "exercises.po").exists():
        known = sorted(p.parent.name for p in _LOCALES.glob("*/exercises.po"))
        raise ValueError(
            f"set_language: expected one of {known} or None, got {language!r}"
        )
    global _language
    _language = language


def _current_language() -> str | None:
    if _language is not None:
        return _language
    catalog = plotting._catalog
    return getattr(catalog, "language", None)


_catalogs: dict[str, dict] = {}


def _(message: str, language: str | None) -> str:
    """``message`` in ``language`` (itself if untranslated)."""
    if language is None:
        return message
    if language not in _catalogs:
        _catalogs[language] = plotting.read_po(_LOCALES / language / "exercises.po")
    return _catalogs[language].get(message) or message


def _fill(template: str, **values) -> str:
    for key, value in values.items():
        template = template.replace("{" + key + "}", str(value))
    return template


# -- the check ------------------------------------------------------------------------


def exercises() -> dict[str, Exercise]:
    """Every exercise, by id (``"3.1"``: chapter 3's first)."""
    from .exercise_data import EXERCISES

    return {e.id: e for e in EXERCISES}


def check(exercise: str, fn: Callable, *, language: str | None = None) -> Report:
    """Check the learner's ``fn`` for exercise ``exercise`` (e.g. ``"3.1"``).

    Returns a :class:`Report` (shown as text in a notebook); never raises for a wrong
    or unfinished ``fn``. ``language``: the messages' language (default: see
    :func:`set_language`)."""
    all_exercises = exercises()
    if exercise not in all_exercises:
        raise ValueError(
            f"check: expected an exercise id in {sorted(all_exercises, key=_order)}, "
            f"got {exercise!r}"
        )
    if not callable(fn):
        raise ValueError(
            f"check: expected the function you wrote, got {type(fn).__name__}"
        )
    if language is not None and not (_LOCALES / language / "exercises.po").exists():
        set_language(language)  # raises the ValueError that lists the languages
    lang = language if language is not None else _current_language()
    spec = all_exercises[exercise]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # a learner's function that draws gets the same numbers
        return _run(spec, fn, lang)


def _order(exercise_id: str) -> tuple[int, int]:
    chapter, number = exercise_id.split(".")
    return int(chapter), int(number)


def _run(spec: Exercise, fn: Callable, lang: str | None) -> Report:
    head = f"{spec.id} {spec.title}"
    for index, case in enumerate(spec.cases):
        generator = torch.Generator().manual_seed(1000 + index)
        args, kwargs = case.make(generator)
        expected = spec.reference(*_clone(args), **_clone(kwargs))
        inputs = _clone((args, kwargs))
        try:
            got = fn(*inputs[0], **inputs[1])
        except NotImplementedError:
            return _todo(spec, head, lang)
        except Exception as error:  # the learner's bug, reported, not raised
            text = _fill(
                _("raised {error}", lang), error=f"{type(error).__name__}: {error}"
            )
            return _failed(spec, head, case, args, kwargs, text, None, lang)
        if got is None:
            if index == 0:
                return _todo(spec, head, lang)
            return _failed(
                spec, head, case, args, kwargs, _("returned None", lang), None, lang
            )
        changed = _changed_input(args, kwargs, inputs)
        if changed is not None:
            text = _fill(
                _(
                    "changed its input `{name}` in place; attention functions must "
                    "leave their inputs as they were (compute on a copy: "
                    "`x = x.clone()`, or use out-of-place operations such as "
                    "`masked_fill` instead of `masked_fill_`)",
                    lang,
                ),
                name=changed,
            )
            return _failed(spec, head, case, args, kwargs, text, "in-place", lang)
        difference = _difference(got, expected, spec.tolerance, lang)
        if difference is None:
            continue
        mistake = _diagnose(spec, fn, index, got, expected)
        if mistake is not None:
            text = _("Likely mistake: ", lang) + _(mistake.diagnosis, lang)
            text += "\n" + difference
            return _failed(spec, head, case, args, kwargs, text, mistake.name, lang)
        return _failed(spec, head, case, args, kwargs, difference, None, lang)
    names = _("; ", lang).join(_(c.description, lang) for c in spec.cases)
    text = _fill(
        _("✓ {head}: correct on all {n} cases ({names}).", lang),
        head=head,
        n=len(spec.cases),
        names=names,
    )
    return Report(spec.id, "passed", text)


def _matches(spec: Exercise, mistake: Mistake, index: int, got, expected) -> bool:
    """Whether the learner's ``got`` on case ``index`` is what ``mistake`` gives there,
    and that differs from the right answer ``expected``."""
    args, kwargs = spec.cases[index].make(torch.Generator().manual_seed(1000 + index))
    try:
        wrong = mistake.wrong(*args, **kwargs)
    except Exception:
        return False
    return (
        _difference(wrong, expected, spec.tolerance, None) is not None
        and _difference(got, wrong, spec.tolerance, None, nan_as_zero=True) is None
    )


def _diagnose(spec: Exercise, fn, index: int, got, expected) -> Mistake | None:
    """The listed mistake the learner's ``fn`` most likely made: among those whose
    output equals the learner's on the failing case ``index``, the one that agrees
    with it on the most cases (two mistakes can coincide on one case: a fully masked
    row is uniform both with d2l's -1e6 fill and with a fill of 0, which differ on
    the other cases)."""
    candidates = [m for m in spec.mistakes if _matches(spec, m, index, got, expected)]
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    agreement = dict.fromkeys(candidates, 0)
    for other, case in enumerate(spec.cases):
        args, kwargs = case.make(torch.Generator().manual_seed(1000 + other))
        try:
            learner = fn(*args, **kwargs)
        except Exception:
            continue
        fresh_args, fresh_kwargs = case.make(
            torch.Generator().manual_seed(1000 + other)
        )
        right = spec.reference(*fresh_args, **fresh_kwargs)
        del right
        for mistake in candidates:
            try:
                wrong_args, wrong_kwargs = case.make(
                    torch.Generator().manual_seed(1000 + other)
                )
                wrong = mistake.wrong(*wrong_args, **wrong_kwargs)
            except Exception:
                continue
            if (
                _difference(learner, wrong, spec.tolerance, None, nan_as_zero=True)
                is None
            ):
                agreement[mistake] += 1
    return max(candidates, key=lambda m: agreement[m])  # ties: the first listed


def _todo(spec: Exercise, head: str, lang: str | None) -> Report:
    text = _fill(
        _(
            "… {head}: not written yet. Fill in the function `{signature}` above, "
            "run its cell, then run this check again.",
            lang,
        ),
        head=head,
        signature=spec.signature,
    )
    return Report(spec.id, "todo", text)


def _failed(spec, head, case, args, kwargs, detail, mistake, lang) -> Report:
    text = _fill(
        _("✗ {head}: wrong on the case “{case}”, inputs {inputs}.", lang),
        head=head,
        case=_(case.description, lang),
        inputs=_describe_inputs(args, kwargs),
    )
    text += "\n" + "\n".join("  " + line for line in detail.splitlines())
    return Report(spec.id, "failed", text, mistake, case.description)


# -- comparing ------------------------------------------------------------------------


def _clone(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, tuple):
        return tuple(_clone(v) for v in x)
    if isinstance(x, list):
        return [_clone(v) for v in x]
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _changed_input(args, kwargs, inputs) -> str | None:
    named = [
        (f"argument {i + 1}", a, b) for i, (a, b) in enumerate(zip(args, inputs[0]))
    ]
    named += [(k, kwargs[k], inputs[1][k]) for k in kwargs]
    for name, original, passed in named:
        for a, b in zip(_tensors(original), _tensors(passed)):
            if a.shape != b.shape or not torch.equal(a, b):
                if not (a.is_floating_point() and torch.isnan(a).any()):
                    return name
    return None


def _tensors(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _tensors(v)]
    return []


def _difference(
    got, expected, tolerance: dict, lang: str | None, nan_as_zero: bool = False
) -> str | None:
    """None if ``got`` equals ``expected`` (tensors, numbers or tuples of them), else a
    message saying where and how they differ. ``nan_as_zero``: NaN counts as 0 on both
    sides (to match a learner's output with a mistake's, which may differ only in how
    an empty row comes out)."""
    if isinstance(expected, tuple):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return _fill(
                _("expected a tuple of {n} results, got {got}", lang),
                n=len(expected),
                got=_kind(got),
            )
        for i, (g, e) in enumerate(zip(got, expected)):
            message = _difference(g, e, tolerance, lang, nan_as_zero)
            if message is not None:
                return _fill(_("result {i}: ", lang), i=i + 1) + message
        return None
    if isinstance(expected, (int, float)):
        if not isinstance(got, (int, float, torch.Tensor)) or (
            isinstance(got, torch.Tensor) and got.numel() != 1
        ):
            return _fill(_("expected a number, got {got}", lang), got=_kind(got))
        value = float(got)
        if nan_as_zero and math.isnan(value) and math.isnan(expected):
            return None
        if math.isclose(value, expected, rel_tol=tolerance["rtol"], abs_tol=1e-9):
            return None
        return _fill(
            _("expected {expected}, got {got}", lang),
            expected=_round(expected),
            got=_round(value),
        )
    if not isinstance(got, torch.Tensor):
        return _fill(
            _("expected a tensor of shape {shape}, got {got}", lang),
            shape=tuple(expected.shape),
            got=_kind(got),
        )
    if got.shape != expected.shape:
        return _fill(
            _("expected shape {expected}, got shape {got}", lang),
            expected=tuple(expected.shape),
            got=tuple(got.shape),
        )
    if got.dtype != expected.dtype:
        return _fill(
            _("expected dtype {expected} (the inputs'), got {got}", lang),
            expected=expected.dtype,
            got=got.dtype,
        )
    if got.dtype == torch.bool or not got.is_floating_point():
        bad = got != expected
    elif nan_as_zero:
        bad = ~torch.isclose(got.nan_to_num(0.0), expected.nan_to_num(0.0), **tolerance)
    else:
        close = torch.isclose(got, expected, equal_nan=False, **tolerance)
        bad = ~close
    if not bad.any():
        return None
    where = tuple(int(i) for i in bad.nonzero()[0])
    row = where[:-1]
    nan = got.is_floating_point() and torch.isnan(got).any()
    message = _fill(
        _("first difference at index {where}: expected {expected}, got {got}", lang),
        where=where,
        expected=_round(expected[where].item()),
        got=_round(got[where].item()),
    )
    if expected.dim() >= 1 and expected.shape[-1] <= 8:
        message += "\n" + _fill(
            _("row {row}: expected {expected}\n        got      {got}", lang),
            row=row,
            expected=_round_list(expected[row]),
            got=_round_list(got[row]),
        )
    if nan:
        message += "\n" + _("your result contains NaN", lang)
    return message


def _kind(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    return type(x).__name__


def _round(x: float) -> str:
    return "nan" if math.isnan(x) else f"{x:.4g}"


def _round_list(t: torch.Tensor) -> str:
    return "[" + ", ".join(_round(float(v)) for v in t.reshape(-1).tolist()) + "]"


def _describe_inputs(args: Sequence, kwargs: dict) -> str:
    parts = [_describe(a) for a in args]
    parts += [f"{k}={_describe(v)}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        if x.numel() <= 6 and not x.is_floating_point():
            return f"tensor({x.tolist()})"
        return f"{tuple(x.shape)} {str(x.dtype).replace('torch.', '')}"
    if isinstance(x, (tuple, list)):
        return "[" + ", ".join(_describe(v) for v in x) + "]"
    return repr(x)
