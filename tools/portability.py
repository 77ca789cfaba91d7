"""Re-execute every chapter under nbval on the kernels and loads of other computers.

``make portability`` runs this script. A learner's CPU differs from ours: its SIMD level
(which ATen kernels run, so the order of float reductions), its MKL code path, its
thread count, and whether something else is running. Every printed number and every
assert of a chapter must hold on all of them (CONTRIBUTING, "True on every computer").
This script emulates those computers on this one, one configuration at a time, and
compares every cell's output with the committed one exactly as ``make test`` does
(same nbval flags and sanitizer, single-threaded unless the configuration says
otherwise):

============  ==============================================================
native        the machine's own kernels, 1 thread (what ``make test`` runs)
default       ``ATEN_CPU_CAPABILITY=default``: ATen's generic (non-SIMD) kernels
avx2          ``ATEN_CPU_CAPABILITY=avx2`` (skipped when it is the native level)
mkl-avx2      ``MKL_ENABLE_INSTRUCTIONS=AVX2``: MKL's AVX2 code, as on AMD CPUs
2-threads     ``OMP_NUM_THREADS=2 MKL_NUM_THREADS=2`` (reductions split in two)
busy          generic kernels (as ``default``), 1 thread, while a *neighbour* runs
              on every core: another Python program with PyTorch, as on a busy
              machine (timing asserts must keep their margins on a slow, loaded
              computer; see below)
============  ==============================================================

A busy machine's neighbours are not tight loops that only take turns on a core: they
are other Python programs, often another chapter or a training loop, and they also share
the processor's caches and the memory bandwidth. A process that only burns CPU left
chapter 8's timing assert at its margin of 1.5x; chapters 9, 12 and 13 running beside it
under nbval brought it to 1.34x (issue 38). So each neighbour (``NEIGHBOUR``, one per
core) runs, on one thread and in turns until its time is up, what such programs do:
attention on tensors far larger than the caches (a 64 MiB score matrix each round),
a 32 MiB copy, a matrix product, and a loop of many small operations (Python and
dispatcher overhead). Its time is bounded (the configuration's ``--timeout``) even if
this script is killed, and the script kills every neighbour when the configuration ends,
also on failure or Ctrl-C.

It prints a table (configuration x chapter: pass / FAIL) and exits non-zero if any
chapter fails in any configuration; then, last (where a CI log's tail shows it), what
each failed cell said. A chapter failed only by its kernel (KERNEL_TROUBLE: it did not
start or answer, or died) is re-run once, alone; if it passes then, it is ``pass*``.

Usage::

    python tools/portability.py            # every configuration, every chapter
    python tools/portability.py --configs default,busy chapters/05_*.ipynb
    python tools/portability.py --list     # the configurations

Each configuration runs the chapters on ``--jobs`` pytest-xdist workers (default 2,
``--dist loadscope``: one chapter per worker at a time); the 2-thread configuration
runs one chapter at a time, so two 2-thread chapters do not oversubscribe two cores.
Logs go to ``_build/portability/<configuration>.log``.
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
PYTEST = [PYTHON, "-m", "pytest"]
NBVAL = [
    "--nbval",
    "--nbval-current-env",
    "--nbval-sanitize-with",
    "tests/nbval_sanitize.cfg",
    "-p",
    "no:cacheprovider",
]
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# (name, environment on top of ONE_THREAD, a neighbour on every core?, one chapter at a
# time?)
CONFIGS = [
    ("native", {}, False, False),
    ("default", {"ATEN_CPU_CAPABILITY": "default"}, False, False),
    ("avx2", {"ATEN_CPU_CAPABILITY": "avx2"}, False, False),
    ("mkl-avx2", {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}, False, False),
    ("2-threads", {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}, False, True),
    ("busy", {"ATEN_CPU_CAPABILITY": "default"}, True, False),
]
# Variables that select kernels or threads: removed from the inherited environment, so
# that "native" is the machine's own and each configuration changes one thing.
CONTROLLED = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR")
# The longest chapters first, so that they do not close the run on one worker (every
# chapter of tests/conftest.py's LONGEST_FIRST is here: tests/test_portability.py).
LONG_FIRST = ("11_", "09_", "13_", "12_", "10_")

# What runs beside the chapters in the busy configuration, one per core (module
# docstring): ``python -c NEIGHBOUR SECONDS``. Native kernels and one thread, like a
# learner's other program; its tensors are far larger than a processor's caches (the
# (4, 2048, 2048) scores: 64 MiB, and their softmax as much again), so that it takes
# memory bandwidth and evicts the chapters' data, not only turns on a core. It stops
# by itself after SECONDS.
NEIGHBOUR = """
import sys, time
import torch
torch.set_num_threads(1)
deadline = time.monotonic() + float(sys.argv[1])
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(4, 2048, 64, generator=g) for _ in range(3))
src = torch.randn(8 * 2**20, generator=g)  # 32 MiB
dst = torch.empty_like(src)
a, b = torch.randn(512, 512, generator=g), torch.randn(512, 512, generator=g)
small = torch.randn(32, 32, generator=g)
while time.monotonic() < deadline:
    scores = q @ k.transpose(-2, -1) / 8  # (4, 2048, 2048): 64 MiB
    out = torch.softmax(scores, dim=-1) @ v
    dst.copy_(src)
    c = a @ b
    for _ in range(300):  # many small operations, as a Python program does
        small = torch.tanh(small @ small.T * 0.01) + 0.5
