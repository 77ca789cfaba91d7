"""Rotary position embedding (RoPE): queries and keys rotated by their absolute
position.

Shape legend: ``B`` batch, ``H`` heads (``H`` for queries, ``Hkv`` for keys), ``T``
positions (queries ``Q`` or keys ``K``), ``d`` head width (even), ``d/2`` rotation
pairs.

RoPE (Su et al. 2021, https://arxiv.org/abs/2104.09864) splits a head's ``d`` features
into ``d/2`` pairs and turns pair ``i`` of the vector at position ``m`` by the angle
``m * inv_freq[i]``, with ``inv_freq[i] = theta ** (-2i/d)``. A rotated query at ``m``
and a rotated key at ``n`` then have a dot product that depends on ``m - n`` only.

Which features form a pair is a layout, and two are in use:

* ``"half"`` (rotate-half, transformers): pair ``i`` is ``(x[i], x[i + d/2])``;
* ``"interleaved"`` (Meta's original Llama code, GGUF / llama.cpp, DeepSeek):
  pair ``i`` is ``(x[2i], x[2i + 1])``.

They are one model up to a fixed permutation of the rows of ``W_q`` and ``W_k``
(:func:`rope_layout_permutation`): a GGUF file stores its q/k rows permuted so that
llama.cpp can rotate neighbours.

Frequencies: the plain ``theta`` rule, the Llama-3.1 scaling (``{"rope_type":
"llama3", ...}``) and YaRN (``{"rope_type": "yarn", ...}``), each computed as
transformers 5.23 does (in float32 by default) so that logits can be compared bit for
bit.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from ._checks import shape_or_type

__all__ = [
    "rope_frequencies",
    "rope_cos_sin",
    "apply_rope",
    "rope_layout_permutation",
    "yarn_mscale",
    "RotaryEmbedding",
]

LAYOUTS = ("half", "interleaved")


def _check_dim(dim) -> None:
    if (
        isinstance(dim, bool)
        or not isinstance(dim, numbers.Integral)
        or dim <= 0
        or dim % 2
    ):
        raise ValueError(
            f"expected the rotary width dim to be a positive even integer, got {dim!r}"
        )


def _check_layout(layout) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"expected layout 'half' or 'interleaved', got {layout!r}")


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature: ``0.1 * mscale * ln(factor) + 1`` for
    ``factor > 1``,
    else 1 (transformers' ``get_mscale``; DeepSeek multiplies its softmax scale by the
    square of ``yarn_mscale(factor, mscale_all_dim)``)."""
    if factor <= 1:
        return 1.0
    return 0.1 * mscale * math.log(factor) + 1.0


def _require(scaling: dict, key: str):
    if key not in scaling:
        raise ValueError(
            f"rope scaling {scaling.get('rope_type')!r}: expected the key {key!r}, "
            "got keys "
            f"{sorted(scaling)}"
        )
    return scaling[key]


