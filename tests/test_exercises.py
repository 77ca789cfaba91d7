"""The checks of the "write it yourself" exercises (attention_lib.exercises) are tested:

* the library's answer and the chapters' solutions pass every exercise, on the check's
  own cases and on cases drawn with other seeds;
* every listed mistake, written as a mutant of the solution, gets its own diagnosis
  (not a generic failure, not another mistake's) and fails on every seed;
* learner solutions written apart from the mutants (tests/exercise_attempts.py): every
  right one passes, every wrong one fails, a named mistake is the one made, and one is
  named for at least 80 % of them; the outside tester's false accepts and false
  reject are among them;
* two blind sets of learner solutions by testers who never saw the checker
  (tests/exercise_blind/dev, used to improve it, and tests/exercise_blind/heldout,
  run once after the checker was final): no right one rejected, no wrong one
  accepted, no wrong mistake named (each wrong solution lists the diagnoses that name
  its mistake, ``accept``), and a likely mistake named for the measured share;
* a stub is "not written yet"; a forgotten ``return``, an unfinished case, an
  exception (with the line of the learner's code), a wrong shape, an in-place change
  and an endless loop (the time limit) are reported, not raised;
* a check leaves the caller's random state, default dtype and grad mode as they were,
  and opens no network connection;
* every message has a Chinese translation, and a Chinese notebook's reports are Chinese
  also without a CJK font (the language follows plot_language, not the font).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import linecache
import math
import re
import signal
import socket
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import attention_lib as al
from attention_lib import exercises as ex
from attention_lib import plotting
from attention_lib.exercises import checker
from attention_lib.plotting import read_po

import exercise_attempts
from exercise_attempts import ATTEMPTS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "attention_lib" / "exercises"
EXERCISES = ex.exercises()
MISTAKES = [(e, m.name) for e, spec in EXERCISES.items() for m in spec.mistakes]
RIGHT = [(e, fn) for e, fn, names in ATTEMPTS if names is None]
WRONG = [(e, fn, names) for e, fn, names in ATTEMPTS if names is not None]
SEEDS = (1, 2)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a check opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def in_dtype(spec):
    """The library's answer as a learner's function: in the inputs' dtype."""

    def answer(*args, **kwargs):
        return checker.reference(spec, args, kwargs)

    return answer


@functools.cache
def report_of(exercise, fn):
    """The check's report of ``fn`` (a learner solution is checked once per run)."""
    return ex.check(exercise, fn)


def run(exercise, fn, seed):
    """The check of ``fn`` on the cases drawn with ``seed`` (0: the check's own)."""
    spec = EXERCISES[exercise]
    with torch.random.fork_rng(devices=[]):
        return checker._run(spec, fn, None, 60.0, seed)


def chapter_solutions() -> dict[str, object]:
    """Each chapter's solution function of each exercise, run from its cell."""
    found = {}
    for path in sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            tags = cell["metadata"].get("tags", [])
            if cell["cell_type"] != "code" or "hide-cell" not in tags:
                continue
            call = re.search(r'al\.exercises\.check\("([\d.]+)", (\w+)\)', source)
            if call:
                namespace = {"torch": torch, "al": al, "math": math}
                exec(
                    compile(source.replace(call.group(0), ""), path.name, "exec"),
                    namespace,
                )
                found[call.group(1)] = namespace[call.group(2)]
    return found


SOLUTIONS = chapter_solutions()


def test_the_book_s_arc_is_covered():
    chapters = {int(e.split(".")[0]) for e in EXERCISES}
    assert chapters == set(range(1, 14))
    assert set(SOLUTIONS) == set(EXERCISES)
    for spec in EXERCISES.values():
        names = [m.name for m in spec.mistakes]
        assert len(names) == len(set(names)) >= 3, spec.id
        drawn = checker.draws(spec)
        assert len(drawn) >= 15, spec.id  # many random cases, not 2 or 3
        dtypes = {t.dtype for d in drawn for t in checker._tensors(d.args)}
        assert {torch.float32, torch.float64} <= dtypes, spec.id