"""

# What nbval says when the machinery failed, not the chapter: the kernel did not start or
# answer (two kernels starting at once can be handed the same free port), its output did
# not arrive within nbval's fixed 5 s after the cell finished (a starved host), or it
# died. A chapter failed only by these is re-run once, alone, and the table says so; an
# output that differs, an assert or a cell over its time limit is never re-run.
KERNEL_TROUBLE = re.compile(
    r"Kernel died|Kernel didn't respond|Kernel dead on test start|kernel_info"
    r"|Kernel info reqest timed out|establish IOPub|exceeded waiting for output"
    r"|Timed out waiting for idle kernel|Address already in use|ZMQError"
    r"|Failure starting kernel|DeadKernelError"
)
# nbval's words for a chapter's own failure: never the machinery's, whatever else the
# message holds (an output or a traceback may mention a kernel).
CHAPTER_FAILURE = re.compile(r"Cell outputs differ|Cell execution caused an exception")
ANSI = re.compile(r"(?:\x1b|#x1B)\[[0-9;]*m")

_neighbours: list[subprocess.Popen] = []


def stop_neighbours() -> None:
    """Kill the neighbours this script started (only those)."""
    while _neighbours:
        proc = _neighbours.pop()
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def start_neighbours(count: int, seconds: float) -> None:
    """Start ``count`` NEIGHBOUR processes, each of which stops by itself after
    ``seconds`` at the latest."""
    for _ in range(count):
        _neighbours.append(
            subprocess.Popen(
                [PYTHON, "-c", NEIGHBOUR, str(seconds)],
                env=base_environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )


def _on_signal(signum, frame):
    stop_neighbours()
    raise KeyboardInterrupt(f"signal {signum}")


def base_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CONTROLLED}
    env.update(ONE_THREAD)
    return env


def native_capability() -> str:
    """The SIMD level ATen picks on this machine, e.g. 'AVX2' or 'AVX512'."""
    out = subprocess.run(
        [PYTHON, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
        env=base_environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def order(chapters: list[str]) -> list[str]:
    def rank(path: str) -> tuple[int, str]:
        name = Path(path).name
        for i, prefix in enumerate(LONG_FIRST):
            if name.startswith(prefix):
                return (i, name)
        return (len(LONG_FIRST), name)

    return sorted(chapters, key=rank)


def cases(junit: Path, chapters: list[str]):
    """``(chapter, cell, [what pytest said of its failure or error])`` for each test case
    of pytest's junit XML that belongs to one of ``chapters`` (none if there is no file)."""
    if not junit.exists():
        return
    for case in ET.parse(junit).getroot().iter("testcase"):
        where = case.get("file") or case.get("classname") or ""
        name = next((Path(c).name for c in chapters if Path(c).stem in where), None)
        if name is not None:
            said = [
                child.text or child.get("message") or child.tag
                for child in case
                if child.tag in ("failure", "error")
            ]
            yield name, case.get("name"), said