def rope_frequencies(
    dim: int,
    theta: float = 10000.0,
    scaling: dict | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, float]:
    """The ``d/2`` angular frequencies of RoPE and the factor cos/sin are scaled by.

    Args:
        dim: rotary width ``d`` (even): the head width, or the rotary part of it.
        theta: the base; ``inv_freq[i] = theta ** (-2i / d)`` (10000 in the paper,
            500000 in Llama 3, 100000 in SmolLM2).
        scaling: ``None`` or ``{"rope_type": "default"}`` for the plain rule;
            ``{"rope_type": "llama3", "factor", "low_freq_factor", "high_freq_factor",
            "original_max_position_embeddings"}`` for Llama 3.1's rule (long
            wavelengths divided by ``factor``, short ones kept, a smooth ramp between);
            ``{"rope_type": "yarn", "factor", "original_max_position_embeddings"}``
            with optional ``beta_fast`` (32), ``beta_slow`` (1), ``mscale``,
            ``mscale_all_dim``, ``attention_factor``, ``truncate`` (True).
        dtype: the dtype the frequencies are computed in; float32 is what transformers
            does whatever the model's dtype.

    Returns:
        ``(inv_freq, attention_factor)``: ``inv_freq`` of shape ``(d/2,)``, and the
        float cos and sin are multiplied by (1 except for YaRN).
    """
    _check_dim(dim)
    if not isinstance(theta, numbers.Real) or isinstance(theta, bool) or theta <= 1:
        raise ValueError(f"expected theta to be a number > 1, got {theta!r}")
    rope_type = "default" if scaling is None else scaling.get("rope_type", "default")
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).to(dtype) / dim  # (d/2,)
    inv_freq = 1.0 / (theta**exponents)  # (d/2,)
    if rope_type == "default":
        return inv_freq, 1.0
    if rope_type == "llama3":
        factor = float(_require(scaling, "factor"))
        low = float(_require(scaling, "low_freq_factor"))
        high = float(_require(scaling, "high_freq_factor"))
        old_len = float(_require(scaling, "original_max_position_embeddings"))
        if factor < 1 or high <= low:
            raise ValueError(
                "llama3 scaling: expected factor >= 1 and high_freq_factor > "
                f"low_freq_factor, got factor={factor}, low={low}, high={high}"
            )
        low_wavelen, high_wavelen = old_len / low, old_len / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, scaled), 1.0
    if rope_type == "yarn":
        factor = float(_require(scaling, "factor"))
        old_len = float(_require(scaling, "original_max_position_embeddings"))
        if factor < 1:
            raise ValueError(f"yarn scaling: expected factor >= 1, got {factor}")
        attention_factor = scaling.get("attention_factor")
        mscale, mscale_all = scaling.get("mscale"), scaling.get("mscale_all_dim")
        if attention_factor is None:
            if mscale and mscale_all:
                attention_factor = yarn_mscale(factor, mscale) / yarn_mscale(
                    factor, mscale_all
                )
            else:
                attention_factor = yarn_mscale(factor)
        beta_fast = scaling.get("beta_fast") or 32
        beta_slow = scaling.get("beta_slow") or 1

        def correction_dim(rotations):
            return (dim * math.log(old_len / (rotations * 2 * math.pi))) / (
                2 * math.log(theta)
            )

        lo, hi = correction_dim(beta_fast), correction_dim(beta_slow)
        if scaling.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, dim - 1)
        if lo == hi:
            hi += 0.001
        ramp = ((torch.arange(dim // 2, dtype=torch.float32) - lo) / (hi - lo)).clamp(
            0, 1
        )
        extrapolation = 1 - ramp.to(dtype)  # 1: keep the frequency, 0: divide it
        pos_freqs = theta**exponents
        inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (
            1.0 / pos_freqs
        ) * extrapolation
        return inv_freq, float(attention_factor)
    raise ValueError(
        f"expected rope_type 'default', 'llama3' or 'yarn', got {rope_type!r}"
    )


def rope_cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    attention_factor: float = 1.0,
    dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the angles ``positions * inv_freq``, one row per position.

    The angles are computed in ``inv_freq``'s dtype (float32 as transformers does), then
    cast to ``dtype`` (the model's; default: ``inv_freq``'s).

    Args:
        positions: integer tensor ``(T,)`` or ``(B, T)`` of absolute positions.
        inv_freq: ``(d/2,)`` from :func:`rope_frequencies`.
        attention_factor: multiplies cos and sin (YaRN).

    Returns:
        ``(cos, sin)``, each ``(T, d/2)`` or ``(B, T, d/2)``.
    """
    if not isinstance(positions, torch.Tensor) or positions.dim() not in (1, 2):
        shape = shape_or_type(positions)
        raise ValueError(
            f"positions: expected an integer tensor (T,) or (B, T), got {shape}"
        )
    if positions.is_floating_point() or positions.is_complex():
        raise ValueError(
            f"positions: expected an integer tensor, got dtype {positions.dtype}"
        )
    if not isinstance(inv_freq, torch.Tensor) or inv_freq.dim() != 1:
        raise ValueError("inv_freq: expected a 1-D tensor (d/2,)")
    angles = positions.to(inv_freq.dtype)[..., None] * inv_freq  # (..., T, d/2)
    cos, sin = angles.cos() * attention_factor, angles.sin() * attention_factor
    dtype = dtype or inv_freq.dtype
    return cos.to(dtype), sin.to(dtype)


def apply_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str = "half"
) -> torch.Tensor:
    """Rotate each pair of features of ``x`` by its angle (a new tensor; ``x`` is kept).

    Pair ``i`` with features ``(a, b)`` becomes
    ``(a cos_i - b sin_i, b cos_i + a sin_i)``
    -- the complex product ``(a + ib) e^{i angle_i}``.

    Args:
        x: ``(B, H, T, d)`` queries or keys of ``H`` heads at ``T`` positions.
        cos, sin: ``(T, d/2)`` from :func:`rope_cos_sin` (every row of the batch at
            the same positions) or ``(B, T, d/2)`` (positions per row, e.g. a
            left-padded batch), with ``x``'s ``B``; another shape raises
            ``ValueError``.
        layout: ``"half"`` (pair ``i`` = ``x[i], x[i + d/2]``, transformers'
            ``q * cos + rotate_half(q) * sin``, bit for bit) or ``"interleaved"``
            (pair ``i`` = ``x[2i], x[2i + 1]``, GGUF / llama.cpp).

    Returns:
        ``(B, H, T, d)``, the rotated ``x``.
    """
    _check_layout(layout)
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        shape = shape_or_type(x)
        raise ValueError(f"x: expected a 4-D tensor (B, H, T, d), got {shape}")
    B, H, T, d = x.shape
    if cos.shape != sin.shape:
        raise ValueError(
            f"cos and sin must have the same shape, got {tuple(cos.shape)} and "
            f"{tuple(sin.shape)}"
        )
    if cos.shape[-1] * 2 != d or cos.shape[-2] != T or cos.dim() not in (2, 3):
        raise ValueError(
            f"cos/sin: expected shape (T, d/2) = ({T}, {d // 2}) or (B, T, d/2) for x "
            "of "
            f"shape {tuple(x.shape)}, got {tuple(cos.shape)}"
        )
    if cos.dim() == 3:
        if cos.shape[0] != B:
            raise ValueError(
                f"cos/sin: expected shape (B, T, d/2) with B={B} for x of shape "
                f"{tuple(x.shape)}, got {tuple(cos.shape)}"
            )
        cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, d/2): shared by the heads
    if layout == "half":
        cos2, sin2 = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)  # (.., T, d)
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]
        return x * cos2 + torch.cat((-x2, x1), -1) * sin2  # (B, H, T, d)
    a, b = x[..., 0::2], x[..., 1::2]  # (B, H, T, d/2) each
    out = torch.stack((a * cos - b * sin, b * cos + a * sin), -1)  # (B, H, T, d/2, 2)
    return out.flatten(-2)  # (B, H, T, d), pairs back next to each other


def rope_layout_permutation(d: int) -> torch.Tensor:
    """Indices ``p`` (``(d,)``) with ``x_interleaved = x_half[..., p]``.

    ``p = [0, d/2, 1, d/2 + 1, ...]``: rotate-half pair ``(i, i + d/2)`` moves to
    ``(2i, 2i + 1)``. Permuting the rows of each head of ``W_q`` and ``W_k`` this way
    (``W[p]``) turns a rotate-half model into the same model in the interleaved layout
    -- what llama.cpp's converter does when it writes a GGUF file;
    ``torch.argsort(p)`` goes back.
    """
    _check_dim(d)
    return torch.arange(d).reshape(2, d // 2).T.reshape(d)  # (d,)


class RotaryEmbedding(nn.Module):
    """RoPE for one model: the frequencies as a buffer, and ``forward(x, positions)``.

    Args:
        dim: rotary width ``d`` (even).
        theta, scaling: as in :func:`rope_frequencies`.
        layout: ``"half"`` or ``"interleaved"`` (see :func:`apply_rope`).
        compute_dtype: dtype of the frequencies and angles (float32 as transformers).
    """

    def __init__(
        self,
        dim: int,
        theta: float = 10000.0,
        scaling: dict | None = None,
        layout: str = "half",
        compute_dtype: torch.dtype = torch.float32,
    ):
        super().__init__()
        _check_layout(layout)
        inv_freq, factor = rope_frequencies(dim, theta, scaling, compute_dtype)
        self.dim, self.theta, self.scaling, self.layout = dim, theta, scaling, layout
        self.attention_factor, self.compute_dtype = factor, compute_dtype
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (d/2,)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, theta={self.theta}, layout={self.layout!r}"

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype | None = None):
        """``(cos, sin)`` of shape ``(T, d/2)`` or ``(B, T, d/2)``, computed in
        ``compute_dtype`` (even after ``.to(float64)`` moved the buffer, as
        transformers does) and cast to ``dtype``."""
        inv_freq = self.inv_freq.to(self.compute_dtype)
        return rope_cos_sin(positions, inv_freq, self.attention_factor, dtype)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``x`` ``(B, H, T, d)`` rotated to ``positions`` ``(T,)`` or ``(B, T)``."""
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[-1] != self.dim:
            shape = shape_or_type(x)
            raise ValueError(f"x: expected (B, H, T, d) with d={self.dim}, got {shape}")
        cos, sin = self.cos_sin(positions, x.dtype)
        return apply_rope(x, cos, sin, self.layout)
