"""The MQAR task (attention_lib/tasks.py, chapters 9 and 12) and the tiny decoder with
multi-head latent attention that chapter 12 trains on it (TinyLatentDecoder)."""

from __future__ import annotations

import math

import pytest
import torch

import attention_lib as al


def _show(t: int, K: int = 8, V: int = 8) -> str:
    if t < K * V:
        return f"k{t // V}:v{t % V}"
    return f"k{t - K * V}?" if t < K * V + K else f"v{t - K * V - K}"


def test_mqar_first_sequence_is_chapter_9s_figure():
    tokens, targets, asked = al.mqar_batch(2, torch.Generator().manual_seed(0))
    assert tokens.shape == targets.shape == (2, 18) and asked.shape == (2, 6)
    assert [_show(int(t)) for t in tokens[0, :10]] == [
        "k2:v0", "k3:v4", "k4:v2", "k6:v1", "k0:v6", "k5:v7", "k0?", "v6", "k2?", "v0",
    ]  # fmt: skip


@pytest.mark.parametrize("K, V, N", [(8, 8, 6), (5, 3, 5), (16, 4, 1)])
def test_mqar_answers_are_the_records_values(K, V, N):
    tokens, targets, asked = al.mqar_batch(
        64, torch.Generator().manual_seed(1), K, V, N
    )
    assert int(tokens.min()) >= 0 and int(tokens.max()) < al.mqar_vocab_size(K, V)
    assert al.mqar_vocab_size(K, V) == K * V + K + V
    assert (targets != al.MQAR_IGNORE).sum() == 64 * N  # one answer per question
    for b in range(64):
        records = {int(t) // V: int(t) % V for t in tokens[b, :N]}
        assert len(records) == N  # distinct keys
        assert sorted(asked[b].tolist()) == list(range(N))  # each record asked once
        for j in range(N):
            key = int(tokens[b, N + 2 * j]) - K * V
            answer = int(tokens[b, N + 2 * j + 1]) - K * V - K
            assert records[key] == answer == int(targets[b, N + 2 * j]) - K * V - K
            assert int(tokens[b, asked[b, j]]) // V == key
    assert (targets[:, :N] == al.MQAR_IGNORE).all()  # nothing to predict on records


def test_mqar_is_reproducible_and_uses_only_the_generator():
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    torch.manual_seed(0)
    a = al.mqar_batch(8, g1)
    torch.manual_seed(1)  # the global RNG plays no part
    b = al.mqar_batch(8, g2)
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    # three draws a batch, in the order keys, values, questions
    g = torch.Generator().manual_seed(5)
    keys = torch.rand(8, 8, generator=g).argsort(dim=1)[:, :6]
    values = torch.randint(0, 8, (8, 6), generator=g)
    assert torch.equal(a[0][:, :6], 8 * keys + values)
    assert math.perm(8, 6) * 8**6 * math.factorial(6) == 3_805_072_588_800


@pytest.mark.parametrize(
    "args, message",
    [
        ((0,), "batch_size"),
        ((4, None), "generator"),
        ((4, "g", 8), "generator"),
        ((4, None, 4, 8, 5), "num_records"),
        ((4, None, 8, 0, 6), "num_values"),
    ],
)
def test_mqar_bad_input(args, message):
    args = list(args)
    if len(args) < 2 or args[1] is None:
        args[1:2] = [torch.Generator().manual_seed(0)]
    if message == "generator":
        args[1] = "g"
    with pytest.raises(ValueError, match=message):
        al.mqar_batch(*args)
    with pytest.raises(ValueError, match="num_keys"):
        al.mqar_vocab_size(0, 8)


def _tiny_latent(seed=0, **sizes):
    torch.manual_seed(seed)
    kw = dict(kv_lora_rank=12, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=8)
    kw.update(sizes)
    return al.TinyLatentDecoder(80, 64, 8, 2, 24, **kw)


def test_tiny_latent_decoder_is_tiny_decoder_with_mla():
    model = _tiny_latent()
    torch.manual_seed(0)
    mqa = al.TinyDecoder(80, 64, 8, 1, 2, max_len=24)
    for block in model.blocks:
        assert isinstance(block.attention, al.MultiHeadLatentAttention)
        assert block.attention.kv_lora_rank == 12
    # the rest starts as the multi-query TinyDecoder's (same seed)
    for part in ("embedding", "norm", "head"):
        for p, q in zip(
            getattr(model, part).parameters(), getattr(mqa, part).parameters()
        ):
            assert torch.equal(p, q)
    assert torch.equal(model.blocks[1].mlp[0].weight, mqa.blocks[1].mlp[0].weight)
    tokens, _, _ = al.mqar_batch(3, torch.Generator().manual_seed(0))
    logits = model(tokens)
    assert logits.shape == (3, 18, 80) and torch.isfinite(logits).all()
    model(tokens, need_weights=True)
    assert model.attention_weights[0].shape == (3, 8, 18, 18)


def test_tiny_latent_decoder_cached_generation_equals_uncached():
    model = _tiny_latent(seed=3).double().eval()
    prompt, _, _ = al.mqar_batch(2, torch.Generator().manual_seed(2))
    prompt = prompt[:, :7]
    cached = model.generate(prompt, 6)
    assert torch.equal(cached, model.generate(prompt, 6, use_cache=False))
    # the cached forward equals the full one, and the cache holds r + dr a token
    caches = [al.LatentCache() for _ in model.blocks]
    full = model(cached)
    step = torch.cat(
        [
            model(cached[:, :5], kv_caches=caches),
            model(cached[:, 5:], kv_caches=caches),
        ],
        1,
    )
    torch.testing.assert_close(step, full, atol=1e-12, rtol=0)
    assert caches[0].latent.shape == (2, 13, 12) and caches[0].rope_keys.shape == (
        2,
        13,
        4,
    )


def test_tiny_latent_decoder_bad_input():
    with pytest.raises(ValueError, match="qk_rope_head_dim"):
        _tiny_latent(qk_rope_head_dim=3)
    with pytest.raises(ValueError, match="kv_lora_rank"):
        _tiny_latent(kv_lora_rank=0)
    model = _tiny_latent()
    X = torch.randn(1, 4, 64)
    with pytest.raises(ValueError, match="keys, values"):
        model.blocks[0].attention(X, X.clone(), X)


def test_mqar_batch_draws_chapter_9s_batches():
    """Chapter 9 draws its task from the library with its own sizes (constants in the
    notebook): they must be the library's defaults, which chapter 12 uses, so that both
    chapters train on the same batches (same tokens, targets and asked records from the
    same generator state)."""
    import ast
    from pathlib import Path

    from chapter_code import run_definitions

    notebook = (
        Path(__file__).parent.parent / "chapters" / "09_watch_attention_learn.ipynb"
    )

    def wanted(node):
        if isinstance(node, ast.FunctionDef):
            return node.name == "mqar_batch"
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            return all(
                isinstance(n, ast.Name) and n.id.isupper() for n in node.targets[0].elts
            )
        return (
            isinstance(node, ast.Assign)
            and getattr(node.targets[0], "id", "").isupper()
        )

    ch = {"torch": torch, "al": al}
    run_definitions(notebook, ch, wanted)
    assert al.mqar_vocab_size() == ch["VOCAB"] and al.MQAR_IGNORE == ch["IGNORE"]
    for seed, batch in ((0, 2), (12345, 1000), (7, 64)):
        g1, g2 = (
            torch.Generator().manual_seed(seed),
            torch.Generator().manual_seed(seed),
        )
        for _ in range(3):  # consecutive batches: the generator advances the same way
            ours, theirs = al.mqar_batch(batch, g1), ch["mqar_batch"](batch, g2)
            for x, y in zip(ours, theirs, strict=True):
                assert torch.equal(x, y)
