"""The check: runs a learner's function on every case of an exercise, compares each
result with the library's, and writes the report.

* Each case is drawn ``count`` times from its own seeded ``torch.Generator``; the
  library's answer (the oracle) is computed in float64 and cast to the inputs' dtype.
* A value is right when it is within the tolerance of its dtype, relative to the size
  of the values (:data:`TOLERANCE`): float32 code that is right passes, a mistake fails.
* A mistake is named when the learner's results equal a listed wrong implementation's
  on every case the learner gets wrong, two cases at least (:func:`diagnose`).
* The learner's code runs under a time limit (SIGALRM where the platform has it, in the
  main thread; elsewhere the time is checked after each call). An exception is reported
  with the line of the learner's code that raised it.
* The caller's random state, default dtype and grad mode are left as they were.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import linecache
import math
import numbers
import signal
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import plotting
from .catalog import EXERCISES
from .spec import Exercise, Mistake

_LOCALES = Path(__file__).resolve().parent.parent / "locales"

#: The learner's code may run this many seconds per check, all cases together.
TIME_LIMIT = 20.0

#: Relative tolerance by dtype: a value passes when ``|got - expected| <= tol *
#: (|expected| + scale)``, ``scale`` the largest ``|expected|`` of the result. float64
#: allows float32 arithmetic inside (transformers' float32 RoPE frequencies, a mean
#: taken in float32).
TOLERANCE = {torch.float64: 2e-5, torch.float32: 2e-4}


@dataclass
class Report:
    """What a check found. Shown as text when it is a cell's last value.

    ``status``: ``"passed"``, ``"todo"`` (not written yet) or ``"failed"``;
    ``mistake``: the name of the diagnosed mistake (or ``"in-place"``, ``"time"``, a
    constraint's name), or None; ``case``: the first failing case's description;
    ``inputs``: its inputs ``(args, kwargs)``, to rerun it in the next cell."""

    exercise: str
    status: str
    text: str
    mistake: str | None = None
    case: str | None = None
    inputs: tuple | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __repr__(self) -> str:
        return self.text

    def __bool__(self) -> bool:
        return self.passed


# -- language --

_language: str | None = None


def set_language(language: str | None) -> None:
    """The language of the checks' messages (``"zh_CN"``), or None: the language asked
    of :func:`attention_lib.plot_language` (with or without a CJK font: a report is
    text, not a plot), else English."""
    if language is not None and not (_LOCALES / language / "exercises.po").exists():
        known = sorted(p.parent.name for p in _LOCALES.glob("*/exercises.po"))
        raise ValueError(
            f"set_language: expected one of {known} or None, got {language!r}"
        )
    global _language
    _language = language


def current_language() -> str | None:
    if _language is not None:
        return _language
    asked = getattr(plotting, "_requested_language", None)
    if asked is not None and (_LOCALES / asked / "exercises.po").exists():
        return asked
    return getattr(plotting._catalog, "language", None)


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


# -- the check --


def exercises() -> dict[str, Exercise]:
    """Every exercise, by id (``"3.1"``: chapter 3's first)."""
    return {e.id: e for e in EXERCISES}


def check(
    exercise: str,
    fn: Callable,
    *,
    language: str | None = None,
    time_limit: float = TIME_LIMIT,
) -> Report:
    """Check the learner's ``fn`` for exercise ``exercise`` (e.g. ``"3.1"``).

    Returns a :class:`Report` (shown as text in a notebook); never raises for a wrong,
    slow or unfinished ``fn``. ``language``: the messages' language (default: see
    :func:`set_language`); ``time_limit``: seconds the learner's code may run in all."""
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
    if language is not None:
        if not (_LOCALES / language / "exercises.po").exists():
            set_language(language)  # raises the ValueError that lists the languages
    if not time_limit > 0:
        raise ValueError(f"check: expected time_limit > 0 seconds, got {time_limit!r}")
    lang = language if language is not None else current_language()
    spec = all_exercises[exercise]
    dtype, grad = torch.get_default_dtype(), torch.is_grad_enabled()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only cost (and vary the rounding)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # a learner's function that draws gets the same numbers
        try:
            return _run(spec, fn, lang, time_limit)
        finally:
            torch.set_default_dtype(dtype)
            torch.set_grad_enabled(grad)
            torch.set_num_threads(threads)


def _order(exercise_id: str) -> tuple[int, int]:
    chapter, number = exercise_id.split(".")
    return int(chapter), int(number)


@dataclass
class Draw:
    """One drawn case: its inputs and the library's answer."""

    case_description: str
    number: int
    args: tuple
    kwargs: dict
    expected: object


_draws: dict[tuple[str, int], list[Draw]] = {}


def draws(spec: Exercise, seed: int = 0) -> list[Draw]:
    """Every drawn case of ``spec``, in order (drawn once per process). ``seed``: 0 is
    what :func:`check` uses; the tests draw other seeds too."""
    if (spec.id, seed) not in _draws:
        found = []
        for c, case in enumerate(spec.cases):
            for k in range(case.count):
                g = torch.Generator().manual_seed(
                    1_000_000 * seed + 10_000 * (c + 1) + k
                )
                with torch.random.fork_rng(devices=[]):
                    args, kwargs = case.make(g)
                    expected = reference(spec, args, kwargs)
                found.append(Draw(case.description, len(found), args, kwargs, expected))
        _draws[spec.id, seed] = found
    return _draws[spec.id, seed]


def reference(spec: Exercise, args, kwargs):
    """The library's answer, computed in float64, in the inputs' dtype."""
    dtype = next(
        (t.dtype for t in _tensors((args, kwargs)) if t.is_floating_point()), None
    )
    result = spec.reference(*_cast(args, torch.float64), **_cast(kwargs, torch.float64))
    return _cast(result, dtype) if dtype is not None else result


class _TookTooLong(BaseException):
    """Raised inside the learner's code when its time is up (not an ``Exception``: a
    learner's ``except Exception`` does not swallow it)."""


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Interrupt the code inside after ``seconds``, where SIGALRM exists and this is
    the main thread (Linux, macOS: a Jupyter kernel runs cells there); elsewhere
    (Windows) run it uninterrupted. A timer that was set before is set again after."""
    usable = (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def ring(signum, frame):
        raise _TookTooLong

    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, ring)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if old_delay > 0:
            left = old_delay - (time.perf_counter() - start)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), old_interval)


@dataclass
class _Outcome:
    draw: Draw
    kind: str  # "right", "wrong" (a value), "error", "none", "todo", "in-place"
    got: object = None
    detail: str = ""


def _run(
    spec: Exercise, fn: Callable, lang: str | None, limit: float, seed: int = 0
) -> Report:
    head = f"{spec.id} {spec.title}"
    stub = is_stub(fn)
    if stub:
        return _todo(spec, head, lang)
    outcomes: list[_Outcome] = []
    spent = 0.0
    for draw in draws(spec, seed):
        inputs = _clone((draw.args, draw.kwargs))
        start = time.perf_counter()
        try:
            with _time_limit(limit - spent):
                got = fn(*inputs[0], **inputs[1])
        except _TookTooLong:
            return _too_slow(spec, head, draw, limit, lang)
        except NotImplementedError as error:
            if stub is None and not outcomes:  # no source to read: a stub, likely
                return _todo(spec, head, lang)
            detail = _fill(
                _(
                    "raised NotImplementedError: this case is not written yet "
                    "({passed} of {n} cases before it pass)",
                    lang,
                ),
                passed=sum(o.kind == "right" for o in outcomes),
                n=len(outcomes),
            )
            outcomes.append(
                _Outcome(draw, "todo", None, detail + _where(error, fn, lang))
            )
            break
        except Exception as error:  # the learner's bug, reported, not raised
            detail = _fill(
                _("your function raised {error}", lang),
                error=f"{type(error).__name__}: {error}",
            )
            outcomes.append(
                _Outcome(draw, "error", None, detail + _where(error, fn, lang))
            )
            spent += time.perf_counter() - start
            continue
        spent += time.perf_counter() - start
        if spent > limit:
            return _too_slow(spec, head, draw, limit, lang)
        if got is None:
            detail = _(
                "your function returns nothing (None): did you forget `return`?", lang
            )
            outcomes.append(_Outcome(draw, "none", None, detail))
            break
        changed = _changed_input(fn, draw.args, draw.kwargs, inputs, lang)
        if changed is not None:
            detail = _fill(
                _(
                    "your function changed its input {name} in place; attention "
                    "functions must leave their inputs as they were (compute on a "
                    "copy: x = x.clone(), or use out-of-place operations such as "
                    "masked_fill instead of masked_fill_)",
                    lang,
                ),
                name=changed,
            )
            outcomes.append(_Outcome(draw, "in-place", got, detail))
            break
        difference = _difference(got, draw.expected, spec, draw, lang)
        outcomes.append(
            _Outcome(draw, "right" if difference is None else "wrong", got, difference)
        )
    failed = [o for o in outcomes if o.kind != "right"]
    if not failed:
        if spec.constraint is not None:
            try:
                with _time_limit(max(limit - spent, 1.0)):
                    broken = spec.constraint.violated(fn, draws(spec, seed))
            except _TookTooLong:
                return _too_slow(spec, head, draws(spec, seed)[-1], limit, lang)
            if broken:
                text = _fill(
                    _("✗ {head}: the values are right, but {diagnosis}", lang),
                    head=head,
                    diagnosis=_(spec.constraint.diagnosis, lang),
                )
                return Report(spec.id, "failed", text, spec.constraint.name)
        names = _("; ", lang).join(
            _(d, lang) for d in dict.fromkeys(c.description for c in spec.cases)
        )
        text = _fill(
            _("✓ {head}: correct on all {n} cases ({names}).", lang),
            head=head,
            n=len(outcomes),
            names=names,
        )
        return Report(spec.id, "passed", text)
    first = failed[0]
    mistake = diagnose(spec, outcomes) if first.kind in ("wrong", "error") else None
    detail = first.detail
    if mistake is not None:
        detail = (
            _("Likely mistake: ", lang) + _(mistake.diagnosis, lang) + "\n" + detail
        )
    if len(failed) > 1:
        summary = _fill(
            _(
                "✗ {head}: wrong on {k} of {n} cases; the first, “{case}”, inputs "
                "{inputs}:",
                lang,
            ),
            k=len(failed),
            n=len(outcomes),
        )
    else:
        summary = _("✗ {head}: wrong on the case “{case}”, inputs {inputs}:", lang)
    text = _fill(
        summary,
        head=head,
        case=_(first.draw.case_description, lang),
        inputs=_describe_inputs(first.draw.args, first.draw.kwargs),
    )
    text += "\n" + "\n".join("  " + line for line in detail.splitlines())
    name = (
        mistake.name
        if mistake is not None
        else ("in-place" if first.kind == "in-place" else None)
    )
    return Report(
        spec.id,
        "failed",
        text,
        name,
        first.draw.case_description,
        _clone((first.draw.args, first.draw.kwargs)),
    )


def _too_slow(spec, head, draw, limit, lang) -> Report:
    text = _fill(
        _(
            "✗ {head}: your function took longer than {limit} s (on the case “{case}” "
            "or before it; the library's answer takes milliseconds): an endless loop?",
            lang,
        ),
        head=head,
        limit=f"{limit:g}",
        case=_(draw.case_description, lang),
    )
    return Report(spec.id, "failed", text, "time", draw.case_description)


def _todo(spec: Exercise, head: str, lang: str | None) -> Report:
    text = _fill(
        _(
            "… {head}: not written yet. Fill in the function {signature} above, then "
            "run its cell again: the check on its last line runs then.",
            lang,
        ),
        head=head,
        signature=spec.signature,
    )
    return Report(spec.id, "todo", text)


def is_stub(fn) -> bool | None:
    """Whether ``fn`` is a stub not written yet: its body (after a docstring) only
    ``raise NotImplementedError``, ``...``, ``pass`` or ``return None``. None if its
    source cannot be read."""
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = list(node.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    ):
        if isinstance(body[0].value.value, str):
            body = body[1:]

    def empty(statement) -> bool:
        if isinstance(statement, ast.Pass):
            return True
        if isinstance(statement, ast.Return):  # a bare `return` or `return None`
            value = statement.value
            return value is None or (
                isinstance(value, ast.Constant) and value.value is None
            )
        if isinstance(statement, ast.Expr) and isinstance(
            statement.value, ast.Constant
        ):
            return statement.value.value is Ellipsis
        if isinstance(statement, ast.Raise) and statement.exc is not None:
            exc = (
                statement.exc.func
                if isinstance(statement.exc, ast.Call)
                else statement.exc
            )
            return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
        return False

    return all(empty(s) for s in body)


def _where(error: BaseException, fn, lang) -> str:
    """The line of the learner's code that raised ``error`` (the last traceback frame
    in the file ``fn`` was defined in: a notebook cell, or a script)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    found = None
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == code.co_filename:
            found = tb
        tb = tb.tb_next
    if found is None:
        return ""
    line = linecache.getline(code.co_filename, found.tb_lineno).strip()
    if not line:
        return "\n" + _fill(_("in your code, line {line}", lang), line=found.tb_lineno)
    return "\n" + _fill(
        _("in your code, line {line}: {source}", lang),
        line=found.tb_lineno,
        source=line,
    )


# -- diagnosis --

_mutants: dict[tuple[str, str, int], object] = {}
_FAILED = object()


def mutant_result(spec: Exercise, mistake: Mistake, draw: Draw):
    """What ``mistake``'s wrong implementation gives on ``draw`` (computed once)."""
    key = (spec.id, mistake.name, id(draw))
    if key not in _mutants:
        try:
            with torch.random.fork_rng(devices=[]):
                _mutants[key] = mistake.wrong(*_clone(draw.args), **_clone(draw.kwargs))
        except Exception:
            _mutants[key] = _FAILED
    return _mutants[key]


def diagnose(spec: Exercise, outcomes: Sequence) -> Mistake | None:
    """The listed mistake the learner most likely made: one whose wrong implementation
    gives the learner's results on every case the learner got wrong (two at least),
    and raises where the learner's code raised; float32 cases may disagree (near the
    float limits two ways of writing one mistake round differently), float64 ones may
    not. Among several, the one that is wrong on the fewest cases the learner got
    right. Code that raises on some cases (two at least) and is wrong on fewer than
    two is matched strictly: the mistake raises on exactly those cases, gives the
    learner's results where they are wrong, and is right where the learner is right."""
    wrong = [o for o in outcomes if o.kind == "wrong"]
    raised = [o for o in outcomes if o.kind == "error"]
    if len(wrong) < 2:
        if len(raised) < 2:
            return None
        right = [o for o in outcomes if o.kind == "right"]
        for mistake in spec.mistakes:
            if (
                all(mutant_result(spec, mistake, o.draw) is _FAILED for o in raised)
                and all(
                    same(o.got, mutant_result(spec, mistake, o.draw)) for o in wrong
                )
                and all(
                    same(o.draw.expected, mutant_result(spec, mistake, o.draw))
                    for o in right
                )
            ):
                return mistake
        return None
    candidates = []
    for mistake in spec.mistakes:
        if not all(mutant_result(spec, mistake, o.draw) is _FAILED for o in raised):
            continue
        agree = [same(o.got, mutant_result(spec, mistake, o.draw)) for o in wrong]
        loose = [a or _in_float32(o.draw) for a, o in zip(agree, wrong)]
        if all(loose) and sum(agree) >= 2 and sum(agree) * 2 >= len(wrong):
            candidates.append((not all(agree), mistake))
    if not candidates:
        return None

    def penalty(candidate):
        partial, mistake = candidate
        wrong_where_right = sum(
            not same(o.draw.expected, mutant_result(spec, mistake, o.draw))
            for o in outcomes
            if o.kind == "right"
        )
        return (partial, wrong_where_right)

    return min(candidates, key=penalty)[1]  # ties: the first listed


def _in_float32(draw: Draw) -> bool:
    return any(t.dtype == torch.float32 for t in _tensors(draw.args))


def same(a, b) -> bool:
    """Whether two results are the same up to rounding (NaN counts as 0, and the dtype
    is ignored): how a learner's output is matched with a mistake's."""
    if b is _FAILED or a is _FAILED:
        return False
    if isinstance(b, (tuple, list)):
        return (
            isinstance(a, (tuple, list))
            and len(a) == len(b)
            and all(same(x, y) for x, y in zip(a, b))
        )
    if not isinstance(b, torch.Tensor):
        x, y = _as_number(a), _as_number(b)
        if x is None or y is None:
            return False
        both_nan = math.isnan(x) and math.isnan(y)
        return both_nan or math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-9)
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return False
    if a.shape != b.shape:
        return False
    if not a.is_floating_point() or not b.is_floating_point():
        return bool(torch.equal(a.double(), b.double()))
    big = 1e300
    a = a.double().nan_to_num(0.0, big, -big)
    b = b.double().nan_to_num(0.0, big, -big)
    scale = b.abs().clamp(max=1e200).max() if b.numel() else torch.tensor(0.0)
    return bool(
        ((a - b).abs() <= 1e-3 * (b.abs() + scale) + 1e-12).all() or torch.equal(a, b)
    )