def chapter_results(junit: Path, chapters: list[str]) -> dict[str, str]:
    """``{chapter: 'pass' | 'FAIL'}`` from pytest's junit XML (a chapter with no
    test case reported -- a collection error, say -- counts as failed)."""
    results = {Path(c).name: None for c in chapters}
    for name, _, said in cases(junit, chapters):
        if said or results[name] is None:
            results[name] = "FAIL" if said else "pass"
    return {name: (state or "FAIL") for name, state in results.items()}


def failed_cells(junit: Path, chapters: list[str]) -> dict[str, list[str]]:
    """``{chapter: [what pytest said of each failed cell]}`` from the junit XML, for the
    chapters with a failed cell (a missing chapter has none to show)."""
    found: dict[str, list[str]] = {}
    for name, cell, said in cases(junit, chapters):
        if said:
            found.setdefault(name, []).extend(f"{cell}: {message}" for message in said)
    return found


def excerpt(said: str, lines: int = 12) -> list[str]:
    """What to print of one failed cell: its name and nbval's verdict, then the end of
    the message (the differing outputs, or the exception), without the cell's source."""
    text = ANSI.sub("", said)
    head, _, rest = text.partition("\nInput:\n")
    if rest:  # nbval prints the source between "Input:" and "Traceback:"
        text = head + "\n" + rest.partition("Traceback:")[2]
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    if len(kept) <= lines:
        return kept
    return [*kept[:2], "...", *kept[-(lines - 3) :]]


def kernel_trouble_only(messages: list[str]) -> bool:
    return bool(messages) and all(
        KERNEL_TROUBLE.search(m) and not CHAPTER_FAILURE.search(m) for m in messages
    )


def run_config(name, extra_env, busy, serial, chapters, jobs, timeout, log_dir):
    env = base_environment()
    env.update(extra_env)
    junit = log_dir / f"{name}.xml"
    junit.unlink(missing_ok=True)
    workers = 1 if serial else jobs
    cmd = [*PYTEST, "-q", *NBVAL, f"--junitxml={junit}"]
    if workers > 1:
        cmd += ["-n", str(workers), "--dist", "loadscope"]
    cmd += chapters
    log = log_dir / f"{name}.log"
    started = time.monotonic()
    try:
        if busy:
            start_neighbours(len(os.sched_getaffinity(0)), timeout + 60)
        with open(log, "w") as out:
            out.write(" ".join(f"{k}={v}" for k, v in extra_env.items()) + "\n")
            out.write(" ".join(cmd) + "\n")
            out.flush()
            proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
            try:
                code = proc.wait(timeout=timeout)
            except BaseException:
                os.killpg(proc.pid, signal.SIGKILL)  # pytest and its workers
                proc.wait()
                raise
    except subprocess.TimeoutExpired:
        code = "timeout"
    finally:
        stop_neighbours()
    seconds = time.monotonic() - started
    results = chapter_results(junit, chapters)
    if code != 0 and all(r == "pass" for r in results.values()):
        results = {c: "FAIL" for c in results}  # pytest failed outside the chapters
    return results, seconds, code, log