def test_shared_steps_share_their_mistakes():
    """A step the book repeats names its mistakes with the same words everywhere."""
    by_name: dict[str, set[str]] = {}
    for spec in EXERCISES.values():
        for m in spec.mistakes:
            by_name.setdefault(m.name, set()).add(m.diagnosis)
    shared = {n for n, d in by_name.items() if len(d) == 1}
    assert {"no-scale", "fill-zero", "off-by-one", "repeat-not-interleave"} <= shared
    uses = {
        name: [e for e, s in EXERCISES.items() if name in {m.name for m in s.mistakes}]
        for name in (
            "no-scale",
            "fill-zero",
            "off-by-one",
            "repeat-not-interleave",
            "read-before-write",
            "softmax-over-queries",
        )
    }
    assert all(len(e) >= 2 for e in uses.values()), uses
    assert {"3.1", "5.1"} <= set(uses["off-by-one"])
    assert {"8.1", "8.2"} <= set(uses["repeat-not-interleave"]) & set(uses["no-scale"])


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_library_s_answer_and_the_chapter_s_solution_pass(exercise):
    spec = EXERCISES[exercise]
    if spec.constraint is not None:  # the library's answer does not read in blocks
        report = ex.check(exercise, in_dtype(spec))
        assert report.mistake == spec.constraint.name, report.text
        assert (
            report.text.startswith(f"✗ {exercise} ")
            and "values are right" in report.text
        )
    for fn in (in_dtype(spec), SOLUTIONS[exercise])[spec.constraint is not None :]:
        start = time.perf_counter()
        report = ex.check(exercise, fn)
        assert report.status == "passed", report.text
        assert report.passed and bool(report) and report.mistake is None
        assert f"all {len(checker.draws(spec))} cases" in report.text
        assert time.perf_counter() - start < 30  # about 0.1 s here: a generous bound
    assert len(report.text) < 400 and "\n" not in report.text  # short, stored


@pytest.mark.parametrize("exercise", EXERCISES)
def test_right_solutions_pass_and_mistakes_fail_on_other_seeds(exercise):
    spec = EXERCISES[exercise]
    rights = [in_dtype(spec)] if spec.constraint is None else []
    rights.append(SOLUTIONS[exercise])
    rights += [fn for e, fn in RIGHT if e == exercise]
    for seed in SEEDS:
        for fn in rights:
            report = run(exercise, fn, seed)
            assert report.passed, (seed, getattr(fn, "__name__", fn), report.text)
        for mistake in spec.mistakes:
            report = run(exercise, mistake.wrong, seed)
            assert report.status == "failed", (seed, mistake.name)
            assert report.mistake in (mistake.name, None), (seed, mistake.name, report)


@pytest.mark.parametrize(("exercise", "mistake"), MISTAKES)
def test_each_mistake_gets_its_own_diagnosis(exercise, mistake):
    spec = EXERCISES[exercise]
    wrong = next(m for m in spec.mistakes if m.name == mistake)
    report = ex.check(exercise, wrong.wrong)
    assert report.status == "failed", report.text
    assert report.mistake == mistake, report.text
    assert "Likely mistake: " + wrong.diagnosis in report.text
    assert "expected" in report.text or "raised" in report.text
    assert report.inputs is not None  # the failing case, to rerun


@pytest.mark.parametrize(
    ("exercise", "fn"), RIGHT, ids=[f"{e}-{fn.__name__}" for e, fn in RIGHT]
)
def test_a_learner_s_right_solution_passes(exercise, fn):
    report = report_of(exercise, fn)
    assert report.passed, report.text


@pytest.mark.parametrize(
    ("exercise", "fn", "names"),
    WRONG,
    ids=[f"{e}-{fn.__name__}" for e, fn, _ in WRONG],
)
def test_a_learner_s_wrong_solution_fails_and_no_wrong_mistake_is_named(
    exercise, fn, names
):
    report = report_of(exercise, fn)
    assert report.status == "failed", report.text
    assert report.mistake is None or report.mistake in names, report.text
    for expected, got in re.findall(r"expected (\S+), got (\S+)", report.text):
        assert expected != got, report.text  # never two equal-looking numbers


def test_a_likely_mistake_is_named_for_most_wrong_solutions():
    """On all the wrong solutions, and on the second batch alone (written after the
    families, from the task texts): a likely mistake named for 80 % at least."""
    later = ATTEMPTS[exercise_attempts.SECOND_BATCH_START :]
    for attempts in (WRONG, [(e, fn, n) for e, fn, n in later if n is not None]):
        named = [fn for e, fn, names in attempts if report_of(e, fn).mistake in names]
        assert len(attempts) >= 30
        assert len(named) >= 0.8 * len(attempts), (len(named), len(attempts))


