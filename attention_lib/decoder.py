"""A tiny decoder-only language model made of the library's parts (chapter 9).

Shape legend: ``B`` batch, ``n`` tokens in this call, ``T`` tokens in the KV cache
(earlier ones included), ``E`` model width (``num_hiddens``), ``H`` query heads, ``Hkv``
key/value heads, ``d = E / H`` head width, ``V`` vocabulary size.

The model is the usual pre-norm stack (as in GPT-2 and Llama, without their
refinements)::

    tokens (B, n) -> embedding + sinusoidal positions (B, n, E)
                  -> num_layers x [ X' = X + GQA(LayerNorm(X)), causal, with a KV cache
                                    X' + MLP(LayerNorm(X')) ] (B, n, E)
                  -> LayerNorm -> Linear -> logits (B, n, V)

Not a framework: a hundred lines to train on a toy task, to look inside, and to decode
with a KV cache.
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_size
from .cache import KVCache
from .multihead import GroupedQueryAttention
from .self_attention import PositionalEncoding

__all__ = ["DecoderBlock", "TinyDecoder"]


class DecoderBlock(nn.Module):
    """One pre-norm block: ``X' = X + GQA(LN1(X))`` (causal), then
    ``X' + MLP(LN2(X'))``; ``(B, n, E) -> (B, n, E)``.

    The MLP is ``Linear(E, mlp_ratio * E) -> GELU -> Linear(mlp_ratio * E, E)``.
    ``dropout`` acts, while training, on the attention weights and on both branches'
    outputs before they are added to the residual stream (as in GPT-2).
    ``kv_cache`` (an :class:`~attention_lib.KVCache`) holds this block's keys and values
    ``(B, Hkv, T, d)`` from earlier calls. ``need_weights=False`` (the default for a
    block and a model, so that training keeps no ``(B, H, n, n)`` weights) runs
    attention's fused path; ``need_weights=True`` runs the readable path, which keeps
    ``attention.attention_weights`` ``(B, H, n, T)`` for inspection.
    """

    def __init__(
        self,
        num_hiddens: int,
        num_heads: int,
        num_kv_heads: int,
        mlp_ratio: int = 4,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.norm1 = nn.LayerNorm(num_hiddens)
        self.attention = GroupedQueryAttention(
            num_hiddens, num_heads, num_kv_heads, dropout=dropout
        )
        self.attention_dropout = nn.Dropout(dropout)  # on the branch, as GPT-2
        self.norm2 = nn.LayerNorm(num_hiddens)
        self.mlp = nn.Sequential(
            nn.Linear(num_hiddens, mlp_ratio * num_hiddens),
            nn.GELU(),
            nn.Linear(mlp_ratio * num_hiddens, num_hiddens),
            nn.Dropout(dropout),
        )

    def forward(self, X, kv_cache: KVCache | None = None, need_weights: bool = False):
        Y = self.norm1(X)  # (B, n, E)
        Y = self.attention(
            Y, Y, Y, is_causal=True, kv_cache=kv_cache, need_weights=need_weights
        )
        X = X + self.attention_dropout(Y)  # (B, n, E)
        return X + self.mlp(self.norm2(X))  # (B, n, E)


class TinyDecoder(nn.Module):
    """A decoder-only Transformer: embedding + positions, ``num_layers``
    :class:`DecoderBlock`, a linear head.

    Args:
        vocab_size: ``V``, token ids are ``0 .. V-1``.
        num_hiddens: ``E``.
        num_heads: ``H`` query heads; must divide ``E``.
        num_kv_heads: ``Hkv`` key/value heads; must divide ``H`` (``H``: MHA, ``1``:
            MQA).
        num_layers: number of blocks.
        max_len: the longest sequence (prompt + generated tokens) the model accepts.
        mlp_ratio: width of the MLP's hidden layer, in multiples of ``E``.
        dropout: on attention weights and on the attention and MLP outputs while
            training.

    Positions are the library's fixed sinusoidal
    :class:`~attention_lib.PositionalEncoding`: nothing to learn, and a token decoded
    with a cache of ``T`` tokens simply gets position ``T`` (``offset=T``).

    ``forward(tokens (B, n), kv_caches=None, need_weights=False)`` -> logits ``(B, n,
    V)``. With ``kv_caches`` (one :class:`~attention_lib.KVCache` per block) the tokens
    continue the cached sequence: their positions start at ``len(kv_caches[0])`` and
    their keys/values are appended. By default the blocks run attention's fused path
    and keep no weights, so a training loop's ``model(tokens)`` does not store a
    ``(B, H, n, n)`` tensor per block every step; pass ``need_weights=True`` to inspect:
    every block then keeps its weights (the attribute :attr:`attention_weights`).
    :meth:`generate` runs the fused path.
    """

    def __init__(
        self,
        vocab_size: int,
        num_hiddens: int,
        num_heads: int,
        num_kv_heads: int,
        num_layers: int,
        max_len: int,
        mlp_ratio: int = 4,
        dropout: float = 0.0,
    ):
        super().__init__()
        check_size(
            "TinyDecoder",
            vocab_size=vocab_size,
            num_hiddens=num_hiddens,
            num_heads=num_heads,
            num_kv_heads=num_kv_heads,
            num_layers=num_layers,
            max_len=max_len,
            mlp_ratio=mlp_ratio,
        )
        self.vocab_size, self.num_layers, self.max_len = vocab_size, num_layers, max_len
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout, max_len)
        self.blocks = nn.ModuleList(
            DecoderBlock(num_hiddens, num_heads, num_kv_heads, mlp_ratio, dropout)
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(num_hiddens)
        self.head = nn.Linear(num_hiddens, vocab_size)

    def _check_tokens(
        self, tokens, name: str = "tokens", offset: int = 0, ids: bool = True
    ) -> None:
        """Raise ``ValueError`` for tokens that are not a non-empty ``(B, n)`` integer
        tensor fitting ``max_len`` after ``offset`` cached positions; with ``ids``
        also for ids outside ``0 .. V-1`` (``min``/``max`` wait for the values: on a
        GPU a host sync, so :meth:`generate` checks its prompt once and not the
        tokens it produces itself)."""
        if not isinstance(tokens, torch.Tensor):
            raise ValueError(
                f"{name}: expected an integer tensor of shape (B, n), got "
                f"{type(tokens).__name__}"
            )
        if tokens.dim() != 2 or tokens.dtype not in (torch.int64, torch.int32):
            raise ValueError(
                f"{name}: expected an integer tensor of shape (B, n), got a "
                f"{tokens.dtype} tensor of shape {tuple(tokens.shape)}"
            )
        if tokens.shape[1] == 0:
            raise ValueError(
                f"{name}: expected at least one token, got shape {tuple(tokens.shape)}"
            )
        if (
            ids
            and tokens.numel()
            and (tokens.min() < 0 or tokens.max() >= self.vocab_size)
        ):
            raise ValueError(
                f"{name}: expected token ids in 0..{self.vocab_size - 1}, got ids in "
                f"{int(tokens.min())}..{int(tokens.max())}"
            )
        if offset + tokens.shape[1] > self.max_len:
            raise ValueError(
                f"{name}: expected at most max_len={self.max_len} positions, got "
                f"{offset} cached + {tokens.shape[1]} new = {offset + tokens.shape[1]}"
            )

    def forward(
        self, tokens, kv_caches: list[KVCache] | None = None, need_weights: bool = False
    ):
        """``tokens (B, n)`` -> logits ``(B, n, V)``; with ``kv_caches`` the tokens
        continue the cached sequence."""
        offset = 0
        if kv_caches is not None:
            if len(kv_caches) != self.num_layers:
                raise ValueError(
                    f"kv_caches: expected one KVCache per block ({self.num_layers}), "
                    f"got {len(kv_caches)}"
                )
            offset = len(kv_caches[0])
        self._check_tokens(tokens, offset=offset)
        return self._logits(tokens, kv_caches, need_weights, offset)

    def _logits(self, tokens, kv_caches, need_weights: bool, offset: int):
        """The forward pass on checked tokens (``generate``'s steps skip the checks)."""
        # (B, n) -> (B, n, E)
        X = self.pos_encoding(self.embedding(tokens), offset=offset)
        for i, block in enumerate(self.blocks):
            cache = None if kv_caches is None else kv_caches[i]
            X = block(X, cache, need_weights)  # (B, n, E)
        return self.head(self.norm(X))  # (B, n, E) -> (B, n, V)

    @property
    def attention_weights(self) -> list[torch.Tensor | None]:
        """Each block's attention weights ``(B, H, n, T)`` from the last forward with
        ``need_weights=True`` (the readable path); ``None`` for a block whose last
        forward was fused (the default). An attribute, like
        ``GroupedQueryAttention.attention_weights``: ``model.attention_weights[0]``."""
        return [block.attention.attention_weights for block in self.blocks]

    @torch.no_grad()
    def generate(self, prompt, max_new_tokens: int, use_cache: bool = True):
        """Greedy decoding: ``prompt (B, n0)`` -> ``(B, n0 + max_new_tokens)``, the
        prompt then the new tokens.

        With ``use_cache`` the prompt runs once (the prefill) and each step feeds only
        the newest token, its keys and values appended to one
        :class:`~attention_lib.KVCache` per block; without, every step reruns the whole
        sequence so far. Both give the same tokens. Every step runs the fused path
        (``need_weights=False``), and the token ids are checked once, in the prompt.
        Call ``.eval()`` first if the model has dropout.
        """
        if (
            isinstance(max_new_tokens, bool)
            or not isinstance(max_new_tokens, int)
            or max_new_tokens < 0
        ):
            raise ValueError(
                "max_new_tokens: expected a non-negative integer, got "
                f"{max_new_tokens!r}"
            )
        self._check_tokens(prompt, "prompt")
        if prompt.shape[1] + max_new_tokens > self.max_len:
            raise ValueError(
                f"prompt + max_new_tokens: expected at most max_len={self.max_len} "
                f"tokens, got {prompt.shape[1]} + {max_new_tokens} = "
                f"{prompt.shape[1] + max_new_tokens}"
            )
        caches = [KVCache() for _ in self.blocks] if use_cache else None
        # (B, n0): all tokens so far, and those the model has not seen yet
        tokens, new = prompt, prompt
        offset = 0
        for _ in range(max_new_tokens):
            # The prompt was checked above; the new tokens are argmax ids (in range)
            # and the length fits max_len, so the steps skip the checks. The fused
            # path: generating needs no weights.
            step = new if use_cache else tokens
            logits = self._logits(step, caches, False, offset)  # (B, n, V)
            if use_cache:
                offset += step.shape[1]
            next_token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
            tokens = torch.cat([tokens, next_token], dim=1)  # (B, n + 1)
            new = next_token
        return tokens
