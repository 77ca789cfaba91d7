"""The library's attention paths on every torch device of the machine running the tests.

The devices are listed at import time: always ``"cpu"``, plus ``"cuda"`` when
``torch.cuda.is_available()`` and ``"mps"`` when ``torch.backends.mps.is_available()``;
every test is parametrized over that list, so a device the machine lacks is simply not a
parameter (nothing is skipped). On a machine with an NVIDIA GPU (CUDA) or Apple silicon
(MPS) the same tests run there too: ``python -m pytest tests/test_devices.py``.

For each device the file checks that

1. every function and module (masks and ``masked_softmax``, Nadaraya-Watson, the scoring
   modules, self-attention and positional encoding, multi-head, grouped-query and fast
   grouped-query attention, tiled attention and ``merge_attention``, multi-head latent
   attention, RoPE, a tiny ``LlamaModel``) computed on the device in float32 equals the
   same computation on the CPU in float64 with the same weights, to float32 round-off
   (TF32 is switched off on CUDA for the comparison), and returns tensors on the device;
2. decoding with a cache (``KVCache``, ``WindowKVCache``, ``LatentCache``) grown step by
   step on the device gives the outputs of one full causal forward on the same device,
   and the cache's tensors live on the device;
3. greedy ``generate`` (``LlamaModel``, ``TinyDecoder``, ``TinyLatentDecoder``,
   ``LatentDecoder``) returns on the device the token ids it returns on the CPU;
4. the tensors the library makes itself (masks, positions, caches) follow the inputs'
   device -- a CPU tensor mixed into a CUDA computation raises, so the checks above
   catch one -- and ``KVCache`` refuses keys from another device with the
   ``ValueError`` its docstring promises, leaving the cache as it was.
"""

import copy

import pytest
import torch

import attention_lib as al
from random_weights import big_random_weights
from tolerances import TOL


def _devices() -> list[str]:
    found = ["cpu"]
    if torch.cuda.is_available():
        found.append("cuda")
    if torch.backends.mps.is_available():
        found.append("mps")
    return found


DEVICES = _devices()
F32 = TOL[torch.float32]  # one float32 operation's round-off
MODEL = dict(atol=1e-4, rtol=1e-4)  # a few float32 layers deep
B, E, H, HKV = 2, 32, 4, 2