def test_the_outside_tester_s_false_verdicts_are_fixed():
    import exercise_attempts as a

    for exercise, fn in (
        ("1.1", a.pooling_naive_exp),  # overflows only past exp's range
        ("9.1", a.mqar_second_half),  # questions where the check put them
        ("9.1", a.mqar_mean_of_means),  # equal numbers of questions per row
        ("10.1", a.online_m0),  # every score far below 0
        ("10.1", a.online_one_softmax),  # ignores the blocks
        ("11.1", a.rope_contiguous),  # positions without gaps
    ):
        assert ex.check(exercise, fn).status == "failed", fn.__name__
    assert ex.check("9.1", a.mqar_numpy32).passed  # a NumPy float32 is a number
    assert ex.check("11.1", a.rope_transformers_float32).passed
    report = ex.check("10.1", a.online_one_softmax)
    assert report.mistake == "all-keys-at-once" and "block_size" in report.text
    report = ex.check("10.2", a.merge_chapter_v1)
    assert report.mistake == "nan-when-no-key", report.text


BLIND = ROOT / "tests" / "exercise_blind"

#: The share of a blind set's wrong solutions whose mistake must be named rightly: the
#: dev set's 111 of 113 were measured after the checker was improved on it; the
#: held-out set (141 solutions, 105 wrong) was run once on the final checker (commit
#: 59a8806) and measured 85 of 105 (81 %), with no false verdict and no wrong name:
#: the issue's goal, 80 %, is its floor. Do not tune the checker on the held-out set.
#: Today: 93 of 115 (with 7.3's 7 of 10, and one 5.1 slip named since).
BLIND_NAMED = {"dev": 0.95, "heldout": 0.80}

#: Exercises a blind set leaves out, because they were added after it was written: 7.3
#: (the whole multi-head layer, added when a reader found that 7.1 and 7.2 retype code
#: chapter 7 shows) is in the held-out set only, written by a third blind tester and run
#: once (tests/exercise_blind/heldout/README.md).
AFTER_BLIND = {"dev": {"7.3"}, "heldout": set()}


