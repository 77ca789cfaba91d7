"""Rotary position embedding (attention_lib.rotary): its properties, its two layouts,
and its frequencies against transformers' own functions."""

import math

import pytest
import torch

import attention_lib as al

D = 16


def _rope(
    x, positions, layout="half", theta=10000.0, scaling=None, dtype=torch.float64
):
    inv_freq, factor = al.rope_frequencies(x.shape[-1], theta, scaling, dtype)
    cos, sin = al.rope_cos_sin(positions, inv_freq, factor)
    return al.apply_rope(x, cos.to(x.dtype), sin.to(x.dtype), layout)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_score_depends_only_on_the_offset(layout):
    q = torch.randn(1, 1, 1, D, dtype=torch.float64)
    k = torch.randn(1, 1, 1, D, dtype=torch.float64)
    scores = {}
    for m, n in [(3, 0), (10, 7), (103, 100), (5, 5), (50, 50)]:
        qm = _rope(q, torch.tensor([m]), layout)
        kn = _rope(k, torch.tensor([n]), layout)
        scores[(m, n)] = (qm * kn).sum().item()
    assert scores[(3, 0)] == pytest.approx(scores[(10, 7)], abs=1e-12)
    assert scores[(3, 0)] == pytest.approx(scores[(103, 100)], abs=1e-12)
    assert scores[(5, 5)] == pytest.approx((q * k).sum().item(), abs=1e-12)
    assert scores[(50, 50)] == pytest.approx((q * k).sum().item(), abs=1e-12)
    # and it does change with the offset
    assert abs(scores[(3, 0)] - scores[(5, 5)]) > 1e-3


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rotation_preserves_norms_and_position_zero_is_identity(layout):
    x = torch.randn(2, 3, 7, D, dtype=torch.float64)
    y = _rope(x, torch.arange(7), layout)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), atol=1e-12, rtol=0)
    torch.testing.assert_close(y[:, :, 0], x[:, :, 0], atol=0, rtol=0)
    assert not torch.allclose(y[:, :, 1:], x[:, :, 1:])


