"""One cached decode step of grouped-query attention against the packed-query floor
(issue 23's Performance section):
``python bench/bench_decode_packed.py [ROUNDS [THREADS]]`` (default: 40, 2 threads).

The arms are ``bench_attention.decode_arms()``'s (T = 4096, E = 512, H = 8, Hkv = 2,
B = 1, 2 threads): ``al.GroupedQueryAttention`` and ``al.FastGroupedQueryAttention``
with a ``KVCache`` (cropped back to T after each step), and ``F.scaled_dot_product_
attention(enable_gqa=True)`` over ready-made keys and values; plus the **packed** floor:
the same projections, the query's ``g = H / Hkv`` heads of each group folded into ``g``
rows of one query, ``(B, Hkv, g, d)``, one SDPA call against ``(B, Hkv, T + 1, d)``,
``W_o`` -- the trick the library's decode step uses, written bare.

Timing: all arms interleaved in every round (the order rotates), each timed by one
``blocked_autorange`` block keeping its fastest call; reported: each arm's fastest time
over the rounds and the ratio of fastest times (other load only ever adds time, so the
fastest is the least disturbed), and the median of the per-round ratios. Shape legend:
``B`` batch, ``T`` cached positions, ``E`` width, ``H`` query heads, ``Hkv`` key/value
heads, ``g = H / Hkv``, ``d = E / H``.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_attention as b  # noqa: E402


def packed_arm():
    """The packed-query floor (its own weights and cache tensors, same shapes)."""
    torch.manual_seed(0)
    E, H, Hkv = b.E, b.H, b.HKV
    d, g = E // H, H // Hkv
    ref = b.SdpaGQA(E, H, Hkv).eval()
    ours = b.al.GroupedQueryAttention(E, H, Hkv).eval()
    ref.load_state_dict(ours.state_dict())
    x1 = torch.randn(1, 1, E)
    k_all = torch.randn(1, Hkv, b.DECODE_T + 1, d)
    v_all = torch.randn(1, Hkv, b.DECODE_T + 1, d)

    def packed():
        with torch.inference_mode():
            q = ref.W_q(x1).view(
                1, Hkv, g, d
            )  # (B, Hkv, g, d): a group's heads as rows
            ref.W_k(x1), ref.W_v(x1)  # the same projections as the other arms
            out = F.scaled_dot_product_attention(q, k_all, v_all)  # (B, Hkv, g, d)
            return ref.W_o(out.reshape(1, 1, E))  # (B, 1, E)

    def gqa():  # the same tensors through enable_gqa, to check the folding
        with torch.inference_mode():
            q = ref.W_q(x1).view(1, 1, H, d).transpose(1, 2)  # (B, H, 1, d)
            out = F.scaled_dot_product_attention(q, k_all, v_all, enable_gqa=True)
            return ref.W_o(out.transpose(1, 2).reshape(1, 1, E))

    torch.testing.assert_close(packed(), gqa(), atol=1e-5, rtol=1e-5)
    return packed


def main(rounds: int = 40, threads: int = b.THREADS) -> None:
    b.THREADS = threads  # the Timer's num_threads
    torch.set_num_threads(threads)
    arms = b.decode_arms()
    arms["packed"] = packed_arm()
    t = b.paired_rounds(arms, rounds, 0.2)
    best = {k: min(v) for k, v in t.items()}
    print(
        f"decode step T={b.DECODE_T}, E={b.E}, H={b.H}, Hkv={b.HKV}, {threads} "
        f"thread(s), {rounds} interleaved rounds; fastest per arm (ms): "
        + ", ".join(f"{k} {v * 1e3:.3f}" for k, v in best.items())
    )
    for arm in ("cached", "fast"):
        for floor in ("packed", "pytorch"):
            print(
                f"  {arm} / {floor}: fastest/fastest {best[arm] / best[floor]:.3f}, "
                f"median of per-round ratios {b.median_ratio(t, arm, floor):.3f}"
            )
    print(f"  load average: {b.loadavg()}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
