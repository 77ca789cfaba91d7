"""attention_lib: the small, tested attention library of the course
"Attention, from kernel regression to grouped-query attention".

Everything is importable from the package top level. Shapes follow one legend (``B``
batch, ``Q`` queries, ``K`` keys/values, ``D`` query/key width, ``Dv`` value width,
``H`` query heads, ``Hkv`` key/value heads, ``E`` model width, ``d = E / H`` head
width); boolean masks mean True = keep, as in
``torch.nn.functional.scaled_dot_product_attention``.
"""

from . import exercises  # al.exercises.check: the self-checking exercises
from .cache import KVCache
from .decoder import DecoderBlock, TinyDecoder
from .explorer import HeadExplorer, explore_heads
from .gguf_loader import GGUFFile, smollm2_path
from .kernels import (
    NadarayaWatson,
    boxcar,
    constant,
    epanechnikov,
    gaussian,
    nadaraya_watson,
    triangular,
)
from .linear import (
    LinearAttentionState,
    RandomFeatureMap,
    delta_rule,
    elu_feature_map,
    linear_attention,
    linear_state_bytes,
    taylor_feature_map,
)
from .llama import (
    LlamaBlock,
    LlamaConfig,
    LlamaModel,
    RMSNorm,
    RotaryAttention,
    SwiGLU,
    WindowKVCache,
    visible_keys,
)
from .masking import (
    causal_mask,
    keep_to_additive,
    keep_to_blocked,
    masked_softmax,
    sequence_mask,
    valid_lens_to_mask,
)
from .fast_decode import FastGroupedQueryAttention
from .multihead import (
    GroupedQueryAttention,
    MultiHeadAttention,
    convert_to_gqa,
    kv_cache_bytes,
    merge_heads,
    repeat_kv,
    split_heads,
)
from .latent import (
    LatentCache,
    LatentDecoder,
    MultiHeadLatentAttention,
    TinyLatentDecoder,
    from_hf_deepseek,
    mla_cache_bytes,
)
from .plotting import (
    heatmap,
    plot,
    plot_language,
    sharp_figures,
    sharp_png,
    show_heatmaps,
    subplots,
    untranslated_plot_strings,
)
from .profiling import TensorRecorder, cpu_clock, peak_memory_bytes, time_ms
from .rotary import (
    RotaryEmbedding,
    apply_rope,
    rope_cos_sin,
    rope_frequencies,
    rope_layout_permutation,
    yarn_mscale,
)
from .scoring import (
    AdditiveAttention,
    DotProductAttention,
    additive_attention,
    dot_product_attention,
)
from .self_attention import PositionalEncoding, SelfAttention
from .tasks import MQAR_IGNORE, mqar_batch, mqar_vocab_size
from .tiled import merge_attention, tiled_attention

__version__ = "0.2.0"

__all__ = [
    # masking
    "sequence_mask",
    "valid_lens_to_mask",
    "masked_softmax",
    "causal_mask",
    "keep_to_blocked",
    "keep_to_additive",
    # kernel regression
    "gaussian",
    "boxcar",
    "constant",
    "triangular",
    "epanechnikov",
    "nadaraya_watson",
    "NadarayaWatson",
    # scoring
    "dot_product_attention",
    "additive_attention",
    "DotProductAttention",
    "AdditiveAttention",
    # self-attention
    "SelfAttention",
    "PositionalEncoding",
    # multi-head and grouped-query
    "split_heads",
    "merge_heads",
    "repeat_kv",
    "kv_cache_bytes",
    "MultiHeadAttention",
    "GroupedQueryAttention",
    "FastGroupedQueryAttention",
    "KVCache",
    "convert_to_gqa",
    # a tiny decoder-only model (chapter 9)
    "DecoderBlock",
    "TinyDecoder",
    # plotting
    "show_heatmaps",
    "plot",
    "subplots",
    "heatmap",
    "sharp_png",
    "sharp_figures",
    "plot_language",
    "untranslated_plot_strings",
    # measuring
    "time_ms",
    "cpu_clock",
    "peak_memory_bytes",
    "TensorRecorder",
    # attention by tiles (chapter 10)
    "tiled_attention",
    "merge_attention",
    # rotary positions (chapter 11)
    "rope_frequencies",
    "rope_cos_sin",
    "apply_rope",
    "rope_layout_permutation",
    "yarn_mscale",
    "RotaryEmbedding",
    # every head of a model, interactive (chapter 11)
    "explore_heads",
    "HeadExplorer",
    # multi-head latent attention (chapter 12)
    "mla_cache_bytes",
    "LatentCache",
    "MultiHeadLatentAttention",
    "LatentDecoder",
    "TinyLatentDecoder",
    "from_hf_deepseek",
    # linear attention and the delta rule (chapter 13)
    "elu_feature_map",
    "taylor_feature_map",
    "RandomFeatureMap",
    "linear_attention",
    "LinearAttentionState",
    "delta_rule",
    "linear_state_bytes",
    # toy tasks (chapters 9 and 12); al.MQAR_IGNORE, the ignored target, is a constant
    "mqar_vocab_size",
    "mqar_batch",
]