def run_and_settle(name, extra_env, busy, serial, chapters, jobs, timeout, log_dir):
    """``run_config``, then the chapters that failed only because their kernel did (see
    KERNEL_TROUBLE) re-run once, alone; one that passes then is marked ``pass*``.
    Also returns ``{chapter: failed cells}`` for the chapters that failed, and the first
    try's failed cells of those that passed when re-run."""
    results, seconds, code, log = run_config(
        name, extra_env, busy, serial, chapters, jobs, timeout, log_dir
    )
    said = failed_cells(log_dir / f"{name}.xml", chapters)
    for chapter, state in results.items():
        if state == "FAIL" and chapter not in said:
            said[chapter] = [f"no cell reported a result: see {log}"]
    retry = [c for c in chapters if kernel_trouble_only(said.get(Path(c).name, []))]
    first_try: dict[str, list[str]] = {}
    if retry:
        print(f"[{name}] the kernel failed, not the chapter, in "
              f"{[Path(c).name for c in retry]}: re-running them once, alone",
              flush=True)  # fmt: skip
        again, more, _, _ = run_config(
            f"{name}-rerun", extra_env, busy, True, retry, 1, timeout, log_dir
        )
        seconds += more
        said_again = failed_cells(log_dir / f"{name}-rerun.xml", retry)
        for chapter, state in again.items():
            if state == "pass":
                results[chapter] = "pass*"
                first_try[chapter] = said.pop(chapter)
            else:
                said[chapter] = said_again.get(chapter, said[chapter])
    return results, seconds, code, log, said, first_try


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("chapters", nargs="*", help="default: chapters/*.ipynb")
    parser.add_argument(
        "--configs", help="comma-separated configurations (default: all, see --list)"
    )
    parser.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers")
    parser.add_argument(
        "--timeout",
        type=int,
        default=2400,
        help="seconds per configuration (a hang guard)",
    )
    parser.add_argument("--list", action="store_true", help="list the configurations")
    args = parser.parse_args()
    if args.list:
        for name, env, busy, serial in CONFIGS:
            what = " ".join(f"{k}={v}" for k, v in {**ONE_THREAD, **env}.items())
            print(
                f"{name:10} {what}{' + a PyTorch neighbour per core' if busy else ''}"
            )
        return 0
    known = {c[0]: c for c in CONFIGS}
    names = args.configs.split(",") if args.configs else list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(
            f"unknown configuration(s) {unknown}; expected some of {list(known)}"
        )
    chapters = args.chapters or sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "chapters").glob("*.ipynb")
    )
    chapters = order(chapters)
    log_dir = ROOT / "_build" / "portability"
    log_dir.mkdir(parents=True, exist_ok=True)
    atexit.register(stop_neighbours)
    signal.signal(signal.SIGTERM, _on_signal)

    native = native_capability()
    print(f"native ATen kernels: {native}; {len(chapters)} chapters; configurations: "
          f"{', '.join(names)}", flush=True)  # fmt: skip
    table: dict[str, dict[str, str]] = {}
    failures: dict[tuple[str, str], list[str]] = {}  # (configuration, chapter) -> cells
    rescued: dict[tuple[str, str], list[str]] = {}  # passed when re-run: the first try
    notes: dict[str, str] = {}
    total = time.monotonic()
    for name in names:
        _, env, busy, serial = known[name]
        level = env.get("ATEN_CPU_CAPABILITY")
        if level and level.upper() == native.upper() and "native" in names:
            table[name] = {Path(c).name: "= native" for c in chapters}
            notes[name] = f"skipped: {level} is this machine's native level"
            print(f"[{name}] {notes[name]}", flush=True)
            continue
        print(f"[{name}] running ...", flush=True)
        results, seconds, code, log, said, first_try = run_and_settle(
            name, env, busy, serial, chapters, args.jobs, args.timeout, log_dir
        )
        for chapter, messages in said.items():
            failures[(name, chapter)] = messages
        for chapter, messages in first_try.items():
            rescued[(name, chapter)] = messages
        table[name] = results
        failed = [c for c, r in results.items() if r == "FAIL"]
        notes[name] = f"{seconds / 60:.1f} min" + (
            f", pytest exit {code}, log {log.relative_to(ROOT)}" if failed else ""
        )
        print(f"[{name}] {notes[name]}: {len(failed)} chapter(s) failed", flush=True)
        if failed:
            tail = log.read_text(errors="replace").splitlines()[-40:]
            print("\n".join("    " + line for line in tail), flush=True)

    width = max(len(Path(c).name) for c in chapters)
    cols = list(table)
    print(f"\n{'chapter':{width}}  " + "  ".join(f"{c:>9}" for c in cols))
    for c in chapters:
        name = Path(c).name
        print(f"{name:{width}}  " + "  ".join(f"{table[k][name]:>9}" for k in cols))
    for k in cols:
        print(f"{k}: {notes[k]}")
    bad = [(k, c) for k in cols for c, r in table[k].items() if r == "FAIL"]
    verdict = (
        "every chapter passed in every configuration"
        if not bad
        else f"{len(bad)} failure(s): " + ", ".join(f"{c} [{k}]" for k, c in bad)
    )
    if rescued:
        verdict += f" ({len(rescued)} re-run after its kernel failed: pass*)"
    # Last, where the tail of a CI log shows it: what the failed cells said.
    for (k, c), messages in [*failures.items(), *rescued.items()]:
        state = "passed when re-run alone" if (k, c) in rescued else "FAILED"
        print(f"\n{c} [{k}] {state}; {len(messages)} cell(s) failed:")
        for message in list(dict.fromkeys(messages))[:2]:
            print("\n".join("    " + line for line in excerpt(message)))
    print(f"total {(time.monotonic() - total) / 60:.1f} min; {verdict}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
