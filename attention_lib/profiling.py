"""Measuring time and memory of attention on the CPU, for the chapters and the
benchmarks.

* :func:`time_ms` -- median wall time of a call, with ``torch.utils.benchmark`` (it
  warms up, picks the number of repetitions, and reports a median, which resists the
  noise of a shared machine).
* :func:`peak_memory_bytes` -- how much the resident memory of a *fresh* Python process
  grows while a statement runs (Linux's peak ``VmHWM``, reset just before, minus
  ``VmRSS``), timeit-style with ``setup`` and ``stmt`` strings. A fresh process is the
  honest way to see a peak on the CPU: PyTorch keeps no CPU allocator statistics, and
  the profiler does not see allocations made inside fused kernels.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import torch
import torch.utils.benchmark as benchmark

__all__ = ["time_ms", "peak_memory_bytes"]


def time_ms(
    fn, *args, min_run_time: float = 0.2, num_threads: int | None = None, **kwargs
) -> float:
    """Median time of ``fn(*args, **kwargs)`` in milliseconds
    (``torch.utils.benchmark.Timer.blocked_autorange``)."""
    timer = benchmark.Timer(
        stmt="fn(*args, **kwargs)",
        globals={"fn": fn, "args": args, "kwargs": kwargs},
        num_threads=num_threads or torch.get_num_threads(),
    )
    return timer.blocked_autorange(min_run_time=min_run_time).median * 1e3


_CHILD = """
import gc, json, sys
import torch
torch.set_num_threads({threads})


def _status_kib(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


{setup}
gc.collect()
with open("/proc/self/clear_refs", "w") as f:
    # reset the peak (VmHWM) to the current resident size, forgetting the imports'
    # transient peak
    f.write("5")
before = _status_kib("VmRSS")
{stmt}
after = _status_kib("VmHWM")
json.dump({{"before_kib": before, "after_kib": after}}, sys.stdout)
"""


def peak_memory_bytes(
    stmt: str, setup: str = "", *, threads: int = 1, timeout: float = 300
) -> int:
    """Peak growth of resident memory while ``stmt`` runs, measured in a fresh
    interpreter.

    ``setup`` runs first (imports, building inputs and modules: their memory is the
    baseline); ``stmt`` is the code measured. Both are Python source, as for ``timeit``.
    Returns bytes (Linux reports KiB, so the resolution is 1 KiB). Linux only: it reads
    ``/proc/self/status``. Run the statement once in ``setup`` too if you want one-time
    allocations (thread pools, caches) out of the measurement.
    """
    code = _CHILD.format(
        setup=textwrap.dedent(setup), stmt=textwrap.dedent(stmt), threads=threads
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"peak_memory_bytes: the measured code failed:\n{result.stderr[-2000:]}"
        )
    usage = json.loads(result.stdout.strip().splitlines()[-1])
    return max(0, usage["after_kib"] - usage["before_kib"]) * 1024
