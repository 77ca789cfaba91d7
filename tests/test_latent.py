"""Multi-head latent attention (attention_lib/latent.py), checked against transformers'
DeepseekV3ForCausalLM (dense layers, small random configurations, weights copied) and
against itself (absorbed = naive, cached = uncached), with deliberate slips that must
break the match."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import attention_lib as al

transformers = pytest.importorskip("transformers")
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf_ds

YARN = {
    "rope_type": "yarn",
    "rope_theta": 10000.0,
    "factor": 40.0,
    "original_max_position_embeddings": 64,
    "beta_fast": 32,
    "beta_slow": 1,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}
# name -> (q_lora_rank, rope_interleave, rope_parameters)
CONFIGS = {
    "q_lora, interleaved": (12, True, {"rope_type": "default", "rope_theta": 10000.0}),
    "no q_lora, half": (None, False, {"rope_type": "default", "rope_theta": 500.0}),
    "yarn x40": (12, True, YARN),
}
V, E, L, H, R, DN, DR, DV = 61, 32, 2, 4, 16, 8, 8, 12


def hf_config(name: str) -> DeepseekV3Config:
    q_lora, interleave, rope = CONFIGS[name]
    return DeepseekV3Config(
        vocab_size=V,
        hidden_size=E,
        intermediate_size=48,
        moe_intermediate_size=16,
        num_hidden_layers=L,
        first_k_dense_replace=L,  # every layer dense: no mixture of experts
        num_attention_heads=H,
        num_key_value_heads=H,
        q_lora_rank=q_lora,
        kv_lora_rank=R,
        qk_nope_head_dim=DN,
        qk_rope_head_dim=DR,
        v_head_dim=DV,
        rope_interleave=interleave,
        rope_parameters=dict(rope),
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )


def hf_model(name: str, dtype: torch.dtype, seed: int = 0):
    """transformers' model with random O(1) weights (norm gains too: a test with every
    gain 1 could not tell which norm is which)."""
    torch.manual_seed(seed)
    model = DeepseekV3ForCausalLM(hf_config(name))
    model.config._attn_implementation = "sdpa"  # eager softmaxes in float32
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight"):
                p.copy_(1 + 0.3 * torch.randn_like(p))
            elif p.dim() == 2:
                p.copy_(torch.randn_like(p) * 1.5 / math.sqrt(p.shape[1]))
    return model.to(dtype).eval()


def ours_from(hf, name: str, dtype: torch.dtype) -> al.LatentDecoder:
    q_lora, interleave, rope = CONFIGS[name]
    scaling = None if rope["rope_type"] == "default" else rope
    model = al.LatentDecoder(
        V,
        E,
        L,
        48,
        norm_eps=hf.config.rms_norm_eps,
        num_heads=H,
        kv_lora_rank=R,
        qk_nope_head_dim=DN,
        qk_rope_head_dim=DR,
        v_head_dim=DV,
        q_lora_rank=q_lora,
        rope_theta=rope["rope_theta"],
        rope_scaling=scaling,
        rope_layout="interleaved" if interleave else "half",
    )
    model.load_state_dict(al.from_hf_deepseek(hf.state_dict()))
    return model.to(dtype).eval()


@pytest.fixture
def hf_rmsnorm_in_input_dtype(monkeypatch):
    """transformers computes RMSNorm in float32 whatever the model's dtype; for a
    float64 comparison its norms compute in the input's dtype (the rotary tables are
    float32 on both sides: ``rope_dtype=torch.float32``, as transformers)."""

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.variance_epsilon))

    monkeypatch.setattr(hf_ds.DeepseekV3RMSNorm, "forward", forward)


TOKENS = torch.randint(0, V, (2, 11), generator=torch.Generator().manual_seed(1))
TOL = {
    torch.float32: dict(atol=2e-5, rtol=2e-5),
    torch.float64: dict(atol=1e-11, rtol=0),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_logits_equal_transformers(name, dtype, hf_rmsnorm_in_input_dtype):
    hf = hf_model(name, dtype)
    ours = ours_from(hf, name, dtype)
    with torch.no_grad():
        want = hf(TOKENS).logits
        assert want.abs().max() > 1  # O(1) logits, not a near-uniform model
        for absorb in (False, True):
            torch.testing.assert_close(ours(TOKENS, absorb=absorb), want, **TOL[dtype])
        # chunked prefill through the caches: the same logits
        caches = [al.LatentCache() for _ in range(L)]
        parts = [ours(TOKENS[:, a:b], caches) for a, b in ((0, 4), (4, 5), (5, 11))]
        torch.testing.assert_close(torch.cat(parts, 1), want, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["q_lora, interleaved", "yarn x40"])
def test_cached_greedy_tokens_equal_transformers(
    name, dtype, hf_rmsnorm_in_input_dtype
):
    hf = hf_model(name, dtype, seed=3)
    ours = ours_from(hf, name, dtype)
    prompt = TOKENS[:, :5]
    with torch.no_grad():
        want = hf.generate(
            prompt,
            max_new_tokens=12,
            do_sample=False,
            pad_token_id=0,
            eos_token_id=None,
        )
        logits = hf(want).logits[:, 4:-1]  # the logits each greedy step chose from
    top2 = logits.topk(2, dim=-1).values
    assert (top2[..., 0] - top2[..., 1]).min() > 1e-3  # no near-tie: tokens are robust
    for absorb in (False, True):
        assert torch.equal(ours.generate(prompt, 12, absorb=absorb), want)


def test_cache_holds_the_latent_and_the_rotary_key(hf_rmsnorm_in_input_dtype):
    dtype = torch.float64
    hf = hf_model("q_lora, interleaved", dtype)
    ours = ours_from(hf, "q_lora, interleaved", dtype)
    caches = [al.LatentCache() for _ in range(L)]
    with torch.no_grad():
        out = hf(TOKENS, use_cache=True)
        ours(TOKENS, caches)
    for layer, cache in enumerate(caches):
        hf_latent = out.past_key_values.layers[layer].keys  # (B, 1, T, r)
        hf_rope = out.past_key_values.layers[layer].values  # (B, 1, T, dr)
        assert cache.latent.shape == (2, 11, R) and cache.rope_keys.shape == (2, 11, DR)
        torch.testing.assert_close(cache.latent, hf_latent[:, 0], atol=1e-12, rtol=0)
        # transformers writes the interleaved rotation's output de-interleaved
        back = torch.argsort(al.rope_layout_permutation(DR))
        torch.testing.assert_close(
            cache.rope_keys[..., back], hf_rope[:, 0], atol=1e-12, rtol=0
        )
    assert al.mla_cache_bytes(L, R, DR, 11, 2, 8) == sum(
        c.keys.nelement() * 8 + c.values.nelement() * 8 for c in caches
    )


# --- deliberate slips must break the match --------------------------------------------


def _wrong_part_queries(self, X, positions):
    """RoPE applied to the first dr features of each query head instead of the last."""
    B, n, _ = X.shape
    q = self.W_uq(self.q_norm(self.W_dq(X))).view(B, n, H, DN + DR).transpose(1, 2)
    q_rope, q_nope = q.split([DR, DN], dim=-1)
    return q_nope, self.rope(q_rope, positions)


@pytest.mark.parametrize(
    "slip", ["no mscale^2", "rope on the wrong part", "half layout"]
)
def test_slips_break_the_match(slip, hf_rmsnorm_in_input_dtype):
    name = "yarn x40"
    dtype = torch.float64
    hf = hf_model(name, dtype)
    ours = ours_from(hf, name, dtype)
    with torch.no_grad():
        want = hf(TOKENS).logits
        torch.testing.assert_close(ours(TOKENS), want, **TOL[dtype])
        for block in ours.blocks:
            layer = block.attention
            if slip == "no mscale^2":
                assert layer.softmax_scale == pytest.approx(
                    (DN + DR) ** -0.5 * al.yarn_mscale(40.0, 1.0) ** 2
                )
                assert al.yarn_mscale(40.0, 1.0) ** 2 == pytest.approx(1.874, abs=1e-3)
                layer.softmax_scale = (DN + DR) ** -0.5
            elif slip == "rope on the wrong part":
                layer.queries = _wrong_part_queries.__get__(layer)
            else:
                layer.rope.layout = "half"
        assert (ours(TOKENS) - want).abs().max() > 0.1


# --- the layer by itself --------------------------------------------------------------


def layer64(q_lora_rank=6, **kw):
    torch.manual_seed(0)
    return al.MultiHeadLatentAttention(
        E, H, R, DN, DR, DV, q_lora_rank=q_lora_rank, rope_dtype=torch.float64, **kw
    ).double()


@pytest.mark.parametrize("q_lora_rank", [None, 6])
def test_absorbed_equals_naive(q_lora_rank):
    mla = layer64(q_lora_rank)
    X = torch.randn(3, 9, E, dtype=torch.float64)
    for need_weights in (True, False):
        naive = mla(X, is_causal=True, need_weights=need_weights)
        absorbed = mla(X, is_causal=True, need_weights=need_weights, absorb=True)
        torch.testing.assert_close(absorbed, naive, atol=1e-12, rtol=0)
    # decoding: a prefill of 5, then one token at a time, absorbed; the same outputs
    cache = al.LatentCache()
    with torch.no_grad():
        steps = [mla(X[:, :5], is_causal=True, kv_cache=cache, need_weights=False)]
        for t in range(5, 9):
            x_t = X[:, t : t + 1]
            steps.append(mla(x_t, kv_cache=cache, need_weights=False, absorb=True))
    torch.testing.assert_close(torch.cat(steps, 1), naive.detach(), atol=1e-12, rtol=0)
    assert len(cache) == 9 and cache.latent.shape == (3, 9, R)


def test_absorbed_weights_equal_naive_weights_and_masks():
    mla = layer64()
    X = torch.randn(2, 6, E, dtype=torch.float64)
    valid_lens = torch.tensor([4, 6])
    keep = torch.rand(6, 6, generator=torch.Generator().manual_seed(0)) > 0.3
    a = mla(X, valid_lens, keep, is_causal=True)
    wa = mla.attention_weights
    b = mla(X, valid_lens, keep, is_causal=True, absorb=True)
    torch.testing.assert_close(b, a, atol=1e-12, rtol=0)
    torch.testing.assert_close(mla.attention_weights, wa, atol=1e-12, rtol=0)
    assert wa.shape == (2, H, 6, 6)
    # the masks mean what they mean for the other layers: True = keep, causal, lengths
    mask = (
        keep
        & al.causal_mask(6)
        & (torch.arange(6) < valid_lens[:, None, None])[:, None]
    )
    torch.testing.assert_close(mla(X, mask=mask), a, atol=1e-12, rtol=0)
    assert (wa[~mask.expand_as(wa)] == 0).all()
    fused = mla(X, valid_lens, keep, is_causal=True, need_weights=False, absorb=True)
    torch.testing.assert_close(fused, a, atol=1e-12, rtol=0)
    assert mla.attention_weights is None


def test_causal_is_bottom_right_with_a_cache():
    mla = layer64()
    X = torch.randn(1, 7, E, dtype=torch.float64)
    full = mla(X, is_causal=True)
    cache = al.LatentCache()
    first = mla(X[:, :3], is_causal=True, kv_cache=cache)
    rest = mla(X[:, 3:], is_causal=True, kv_cache=cache)  # 4 queries, 7 keys
    torch.testing.assert_close(torch.cat([first, rest], 1), full, atol=1e-12, rtol=0)
    assert mla.attention_weights[0, 0, 0, 4:].abs().max() == 0  # query 3 sees keys 0..3


def test_softmax_scale_and_sizes():
    plain = al.MultiHeadLatentAttention(E, H, R, DN, DR, DV)
    assert plain.softmax_scale == pytest.approx((DN + DR) ** -0.5)
    yarn = al.MultiHeadLatentAttention(E, H, R, DN, DR, DV, rope_scaling=YARN)
    assert yarn.softmax_scale / plain.softmax_scale == pytest.approx(
        (0.1 * math.log(40) + 1) ** 2
    )
    W_uk, W_uv = plain.up_projections()
    assert W_uk.shape == (H, DN, R) and W_uv.shape == (H, DV, R)
    assert plain.W_dkv.weight.shape == (R + DR, E) and not hasattr(plain, "W_dq")


def test_mla_cache_bytes():
    # DeepSeek-V3: 61 layers, r = 512, dr = 64, bf16 -> 70,272 bytes a token; MHA with
    # 128 heads of 128 (keys and values) would be 3,997,696
    assert al.mla_cache_bytes(61, 512, 64, 1) == 70_272
    assert al.kv_cache_bytes(61, 128, 128, 1) == 3_997_696
    assert al.kv_cache_bytes(61, 8, 128, 1) == 249_856
    assert al.kv_cache_bytes(61, 1, 128, 1) == 31_232
    # the same bytes as GQA with (r + dr) / 2d = 2.25 heads of 128
    assert al.mla_cache_bytes(61, 512, 64, 1) * 4 == al.kv_cache_bytes(61, 9, 128, 1)
    assert type(al.mla_cache_bytes(1, 2, 2, 3)) is int
    with pytest.raises(
        ValueError, match="expected seq_len to be a non-negative integer"
    ):
        al.mla_cache_bytes(1, 2, 2, 4096.0)
    with pytest.raises(ValueError, match="kv_lora_rank .* got -1"):
        al.mla_cache_bytes(1, -1, 2, 3)


def test_bad_input_raises_and_changes_nothing():
    mla = layer64()
    X = torch.randn(2, 4, E, dtype=torch.float64)
    cache = al.LatentCache()
    mla(X, is_causal=True, kv_cache=cache)
    latent = cache.latent.clone()
    bad_calls = [
        (
            dict(X=torch.randn(2, 4, E + 1, dtype=torch.float64)),
            "expected last dimension",
        ),
        (dict(X=torch.randn(4, E, dtype=torch.float64)), "expected a 3-D tensor"),
        (dict(X=X[:, :1], mask=torch.ones(1, 4, dtype=torch.bool)), "mask"),
        (dict(X=X[:, :1], mask=torch.ones(2, 1, 5, dtype=torch.bool)), "3-D"),
        (dict(X=X[:, :1], valid_lens=torch.tensor([1, 2, 3])), "valid_lens"),
        (dict(X=X[:1, :1]), r"\(1, 1, T, 16\)"),  # another batch size than the cache's
        (dict(X=X[:, :1], kv_cache="cache"), "LatentCache"),
    ]
    for kwargs, message in bad_calls:
        kwargs.setdefault("kv_cache", cache)
        with pytest.raises(ValueError, match=message):
            mla(**kwargs)
        assert len(cache) == 4
    torch.testing.assert_close(cache.latent, latent, atol=0, rtol=0)
    with pytest.raises(ValueError, match="even qk_rope_head_dim"):
        al.MultiHeadLatentAttention(E, H, R, DN, 7, DV)
    with pytest.raises(ValueError, match="kv_lora_rank"):
        al.MultiHeadLatentAttention(E, H, 0, DN, DR, DV)


def test_a_failure_inside_restores_the_cache(monkeypatch):
    mla = layer64()
    X = torch.randn(1, 3, E, dtype=torch.float64)
    cache = al.LatentCache()
    mla(X, kv_cache=cache)

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(mla, "_heads", boom)
    with pytest.raises(RuntimeError):
        mla(X[:, :1], kv_cache=cache)
    assert len(cache) == 3


def test_decoder_checks_its_input():
    model = al.LatentDecoder(
        V,
        E,
        1,
        16,
        num_heads=H,
        kv_lora_rank=R,
        qk_nope_head_dim=DN,
        qk_rope_head_dim=DR,
        v_head_dim=DV,
    )
    with pytest.raises(ValueError, match="expected ids in 0..60"):
        model(torch.tensor([[V]]))
    with pytest.raises(ValueError, match="integer tensor"):
        model(torch.zeros(1, 2))
    with pytest.raises(ValueError, match="one LatentCache per block"):
        model(torch.tensor([[1]]), [])
    assert isinstance(model.blocks[0].attention, nn.Module)
