"""One decode step of linear attention against one of softmax attention with a KV cache
(issue 32, chapter 13): ``python bench/bench_linear_decode.py [ROUNDS [THREADS]]``
(default: 15 rounds, 1 thread).

Both arms are the attention core of one layer (no projections), batch 1, float32, H = 8
heads of width d = 64, after T tokens (T = 1k, 4k, 16k):

* **kv**: ``al.KVCache`` holding ``(B, H, T, d)`` keys and values; a step appends the new
  key and value (``update``), runs ``F.scaled_dot_product_attention`` of the query over
  the ``T + 1`` keys, and crops the cache back to ``T`` for the next call.
* **linear**: ``al.LinearAttentionState`` with ``elu+1`` features (F = d), after the same
  T tokens; a step writes one token into ``S (B, H, d, d)`` and ``z (B, H, d)`` and reads
  ``S phi(q) / (z . phi(q))``. Its cost and bytes do not depend on T.

Timing as in ``bench_attention.py``: the arms of all three T interleaved in every round
(order rotating), each timed by one ``blocked_autorange`` block keeping its fastest call;
reported: each arm's fastest time over the rounds, the ratio kv / linear at each T and
the bytes each holds (``KVCache``'s tensors, ``LinearAttentionState.nbytes``).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_attention as b  # noqa: E402

import attention_lib as al  # noqa: E402

H, d = 8, 64
LENGTHS = (1024, 4096, 16384)


def arms(T: int) -> tuple[dict, dict]:
    """The two decode steps after ``T`` tokens, and the bytes each keeps."""
    g = torch.Generator().manual_seed(T)
    q, k, v = torch.randn(3, 1, H, 1, d, generator=g).unbind(0)  # (B, H, 1, d)
    cache = al.KVCache(capacity=T + 1)
    cache.update(
        torch.randn(1, H, T, d, generator=g), torch.randn(1, H, T, d, generator=g)
    )
    state = al.LinearAttentionState()
    with torch.inference_mode():
        # the state after T tokens (written in chunks: the same S and z as one by one)
        prefix_k = torch.randn(1, H, T, d, generator=g)
        prefix_v = torch.randn(1, H, T, d, generator=g)
        phi_k = al.elu_feature_map(prefix_k)
        state.load(prefix_v.transpose(-1, -2) @ phi_k, phi_k.sum(-2))

    def kv():
        with torch.inference_mode():
            keys, values = cache.update(k, v)  # (B, H, T + 1, d)
            out = F.scaled_dot_product_attention(q, keys, values)
        cache.crop(T)
        return out

    def linear():
        with torch.inference_mode():
            return state.step(q, k, v)

    sizes = {"kv": cache.keys.nbytes + cache.values.nbytes, "linear": state.nbytes}
    return {f"kv@{T}": kv, f"linear@{T}": linear}, sizes


def main(rounds: int = 15, threads: int = 1) -> None:
    b.THREADS = threads
    torch.set_num_threads(threads)
    all_arms, sizes = {}, {}
    for T in LENGTHS:
        step_arms, sizes[T] = arms(T)
        all_arms.update(step_arms)
    t = b.paired_rounds(all_arms, rounds, 0.2)
    best = {name: min(v) for name, v in t.items()}
    print(
        f"decode step, attention core, B=1, H={H}, d={d}, float32, {threads} thread(s), "
        f"{rounds} interleaved rounds; fastest per arm:"
    )
    for T in LENGTHS:
        kv, lin = best[f"kv@{T}"], best[f"linear@{T}"]
        print(
            f"  T={T:>6}: KV cache {kv * 1e6:8.1f} us ({sizes[T]['kv'] / 2**20:.1f} MiB)"
            f" | linear state {lin * 1e6:6.1f} us ({sizes[T]['linear'] / 2**10:.1f} KiB)"
            f" | kv / linear {kv / lin:5.2f}"
        )
    print(f"  load average: {b.loadavg()}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