def blind_set(name: str) -> list[tuple[str, dict]]:
    """``(exercise, solution)`` of a blind set: ``solution`` is the tester's
    ``dict(name, correct, mistake, family, fn)`` plus ``accept``."""
    found = []
    for path in sorted((BLIND / name).glob("ex_*.py")):
        spec = importlib.util.spec_from_file_location(f"blind_{name}_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found += [(path.stem[3:].replace("_", "."), s) for s in module.SOLUTIONS]
    return found


@pytest.mark.parametrize("name", BLIND_NAMED)
def test_blind_learner_solutions_are_judged_right_and_their_mistakes_named(name):
    solutions = blind_set(name)
    assert {e for e, _ in solutions} == set(EXERCISES) - AFTER_BLIND[name]
    rejected, accepted, misnamed, named, wrong = [], [], [], 0, 0
    for exercise, solution in solutions:
        report = ex.check(exercise, solution["fn"])
        label = (exercise, solution["name"], report.mistake)
        if solution["correct"]:
            if not report.passed:
                rejected.append((*label, report.text))
            continue
        wrong += 1
        if report.status != "failed":
            accepted.append(label)
        elif report.mistake in solution["accept"]:
            named += 1
        elif report.mistake is not None:
            misnamed.append((*label, solution["mistake"]))
    assert not rejected, rejected
    assert not accepted, accepted
    assert not misnamed, misnamed
    assert wrong >= 100
    assert named >= BLIND_NAMED[name] * wrong, (named, wrong)


def _sdpa_learner(scale="sqrt(D)", fill=-math.inf, dim=-1, nan_to_zero=True):
    """5.1 as a learner writes it (masked_fill, softmax), one slip switched on."""

    def scaled_dot_product_attention(queries, keys, values, valid_lens):
        width = {"sqrt(D)": queries.shape[-1], "sqrt(K)": keys.shape[1], "none": 1}
        scores = queries @ keys.transpose(1, 2) / math.sqrt(width[scale])  # (B, Q, K)
        keep = torch.arange(keys.shape[1]) < valid_lens[:, None, None]  # (B, 1, K)
        weights = torch.softmax(scores.masked_fill(~keep, fill), dim=dim)
        return (weights.nan_to_num(0.0) if nan_to_zero else weights) @ values

    return scaled_dot_product_attention


def _causal_learner(offset=0, fill=-math.inf):
    """6.1 as a learner writes it: tril(K - Q + offset) and masked_fill."""

    def causal_attention(queries, keys, values):
        Q, K = queries.shape[1], keys.shape[1]
        keep = torch.ones(Q, K, dtype=torch.bool).tril(K - Q + offset)  # (Q, K)
        scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
        weights = torch.softmax(scores.masked_fill(~keep, fill), dim=-1)
        return weights.nan_to_num(0.0) @ values

    return causal_attention


#: (exercise, learner's function, the mistake to name; None: right, nothing flagged).
#: The fills a learner uses: -inf (then NaN -> 0 for a length of 0), or a large negative
#: number (-1e9, finfo.min), which gives a row without keys uniform weights.
CHAPTER_5_6_SLIPS = [
    ("5.1", _sdpa_learner(), None),
    ("5.1", _sdpa_learner(scale="none"), "no-scale"),
    ("5.1", _sdpa_learner(scale="none", nan_to_zero=False), "no-scale"),
    ("5.1", _sdpa_learner(scale="none", fill=-1e9), "no-scale-large-fill"),
    ("5.1", _sdpa_learner(scale="none", fill=-3.4e38), "no-scale-large-fill"),
    ("5.1", _sdpa_learner(scale="sqrt(K)"), "scale-by-key-count"),
    ("5.1", _sdpa_learner(scale="sqrt(K)", fill=-1e9), "scale-by-key-count-large-fill"),
    ("5.1", _sdpa_learner(dim=1), "softmax-over-queries"),
    ("5.1", _sdpa_learner(dim=1, nan_to_zero=False), "softmax-over-queries-nan"),
    ("5.1", _sdpa_learner(dim=1, fill=-1e9), "softmax-over-queries-large-fill"),
    ("6.1", _causal_learner(), None),
    ("6.1", _causal_learner(fill=-1e9), None),  # right: a causal row keeps a key
    ("6.1", _causal_learner(offset=-1), "excludes-itself"),
    ("6.1", _causal_learner(offset=-1, fill=-1e9), "excludes-itself-large-fill"),
    ("6.1", _causal_learner(offset=-1, fill=-1e4), "excludes-itself-large-fill"),
]


@pytest.mark.parametrize(
    ("exercise", "fn", "name"),
    CHAPTER_5_6_SLIPS,
    ids=[f"{e}-{n}-{i}" for i, (e, _, n) in enumerate(CHAPTER_5_6_SLIPS)],
)
def test_chapter_5_and_6_slips_are_named_on_every_seed(exercise, fn, name):
    """The reader's slips of 5.1 (softmax over dim=1, no scale, 1/sqrt(K)) and 6.1
    (tril(K - Q - 1)), with either fill: named on the check's own cases and on two
    other draws; the right solutions pass with nothing flagged."""
    assert_named_on_every_seed(exercise, fn, name)


def assert_named_on_every_seed(exercise, fn, name):
    """``fn`` passes with nothing flagged (``name`` None), or fails with the likely
    mistake ``name``, on the check's own cases and on the draws of ``SEEDS``; the report
    prints that mistake's diagnosis."""
    for seed in (0, *SEEDS):
        report = run(exercise, fn, seed)
        if name is None:
            assert report.passed and report.mistake is None, (seed, report.text)
        else:
            assert report.status == "failed" and report.mistake == name, (
                seed,
                report.text,
            )
    if name is not None:
        diagnosis = next(m for m in EXERCISES[exercise].mistakes if m.name == name)
        report = ex.check(exercise, fn)
        assert "Likely mistake: " + diagnosis.diagnosis in report.text


@pytest.mark.parametrize("exercise", EXERCISES)
def test_a_stub_is_not_written_yet(exercise):
    def raises(*args, **kwargs):
        raise NotImplementedError  # your code here

    def raises_a_message(*args, **kwargs):
        """A docstring."""
        raise NotImplementedError("write me")

    def ellipsis(*args, **kwargs): ...

    def passes(*args, **kwargs):
        pass

    def returns_none(*args, **kwargs):
        return None  # TODO

    for stub in (raises, raises_a_message, ellipsis, passes, returns_none):
        report = ex.check(exercise, stub)
        assert report.status == "todo", stub.__name__
        assert "not written yet" in report.text
        assert EXERCISES[exercise].signature in report.text


def test_a_forgotten_return_and_an_unfinished_case_are_told_apart_from_a_stub():
    def no_return(X, valid_lens):
        weights = al.masked_softmax(X, valid_lens)  # noqa: F841

    report = ex.check("3.1", no_return)
    assert report.status == "failed" and "did you forget `return`" in report.text
    assert "not written yet" not in report.text

    def half_done(X, valid_lens):
        if valid_lens.dim() == 2:
            raise NotImplementedError("lengths per query: todo")
        return al.masked_softmax(X, valid_lens)

    report = ex.check("3.1", half_done)
    assert report.status == "failed" and report.case == "lengths per query"
    assert "this case is not written yet (14 of 14 cases before it pass)" in report.text


def test_numbers_may_be_numpy_scalars_or_zero_dim_tensors():
    """A number may come in any of these forms (9.1's task says so: "a tensor
    holding one number" is accepted, as `.mean()` returns one)."""
    answer = EXERCISES["9.1"].reference
    one_element = (
        np.float32,
        np.float64,
        torch.tensor,
        float,
        lambda x: torch.tensor([x]),
    )
    for kind in one_element:
        assert ex.check("9.1", lambda lg, t, kind=kind: kind(answer(lg, t))).passed
    report = ex.check("9.1", lambda logits, targets: "most of them")
    assert "expected a number, got a value of type str" in report.text
    report = ex.check("9.1", lambda lg, t: torch.tensor([answer(lg, t)] * 2))
    assert "expected a number, got a tensor of shape (2,)" in report.text


def test_12_1_names_a_solution_that_builds_per_head_keys():
    """12.1 asks for the absorbed route: a solution that builds every head's keys or
    values of the cached tokens (all heads at once, one head at a time, or only the
    values) has the right values but is named; absorbed solutions in two styles pass,
    and the extra check is fast."""

    def keys_all_heads(q_nope, latent, W_uk, W_uv):
        keys = torch.einsum("btr,hdr->bhtd", latent, W_uk)  # (B, H, T, dn)
        values = torch.einsum("btr,hvr->bhtv", latent, W_uv)  # (B, H, T, dv)
        scores = q_nope @ keys.mT / math.sqrt(q_nope.shape[-1])
        return scores.softmax(-1) @ values

    def keys_one_head_at_a_time(q_nope, latent, W_uk, W_uv):
        out = []
        for h in range(q_nope.shape[1]):
            k, v = latent @ W_uk[h].T, latent @ W_uv[h].T  # (B, T, dn), (B, T, dv)
            scores = q_nope[:, h] @ k.mT / math.sqrt(q_nope.shape[-1])
            out.append(scores.softmax(-1) @ v)
        return torch.stack(out, dim=1)

    def values_only(q_nope, latent, W_uk, W_uv):
        c = latent[:, None]  # (B, 1, T, r)
        scores = (q_nope @ W_uk) @ c.mT / math.sqrt(q_nope.shape[-1])
        return scores.softmax(-1) @ (c @ W_uv.mT)  # values (B, H, T, dv)

    for naive in (keys_all_heads, keys_one_head_at_a_time, values_only):
        report = ex.check("12.1", naive)
        assert report.status == "failed", naive.__name__
        assert report.mistake == "builds-per-head-keys", (naive.__name__, report.text)
        assert "values are right" in report.text
        assert "absorb W_uk into the query" in report.text

    def absorbed_einsum(q_nope, latent, W_uk, W_uv):
        q_latent = torch.einsum("bhqd,hdr->bhqr", q_nope, W_uk)
        scores = torch.einsum("bhqr,btr->bhqt", q_latent, latent)
        mixed = torch.einsum(
            "bhqt,btr->bhqr", (scores / math.sqrt(q_nope.shape[-1])).softmax(-1), latent
        )
        return torch.einsum("bhqr,hvr->bhqv", mixed, W_uv)

    def absorbed_one_head_at_a_time(q_nope, latent, W_uk, W_uv):
        out = []
        for h in range(q_nope.shape[1]):
            q_latent = q_nope[:, h] @ W_uk[h]  # (B, 1, r)
            scores = q_latent @ latent.mT / math.sqrt(q_nope.shape[-1])
            out.append(scores.softmax(-1) @ latent @ W_uv[h].T)  # (B, 1, dv)
        return torch.stack(out, dim=1)

    for right in (absorbed_einsum, absorbed_one_head_at_a_time, SOLUTIONS["12.1"]):
        report = ex.check("12.1", right)
        assert report.passed, report.text
    constraint = EXERCISES["12.1"].constraint
    for fn, broken in ((absorbed_einsum, False), (keys_all_heads, True)):
        start = time.perf_counter()
        assert constraint.violated(fn, checker.draws(EXERCISES["12.1"])) is broken
        assert time.perf_counter() - start < 5  # about 0.01 s here


def test_the_report_shows_the_line_of_the_learner_s_code_that_raised():
    source = (
        "def masked_softmax(X, valid_lens):\n"
        "    scores = X * 2\n"
        "    return scores @ X  # (B, Q, K) @ (B, Q, K)\n"
    )
    filename = "<ipython-input-7-learner>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {}
    exec(compile(source, filename, "exec"), namespace)
    report = ex.check("3.1", namespace["masked_softmax"])
    assert report.status == "failed" and report.mistake is None
    assert "your function raised RuntimeError" in report.text
    assert (
        "in your code, line 3: return scores @ X  # (B, Q, K) @ (B, Q, K)"
        in report.text
    )


def test_wrong_shapes_kinds_and_in_place_changes_are_reported_not_raised():
    report = ex.check("3.1", lambda X, valid_lens: X.sum(-1))
    assert re.search(
        r"expected shape \(\d, \d, \d\), got shape \(\d, \d\)", report.text
    )
    report = ex.check("3.1", lambda X, valid_lens: X.numpy())
    assert "got a NumPy array of shape" in report.text

    def in_place_input(X, valid_lens):
        result = al.masked_softmax(X, valid_lens)
        X.zero_()
        return result

    report = ex.check("3.1", in_place_input)
    assert report.mistake == "in-place" and "X (argument 1)" in report.text

    def writes_its_own_result(X, valid_lens):
        return torch.empty_like(X).copy_(al.masked_softmax(X, valid_lens))

    assert ex.check("3.1", writes_its_own_result).passed


def test_an_endless_loop_hits_the_time_limit_and_the_kernel_stays_usable():
    def endless(X, valid_lens):
        while True:
            pass

    before = signal.getsignal(signal.SIGALRM)
    start = time.perf_counter()
    report = ex.check("3.1", endless, time_limit=0.5)
    assert time.perf_counter() - start < 10
    assert report.status == "failed" and report.mistake == "time"
    assert "took longer than 0.5 s" in report.text
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
    assert ex.check("3.1", EXERCISES["3.1"].reference).passed  # still usable
    with pytest.raises(ValueError, match="time_limit"):
        ex.check("3.1", endless, time_limit=0)


def test_a_check_leaves_the_caller_s_state_as_it_was():
    torch.manual_seed(123)
    before = torch.get_rng_state()

    def draws(X, valid_lens):  # a learner's function that uses the global RNG
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        return torch.rand(X.shape, dtype=X.dtype)

    ex.check("3.1", draws)
    ex.check("13.2", EXERCISES["13.2"].reference)
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.get_default_dtype() == torch.float32 and torch.is_grad_enabled()


def test_bad_calls_of_check():
    with pytest.raises(ValueError, match="3.1"):
        ex.check("3.9", EXERCISES["3.1"].reference)
    with pytest.raises(ValueError, match="expected the function you wrote"):
        ex.check("3.1", "def masked_softmax(...)")
    with pytest.raises(ValueError, match="zh_CN"):
        ex.check("3.1", EXERCISES["3.1"].reference, language="fr")
    with pytest.raises(ValueError, match="zh_CN"):
        ex.set_language("klingon")


def test_the_package_has_no_import_cycle():
    """The data modules import the spec and the families, never the checker."""
    for path in PACKAGE.glob("*.py"):
        if path.name in ("__init__.py", "checker.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1
        }
        assert "checker" not in imported, path.name


def _messages() -> list[str]:
    """Every message a report can show: the templates (``_("...")`` in checker.py),
    the cases' descriptions, the results' names and the diagnoses."""
    tree = ast.parse((PACKAGE / "checker.py").read_text(encoding="utf-8"))
    found = [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "_"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]
    for spec in EXERCISES.values():
        found += [c.description for c in spec.cases]
        found += [m.diagnosis for m in spec.mistakes]
        found += list(spec.results)
        if spec.constraint is not None:
            found.append(spec.constraint.diagnosis)
    return list(dict.fromkeys(found))


def test_every_message_has_a_chinese_translation():
    catalog = read_po(ROOT / "attention_lib" / "locales" / "zh_CN" / "exercises.po")
    messages = _messages()
    assert len(messages) > 150
    missing = [m for m in messages if not catalog.get(m)]
    assert not missing, missing
    for message in messages:  # placeholders survive translation
        for name in re.findall(r"\{\w+\}", message):
            assert name in catalog[message], message
    unused = set(catalog) - set(messages)
    assert not unused, f"exercises.po has messages no check shows: {sorted(unused)}"


ENGLISH = (
    "argument",
    "a tensor",
    "expected",
    " got ",
    "result ",
    "of type",
    "array of",
    "differ",
    "allowed",
    "row ",
    "your ",
    "cases",
    "Likely",
    "line ",
    "right:",
)


def test_a_chinese_notebook_s_reports_are_chinese_without_a_cjk_font(monkeypatch):
    """The Chinese notebooks' setup cell runs al.plot_language("zh_CN"): without a CJK
    font the plots stay English, the reports (text) are Chinese all the same."""
    import exercise_attempts as a

    monkeypatch.setattr(plotting, "cjk_font", lambda: None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert al.plot_language("zh_CN") is None  # no font: English plots
        assert plotting._catalog is None

        def online_attention(q, keys, values, block_size):
            raise NotImplementedError  # your code here

        todo = ex.check("10.1", online_attention)
        assert "尚未完成" in todo.text
        reports = [
            ex.check("10.1", EXERCISES["10.1"].mistakes[0].wrong),
            ex.check("10.2", a.merge_swapped),
            ex.check("13.2", a.delta_transposed),
            ex.check("3.1", lambda X, valid_lens: X.add_(1).softmax(-1)),
            ex.check("9.1", lambda logits, targets: [0.5]),
            ex.check("4.1", a.additive_untransposed),
            ex.check("3.1", lambda X, valid_lens: X.numpy()),
        ]
        assert "可能的错误" in reports[0].text and "累计和" in reports[0].text
        for report in reports:
            assert report.status == "failed", report.text
            assert not [w for w in ENGLISH if w in report.text], report.text
        assert "✓" in ex.check("10.1", SOLUTIONS["10.1"]).text
    finally:
        al.plot_language(None)
    assert "not written yet" in ex.check("10.1", online_attention).text
    assert plotting._requested_language is None


# -- 7.3, the whole multi-head layer, as learners write it --


def _mha_7_3(scale="d", split="transpose", merge="transpose", dim=-1, W_o=True, T=True):
    """7.3 written the plain way (project, reshape + transpose, softmax, merge, W_o), one
    slip switched on: ``scale`` "d", "E" or "none"; ``split`` / ``merge`` "transpose",
    "view" (straight to the other shape) or "strided" (feature j to head j mod H);
    ``dim`` of the softmax; ``W_o=False`` forgets the output projection; ``T=False``
    multiplies by the weights untransposed."""

    def multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o_, num_heads):
        B, Q, E = queries.shape
        H, d = num_heads, E // num_heads

        def heads(x, W):  # (B, n, E) -> (B, H, n, d)
            x = x @ (W.T if T else W)
            if split == "view":
                return x.reshape(B, H, x.shape[1], d)
            if split == "strided":
                return x.view(B, x.shape[1], d, H).permute(0, 3, 1, 2)
            return x.view(B, x.shape[1], H, d).transpose(1, 2)

        q, k, v = heads(queries, W_q), heads(keys, W_k), heads(values, W_v)
        width = {"d": d, "E": E, "none": 1}[scale]
        out = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(width), dim=dim) @ v
        if merge == "view":
            out = out.reshape(B, Q, E)
        elif merge == "strided":
            out = out.permute(0, 2, 3, 1).reshape(B, Q, E)
        else:
            out = out.transpose(1, 2).reshape(B, Q, E)
        return out @ (W_o_.T if T else W_o_) if W_o else out

    return multi_head_attention