@pytest.fixture(autouse=True, scope="module")
def _one_cpu_thread():
    """One CPU thread for these tiny tensors (as ``make test`` runs every test),
    restored afterwards: on a busy 2-core machine a second intra-op thread only waits
    for a core, and made this file about eight times slower (4 s -> 35 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=DEVICES)
def device(request):
    """The device name; on CUDA with TF32 matmuls off (restored afterwards), so that
    float32 there means float32."""
    name = request.param
    if name != "cuda":
        yield name
        return
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield name
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _pair(module: torch.nn.Module, device: str):
    """``(float32 copy on device, float64 copy on the CPU)``, both in eval mode, with
    the weights of ``module``."""
    on_device = copy.deepcopy(module).to(device=device, dtype=torch.float32).eval()
    reference = copy.deepcopy(module).to(device="cpu", dtype=torch.float64).eval()
    return on_device, reference


def _inputs(*tensors, device):
    """Each float32 tensor moved to ``device`` and, exactly, to float64 on the CPU;
    integer and bool tensors keep their dtype, anything else is passed as is."""
    moved, ref = [], []
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            moved.append(t)
            ref.append(t)
        else:
            moved.append(t.to(device))
            ref.append(t.double() if t.is_floating_point() else t)
    return moved, ref


def _to(kwargs: dict, device: str) -> dict:
    """The keyword arguments with their tensors moved to ``device``."""
    return {k: v.to(device) if torch.is_tensor(v) else v for k, v in kwargs.items()}


def _same(out, ref, device, tol=F32):
    """``out`` lives on ``device`` (float32) and equals the float64 ``ref``."""
    assert out.device.type == device, f"expected a {device} tensor, got {out.device}"
    assert out.dtype == torch.float32, out.dtype
    torch.testing.assert_close(out.cpu().double(), ref, **tol)


# ---- 1. each function and module: float32 on the device == float64 on the CPU --------


def test_masked_softmax_and_masks(device):
    X = torch.randn(B, 3, 5)
    lens1 = torch.tensor([0, 3])  # a fully masked example: zero weights
    lens2 = torch.tensor([[1, 5, 2], [4, 0, 3]])
    keep = torch.rand(B, 3, 5) > 0.4
    cases = [
        dict(valid_lens=lens1),
        dict(valid_lens=lens2),
        dict(mask=keep),
        dict(is_causal=True),
        dict(valid_lens=lens2, mask=keep, is_causal=True),
    ]
    for kwargs in cases:
        (x, *args), (xr, *args_ref) = _inputs(X, *kwargs.values(), device=device)
        got = al.masked_softmax(x, **dict(zip(kwargs, args)))
        _same(got, al.masked_softmax(xr, **dict(zip(kwargs, args_ref))), device)
    # d2l keeps valid_lens on the CPU: they follow the scores' device
    _same(
        al.masked_softmax(X.to(device), lens1),
        al.masked_softmax(X.double(), lens1),
        device,
    )
    # the masks the library builds land on the device of their inputs
    made = {
        "causal_mask": al.causal_mask(3, 5, device=device),
        "valid_lens_to_mask": al.valid_lens_to_mask(lens2.to(device), 3, 5),
        "keep_to_additive": al.keep_to_additive(keep.to(device)),
        "sequence_mask": al.sequence_mask(X.to(device), lens1, value=-1.0),
    }
    expected = {
        "causal_mask": al.causal_mask(3, 5),
        "valid_lens_to_mask": al.valid_lens_to_mask(lens2, 3, 5),
        "keep_to_additive": al.keep_to_additive(keep),
        "sequence_mask": al.sequence_mask(X, lens1, value=-1.0),
    }
    for name, got in made.items():
        assert got.device.type == device, name
        torch.testing.assert_close(got.cpu(), expected[name], msg=name)


KERNELS = [al.gaussian, al.boxcar, al.constant, al.triangular, al.epanechnikov]


def test_nadaraya_watson(device):
    x_train = torch.rand(12) * 5
    y_train = torch.sin(x_train) + 0.1 * torch.randn(12)
    x_query = torch.linspace(0, 5, 7)
    points = torch.randn(12, 2), torch.randn(12, 3), torch.randn(7, 2)  # D=2, Dv=3
    for data in [(x_train, y_train, x_query), points]:
        dev, ref = _inputs(*data, device=device)
        for kernel in KERNELS:
            y_hat, w = al.nadaraya_watson(*dev, kernel=kernel, bandwidth=0.8)
            y_ref, w_ref = al.nadaraya_watson(*ref, kernel=kernel, bandwidth=0.8)
            _same(y_hat, y_ref, device)
            _same(w, w_ref, device)
    model, model_ref = _pair(al.NadarayaWatson(bandwidth=0.6), device)
    (x, y), (xr, yr) = _inputs(x_train, y_train, device=device)
    for leave_one_out in (False, True):  # True builds an eye mask on the device
        _same(
            model(x, y, x, leave_one_out=leave_one_out),
            model_ref(xr, yr, xr, leave_one_out=leave_one_out),
            device,
        )
        _same(model.attention_weights, model_ref.attention_weights, device)
    assert model.attention_weights.diagonal().abs().max() == 0  # leave-one-out


def test_scoring_modules(device):
    queries, keys, values = (
        torch.randn(B, 3, 6),
        torch.randn(B, 5, 6),
        torch.randn(B, 5, 4),
    )
    lens1, lens2 = torch.tensor([2, 5]), torch.tensor([[1, 5, 3], [0, 2, 4]])
    dot, dot_ref = al.DotProductAttention().eval(), al.DotProductAttention().eval()
    additive, additive_ref = _pair(al.AdditiveAttention(6, 6, 8), device)
    dev, ref = _inputs(queries, keys, values, device=device)
    cases = [{}, dict(valid_lens=lens1), dict(valid_lens=lens2)]
    cases.append(dict(valid_lens=lens1, is_causal=True))
    for kwargs in cases:
        _same(dot(*dev, **_to(kwargs, device)), dot_ref(*ref, **kwargs), device)
        _same(dot.attention_weights, dot_ref.attention_weights, device)
        if "is_causal" in kwargs:
            continue  # additive attention has no is_causal
        got = additive(*dev, **_to(kwargs, device))
        _same(got, additive_ref(*ref, **kwargs), device)
        _same(additive.attention_weights, additive_ref.attention_weights, device)


def test_self_attention_and_positional_encoding(device):
    layer, layer_ref = _pair(al.SelfAttention(8, 6, 5, bias=True), device)
    (X,), (X_ref,) = _inputs(torch.randn(B, 7, 8), device=device)
    lens = torch.tensor([5, 0])
    cases = [{}, dict(valid_lens=lens), dict(is_causal=True)]
    cases.append(dict(valid_lens=lens, is_causal=True))  # causal over padding, fused
    for need_weights in (True, False):
        for kwargs in cases:
            kw_dev = _to(kwargs, device)
            got = layer(X, need_weights=need_weights, **kw_dev)
            _same(got, layer_ref(X_ref, need_weights=need_weights, **kwargs), device)
    positions, positions_ref = _pair(al.PositionalEncoding(8, max_len=32), device)
    for offset in (0, 9):
        _same(positions(X, offset=offset), positions_ref(X_ref, offset=offset), device)


def _attention_cases(num_queries, num_keys):
    lens1 = torch.tensor([num_keys - 2, num_keys])
    lens2 = torch.randint(0, num_keys + 1, (B, num_queries))
    mask = torch.rand(B, 1, num_queries, num_keys) > 0.3
    return [
        {},
        dict(valid_lens=lens1),
        dict(valid_lens=lens2),
        dict(mask=mask),
        dict(is_causal=True),
        dict(valid_lens=lens1, is_causal=True),
    ]


@pytest.mark.parametrize(
    "make",
    [
        lambda: al.MultiHeadAttention(E, H, bias=True),
        lambda: al.GroupedQueryAttention(E, H, HKV),
        lambda: al.GroupedQueryAttention(E, H, 1),
        lambda: al.FastGroupedQueryAttention(E, H, HKV),
    ],
    ids=["mha", "gqa", "mqa", "fast-gqa"],
)
def test_multi_head_and_grouped_query_attention(device, make):
    layer, layer_ref = _pair(make(), device)
    q, kv = torch.randn(B, 5, E), torch.randn(B, 7, E)
    (q_dev, kv_dev), (q_ref, kv_ref) = _inputs(q, kv, device=device)
    for need_weights in (True, False):
        for kwargs in _attention_cases(5, 7):
            kw_dev = _to(kwargs, device)
            got = layer(q_dev, kv_dev, kv_dev, need_weights=need_weights, **kw_dev)
            ref = layer_ref(q_ref, kv_ref, kv_ref, need_weights=need_weights, **kwargs)
            _same(got, ref, device)
            if need_weights:
                _same(layer.attention_weights, layer_ref.attention_weights, device)
        # d2l keeps valid_lens on the CPU: the masks follow the inputs' device
        lens = torch.tensor([3, 0])
        got = layer(q_dev, kv_dev, kv_dev, lens, need_weights=need_weights)
        _same(got, layer_ref(q_ref, kv_ref, kv_ref, lens), device)
        (x,), (x_ref,) = _inputs(torch.randn(B, 7, E), device=device)
        got = layer(x, x, x, lens, need_weights=need_weights, is_causal=True)
        _same(got, layer_ref(x_ref, x_ref, x_ref, lens, is_causal=True), device)
    # causal self-attention, as an explicit (Q, K) mask made on the device and as
    # is_causal, on both paths
    (x,), (x_ref,) = _inputs(torch.randn(B, 6, E), device=device)
    ref = layer_ref(x_ref, x_ref, x_ref, mask=al.causal_mask(6))
    for need_weights in (True, False):
        mask = al.causal_mask(6, device=device)
        _same(layer(x, x, x, mask=mask, need_weights=need_weights), ref, device)
        got = layer(x, x, x, is_causal=True, need_weights=need_weights)
        _same(got, ref, device)


def test_tiled_and_merged_attention(device):
    q, k, v = (
        torch.randn(B, 3, 7, 8),
        torch.randn(B, 3, 10, 8),
        torch.randn(B, 3, 10, 6),
    )
    dev, ref = _inputs(q, k, v, device=device)
    for kwargs in _attention_cases(7, 10):
        for block_size in (3, 4):
            kw_dev = _to(kwargs, device)
            out, lse = al.tiled_attention(
                *dev, block_size=block_size, return_lse=True, **kw_dev
            )
            out_ref, lse_ref = al.tiled_attention(*ref, return_lse=True, **kwargs)
            _same(out, out_ref, device)
            _same(lse, lse_ref, device)
            direct, _ = al.dot_product_attention(*ref, **kwargs)
            _same(out, direct, device)
    # two key chunks merged == attention over all keys; with lengths [3, 10] the
    # first example sees no key of the second chunk (lse = -inf there)
    lens = torch.tensor([3, 10])
    parts = [
        al.tiled_attention(
            dev[0], dev[1][..., :4, :], dev[2][..., :4, :],
            valid_lens=lens.clamp(max=4).to(device), block_size=4, return_lse=True,
        ),
        al.tiled_attention(
            dev[0], dev[1][..., 4:, :], dev[2][..., 4:, :],
            valid_lens=(lens - 4).clamp(min=0).to(device), block_size=4,
            return_lse=True,
        ),
    ]  # fmt: skip
    assert torch.isinf(parts[1][1][0]).all()  # the chunk example 0 does not see
    out, lse = al.merge_attention([p[0] for p in parts], [p[1] for p in parts])
    out_ref, lse_ref = al.tiled_attention(*ref, valid_lens=lens, return_lse=True)
    _same(out, out_ref, device)
    _same(lse, lse_ref, device)


YARN = {
    "rope_type": "yarn",
    "factor": 4.0,
    "original_max_position_embeddings": 8,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}


@pytest.mark.parametrize(
    "kwargs",
    [{}, dict(q_lora_rank=12, bias=True, rope_scaling=YARN, rope_layout="half")],
    ids=["plain", "q-lora-yarn"],
)
def test_multi_head_latent_attention(device, kwargs):
    mla = al.MultiHeadLatentAttention(E, H, 8, 4, 4, 6, **kwargs)
    layer, layer_ref = _pair(mla, device)
    (X,), (X_ref,) = _inputs(torch.randn(B, 6, E), device=device)
    for need_weights in (True, False):
        for absorb in (False, True):
            for case in [
                {},
                dict(is_causal=True),
                dict(valid_lens=torch.tensor([4, 6])),
            ]:
                c_dev = _to(case, device)
                args = dict(need_weights=need_weights, absorb=absorb)
                got = layer(X, **args, **c_dev)
                _same(got, layer_ref(X_ref, **args, **case), device)


def test_rope(device):
    x = torch.randn(B, H, 6, 8)
    (x_dev,), (x_ref,) = _inputs(x, device=device)
    for scaling in [None, YARN]:
        inv_freq, factor = al.rope_frequencies(8, scaling=scaling)
        inv_ref, _ = al.rope_frequencies(8, scaling=scaling, dtype=torch.float64)
        for positions in [
            torch.arange(3, 9),
            torch.tensor([[0, 1, 2, 3, 4, 5]] * 2) + 7,
        ]:
            cos, sin = al.rope_cos_sin(
                positions.to(device), inv_freq.to(device), factor
            )
            cos_ref, sin_ref = al.rope_cos_sin(positions, inv_ref, factor)
            _same(cos, cos_ref, device)
            for layout in ("half", "interleaved"):
                got = al.apply_rope(x_dev, cos, sin, layout)
                _same(got, al.apply_rope(x_ref, cos_ref, sin_ref, layout), device)
    for layout in ("half", "interleaved"):
        rope, rope_ref = _pair(al.RotaryEmbedding(8, layout=layout), device)
        positions = torch.arange(10, 16)
        _same(rope(x_dev, positions.to(device)), rope_ref(x_ref, positions), device)


V = 61
LLAMAS = {
    "llama": {},
    "llama3-tied-mqa": dict(
        num_kv_heads=1,
        tie_embeddings=True,
        rope_theta=500000.0,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8,
        },
    ),
    "window-sinks": dict(sliding_window=4, num_sinks=1),
    "interleaved": dict(rope_layout="interleaved"),
}


def _llama(**kwargs) -> al.LlamaModel:
    config = dict(num_kv_heads=HKV) | kwargs
    return big_random_weights(
        al.LlamaModel(al.LlamaConfig(V, E, 2, H, ffn_hiddens=48, **config))
    )


def _llama_cases(names):
    """``(device, name, need_weights)`` for every device, model and path."""
    return [
        (device, name, need_weights)
        for device in DEVICES
        for name in names
        for need_weights in (False, True)
    ]


FORWARD_CASES = _llama_cases(
    ["llama", "llama3-tied-mqa", "interleaved", "window-sinks"]
)


@pytest.mark.parametrize(
    "device, name, need_weights", FORWARD_CASES, indirect=["device"]
)
def test_llama_forward(device, name, need_weights):
    model, model_ref = _pair(_llama(**LLAMAS[name]), device)
    tokens = torch.randint(0, V, (B, 11))
    with torch.no_grad():
        ref = model_ref(tokens)
        got = model(tokens.to(device), need_weights=need_weights)
        _same(got, ref, device, MODEL)
        got = model(tokens.to(device), need_weights=need_weights, last_only=True)
        _same(got, ref[:, -1:], device, MODEL)


# ---- 2. cached decoding on the device == one full causal forward ---------------------

CHUNKS = [4, 1, 1, 2, 1, 1]  # a prefill, decode steps, a chunk of two


def _chunks(x, dim=1):
    return x.split(CHUNKS, dim=dim)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize(
    "make",
    [
        lambda device: al.MultiHeadAttention(E, H).to(device),
        lambda device: al.GroupedQueryAttention(E, H, HKV).to(device),
        # convert_to_gqa packs W_k and W_v again on the device: the one-matmul step
        lambda device: al.convert_to_gqa(
            al.FastGroupedQueryAttention(E, H, HKV).to(device), HKV
        ),
    ],
    ids=["mha", "gqa", "fast-gqa"],
)
def test_kv_cache_decoding(device, make, need_weights):
    layer = make(device).eval()
    if isinstance(layer, al.FastGroupedQueryAttention) and not need_weights:
        assert layer._fused_kv() is not None  # the packed decode step runs
    x = torch.randn(B, sum(CHUNKS), E, device=device)
    cache = al.KVCache(capacity=3)  # small: the buffers grow (double) on the device
    with torch.no_grad():
        full = layer(x, x, x, is_causal=True, need_weights=need_weights)
        steps = [
            layer(c, c, c, is_causal=True, kv_cache=cache, need_weights=need_weights)
            for c in _chunks(x)
        ]
        keys = al.split_heads(layer.W_k(x), layer.num_kv_heads)
    assert cache.capacity > 3 and len(cache) == x.shape[1]
    for t in (cache.keys, cache.values, *steps):
        assert t.device.type == device
    torch.testing.assert_close(cache.keys, keys, **F32)
    torch.testing.assert_close(torch.cat(steps, 1), full, **F32)


@pytest.mark.parametrize(
    "device, name, need_weights",
    _llama_cases(["llama", "window-sinks"]),
    indirect=["device"],
)
def test_llama_cached_decoding(device, name, need_weights):
    model = _llama(**LLAMAS[name]).to(device)
    tokens = torch.randint(0, V, (B, sum(CHUNKS)), device=device)
    with torch.no_grad():
        full = model(tokens, need_weights=need_weights)
        caches = model.new_caches()
        steps = [model(c, caches, need_weights=need_weights) for c in _chunks(tokens)]
    torch.testing.assert_close(torch.cat(steps, 1), full, **MODEL)
    window = LLAMAS[name].get("sliding_window")
    kind = al.KVCache if window is None else al.WindowKVCache
    for cache in caches:
        assert isinstance(cache, kind) and len(cache) == tokens.shape[1]
        held = [cache.keys, cache.values]
        if window is not None:
            held.append(cache.positions)
            assert cache.positions.tolist() == [0, 7, 8, 9]  # the sink, W - 1 last
        assert all(t.device.type == device for t in held)


@pytest.mark.parametrize("absorb", [False, True])
def test_latent_cache_decoding(device, absorb):
    layer = al.MultiHeadLatentAttention(E, H, 8, 4, 4, 6).to(device).eval()
    x = torch.randn(B, sum(CHUNKS), E, device=device)
    cache = al.LatentCache()
    with torch.no_grad():
        full = layer(x, is_causal=True)
        steps = [
            layer(c, is_causal=True, kv_cache=cache, absorb=absorb, need_weights=False)
            for c in _chunks(x)
        ]
    assert cache.latent.device.type == device and cache.rope_keys.device.type == device
    assert cache.latent.shape == (B, x.shape[1], 8)
    torch.testing.assert_close(torch.cat(steps, 1), full, **F32)


def _decoders():
    return {
        "tiny": lambda: al.TinyDecoder(V, E, H, HKV, 2, max_len=16),
        "tiny-latent": lambda: al.TinyLatentDecoder(V, E, H, 2, 16, 8, 4, 4, 8),
        "latent": lambda: al.LatentDecoder(
            V, E, 2, 48, num_heads=H, kv_lora_rank=8, qk_nope_head_dim=4,
            qk_rope_head_dim=4, v_head_dim=8,
        ),
    }  # fmt: skip


@pytest.mark.parametrize("name", ["tiny", "tiny-latent", "latent"])
def test_decoder_cached_forward(device, name):
    model = big_random_weights(_decoders()[name]()).to(device)
    tokens = torch.randint(0, V, (B, sum(CHUNKS)), device=device)
    cache_type = al.LatentCache if name == "latent" else al.KVCache
    with torch.no_grad():
        full = model(tokens)
        _same(full, _pair(model, "cpu")[1](tokens.cpu()), device, MODEL)
        caches = [cache_type() for _ in model.blocks]
        steps = [model(c, caches) for c in _chunks(tokens)]
    torch.testing.assert_close(torch.cat(steps, 1), full, **MODEL)
    assert all(c.keys.device.type == device for c in caches)


# ---- 3. greedy generation: the same token ids on the device as on the CPU ------------

GENERATORS = {
    "llama": lambda m, p: m.generate(p, 8),
    "llama-no-cache": lambda m, p: m.generate(p, 8, use_cache=False),
    "window-sinks": lambda m, p: m.generate(p, 8),
    "tiny": lambda m, p: m.generate(p, 8),
    "tiny-no-cache": lambda m, p: m.generate(p, 8, use_cache=False),
    "tiny-latent": lambda m, p: m.generate(p, 8),
    "latent": lambda m, p: m.generate(p, 8),
    "latent-absorb": lambda m, p: m.generate(p, 8, absorb=True),
}


def _model(name):
    torch.manual_seed(1)
    base = name.removesuffix("-no-cache").removesuffix("-absorb")
    if base in LLAMAS:
        return _llama(**LLAMAS[base])
    return big_random_weights(_decoders()[base]())


GENERATE_CASES = [(device, name) for device in DEVICES for name in GENERATORS]


@pytest.mark.parametrize("device, name", GENERATE_CASES, indirect=["device"])
def test_generate_matches_cpu(device, name):
    model, model_ref = _pair(_model(name), device)
    prompt = torch.randint(0, V, (B, 4))
    got = GENERATORS[name](model, prompt.to(device))
    expected = GENERATORS[name](model_ref, prompt)
    assert got.device.type == device
    assert got.shape == (B, 12) and torch.equal(got[:, :4].cpu(), prompt)
    # the float64 logits of the generated sequence: each choice is their argmax, by a
    # margin far above float32 round-off, so the device must choose the same
    with torch.no_grad():
        logits = model_ref(expected)[:, 3:-1]  # the positions that chose a token
    top2 = logits.topk(2, dim=-1).values
    assert torch.equal(logits.argmax(-1), expected[:, 4:])
    assert (top2[..., 0] - top2[..., 1]).min() > 1e-3
    assert torch.equal(got.cpu(), expected)


# ---- 4. a cache refuses keys from another device, as documented ----------------------


@pytest.mark.parametrize("cache_type", [al.KVCache, al.LatentCache])
def test_kv_cache_refuses_another_device(device, cache_type):
    other = "meta" if device == "cpu" else "cpu"  # meta: a second device everywhere
    cache = cache_type()
    keys = torch.randn(B, HKV, 3, 4, device=device)
    cache.update(keys, keys)
    stranger = torch.zeros(B, HKV, 1, 4, device=other)
    with pytest.raises(ValueError, match=rf"on {device}.*got torch.float32 on {other}"):
        cache.update(stranger, stranger)
    assert len(cache) == 3 and cache.keys.device.type == device  # unchanged
    torch.testing.assert_close(cache.keys, keys)


# ---- linear attention (chapter 13) ------------------------------------------------------


def test_linear_attention_and_its_state(device):
    """The three forms, valid_lens, the three feature maps, the decoding state and the
    (gated) delta rule: float32 on the device == float64 on the CPU; the state's
    tensors live on the device."""
    q, k, v = torch.randn(B, 3, 9, 4), torch.randn(B, 3, 9, 4), torch.randn(B, 3, 9, 5)
    dev, ref = _inputs(q, k, v, device=device)
    features = al.RandomFeatureMap(4, 16, generator=torch.Generator().manual_seed(0))
    maps = [
        (al.elu_feature_map, al.elu_feature_map),
        (al.taylor_feature_map, al.taylor_feature_map),
        (features.to(device), copy.deepcopy(features).double()),
    ]
    lens = torch.tensor([9, 4])
    for phi_dev, phi_ref in maps:
        for form in ("quadratic", "recurrent", "chunked"):
            out = al.linear_attention(
                *dev, phi_dev, form=form, chunk_size=4, valid_lens=lens.to(device)
            )
            expected = al.linear_attention(*ref, phi_ref, valid_lens=lens)
            _same(out, expected, device, MODEL)
    state = al.LinearAttentionState()
    steps = [state.step(*(t[..., :5, :] for t in dev))]
    steps += [state.step(*(t[..., i : i + 1, :] for t in dev)) for i in range(5, 9)]
    assert state.S.device.type == device and state.z.device.type == device
    _same(torch.cat(steps, -2), al.linear_attention(*ref), device, MODEL)
    unit_k = [torch.nn.functional.normalize(t, dim=-1) for t in (dev[1], ref[1])]
    out, S = al.delta_rule(dev[0], unit_k[0], dev[2], 0.6, decay=0.9)
    out_ref, S_ref = al.delta_rule(ref[0], unit_k[1], ref[2], 0.6, decay=0.9)
    _same(out, out_ref, device, MODEL)
    _same(S, S_ref, device, MODEL)