# -- comparing --


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


def _cast(x, dtype):
    if isinstance(x, torch.Tensor):
        return x.to(dtype) if x.is_floating_point() else x
    if isinstance(x, tuple):
        return tuple(_cast(v, dtype) for v in x)
    if isinstance(x, list):
        return [_cast(v, dtype) for v in x]
    if isinstance(x, dict):
        return {k: _cast(v, dtype) for k, v in x.items()}
    return x


def _tensors(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


def _parameter_names(fn) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _changed_input(fn, args, kwargs, inputs, lang) -> str | None:
    names = _parameter_names(fn)
    named = []
    for i, (a, b) in enumerate(zip(args, inputs[0])):
        if i < len(names) and not names[i].startswith("*"):
            label = _fill(_("{name} (argument {i})", lang), name=names[i], i=i + 1)
        else:
            label = _fill(_("argument {i}", lang), i=i + 1)
        named.append((label, a, b))
    named += [(k, kwargs[k], inputs[1][k]) for k in kwargs]
    for name, original, passed in named:
        for a, b in zip(_tensors(original), _tensors(passed)):
            if a.shape != b.shape or not torch.equal(a, b):
                if not (a.is_floating_point() and torch.isnan(a).any()):
                    return name
    return None


def _as_number(x) -> float | None:
    """``x`` as a float if it is one number (a Python or NumPy scalar, a one-element
    tensor or array), else None."""
    if isinstance(x, bool):
        return None
    if isinstance(x, numbers.Real):
        return float(x)
    if isinstance(x, torch.Tensor) and x.numel() == 1 and not x.dtype == torch.bool:
        return float(x)
    if type(x).__module__ == "numpy" and getattr(x, "size", 0) == 1:
        try:
            return float(x)
        except (TypeError, ValueError):
            return None
    return None


def _kind(x, lang) -> str:
    if isinstance(x, torch.Tensor):
        return _fill(_("a tensor of shape {shape}", lang), shape=tuple(x.shape))
    if type(x).__module__ == "numpy" and hasattr(x, "shape"):
        return _fill(_("a NumPy array of shape {shape}", lang), shape=tuple(x.shape))
    if isinstance(x, (tuple, list)):
        return _fill(_("a {kind} of {n} items", lang), kind=type(x).__name__, n=len(x))
    return _fill(_("a value of type {kind}", lang), kind=type(x).__name__)


def _digits(expected: float, got: float) -> tuple[str, str]:
    """The two numbers with enough significant digits to differ."""
    for digits in range(4, 18):
        a, b = _round(expected, digits), _round(got, digits)
        if a != b:
            return a, b
    return _round(expected, 17), _round(got, 17)


def _round(x: float, digits: int = 4) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    text = f"{x:.{digits}g}"
    return "0" if text in ("0", "-0") else text


def _round_list(t: torch.Tensor) -> str:
    return "[" + ", ".join(_round(float(v)) for v in t.reshape(-1).tolist()) + "]"


def _difference(got, expected, spec: Exercise, draw: Draw, lang) -> str | None:
    """None if ``got`` is ``expected`` (within the tolerance), else what differs."""
    if isinstance(expected, tuple):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return _fill(
                _("expected a tuple of {n} results, got {got}", lang),
                n=len(expected),
                got=_kind(got, lang),
            )
        messages = [_value_difference(g, e, draw, lang) for g, e in zip(got, expected)]
        names = [
            _(spec.results[i], lang) if i < len(spec.results) else str(i + 1)
            for i in range(len(expected))
        ]
        wrong = [i for i, m in enumerate(messages) if m is not None]
        if not wrong:
            return None
        right = [i for i, m in enumerate(messages) if m is None]
        text = ""
        if right:
            text = (
                _fill(
                    _("right: {names}", lang),
                    names=_(", ", lang).join(
                        _fill(_("result {i} ({name})", lang), i=i + 1, name=names[i])
                        for i in right
                    ),
                )
                + "\n"
            )
        i = wrong[0]
        return (
            text
            + _fill(_("result {i} ({name}): ", lang), i=i + 1, name=names[i])
            + messages[i]
        )
    return _value_difference(got, expected, draw, lang)


def _value_difference(got, expected, draw: Draw, lang) -> str | None:
    if not isinstance(expected, torch.Tensor):
        value = _as_number(got)
        if value is None:
            return _fill(_("expected a number, got {got}", lang), got=_kind(got, lang))
        if math.isclose(value, expected, rel_tol=1e-5, abs_tol=1e-12):
            return None
        shown = _digits(expected, value)
        return _fill(
            _("expected {expected}, got {got} (a difference of {diff})", lang),
            expected=shown[0],
            got=shown[1],
            diff=f"{abs(value - expected):.2g}",
        )
    if not isinstance(got, torch.Tensor):
        return _fill(
            _("expected a tensor of shape {shape}, got {got}", lang),
            shape=tuple(expected.shape),
            got=_kind(got, lang),
        )
    if got.shape != expected.shape:
        return _fill(
            _("expected shape {expected}, got shape {got}", lang),
            expected=tuple(expected.shape),
            got=tuple(got.shape),
        )
    wider = expected.dtype == torch.float32 and got.dtype == torch.float64
    if got.dtype != expected.dtype and not wider:  # float64 for float32 is fine
        return _fill(
            _("expected dtype {expected} (the inputs'), got {got}", lang),
            expected=str(expected.dtype).replace("torch.", ""),
            got=str(got.dtype).replace("torch.", ""),
        )
    if not got.is_floating_point():
        bad = got != expected
        if not bad.any():
            return None
        where = tuple(int(i) for i in bad.nonzero()[0])
        return _fill(
            _(
                "first difference at index {where}: expected {expected}, got {got}",
                lang,
            ),
            where=where,
            expected=expected[where].item(),
            got=got[where].item(),
        )
    tol = TOLERANCE.get(expected.dtype, 1e-2)
    e, g = expected.double(), got.double()
    finite = e[torch.isfinite(e)]
    scale = float(finite.abs().max()) if finite.numel() else 0.0
    allowed = tol * (e.abs() + scale) + 1e-300
    diff = (g - e).abs()
    ok = (g == e) | (diff <= allowed)
    if bool(ok.all()):
        return None
    badness = torch.where(
        ok, torch.zeros_like(diff), (diff / allowed).nan_to_num(math.inf)
    )
    where = tuple(int(i) for i in torch.nonzero(badness == badness.max())[0])
    exp_v, got_v = float(e[where]), float(g[where])
    shown = _digits(exp_v, got_v)
    size = abs(got_v - exp_v)
    message = _fill(
        _("largest difference at index {where}: expected {expected}, got {got}", lang),
        where=where,
        expected=shown[0],
        got=shown[1],
    )
    if math.isfinite(size):
        if exp_v != 0:
            message += "\n" + _fill(
                _(
                    "(difference {diff}, {rel} of the expected value; allowed "
                    "{allowed})",
                    lang,
                ),
                diff=f"{size:.2g}",
                rel=_percent(size / abs(exp_v)),
                allowed=f"{float(allowed[where]):.2g}",
            )
        else:
            message += "\n" + _fill(
                _("(difference {diff}; allowed {allowed})", lang),
                diff=f"{size:.2g}",
                allowed=f"{float(allowed[where]):.2g}",
            )
    count = int((~ok).sum())
    if count > 1:
        message += "\n" + _fill(
            _("{k} of {n} values differ", lang), k=count, n=expected.numel()
        )
    if expected.dim() >= 1 and expected.shape[-1] <= 8:
        row = where[:-1]
        if row:
            message += "\n" + _fill(_("row {row}:", lang), row=row)
        message += "\n" + _fill(
            _("  expected {expected}\n  got      {got}", lang),
            expected=_round_list(expected[row]),
            got=_round_list(got[row]),
        )
    if torch.isnan(g).any():
        message += "\n" + _("your result contains NaN", lang)
    elif (
        draw is not None
        and expected.dtype == torch.float64
        and float((diff / (e.abs() + scale + 1e-300)).nan_to_num(math.inf).max()) < 1e-3
    ):
        message += "\n" + _(
            "the difference is small: float32 arithmetic somewhere? Compute in the "
            "inputs' dtype (float64)",
            lang,
        )
    return message


def _percent(x: float) -> str:
    if x >= 0.01:
        return f"{100 * x:.3g} %"
    return f"{x:.2g}"


def _describe_inputs(args: Sequence, kwargs: dict) -> str:
    parts = [_describe(a) for a in args]
    parts += [f"{k}={_describe(v)}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        if x.numel() <= 8 and not x.is_floating_point():
            return f"tensor({x.tolist()})"
        return f"{tuple(x.shape)} {str(x.dtype).replace('torch.', '')}"
    if isinstance(x, float):
        return _round(x)
    if isinstance(x, (tuple, list)):
        return "[" + ", ".join(_describe(v) for v in x) + "]"
    return repr(x)