def _mha_loop(queries, keys, values, W_q, W_k, W_v, W_o, num_heads):
    """7.3 as H single-head attentions on blocks of the weights' rows."""
    d = queries.shape[-1] // num_heads
    outputs = []
    for h in range(num_heads):
        rows = slice(h * d, (h + 1) * d)
        q, k, v = queries @ W_q[rows].T, keys @ W_k[rows].T, values @ W_v[rows].T
        w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(d), dim=-1)  # (B, Q, K)
        outputs.append(w @ v)  # (B, Q, d)
    return torch.cat(outputs, dim=-1) @ W_o.T


def _mha_einsum(queries, keys, values, W_q, W_k, W_v, W_o, num_heads):
    B, Q, E = queries.shape
    d = E // num_heads
    q = torch.einsum("bqe,fe->bqf", queries, W_q).view(B, Q, num_heads, d)
    k = torch.einsum("bke,fe->bkf", keys, W_k).view(B, -1, num_heads, d)
    v = torch.einsum("bke,fe->bkf", values, W_v).view(B, -1, num_heads, d)
    w = torch.einsum("bqhd,bkhd->bhqk", q, k).div(d**0.5).softmax(-1)
    out = torch.einsum("bhqk,bkhd->bqhd", w, v).reshape(B, Q, E)
    return torch.einsum("bqe,fe->bqf", out, W_o)


