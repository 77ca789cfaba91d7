"""TinyDecoder: shapes, decoding with a KV cache == without, readable == fused path,
conversion to GQA, bad input."""

import inspect

import pytest
import torch

import attention_lib as al

V, E, H, L, MAX_LEN = 23, 32, 4, 2, 40


def model(num_kv_heads=H, seed=0, **kwargs):
    torch.manual_seed(seed)
    return al.TinyDecoder(V, E, H, num_kv_heads, L, MAX_LEN, **kwargs).eval()


def tokens(B=3, n=7, seed=1):
    return torch.randint(0, V, (B, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("num_kv_heads", [1, 2, H])
def test_shapes_and_parameters(num_kv_heads):
    m = model(num_kv_heads)
    assert m(tokens()).shape == (3, 7, V)
    assert m.generate(tokens(), 5).shape == (3, 12)
    attention = m.blocks[0].attention
    assert (
        isinstance(attention, al.GroupedQueryAttention)
        and attention.num_kv_heads == num_kv_heads
    )
    assert attention.W_k.weight.shape == (num_kv_heads * E // H, E)
    assert len(m.blocks) == L and m.head.weight.shape == (V, E)


@pytest.mark.parametrize("num_kv_heads", [1, 2, H])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generate_with_cache_equals_without(num_kv_heads, seed):
    m, prompt = model(num_kv_heads, seed), tokens(seed=seed + 10)
    cached = m.generate(prompt, 12)
    uncached = m.generate(prompt, 12, use_cache=False)
    assert torch.equal(cached, uncached)
    assert torch.equal(cached[:, :7], prompt)  # the prompt is kept in front
    assert torch.equal(m.generate(prompt, 0), prompt)


@pytest.mark.parametrize("num_kv_heads", [1, 2, H])
def test_logits_with_cache_equal_full_forward(num_kv_heads):
    m, x = model(num_kv_heads), tokens(n=9)
    full = m(x)  # (B, n, V)
    caches = [al.KVCache() for _ in range(L)]
    with torch.no_grad():
        pieces = [
            m(x[:, :4], kv_caches=caches)
        ]  # prefill 4 tokens, then one token at a time
        pieces += [m(x[:, t : t + 1], kv_caches=caches) for t in range(4, 9)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full)
    assert len(caches[0]) == 9 and caches[-1].keys.shape == (
        3,
        num_kv_heads,
        9,
        E // H,
    )  # Hkv heads, not H


def test_readable_path_agrees_with_fused_and_keeps_the_weights():
    m, x = model(2), tokens()
    m(x, need_weights=True)
    fused = m(x)  # the fused path is the model's default: it keeps no weights
    assert all(w is None for w in m.attention_weights)  # an attribute, not a method
    readable = m(x, need_weights=True)  # asked for, to inspect
    torch.testing.assert_close(readable, fused)
    weights = m.attention_weights
    assert len(weights) == L and weights[0].shape == (3, H, 7, 7)
    assert weights[0] is m.blocks[0].attention.attention_weights
    torch.testing.assert_close(weights[1].sum(-1), torch.ones(3, H, 7))
    assert (weights[0].triu(diagonal=1) == 0).all()  # causal: no weight on later tokens


def test_need_weights_defaults_layers_inspect_and_a_model_trains():
    # A layer keeps its weights by default (to inspect); a block and a model do not, so
    # that a training loop's model(tokens) stores no (B, H, n, n) tensor per block.
    defaults = [
        inspect.signature(f).parameters["need_weights"].default
        for f in (
            al.GroupedQueryAttention.forward,
            al.SelfAttention.forward,
            al.DecoderBlock.forward,
            al.TinyDecoder.forward,
        )
    ]
    assert defaults == [True, True, False, False]
    m, x = model(2).train(), tokens()
    m(x).sum().backward()  # a training step with the defaults
    assert all(w is None for w in m.attention_weights)
    m.blocks[0](m.embedding(x), need_weights=True)
    assert m.blocks[0].attention.attention_weights.shape == (3, H, 7, 7)


def test_generate_runs_the_fused_path_and_checks_ids_once(monkeypatch):
    m, prompt = model(2), tokens()
    m(prompt, need_weights=True)  # readable: every block keeps weights
    calls = {"min": 0, "need_weights": []}
    real_min = torch.Tensor.min

    def counting_min(self, *args, **kwargs):
        calls["min"] += 1
        return real_min(self, *args, **kwargs)

    def spy(module, args, kwargs):
        calls["need_weights"].append(kwargs["need_weights"])

    monkeypatch.setattr(torch.Tensor, "min", counting_min)
    hooks = [
        b.attention.register_forward_pre_hook(spy, with_kwargs=True) for b in m.blocks
    ]
    for use_cache in (True, False):
        calls["min"], calls["need_weights"] = 0, []
        m.generate(prompt, 6, use_cache=use_cache)
        assert calls["min"] == 1  # the prompt's ids, not once per generated token
        assert calls["need_weights"] == [False] * (6 * L)
    for hook in hooks:
        hook.remove()
    assert all(w is None for w in m.attention_weights)  # the fused path keeps none


def test_a_later_token_does_not_change_earlier_logits():
    m, x = model(2), tokens()
    y = x.clone()
    y[:, -1] = (y[:, -1] + 1) % V
    torch.testing.assert_close(m(x)[:, :-1], m(y)[:, :-1])


def test_convert_to_gqa_on_the_whole_model():
    m, x = model(H), tokens()
    same = al.convert_to_gqa(m, H)  # groups of one: nothing pooled
    torch.testing.assert_close(same(x), m(x), rtol=0, atol=0)
    with torch.no_grad():  # identical kv heads: mean-pooling them loses nothing
        for block in m.blocks:
            for layer in (block.attention.W_k, block.attention.W_v):
                layer.weight.copy_(layer.weight[: E // H].repeat(H, 1))
    for num_kv_heads in (1, 2):
        gqa = al.convert_to_gqa(m, num_kv_heads, method="mean")
        assert all(b.attention.num_kv_heads == num_kv_heads for b in gqa.blocks)
        assert all(
            b.attention.num_kv_heads == H for b in m.blocks
        )  # the input model is untouched
        torch.testing.assert_close(gqa(x), m(x))
        assert torch.equal(gqa.generate(x, 6), gqa.generate(x, 6, use_cache=False))


def test_dropout_on_the_attention_branch_before_the_residual():
    # L-4: as GPT-2, the attention output is dropped before it joins the residual
    torch.manual_seed(0)
    block = al.DecoderBlock(E, H, 2, dropout=0.5)
    block.attention.dropout.p = 0.0  # isolate the branch dropout from the weights'
    with torch.no_grad():
        block.mlp[2].weight.zero_()  # the MLP branch adds 0
        block.mlp[2].bias.zero_()
    X = torch.randn(3, 7, E)
    with torch.no_grad():
        Y = block.norm1(X)
        branch = block.attention(Y, Y, Y, is_causal=True, need_weights=False)
        block.eval()
        torch.testing.assert_close(block(X), X + branch)  # eval: nothing dropped
        block.train()
        delta = block(X) - X
    dropped = delta.abs() < 1e-6
    assert 0.3 < dropped.float().mean() < 0.7
    torch.testing.assert_close(delta[~dropped], 2 * branch[~dropped])  # 1 / (1 - p)


def test_dropout_is_active_only_in_training():
    m, x = model(2, dropout=0.5), tokens()
    torch.testing.assert_close(m(x), m(x))  # eval: deterministic
    m.train()
    assert not torch.allclose(m(x), m(x))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"vocab_size": 0}, "expected vocab_size to be a positive integer, got 0"),
        ({"num_layers": 0}, "expected num_layers to be a positive integer, got 0"),
        ({"max_len": 2.5}, "expected max_len to be a positive integer, got 2.5"),
        ({"mlp_ratio": -1}, "expected mlp_ratio to be a positive integer, got -1"),
        ({"num_heads": 3}, "num_heads must divide"),
        ({"num_kv_heads": 3}, "num_kv_heads"),
    ],
)
def test_bad_sizes_raise(kwargs, match):
    args = dict(
        vocab_size=V,
        num_hiddens=E,
        num_heads=H,
        num_kv_heads=H,
        num_layers=L,
        max_len=MAX_LEN,
    )
    with pytest.raises(ValueError, match=match):
        al.TinyDecoder(**{**args, **kwargs})


def test_bad_inputs_raise():
    m = model(2)
    with pytest.raises(ValueError, match=r"token ids in 0..22, got ids in 0..23"):
        m(torch.tensor([[0, V]]))
    with pytest.raises(ValueError, match="token ids"):
        m(torch.tensor([[-1, 0]]))
    with pytest.raises(ValueError, match="integer tensor of shape"):
        m(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="integer tensor of shape"):
        m(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="at least one token"):
        m(torch.zeros(2, 0, dtype=torch.long))
    with pytest.raises(ValueError, match=f"at most max_len={MAX_LEN}"):
        m(torch.zeros(1, MAX_LEN + 1, dtype=torch.long))
    with pytest.raises(ValueError, match="one KVCache per block"):
        m(tokens(), kv_caches=[al.KVCache()])
    caches = [al.KVCache() for _ in range(L)]
    m(torch.zeros(1, MAX_LEN - 1, dtype=torch.long), kv_caches=caches)
    with pytest.raises(ValueError, match="39 cached \\+ 2 new = 41"):
        m(torch.zeros(1, 2, dtype=torch.long), kv_caches=caches)
    with pytest.raises(
        ValueError, match="max_new_tokens: expected a non-negative integer"
    ):
        m.generate(tokens(), -1)
    with pytest.raises(ValueError, match="prompt \\+ max_new_tokens: expected at most"):
        m.generate(tokens(n=30), 11)
    with pytest.raises(ValueError, match="prompt: expected token ids"):
        m.generate(torch.tensor([[V + 5]]), 1)
