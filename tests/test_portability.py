"""tools/portability.py (``make portability``): how it reads pytest's results, orders the
chapters, and that the neighbours it starts on a busy machine are what they say (memory
heavy PyTorch programs, bounded in time) and are always stopped. The matrix itself is
run by ``make portability`` (about 25 minutes), not here."""

import importlib.util
import os
import re
import subprocess
import sys
import time
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
    # the busy run is the harshest for a timing assert: generic kernels, neighbours
    busy = {c[0]: c[1] for c in portability.CONFIGS}["busy"]
    assert busy == {"ATEN_CPU_CAPABILITY": "default"}


def test_every_long_chapter_of_make_test_is_run_first():
    conftest = (ROOT / "tests" / "conftest.py").read_text()
    listed = conftest[conftest.index("LONGEST_FIRST = [") :].split("]")[0]
    long_chapters = re.findall(r'"chapters/(\d\d_)', listed)
    assert long_chapters and set(long_chapters) <= set(portability.LONG_FIRST)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux only")
def test_the_neighbours_stop_even_when_the_run_fails(tmp_path, monkeypatch):
    # a run whose "pytest" fails at once; the neighbours must be gone afterwards
    monkeypatch.setattr(portability, "PYTEST", [sys.executable, "-c", "exit(3)"])
    started = []
    real_start = portability.start_neighbours

    def start(count, seconds):
        assert count == len(os.sched_getaffinity(0)) and seconds > 60  # one per core
        real_start(count, seconds)
        started.extend(portability._neighbours)

    monkeypatch.setattr(portability, "start_neighbours", start)
    results, _, code, _ = portability.run_config(
        "busy", {}, True, False, ["chapters/no_such_chapter.ipynb"], 1, 60, tmp_path
    )
    assert code == 3 and results == {"no_such_chapter.ipynb": "FAIL"}
    assert started and all(p.poll() is not None for p in started)
    assert portability._neighbours == []


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux only")
def test_a_neighbour_is_a_memory_heavy_pytorch_program_that_stops_by_itself():
    # not a CPU burner: it holds tensors far larger than a processor's caches, runs
    # PyTorch operations on them, and exits after its time even if nobody kills it
    proc = subprocess.Popen([sys.executable, "-c", portability.NEIGHBOUR, "8"])
    try:
        largest, cpu = 0.0, 0.0
        deadline = time.monotonic() + 90
        while proc.poll() is None and time.monotonic() < deadline:
            largest = max(largest, _rss_mib(proc.pid))
            fields = (
                Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            )
            cpu = max(
                cpu, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            )
            time.sleep(0.2)
        assert proc.wait(timeout=60) == 0  # it stopped by itself
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert largest > 150, largest  # MiB resident: a 64 MiB score matrix and more
    assert cpu > 1, cpu  # seconds of CPU: it computed, not only waited


MISMATCH = (
    "#x1B[91mNotebook cell execution failed#x1B[0m\n#x1B[94mCell 2: Cell outputs "
    "differ\n\nInput:\n#x1B[0mprint(secret_source_line)\n\n#x1B[94mTraceback:#x1B[0m\n"
    "#x1B[94m mismatch 'stdout'#x1B[91m\n\n assert reference_output == test_output "
    "failed:\n\n  - weights: 0.25\n  + weights: 0.26\n#x1B[0m"
)
KERNEL = "RuntimeError: Kernel didn't respond in 60 seconds"


def junit_with(path, failures):
    """A junit file where chapter stem -> failure text, or '' for a passing cell."""
    xml = "".join(
        f'<testcase classname="chapters.{stem}.ipynb" name="Cell {i}">'
        + (f"<failure message='x'>{text}</failure>" if text else "")
        + "</testcase>"
        for i, (stem, text) in enumerate(failures)
    )
    path.write_text(f"<testsuites><testsuite>{xml}</testsuite></testsuites>")