def _mha_sdpa(queries, keys, values, W_q, W_k, W_v, W_o, num_heads):
    linear = torch.nn.functional.linear  # x @ W.T

    def split(x, W):  # (B, n, E) -> (B, H, n, d)
        return linear(x, W).unflatten(-1, (num_heads, -1)).transpose(1, 2)

    out = torch.nn.functional.scaled_dot_product_attention(
        split(queries, W_q), split(keys, W_k), split(values, W_v)
    )  # (B, H, Q, d)
    return linear(out.transpose(1, 2).flatten(2), W_o)


def _mha_library(queries, keys, values, W_q, W_k, W_v, W_o, num_heads):
    q = al.split_heads(queries @ W_q.T, num_heads)
    k = al.split_heads(keys @ W_k.T, num_heads)
    v = al.split_heads(values @ W_v.T, num_heads)
    return al.merge_heads(al.dot_product_attention(q, k, v)[0]) @ W_o.T


#: (learner's function, the mistake to name; None: right).
MHA_7_3 = [
    (_mha_7_3(), None),
    (_mha_loop, None),
    (_mha_einsum, None),
    (_mha_sdpa, None),
    (_mha_library, None),
    (_mha_7_3(scale="E"), "scale-by-model-width"),
    (_mha_7_3(scale="none"), "no-scale"),
    (_mha_7_3(W_o=False), "no-output-projection"),
    (_mha_7_3(split="view", merge="view"), "heads-split-without-transpose"),
    (_mha_7_3(split="view"), "split-without-transpose"),
    (_mha_7_3(merge="view"), "merge-without-transpose"),
    (_mha_7_3(split="strided", merge="strided"), "interleaved-heads"),
    (_mha_7_3(dim=1), "softmax-over-heads"),
    (_mha_7_3(dim=2), "softmax-over-queries"),
    (_mha_7_3(T=False), "weights-not-transposed"),
]


@pytest.mark.parametrize(
    ("fn", "name"), MHA_7_3, ids=[f"{i}-{n}" for i, (_, n) in enumerate(MHA_7_3)]
)
def test_7_3_right_styles_pass_and_each_slip_is_named(fn, name):
    """7.3 (the whole layer from W_q, W_k, W_v, W_o): a loop over heads, einsum, SDPA,
    the library's helpers and the plain way pass; the scale 1/sqrt(E), a missing W_o,
    heads split by a reshape without transpose (or merged so), interleaved heads, the
    softmax over the heads or the queries and untransposed weights are each named, on
    the check's own cases and on two other draws."""
    assert_named_on_every_seed("7.3", fn, name)
