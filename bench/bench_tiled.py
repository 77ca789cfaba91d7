"""Memory and speed of ``al.tiled_attention`` (chapter 10), printed as markdown tables.

1. Peak memory of one call of ``al.tiled_attention`` and of the readable
   ``al.dot_product_attention`` for n = 1k, 2k, 4k, 8k, 16k (B=1, H=8, d=64, float32,
   ``torch.no_grad()``), each number from a fresh interpreter (``al.peak_memory_bytes``;
   both paths run once at n = 128 first, so one-time allocations are not counted). The
   readable path holds two ``(B, H, n, n)`` matrices, ``2 * 4 * B * H * n^2`` bytes;
   sizes where that alone would exceed ``--max-gib`` (default 8 GiB) are skipped and
   the table says so. Reported: the ratio of each size's peak to the previous size's,
   per doubling of n. Goal for the tiled path: every ratio <= 2.1 (linear memory).
2. Time of ``al.tiled_attention`` relative to ``F.scaled_dot_product_attention`` at
   n = 4096 (same shapes), paired rounds with the median ratio reported. No goal: the
   tiled function is the readable version of the algorithm, a Python loop over tiles.

One thread throughout. ``--quick`` measures n = 1k and 2k only (a smoke test).

Usage: python bench/bench_tiled.py [--quick] [--max-gib 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch
import torch.nn.functional as F

import attention_lib as al

B, H, D = 1, 8, 64
THREADS = 1
GOAL_RATIO = 2.1

SETUP = """
import torch
import attention_lib as al
torch.manual_seed(0)
q, k, v = (torch.randn({B}, {H}, {n}, {D}) for _ in range(3))
with torch.no_grad():
    {call}(q[..., :128, :], k[..., :128, :], v[..., :128, :])  # warm-up
"""
CALLS = {"tiled": "al.tiled_attention", "readable": "al.dot_product_attention"}


def readable_bytes(n: int) -> int:
    """Bytes of the two (B, H, n, n) float32 matrices the readable path holds."""
    return 2 * 4 * B * H * n * n


def peak_mib(path: str, n: int) -> float:
    setup = SETUP.format(B=B, H=H, n=n, D=D, call=CALLS[path])
    stmt = f"with torch.no_grad():\n    {CALLS[path]}(q, k, v)"
    return al.peak_memory_bytes(stmt, setup, threads=THREADS, timeout=1800) / 2**20


def memory_table(sizes: list[int], max_gib: float) -> tuple[list[str], bool]:
    peaks = {path: {} for path in CALLS}
    skipped = []
    for n in sizes:
        peaks["tiled"][n] = peak_mib("tiled", n)
        if readable_bytes(n) > max_gib * 2**30:
            skipped.append(n)
        else:
            peaks["readable"][n] = peak_mib("readable", n)
    lines = [
        f"Peak memory of one call (B={B}, H={H}, d={D}, float32, no_grad; "
        "fresh interpreter per number)",
        "",
        "| n | tiled (MiB) | x per doubling | readable (MiB) | x per doubling |",
        "|---:|---:|---:|---:|---:|",
    ]
    worst = 0.0
    for i, n in enumerate(sizes):
        cells = [str(n)]
        for path in CALLS:
            mib = peaks[path].get(n)
            prev = peaks[path].get(sizes[i - 1]) if i else None
            if mib is None:
                cells += ["skipped", ""]
                continue
            ratio = mib / prev if prev else None
            if path == "tiled" and ratio is not None:
                worst = max(worst, ratio)
            cells += [f"{mib:.1f}", f"{ratio:.2f}" if ratio is not None else ""]
        lines.append("| " + " | ".join(cells) + " |")
    ok = worst <= GOAL_RATIO
    lines.append("")
    lines.append(
        f"Tiled path, largest ratio per doubling: {worst:.2f} "
        f"(goal <= {GOAL_RATIO}: {'met' if ok else 'NOT met'})"
    )
    if skipped:
        lines.append(
            f"Readable path skipped at n = {', '.join(map(str, skipped))}: its two "
            f"n x n matrices alone would take more than {max_gib:g} GiB "
            f"({', '.join(f'{readable_bytes(n) / 2**30:.0f} GiB' for n in skipped)})."
        )
    return lines, ok


def time_table(n: int = 4096, rounds: int = 3) -> list[str]:
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, n, D) for _ in range(3))
    arms = {
        "tiled_attention": lambda: al.tiled_attention(q, k, v),
        "SDPA": lambda: F.scaled_dot_product_attention(q, k, v),
    }
    with torch.no_grad():
        torch.testing.assert_close(arms["tiled_attention"](), arms["SDPA"]())
        times = {name: [] for name in arms}
        ratios = []
        for r in range(rounds):  # paired rounds, the order flips every round
            order = list(arms) if r % 2 == 0 else list(arms)[::-1]
            for name in order:
                times[name].append(
                    al.time_ms(arms[name], min_run_time=0.5, num_threads=THREADS)
                )
            ratios.append(times["tiled_attention"][-1] / times["SDPA"][-1])
    return [
        f"Time at n = {n} (B={B}, H={H}, d={D}, float32, {THREADS} thread, "
        f"{rounds} paired rounds)",
        "",
        "| function | median ms |",
        "|---|---:|",
        *(f"| {name} | {statistics.median(t):.1f} |" for name, t in times.items()),
        "",
        f"tiled_attention / SDPA: {statistics.median(ratios):.1f}x "
        "(reported, no goal: the tiled function is a readable Python loop)",
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 1k and 2k only")
    parser.add_argument("--max-gib", type=float, default=8.0)
    args = parser.parse_args(argv)
    torch.set_num_threads(THREADS)
    sizes = [1024, 2048] if args.quick else [1024, 2048, 4096, 8192, 16384]
    lines, ok = memory_table(sizes, args.max_gib)
    print("\n".join(lines), flush=True)
    print()
    print("\n".join(time_table(1024 if args.quick else 4096)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
