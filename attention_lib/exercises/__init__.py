"""Exercises that check themselves: ``al.exercises.check("3.1", masked_softmax)``.

A learner writes a mechanism (a masked softmax, a GQA layer, an online softmax, ...) in
a notebook cell and runs one line. The check calls the learner's function on many
seeded random cases of every property the task states (sizes, float32 and float64,
scores near the floating-point limits, fully masked rows, gaps in the positions, ...)
and on the edge cases, compares each result with the library's (the oracle), and
prints either what was checked, or the first case that fails with

* a **diagnosis** of the likely mistake, in plain words, when the learner's results
  equal a listed wrong implementation's (a ``Mistake``) on every case they get wrong;
  the mistakes of a step the book repeats are written once
  (:mod:`attention_lib.exercises.families`);
* the failing case's inputs (shapes, dtype; ``report.inputs`` holds them) and the
  largest difference, its size and the tolerance;
* for an exception, the line of the learner's code that raised it; for code that runs
  too long, a time limit.

A stub that is not written yet (its body only ``raise NotImplementedError``, ``...``
or ``pass``) gets a short "not written yet" and raises nothing, so "Run all" and nbval
work. A check never changes the caller's random state, never touches the network, and
never changes its inputs.

The package: :mod:`~attention_lib.exercises.checker` (the check and its report),
:mod:`~attention_lib.exercises.spec` (what an exercise is), ``families`` (shared
mistakes) and one module per step of the book with its exercises (``scores``,
``masks``, ``heads``, ``mqar``, ``online``, ``rope``, ``mla``, ``recurrent``, listed in
``catalog``). The messages are translated in
``attention_lib/locales/<language>/exercises.po``; the language follows
:func:`attention_lib.plot_language` (whether or not a CJK font is installed), or
:func:`set_language`.
"""

from .checker import TIME_LIMIT, Report, check, exercises, set_language
from .spec import Case, Constraint, Exercise, Mistake

__all__ = [
    "TIME_LIMIT",
    "Case",
    "Constraint",
    "Exercise",
    "Mistake",
    "Report",
    "check",
    "exercises",
    "set_language",
]
