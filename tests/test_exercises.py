"""The checks of the "write it yourself" exercises (attention_lib.exercises) are tested:

* the library's answer passes every exercise;
* every listed mistake, written as a mutant of the solution, gets its own diagnosis (not
  a generic failure, not another mistake's);
* a stub that is not written yet (raises NotImplementedError, or returns None) gets
  "not written yet" and raises nothing;
* a function that raises, returns the wrong shape or changes its input is reported,
  not raised;
* a check never changes the caller's random state and never opens a network
  connection;
* every message has a Chinese translation, and the Chinese report is Chinese.
"""

from __future__ import annotations

import ast
import socket
from pathlib import Path

import pytest
import torch

from attention_lib import exercises as ex
from attention_lib.plotting import read_po

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = ex.exercises()
MISTAKES = [(e, m.name) for e, spec in EXERCISES.items() for m in spec.mistakes]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a check opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_the_book_s_arc_is_covered():
    chapters = {int(e.split(".")[0]) for e in EXERCISES}
    assert chapters == set(range(1, 14))
    for spec in EXERCISES.values():
        assert len(spec.cases) >= 2, spec.id
        names = [m.name for m in spec.mistakes]
        assert len(names) == len(set(names)), spec.id
    # at least 3 diagnosed mistakes for every exercise but the smallest (7.2, 2)
    assert all(len(s.mistakes) >= 3 for e, s in EXERCISES.items() if e != "7.2")


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_library_s_answer_passes(exercise):
    report = ex.check(exercise, EXERCISES[exercise].reference)
    assert report.status == "passed", report.text
    assert report.passed and bool(report)
    assert str(len(EXERCISES[exercise].cases)) in report.text


@pytest.mark.parametrize(("exercise", "mistake"), MISTAKES)
def test_each_mistake_gets_its_own_diagnosis(exercise, mistake):
    spec = EXERCISES[exercise]
    wrong = next(m for m in spec.mistakes if m.name == mistake)
    report = ex.check(exercise, wrong.wrong)
    assert report.status == "failed", report.text
    assert report.mistake == mistake, report.text
    assert wrong.diagnosis in report.text
    assert "expected" in report.text  # the expected vs received values, or shapes


@pytest.mark.parametrize("exercise", EXERCISES)
def test_a_stub_is_not_written_yet(exercise):
    def raises(*args, **kwargs):
        raise NotImplementedError("write me")

    def returns_none(*args, **kwargs):
        pass

    for stub in (raises, returns_none):
        report = ex.check(exercise, stub)
        assert report.status == "todo"
        assert "not written yet" in report.text
        assert EXERCISES[exercise].signature in report.text


def test_errors_wrong_shapes_and_in_place_changes_are_reported_not_raised():
    def broken(X, valid_lens):
        return X @ X  # a shape error inside the learner's code

    report = ex.check("3.1", broken)
    assert report.status == "failed" and report.mistake is None
    assert "RuntimeError" in report.text

    report = ex.check("3.1", lambda X, valid_lens: X.sum(-1))
    assert "expected shape (2, 3, 5), got shape (2, 3)" in report.text

    def in_place(X, valid_lens):
        return X.softmax(-1).copy_(
            ex.exercises()["3.1"].reference(X.clone(), valid_lens)
        )

    def in_place_input(X, valid_lens):
        result = EXERCISES["3.1"].reference(X, valid_lens)
        X.zero_()
        return result

    assert ex.check("3.1", in_place).passed  # writing into its own result is fine
    report = ex.check("3.1", in_place_input)
    assert report.mistake == "in-place" and "argument 1" in report.text

    report = ex.check("9.1", lambda logits, targets: "most of them")
    assert "expected a number, got str" in report.text


def test_a_check_keeps_the_caller_s_random_state():
    torch.manual_seed(123)
    before = torch.get_rng_state()

    def draws(X, valid_lens):  # a learner's function that uses the global RNG
        return torch.rand(X.shape, dtype=X.dtype)

    ex.check("3.1", draws)
    ex.check("13.2", EXERCISES["13.2"].reference)
    assert torch.equal(torch.get_rng_state(), before)


def test_bad_calls_of_check():
    with pytest.raises(ValueError, match="3.1"):
        ex.check("3.9", EXERCISES["3.1"].reference)
    with pytest.raises(ValueError, match="expected the function you wrote"):
        ex.check("3.1", "def masked_softmax(...)")
    with pytest.raises(ValueError, match="zh_CN"):
        ex.check("3.1", EXERCISES["3.1"].reference, language="fr")
    with pytest.raises(ValueError, match="zh_CN"):
        ex.set_language("klingon")


def _messages() -> list[str]:
    """Every message a report can show: the templates (``_("...")`` in
    exercises.py), the cases' descriptions and the diagnoses."""
    tree = ast.parse((ROOT / "attention_lib" / "exercises.py").read_text())
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
    return found


def test_every_message_has_a_chinese_translation():
    catalog = read_po(ROOT / "attention_lib" / "locales" / "zh_CN" / "exercises.po")
    messages = _messages()
    assert len(messages) > 100
    missing = [m for m in messages if not catalog.get(m)]
    assert not missing, missing
    for message in messages:  # placeholders survive translation
        for name in ("{head}", "{n}", "{case}", "{expected}", "{got}", "{signature}"):
            assert (name in message) == (name in catalog[message]), message
    unused = set(catalog) - set(messages)
    assert not unused, f"exercises.po has messages no check shows: {sorted(unused)}"


def test_the_chinese_report_is_chinese():
    spec = EXERCISES["10.1"]
    report = ex.check("10.1", spec.mistakes[0].wrong, language="zh_CN")
    assert "可能的错误" in report.text and "累计和" in report.text
    assert "✓" in ex.check("10.1", spec.reference, language="zh_CN").text
    try:
        ex.set_language("zh_CN")  # or al.plot_language("zh_CN") in a Chinese notebook
        assert "还没有写" in ex.check("10.1", lambda *a: None).text
    finally:
        ex.set_language(None)
    assert "not written yet" in ex.check("10.1", lambda *a: None).text
