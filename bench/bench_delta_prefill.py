"""The delta rule over a whole prompt, token by token against chunkwise (issue 35,
chapter 13): ``python bench/bench_delta_prefill.py [ROUNDS [THREADS [CHUNK]]]``
(default: 5 rounds, 1 thread, chunks of 64).

Both arms are ``al.delta_rule`` on the same inputs: batch 1, H = 8 heads, keys and
queries of width d = 64 (keys L2-normalised), values of width 64, beta per token and
head, float32, at T = 1k, 2k and 4k tokens:

* **recurrent** (``chunk_size=None``): T rank-one updates of ``S (B, H, 64, 64)``,
  each a few matrix-vector products;
* **chunked** (``chunk_size=64``): per chunk one triangular solve (the WY form) and a
  few ``(64, 64)`` matrix products; T / 64 steps of the loop instead of T.

Prefill runs under ``torch.inference_mode``; a fourth pair of arms, **train@1024**, runs
the forward and the backward pass (the gradient of a sum) at T = 1k, as in training.

Timing as in ``bench_attention.py``: all arms interleaved in every round (order
rotating), each timed by one ``blocked_autorange`` block keeping its fastest call;
reported: the median over rounds of each arm's time and of the ratio recurrent / chunked
taken within a round. On a machine shared with other work the seconds move with the
load (printed); the ratio, measured side by side, is the number to read.
"""

from __future__ import annotations

import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_attention as b  # noqa: E402

import attention_lib as al  # noqa: E402

H, d = 8, 64
LENGTHS = (1024, 2048, 4096)
TRAIN_T = 1024


def inputs(T: int, requires_grad: bool = False) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(T)
    q, k, v = torch.randn(3, 1, H, T, d, generator=g).unbind(0)  # (B, H, T, d)
    k = F.normalize(k, dim=-1)
    beta = torch.sigmoid(torch.randn(1, H, T, generator=g))  # (B, H, T)
    return [x.requires_grad_(requires_grad) for x in (q, k, v, beta)]


def arms(chunk: int) -> dict:
    result = {}
    for T in LENGTHS:
        q, k, v, beta = inputs(T)
        for name, C in (("recurrent", None), ("chunked", chunk)):

            def prefill(q=q, k=k, v=v, beta=beta, C=C):
                with torch.inference_mode():
                    return al.delta_rule(q, k, v, beta, chunk_size=C)

            result[f"{name}@{T}"] = prefill
    q, k, v, beta = inputs(TRAIN_T, requires_grad=True)
    for name, C in (("recurrent", None), ("chunked", chunk)):

        def train(C=C):
            out, S = al.delta_rule(q, k, v, beta, chunk_size=C)
            (out.sum() + S.sum()).backward()
            for x in (q, k, v, beta):
                x.grad = None

        result[f"{name}@train"] = train
    return result


def main(rounds: int = 5, threads: int = 1, chunk: int = 64) -> None:
    b.THREADS = threads
    torch.set_num_threads(threads)
    times = b.paired_rounds(arms(chunk), rounds, 0.2)
    print(
        f"delta rule, B=1, H={H}, d={d}, float32, {threads} thread(s), chunks of "
        f"{chunk}, {rounds} interleaved rounds; medians over rounds:"
    )
    print(f"  {'':>15} {'recurrent':>12} {'chunked':>12} {'recurrent / chunked':>20}")
    rows = [(f"prefill T={T}", str(T)) for T in LENGTHS]
    rows.append((f"train T={TRAIN_T}", "train"))
    for label, key in rows:
        rec, chk = times[f"recurrent@{key}"], times[f"chunked@{key}"]
        ratio = b.median_ratio(times, f"recurrent@{key}", f"chunked@{key}")
        print(
            f"  {label:>15} {statistics.median(rec) * 1e3:9.1f} ms "
            f"{statistics.median(chk) * 1e3:9.1f} ms {ratio:17.1f}x"
        )
    print(f"  load average: {b.loadavg()}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:4]))
