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
* :class:`TensorRecorder` -- in process and exact: the tensors the operations inside a
  ``with`` block create (largest, peak alive, matrix products).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import weakref

import torch
import torch.utils.benchmark as benchmark
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["cpu_clock", "time_ms", "peak_memory_bytes", "TensorRecorder"]


def cpu_clock() -> float:
    """Seconds of CPU time of the calling thread (``time.thread_time``): time during
    which other processes of a busy machine hold the core is not counted. On Windows
    that clock advances in scheduler ticks of about 15.6 ms, too coarse for calls of a
    millisecond, so there this is the wall clock (``time.perf_counter``)."""
    return time.perf_counter() if sys.platform == "win32" else time.thread_time()


def time_ms(
    fn,
    *args,
    min_run_time: float = 0.2,
    num_threads: int | None = None,
    cpu_time: bool = False,
    **kwargs,
) -> float:
    """Median time of ``fn(*args, **kwargs)`` in milliseconds
    (``torch.utils.benchmark.Timer.blocked_autorange``).

    With ``cpu_time=True`` the clock is :func:`cpu_clock`, the CPU time of the calling
    thread: time during which other processes of a busy machine hold the core is not
    counted. Only for single-threaded calls (``num_threads=1``), whose work runs on the
    calling thread; on a quiet machine it equals the wall time."""
    if cpu_time and (num_threads or torch.get_num_threads()) != 1:
        raise ValueError(
            f"cpu_time=True measures the calling thread only: expected num_threads=1, "
            f"got {num_threads or torch.get_num_threads()}"
        )
    timer = benchmark.Timer(
        stmt="fn(*args, **kwargs)",
        globals={"fn": fn, "args": args, "kwargs": kwargs},
        num_threads=num_threads or torch.get_num_threads(),
        **({"timer": cpu_clock} if cpu_time else {}),
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


def _tensors(xs) -> list[torch.Tensor]:
    """The tensors in an op's arguments or results (nested tuples, lists, dicts)."""
    if isinstance(xs, torch.Tensor):
        return [xs]
    if isinstance(xs, dict):
        xs = list(xs.values())
    if isinstance(xs, (tuple, list)):
        return [t for x in xs for t in _tensors(x)]
    return []


class TensorRecorder(TorchDispatchMode):
    """Record what the PyTorch operations run inside ``with TensorRecorder() as rec:``
    create, exactly and in process (unlike :func:`peak_memory_bytes`, it sees only
    tensors, not the memory a fused kernel uses internally).

    A tensor is *new* when its storage is neither one of the operation's inputs (a view,
    or a result written in place) nor one already recorded. Attributes:

    * ``products``: matrix products run (``aten.mm`` and ``aten.bmm``);
    * ``largest``: elements of the largest new tensor;
    * ``largest_bytes``, ``largest_op``: bytes of the largest new storage, and the
      operation that made it;
    * ``peak``: the most bytes of new storages alive at the same time;
    * ``ops``: the name of every operation run.
    """

    def __init__(self):
        super().__init__()
        self.products, self.largest, self.largest_bytes, self.peak = 0, 0, 0, 0
        self.largest_op, self.ops, self.live = "", set(), 0
        self._storages: dict[int, list[int]] = {}  # address -> [bytes, tensors alive]

    def _release(self, address: int) -> None:
        entry = self._storages[address]
        entry[1] -= 1
        if entry[1] == 0:  # the last tensor using this storage is gone: memory freed
            self.live -= self._storages.pop(address)[0]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.ops.add(str(func))
        if func in (torch.ops.aten.mm.default, torch.ops.aten.bmm.default):
            self.products += 1
        inputs = {t.untyped_storage().data_ptr() for t in _tensors((args, kwargs))}
        for t in _tensors(out):
            storage = t.untyped_storage()
            address, nbytes = storage.data_ptr(), storage.nbytes()
            if nbytes == 0:
                continue
            if address not in self._storages:
                if address in inputs:  # a view of an input, or written in place
                    continue
                self._storages[address] = [nbytes, 0]
                self.live += nbytes
                self.peak = max(self.peak, self.live)
                self.largest = max(self.largest, t.numel())
                if nbytes > self.largest_bytes:
                    self.largest_bytes, self.largest_op = nbytes, str(func)
            self._storages[address][1] += 1
            weakref.finalize(t, self._release, address)  # runs when t is freed
        return out
