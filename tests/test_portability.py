"""tools/portability.py (``make portability``): how it reads pytest's results, orders the
chapters, and that the CPU burners it starts are always stopped. The matrix itself is
run by ``make portability`` (about 25 minutes), not here."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "portability", ROOT / "tools" / "portability.py"
)
portability = importlib.util.module_from_spec(spec)
spec.loader.exec_module(portability)

CHAPTERS = ["chapters/01_a.ipynb", "chapters/09_b.ipynb", "chapters/03_c.ipynb"]


def junit(tmp_path, cases):
    xml = "".join(
        f'<testcase classname="chapters.{stem}.ipynb" name="Cell {i}">{inner}</testcase>'
        for i, (stem, inner) in enumerate(cases)
    )
    path = tmp_path / "r.xml"
    path.write_text(f"<testsuites><testsuite>{xml}</testsuite></testsuites>")
    return path


def test_a_failed_cell_fails_its_chapter_and_a_missing_chapter_fails(tmp_path):
    path = junit(
        tmp_path,
        [("01_a", ""), ("01_a", "<failure message='x'/>"), ("09_b", ""),
         ("09_b", "")],
    )  # fmt: skip
    results = portability.chapter_results(path, CHAPTERS)
    assert results == {"01_a.ipynb": "FAIL", "09_b.ipynb": "pass", "03_c.ipynb": "FAIL"}
    assert set(
        portability.chapter_results(tmp_path / "none.xml", CHAPTERS).values()
    ) == {"FAIL"}


def test_the_long_chapters_come_first():
    assert portability.order(CHAPTERS) == [
        "chapters/09_b.ipynb",
        "chapters/01_a.ipynb",
        "chapters/03_c.ipynb",
    ]


def test_each_configuration_changes_what_it_says_and_native_is_clean(monkeypatch):
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "SSE4_2")
    env = portability.base_environment()
    assert "ATEN_CPU_CAPABILITY" not in env and "MKL_ENABLE_INSTRUCTIONS" not in env
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    names = [c[0] for c in portability.CONFIGS]
    assert names == ["native", "default", "avx2", "mkl-avx2", "2-threads", "busy"]
    assert [c[2] for c in portability.CONFIGS].count(True) == 1  # one busy run


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux only")
def test_the_burners_stop_even_when_the_run_fails(tmp_path, monkeypatch):
    # a run whose "pytest" fails at once; the burners must be gone afterwards
    monkeypatch.setattr(portability, "PYTEST", [sys.executable, "-c", "exit(3)"])
    started = []
    real_start = portability.start_burners

    def start(count):
        real_start(count)
        started.extend(portability._burners)

    monkeypatch.setattr(portability, "start_burners", start)
    results, _, code, _ = portability.run_config(
        "busy", {}, True, False, ["chapters/no_such_chapter.ipynb"], 1, 60, tmp_path
    )
    assert code == 3 and results == {"no_such_chapter.ipynb": "FAIL"}
    assert started and all(p.poll() is not None for p in started)
    assert portability._burners == []