def test_a_failed_cell_is_shown_without_its_source(tmp_path):
    junit_with(tmp_path / "r.xml", [("01_a", ""), ("01_a", MISMATCH), ("09_b", "")])
    said = portability.failed_cells(tmp_path / "r.xml", CHAPTERS)
    assert list(said) == ["01_a.ipynb"] and len(said["01_a.ipynb"]) == 1
    shown = portability.excerpt(said["01_a.ipynb"][0])
    assert shown == [  # no colour codes, no source
        "Cell 1: Notebook cell execution failed",
        "Cell 2: Cell outputs differ",
        " mismatch 'stdout'",
        " assert reference_output == test_output failed:",
        "  - weights: 0.25",
        "  + weights: 0.26",
    ]
    long = portability.excerpt("\n".join(f"line {i}" for i in range(40)), lines=6)
    assert long == ["line 0", "line 1", "...", "line 37", "line 38", "line 39"]


@pytest.mark.parametrize("second_try", ["pass", "FAIL"])
def test_only_a_kernel_failure_is_re_run(tmp_path, monkeypatch, second_try):
    # 01_a: its kernel did not answer; 03_c: an output differs; 09_b passed
    calls = []

    def fake_run(name, env, busy, serial, chapters, jobs, timeout, log_dir):
        calls.append((name, serial, list(chapters)))
        if len(calls) == 1:
            junit_with(
                log_dir / f"{name}.xml",
                [("01_a", KERNEL), ("01_a", KERNEL), ("09_b", ""), ("03_c", MISMATCH)],
            )
            states = {"01_a.ipynb": "FAIL", "09_b.ipynb": "pass", "03_c.ipynb": "FAIL"}
            return states, 10.0, 1, log_dir / f"{name}.log"
        junit_with(log_dir / f"{name}.xml", [("01_a", "" if second_try == "pass"
                                                 else MISMATCH)])  # fmt: skip
        return {"01_a.ipynb": second_try}, 5.0, int(second_try != "pass"), None

    monkeypatch.setattr(portability, "run_config", fake_run)
    results, seconds, _, _, said, first_try = portability.run_and_settle(
        "native", {}, False, False, CHAPTERS, 2, 60, tmp_path
    )
    # one re-run, alone, of the kernel failure only
    assert calls[1] == ("native-rerun", True, ["chapters/01_a.ipynb"])
    assert len(calls) == 2 and seconds == 15.0
    assert results["03_c.ipynb"] == "FAIL" and results["09_b.ipynb"] == "pass"
    if second_try == "pass":
        assert results["01_a.ipynb"] == "pass*"
        assert list(said) == ["03_c.ipynb"] and list(first_try) == ["01_a.ipynb"]
        assert KERNEL in first_try["01_a.ipynb"][0]
    else:  # failed again: a failure, with what the second try said
        assert results["01_a.ipynb"] == "FAIL" and not first_try
        assert "outputs differ" in said["01_a.ipynb"][0]


def test_what_counts_as_the_kernel_failing():
    assert portability.kernel_trouble_only(
        [KERNEL, "Cell 3: Kernel dead on test start"]
    )
    assert not portability.kernel_trouble_only([])
    assert not portability.kernel_trouble_only([KERNEL, MISMATCH])
    # a chapter's own exception or output that mentions a kernel is the chapter's
    raised = "Cell execution caused an exception\nRuntimeError: Kernel died (simulated)"
    assert not portability.kernel_trouble_only([raised])


def test_no_re_run_when_no_kernel_failed(tmp_path, monkeypatch):
    calls = []

    def fake_run(name, env, busy, serial, chapters, jobs, timeout, log_dir):
        calls.append(name)
        junit_with(log_dir / f"{name}.xml", [("01_a", MISMATCH), ("09_b", "")])
        states = {"01_a.ipynb": "FAIL", "09_b.ipynb": "pass", "03_c.ipynb": "FAIL"}
        return states, 1.0, 1, log_dir / f"{name}.log"

    monkeypatch.setattr(portability, "run_config", fake_run)
    results, *_, said, first_try = portability.run_and_settle(
        "busy", {}, True, False, CHAPTERS, 2, 60, tmp_path
    )
    assert calls == ["busy"] and not first_try
    assert results["01_a.ipynb"] == results["03_c.ipynb"] == "FAIL"
    # a chapter with no result at all (a collection error) says where to look
    assert said["03_c.ipynb"] == [f"no cell reported a result: see {tmp_path}/busy.log"]