def test_layouts_are_one_model_up_to_a_permutation():
    p = al.rope_layout_permutation(D)
    assert p.tolist()[:4] == [0, D // 2, 1, D // 2 + 1]
    assert sorted(p.tolist()) == list(range(D))
    x = torch.randn(2, 3, 9, D, dtype=torch.float64)
    pos = torch.arange(4, 13)
    half = _rope(x, pos, "half")
    inter = _rope(x[..., p], pos, "interleaved")
    torch.testing.assert_close(inter, half[..., p], atol=0, rtol=0)
    torch.testing.assert_close(inter[..., torch.argsort(p)], half, atol=0, rtol=0)
    # the slip: the same features read in the other layout is another function
    assert (_rope(x, pos, "interleaved") - half).abs().max() > 0.1


def test_half_layout_equals_transformers_bit_for_bit():
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    x = torch.randn(2, 3, 11, D)
    pos = torch.arange(11)
    inv_freq, _ = al.rope_frequencies(D, 10000.0)
    cos, sin = al.rope_cos_sin(pos, inv_freq)
    ours = al.apply_rope(x, cos, sin, "half")
    cos2, sin2 = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
    ref, _ = llama.apply_rotary_pos_emb(x, x, cos2[None], sin2[None])
    torch.testing.assert_close(ours, ref, atol=0, rtol=0)


@pytest.mark.parametrize(
    "params",
    [
        {"rope_type": "default", "rope_theta": 10000.0},
        {"rope_type": "default", "rope_theta": 100000.0},
        {
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 2048,
        },
    ],
    ids=["default", "theta1e5", "llama3", "yarn-deepseek", "yarn"],
)
def test_frequencies_equal_transformers(params):
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    d = 64
    config = transformers.LlamaConfig(
        hidden_size=d * 4,
        num_attention_heads=4,
        max_position_embeddings=params.get("original_max_position_embeddings", 2048)
        * int(params.get("factor", 1)),
        rope_parameters=dict(params),
    )
    scaling = None if params["rope_type"] == "default" else dict(params)
    ours, factor = al.rope_frequencies(d, params["rope_theta"], scaling)
    if params["rope_type"] == "default":
        ref = 1.0 / (
            params["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float) / d)
        )
        ref_factor = 1.0
    else:
        ref, ref_factor = ROPE_INIT_FUNCTIONS[params["rope_type"]](config, "cpu")
    torch.testing.assert_close(ours, ref, atol=0, rtol=0)
    assert factor == pytest.approx(ref_factor, abs=1e-12)


def test_llama3_scaling_keeps_short_wavelengths_and_divides_long_ones():
    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    plain, _ = al.rope_frequencies(128, 500000.0)
    scaled, _ = al.rope_frequencies(128, 500000.0, scaling)
    wavelen = 2 * math.pi / plain
    short, long_ = wavelen < 8192 / 4, wavelen > 8192 / 1
    assert short.any() and long_.any()
    torch.testing.assert_close(scaled[short], plain[short], atol=0, rtol=0)
    torch.testing.assert_close(scaled[long_], plain[long_] / 8, atol=0, rtol=1e-6)
    # the slip "scaling forgotten" is a visible change of the rotation
    assert (scaled - plain).abs().max() > 1e-4


def test_yarn_mscale():
    assert al.yarn_mscale(1.0) == 1.0
    assert al.yarn_mscale(40.0, 1.0) == pytest.approx(0.1 * math.log(40) + 1)


def test_rotary_embedding_module_and_batched_positions():
    rope = al.RotaryEmbedding(D, theta=100.0, layout="interleaved")
    x = torch.randn(2, 3, 5, D)
    pos = torch.stack([torch.arange(5), torch.arange(10, 15)])  # (B, T)
    y = rope(x, pos)
    torch.testing.assert_close(y[0:1], rope(x[0:1], torch.arange(5)))
    torch.testing.assert_close(y[1:2], rope(x[1:2], torch.arange(10, 15)))
    # the angles stay float32 after .to(float64), as in transformers
    rope64 = al.RotaryEmbedding(D).to(torch.float64)
    cos, _ = rope64.cos_sin(torch.arange(3), torch.float64)
    assert torch.equal(cos, cos.float().double())


def test_inputs_are_not_modified():
    x = torch.randn(1, 2, 4, D)
    before = x.clone()
    _rope(x.double(), torch.arange(4))
    al.RotaryEmbedding(D)(x, torch.arange(4))
    assert torch.equal(x, before)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: al.rope_frequencies(7), "even"),
        (lambda: al.rope_frequencies(8, theta=1.0), "theta"),
        (lambda: al.rope_frequencies(8, scaling={"rope_type": "ntk"}), "rope_type"),
        (lambda: al.rope_frequencies(8, scaling={"rope_type": "llama3"}), "factor"),
        (lambda: al.rope_cos_sin(torch.arange(3.0), torch.ones(4)), "integer"),
        (
            lambda: al.apply_rope(
                torch.ones(1, 1, 3, 8), torch.ones(3, 3), torch.ones(3, 3)
            ),
            "(T, d/2)",
        ),
        (
            lambda: al.apply_rope(
                torch.ones(1, 3, 8), torch.ones(3, 4), torch.ones(3, 4)
            ),
            "4-D",
        ),
        (
            lambda: al.apply_rope(
                torch.ones(1, 1, 3, 8), torch.ones(3, 4), torch.ones(3, 4), "complex"
            ),
            "layout",
        ),
        (lambda: al.rope_layout_permutation(5), "even"),
    ],
)
def test_bad_input_raises_value_error(call, message):
    with pytest.raises(
        ValueError, match=message.replace("(", r"\(").replace(")", r"\)")
    ):
        call()


def test_apply_rope_refuses_cos_sin_of_another_batch_size():
    x = torch.randn(2, 3, 5, D)
    cos, sin = al.rope_cos_sin(torch.arange(15).view(3, 5), al.rope_frequencies(D)[0])
    with pytest.raises(ValueError, match=r"B=2.*\(3, 5, 8\)"):
        al.apply_rope(x, cos, sin)
    y = al.apply_rope(x, cos[:2], sin[:2])  # the batch size that fits
    assert y.shape == x.shape
