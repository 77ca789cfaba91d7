"""Linear attention: softmax's exponential kernel replaced by a feature map.

Softmax attention weighs value ``j`` for query ``t`` by ``exp(q_t . k_j / sqrt(D))``,
normalised: Nadaraya-Watson with an exponential kernel (chapter 2). Replace the kernel
by a dot product of features, ``phi(q_t) . phi(k_j)``, and the sum over keys can be
regrouped (associativity)::

    out_t = sum_{j<=t} (phi(q_t) . phi(k_j)) v_j / sum_{j<=t} phi(q_t) . phi(k_j)
          = S_t phi(q_t) / (z_t . phi(q_t)),
    S_t = S_{t-1} + v_t phi(k_t)^T    (Dv, F)   z_t = z_{t-1} + phi(k_t)    (F,)

so a causal layer keeps a fixed-size state ``(S, z)`` instead of a KV cache that grows
with every token (Katharopoulos et al., 2020). :func:`linear_attention` computes it
in three equal forms (a masked ``(T, T)`` matrix, the recurrence, and chunks);
:class:`LinearAttentionState` decodes one token at a time, with the additive update
above or the delta rule ``S <- S + beta (v - S phi(k)) phi(k)^T`` (Schlag et al.,
2021; DeltaNet), and an optional decay gate (Gated DeltaNet, Yang et al., 2025).
:func:`delta_rule` runs the delta rule over a sequence, token by token or chunk by
chunk (the WY form of Yang et al., 2024, which is how DeltaNet trains).

Shapes: ``...`` are any leading (batch, head) dimensions, usually ``(B, H)``; ``T``
positions; ``D`` query/key width; ``F`` feature width (after the feature map); ``Dv``
value width. The state is stored as ``S`` of shape ``(..., Dv, F)``, so that the
read-out is the matrix-vector product ``S phi(q)`` of the formulas above.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import check_count, check_size, shape_or_type
from .masking import _check_valid_lens

FORMS = ("quadratic", "recurrent", "chunked")
RULES = ("additive", "delta")


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """``elu(x) + 1``, elementwise: ``(..., D) -> (..., D)``, every feature > 0
    (Katharopoulos et al., 2020), so the normaliser ``sum_j phi(q) . phi(k_j)`` is
    positive.

    Computed as ``exp(x)`` for ``x <= 0`` and ``x + 1`` above: ``elu(x) + 1`` itself
    rounds to exactly 0 once ``exp(x)`` is below half the spacing of the numbers at 1
    (``x`` below about -6.2 in bfloat16, -8.3 in float16, -17 in float32), and a query
    made of such features reads nothing. Where even ``exp(x)`` underflows, the feature
    is the dtype's smallest normal number (``torch.finfo(dtype).tiny``), so that every
    feature is > 0 in every dtype."""
    _check_features_input("elu_feature_map", x)
    # exp of min(x, 0): the branch not taken must not overflow, or its gradient is NaN
    features = torch.where(x > 0, x + 1, torch.exp(x.clamp(max=0)))
    return features.clamp(min=torch.finfo(x.dtype).tiny)


def taylor_feature_map(x: torch.Tensor) -> torch.Tensor:
    """Based's second-order Taylor features (Arora et al., 2024): ``(..., D) -> (...,
    1 + D + D*D)``, ``[1, x', vec(x' x'^T) / sqrt(2)]`` with ``x' = x / D**0.25``, so
    that ``phi(q) . phi(k) = 1 + s + s**2 / 2`` with ``s = q . k / sqrt(D)``: the first
    three terms of ``exp(s)``'s series, positive for every ``s`` (at least 1/2)."""
    _check_features_input("taylor_feature_map", x)
    xs = x / x.shape[-1] ** 0.25  # (..., D)
    outer = (xs.unsqueeze(-1) * xs.unsqueeze(-2)).flatten(-2) / math.sqrt(
        2
    )  # (..., D*D)
    return torch.cat([torch.ones_like(xs[..., :1]), xs, outer], dim=-1)  # (..., F)


class RandomFeatureMap(nn.Module):
    """Performer's positive random features, FAVOR+ (Choromanski et al., 2021).

    ``phi(x) = exp(W x - |x|**2 / 2) / sqrt(m)`` with ``m`` rows of ``W`` drawn from
    ``N(0, I)``: ``(..., D) -> (..., m)``. For every ``q`` and ``k``, ``E_W[phi(q) .
    phi(k)] = exp(q . k)`` -- unbiased, with every feature positive. The kernel is
    unscaled: to estimate softmax attention's ``exp(q . k / sqrt(D))``, feed ``q /
    D**0.25`` and ``k / D**0.25``.

    Args:
        dim: ``D``, the width of the inputs.
        num_features: ``m``.
        orthogonal: draw the rows in blocks of ``D`` mutually orthogonal directions
            (each block from the QR decomposition of a Gaussian matrix, with the signs
            fixed so that the directions are uniform on the sphere), with norms drawn
            like a Gaussian row's (chi with ``D`` degrees of freedom), so that each row
            is marginally ``N(0, I)``: still unbiased, lower variance (Performer's
            orthogonal random features).
        generator: the ``torch.Generator`` the draws come from (the global one if
            None).
        dtype: the dtype of the stored ``omega``; inputs of another dtype use a cast
            copy.

    The rows are the buffer ``omega`` of shape ``(m, D)``.
    """

    def __init__(
        self,
        dim: int,
        num_features: int,
        *,
        orthogonal: bool = False,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
    ):
        super().__init__()
        check_size("RandomFeatureMap", dim=dim, num_features=num_features)
        self.dim, self.num_features, self.orthogonal = dim, num_features, orthogonal
        draw = {"generator": generator, "dtype": torch.float64}
        if orthogonal:
            num_blocks = -(-num_features // dim)
            gaussian = torch.randn(num_blocks, dim, dim, **draw)  # (blocks, D, D)
            q, r = torch.linalg.qr(gaussian)  # q: (blocks, D, D), orthonormal columns
            # LAPACK's QR leaves column i of q with a negative coordinate i; flipping
            # the columns by the signs of r's diagonal makes q uniform (Haar)
            signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))  # (blocks, D)
            q = q * signs.unsqueeze(-2)  # (blocks, D, D)
            # rows: D orthonormal directions per block
            directions = q.transpose(-1, -2).reshape(-1, dim)[:num_features]  # (m, D)
            norms = torch.randn(num_features, dim, **draw).norm(dim=1)  # (m,)
            omega = norms[:, None] * directions
        else:
            omega = torch.randn(num_features, dim, **draw)  # (m, D)
        self.register_buffer("omega", omega.to(dtype))

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, num_features={self.num_features}, "
            f"orthogonal={self.orthogonal}"
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_features_input("RandomFeatureMap", x)
        if x.shape[-1] != self.dim:
            raise ValueError(
                f"RandomFeatureMap: expected inputs of width D={self.dim}, got last "
                f"dimension {x.shape[-1]} (shape {tuple(x.shape)})"
            )
        omega = self.omega.to(dtype=x.dtype, device=x.device)
        projections = x @ omega.T  # (..., m)
        half_norms = (x * x).sum(-1, keepdim=True) / 2  # (..., 1)
        return torch.exp(projections - half_norms) / math.sqrt(self.num_features)


def linear_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    feature_map: Callable[[torch.Tensor], torch.Tensor] | None = elu_feature_map,
    *,
    form: str = "quadratic",
    chunk_size: int = 64,
    valid_lens: torch.Tensor | None = None,
    normalize: bool = True,
    eps: float = 0.0,
) -> torch.Tensor:
    """Causal linear attention: query ``t`` reads the keys ``j <= t``.

    ``out_t = sum_{j<=t} (phi(q_t) . phi(k_j)) v_j / (sum_{j<=t} phi(q_t) . phi(k_j) +
    eps)`` (without the denominator when ``normalize`` is False), computed in one of
    three forms that give the same numbers (to rounding):

    * ``"quadratic"``: the masked ``(T, T)`` matrix of ``phi(q_t) . phi(k_j)``, times
      the values, divided by its row sums -- softmax attention with another kernel;
    * ``"recurrent"``: one token at a time through the state ``S_t = S_{t-1} + v_t
      phi(k_t)^T``, ``z_t = z_{t-1} + phi(k_t)``, ``out_t = S_t phi(q_t) / (z_t .
      phi(q_t) + eps)`` (:class:`LinearAttentionState`);
    * ``"chunked"``: ``chunk_size`` tokens at a time, the quadratic form inside a chunk
      plus the state carried from the chunks before (any ``chunk_size >= 1``; the last
      chunk may be shorter).

    Args:
        queries: ``(..., T, D)``.
        keys: ``(..., T, D)`` (the same leading dimensions and ``T``: self-attention).
        values: ``(..., T, Dv)``.
        feature_map: ``phi``, ``(..., D) -> (..., F)``: :func:`elu_feature_map`,
            :func:`taylor_feature_map`, a :class:`RandomFeatureMap`, or None for the
            inputs as they are (already mapped).
        form: ``"quadratic"``, ``"recurrent"`` or ``"chunked"``.
        chunk_size: tokens per chunk for ``"chunked"``.
        valid_lens: ``(B,)`` whole numbers in ``[0, T]``, for inputs ``(B, ..., T,
            D)``: keys at positions ``>= valid_len`` are ignored (the state stops
            there), as the padding of a right-padded batch. A position with no key to
            read (``valid_len = 0``) gets an output of zeros.
        normalize: divide by the normaliser (Katharopoulos et al.); False gives the
            unnormalised sum ``S_t phi(q_t)``.
        eps: added to the normaliser.

    Returns:
        ``(..., T, Dv)``.
    """
    _check_linear_inputs(queries, keys, values, form, chunk_size, eps)
    phi_q, phi_k = _features(feature_map, queries, keys)
    if valid_lens is not None:
        if queries.dim() < 3:
            raise ValueError(
                "valid_lens: needs inputs with a batch dimension, (B, ..., T, D); got "
                f"queries of shape {tuple(queries.shape)}"
            )
        if isinstance(valid_lens, torch.Tensor) and valid_lens.device != queries.device:
            raise ValueError(
                f"valid_lens: expected a tensor on the inputs' device {queries.device}"
                f", got one on {valid_lens.device}"
            )
        _check_valid_lens(valid_lens, queries.shape[0], queries.shape[-2])
        if valid_lens.dim() != 1 or (valid_lens > queries.shape[-2]).any():
            raise ValueError(
                f"valid_lens: expected shape ({queries.shape[0]},) with lengths in [0, "
                f"T={queries.shape[-2]}], got {valid_lens.tolist()}"
            )
        positions = torch.arange(queries.shape[-2], device=queries.device)  # (T,)
        lens = valid_lens.reshape(-1, *[1] * (queries.dim() - 2))  # (B, 1.., 1)
        keep = (positions < lens).to(phi_k.dtype).unsqueeze(-1)  # (B, 1.., T, 1)
        phi_k, values = phi_k * keep, values * keep
    if form == "quadratic":
        return _quadratic(phi_q, phi_k, values, normalize, eps)
    if form == "recurrent":
        state = LinearAttentionState(None, normalize=normalize, eps=eps)
        return state.step(phi_q, phi_k, values)
    return _chunked(phi_q, phi_k, values, chunk_size, normalize, eps)


def _quadratic(phi_q, phi_k, values, normalize, eps):
    T = phi_q.shape[-2]
    scores = phi_q @ phi_k.transpose(-1, -2)  # (..., T, T)
    causal = torch.ones(T, T, dtype=torch.bool, device=scores.device).tril()
    scores = scores.masked_fill(~causal, 0)
    out = scores @ values  # (..., T, Dv)
    if not normalize:
        return out
    return _divide(out, scores.sum(-1, keepdim=True) + eps)


def _chunked(phi_q, phi_k, values, chunk_size, normalize, eps):
    *lead, T, F_ = phi_q.shape
    Dv = values.shape[-1]
    S = phi_q.new_zeros(*lead, Dv, F_)  # the state of the chunks before
    z = phi_q.new_zeros(*lead, F_)
    outs = [values.new_zeros(*lead, 0, Dv)]  # T = 0: an empty output
    for start in range(0, T, chunk_size):
        q = phi_q[..., start : start + chunk_size, :]  # (..., c, F)
        k = phi_k[..., start : start + chunk_size, :]
        v = values[..., start : start + chunk_size, :]  # (..., c, Dv)
        c = q.shape[-2]
        causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
        scores = (q @ k.transpose(-1, -2)).masked_fill(~causal, 0)  # (..., c, c)
        out = q @ S.transpose(-1, -2) + scores @ v  # (..., c, Dv)
        if normalize:
            norm = q @ z.unsqueeze(-1) + scores.sum(-1, keepdim=True)  # (..., c, 1)
            out = _divide(out, norm + eps)
        outs.append(out)
        S = S + v.transpose(-1, -2) @ k  # (..., Dv, F)
        z = z + k.sum(-2)
    return torch.cat(outs, dim=-2)


def _divide(numerator: torch.Tensor, normaliser: torch.Tensor) -> torch.Tensor:
    """``numerator / normaliser``, with 0 where nothing was read (normaliser 0)."""
    empty = normaliser == 0
    return torch.where(empty, 0.0, numerator / torch.where(empty, 1.0, normaliser))


class LinearAttentionState:
    """The decoding state of causal linear attention: the analogue of
    :class:`~attention_lib.KVCache`, with a size that does not grow with the tokens.

    A KV cache keeps every key and value and grows by ``2 Hkv d`` numbers a token; this
    keeps ``S`` ``(..., Dv, F)`` (and ``z`` ``(..., F)``) whatever the number of tokens.

    Rules, per token ``(q, k, v)`` with ``a`` the decay (1 when not given):

    * ``"additive"`` (linear attention): ``S <- a S + v phi(k)^T``, ``z <- a z +
      phi(k)``; the output is ``S phi(q) / (z . phi(q) + eps)`` (or ``S phi(q)`` with
      ``normalize=False``). A key written twice is stored twice: nothing is overwritten.
    * ``"delta"`` (DeltaNet, Schlag et al., 2021; Yang et al., 2024): ``S <- a S``, then
      ``S <- S + beta (v - S phi(k)) phi(k)^T``: read what the state holds for ``k``,
      and move it a fraction ``beta`` towards ``v``. With ``beta = 1`` and a unit-norm
      ``phi(k)`` the state then returns exactly ``v`` for ``k``: the old value is
      overwritten. The output is ``S phi(q)`` (no normaliser). With a decay gate this is
      Gated DeltaNet (Yang et al., 2025). DeltaNet uses L2-normalised keys: normalise
      them (or put that in ``feature_map``). The write multiplies ``S`` by ``I - beta
      phi(k) phi(k)^T``, whose eigenvalue along ``phi(k)`` is ``1 - beta
      |phi(k)|^2``: the state stays bounded only for ``beta |phi(k)|^2 <= 2``, and
      :meth:`step` warns (``RuntimeWarning``) when a token exceeds that.

    Args:
        feature_map: ``phi`` (as in :func:`linear_attention`); None: the inputs as
            they are.
        rule: ``"additive"`` or ``"delta"``.
        normalize: divide by ``z . phi(q)``; default True for ``"additive"``; the delta
            rule keeps no ``z`` and refuses True.
        eps: added to the normaliser.
    """

    def __init__(
        self,
        feature_map: Callable[[torch.Tensor], torch.Tensor] | None = elu_feature_map,
        *,
        rule: str = "additive",
        normalize: bool | None = None,
        eps: float = 0.0,
    ):
        if rule not in RULES:
            raise ValueError(
                f"LinearAttentionState: expected rule in {RULES}, got {rule!r}"
            )
        if normalize is None:
            normalize = rule == "additive"
        if normalize and rule == "delta":
            raise ValueError(
                "LinearAttentionState: the delta rule keeps no normaliser z; expected "
                "normalize=False (or None) with rule='delta', got normalize=True"
            )
        _check_eps("LinearAttentionState", eps)
        self.feature_map, self.rule = feature_map, rule
        self.normalize, self.eps = bool(normalize), eps
        self.reset()

    def reset(self) -> None:
        """Forget everything: no state, no tokens."""
        self._S: torch.Tensor | None = None
        self._z: torch.Tensor | None = None
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        shape = None if self._S is None else tuple(self._S.shape)
        return (
            f"LinearAttentionState(rule={self.rule!r}, tokens={self._length}, "
            f"S={shape}, bytes={self.nbytes})"
        )

    @property
    def S(self) -> torch.Tensor | None:
        """``(..., Dv, F)``, or None before the first token."""
        return self._S

    @property
    def z(self) -> torch.Tensor | None:
        """``(..., F)``; None before the first token and for the delta rule."""
        return self._z

    @property
    def nbytes(self) -> int:
        """The number of bytes the state holds (``S`` and ``z``), the same after 10
        tokens or 10^6."""
        return sum(
            t.numel() * t.element_size() for t in (self._S, self._z) if t is not None
        )

    def load(self, S: torch.Tensor, z: torch.Tensor | None = None) -> None:
        """Start from a given state (``S`` ``(..., Dv, F)``; ``z`` ``(..., F)`` when
        normalising); the token count starts at 0. Copies: the inputs are not changed
        later."""
        if not isinstance(S, torch.Tensor) or S.dim() < 2:
            raise ValueError(
                f"load: expected S of shape (..., Dv, F), got {shape_or_type(S)}"
            )
        if self.normalize:
            if (
                not isinstance(z, torch.Tensor)
                or z.shape != S.shape[:-2] + S.shape[-1:]
            ):
                raise ValueError(
                    "load: a normalised state needs z of shape (..., F) = "
                    f"{tuple(S.shape[:-2] + S.shape[-1:])}, got {shape_or_type(z)}"
                )
        elif z is not None:
            raise ValueError("load: this state keeps no normaliser; expected z=None")
        self._S = S.clone()
        self._z = None if z is None else z.to(S.dtype).clone()
        self._length = 0

    def _prepare(self, owner, state_name, queries, keys, values, beta, decay):
        """Check a call's inputs against the rule and the state and map them;
        returns ``(phi_q, phi_k, betas, decays)``, ``betas`` and ``decays`` of shape
        ``(..., T)`` or None. Touches no state: every check comes before any write."""
        _check_linear_inputs(queries, keys, values, "recurrent", 1, self.eps)
        phi_q, phi_k = _features(self.feature_map, queries, keys)
        *lead, T, F_ = phi_k.shape
        Dv = values.shape[-1]
        if self._S is not None:
            expected = (*lead, Dv, F_)
            if tuple(self._S.shape) != expected:
                raise ValueError(
                    f"{owner}: expected {state_name} of shape (..., Dv, F) = "
                    f"{expected} to match the inputs, got {tuple(self._S.shape)}"
                )
            if self._S.dtype != phi_k.dtype or self._S.device != phi_k.device:
                raise ValueError(
                    f"{owner}: expected {state_name} and the inputs in one dtype on "
                    f"one device, got {state_name} {self._S.dtype} on "
                    f"{self._S.device}, inputs {phi_k.dtype} on {phi_k.device}"
                )
        if self.rule == "delta" and beta is None:
            raise ValueError(f"{owner}: the delta rule needs beta")
        if self.rule == "additive" and beta is not None:
            raise ValueError(
                f"{owner}: beta is the delta rule's; expected beta=None with "
                "rule='additive'"
            )
        betas = _per_token("beta", beta, (*lead, T), phi_k, 2.0)
        decays = _per_token("decay", decay, (*lead, T), phi_k, 1.0)
        if self.rule == "delta":
            _warn_if_unstable(phi_k, betas)
        return phi_q, phi_k, betas, decays

    def step(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        *,
        beta: float | torch.Tensor | None = None,
        decay: float | torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Write ``T_new >= 0`` tokens one after the other and read each one's output.

        Args:
            queries: ``(..., T_new, D)``.
            keys: ``(..., T_new, D)``.
            values: ``(..., T_new, Dv)``, on the same device and of the same dtype.
            beta: the delta rule's write strength, a number in ``[0, 2]`` or a tensor
                broadcastable to ``(..., T_new)`` (one per token and head); required
                for ``"delta"``, refused for ``"additive"``.
            decay: the gate ``a`` in ``[0, 1]`` (a number or a tensor broadcastable
                to ``(..., T_new)``); None: no decay.

        Returns:
            ``(..., T_new, Dv)``. A call that raises leaves the state as it was; with
            ``T_new = 0`` the output is empty and the state unchanged.

        Warns:
            RuntimeWarning: with the delta rule, when some ``beta |phi(k)|^2 > 2``
            (see :func:`delta_rule`): the state then grows without bound.
        """
        phi_q, phi_k, betas, decays = self._prepare(
            "LinearAttentionState.step",
            "the state S",
            queries,
            keys,
            values,
            beta,
            decay,
        )
        *lead, T, F_ = phi_k.shape
        Dv = values.shape[-1]
        if T == 0:  # nothing to write or read
            return values.new_zeros(*lead, 0, Dv)
        S = phi_k.new_zeros(*lead, Dv, F_) if self._S is None else self._S
        z = None
        if self.normalize:
            z = phi_k.new_zeros(*lead, F_) if self._z is None else self._z
        out, S, z = _recurrence(
            phi_q, phi_k, values, S, z, self.rule, betas, decays, self.eps
        )
        self._S, self._z, self._length = S, z, self._length + T
        return out


def _recurrence(phi_q, phi_k, values, S, z, rule, betas, decays, eps):
    """The state's update, one token at a time from ``(S, z)``; returns ``(outputs
    (..., T, Dv), S, z)``."""
    outs = []
    for t in range(phi_k.shape[-2]):
        k, v, q = phi_k[..., t, :], values[..., t, :], phi_q[..., t, :]
        if decays is not None:
            a = decays[..., t]  # (...)
            S = a[..., None, None] * S
            if z is not None:
                z = a[..., None] * z
        if rule == "additive":
            S = S + v.unsqueeze(-1) * k.unsqueeze(-2)  # (..., Dv, F)
        else:
            error = v - (S @ k.unsqueeze(-1)).squeeze(-1)  # (..., Dv)
            S = S + (betas[..., t, None] * error).unsqueeze(-1) * k.unsqueeze(-2)
        out = (S @ q.unsqueeze(-1)).squeeze(-1)  # (..., Dv)
        if z is not None:
            z = z + k
            out = _divide(out, (z * q).sum(-1, keepdim=True) + eps)
        outs.append(out)
    return torch.stack(outs, dim=-2), S, z  # (..., T, Dv)


def delta_rule(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    beta: float | torch.Tensor,
    *,
    decay: float | torch.Tensor | None = None,
    feature_map: Callable[[torch.Tensor], torch.Tensor] | None = None,
    initial_state: torch.Tensor | None = None,
    chunk_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The delta rule over a whole sequence (DeltaNet; Gated DeltaNet with ``decay``),
    from ``initial_state`` (zeros if None): per token, with ``k = phi(k_t)``,
    ``q = phi(q_t)`` and ``a`` the decay (1 if None),
    ``S <- a S (I - beta k k^T) + beta v k^T`` and ``out_t = S q``
    (:class:`LinearAttentionState` with ``rule="delta"``).

    Two forms give the same numbers (to rounding):

    * ``chunk_size=None``: the recurrence, one token at a time;
    * ``chunk_size=C``: the chunkwise form (Yang et al., 2024, "Parallelizing Linear
      Transformers with the Delta Rule over Sequence Length"; with the gate, Yang,
      Kautz and Hatamizadeh, 2025, "Gated Delta Networks"). Per chunk of ``C`` tokens
      (the last may be shorter) the ``C`` rank-one updates are gathered in the WY
      form ``T = (I + strictly_lower(diag(beta) K K^T))^-1 diag(beta)``, ``W = T K``,
      ``U = T V`` (one triangular solve); the pseudo-values ``U - W S^T`` replace the
      values, the outputs are the carried state's read plus a causal ``(C, C)``
      attention inside the chunk, and ``S`` moves to the next chunk in one matrix
      product. With the gate, ``a_{j+1} ... a_i`` multiplies the pair ``(i, j)``.
      A loop over chunks instead of tokens, and matrix products instead of
      matrix-vector ones: much faster for training and prefill (``C = 64`` is usual).

    Stability: a write multiplies ``S`` by ``I - beta k k^T``, whose eigenvalue along
    ``k`` is ``1 - beta |k|^2``; it lies in ``[-1, 1]`` only for ``0 <= beta |k|^2 <=
    2``. Beyond, the state grows geometrically (``|k|^2 = 8``, ``beta = 1``: by 7 per
    write along ``k``). DeltaNet therefore L2-normalises the keys and takes ``beta`` in
    ``[0, 2]`` (usually a sigmoid, in ``(0, 1)``); a ``RuntimeWarning`` is raised when
    some ``beta |phi(k)|^2`` exceeds 2 (by more than rounding).

    Args:
        queries, keys: ``(..., T, D)``; values: ``(..., T, Dv)``; one dtype, one
            device.
        beta: a number in ``[0, 2]`` or a tensor broadcastable to ``(..., T)``.
        decay: None, a number in ``[0, 1]`` or a tensor broadcastable to ``(..., T)``.
        feature_map: applied to queries and keys (None: as they are; DeltaNet feeds
            L2-normalised keys).
        initial_state: ``S`` ``(..., Dv, F)`` to start from (not changed).
        chunk_size: None for the recurrence, or ``C >= 1`` for the chunkwise form
            (16-bit inputs are computed in float32 there; the outputs and the state
            come back in the inputs' dtype).

    Returns:
        ``(outputs (..., T, Dv), S (..., Dv, F))``, the final state. With ``T = 0``:
        empty outputs and the initial state (a copy; zeros if None).

    Warns:
        RuntimeWarning: when some ``beta |phi(k)|^2 > 2``: the state will blow up.
    """
    if chunk_size is not None:
        check_size("delta_rule", chunk_size=chunk_size)
    state = LinearAttentionState(feature_map, rule="delta")
    if initial_state is not None:
        if not isinstance(initial_state, torch.Tensor) or initial_state.dim() < 2:
            raise ValueError(
                "delta_rule: expected initial_state of shape (..., Dv, F), got "
                f"{shape_or_type(initial_state)}"
            )
        state.load(initial_state)
    phi_q, phi_k, betas, decays = state._prepare(
        "delta_rule", "initial_state", queries, keys, values, beta, decay
    )
    *lead, T, F_ = phi_k.shape
    Dv = values.shape[-1]
    if chunk_size is not None and T > 0:
        return _delta_chunked(phi_q, phi_k, values, betas, decays, state.S, chunk_size)
    S = phi_k.new_zeros(*lead, Dv, F_) if state.S is None else state.S
    if T == 0:
        return values.new_zeros(*lead, 0, Dv), S
    out, S, _ = _recurrence(phi_q, phi_k, values, S, None, "delta", betas, decays, 0.0)
    return out, S


def _delta_chunked(phi_q, phi_k, values, betas, decays, S, chunk_size):
    """The chunkwise delta rule (see :func:`delta_rule`) from ``S`` (None: zeros):
    ``(outputs, final S)``."""
    dtype = phi_k.dtype
    if dtype in (torch.float16, torch.bfloat16):  # no triangular solve in 16 bits
        args = (phi_q, phi_k, values, betas, decays, S)
        out, S = _delta_chunked(
            *(None if t is None else t.float() for t in args), chunk_size
        )
        return out.to(dtype), S.to(dtype)
    *lead, T, F_ = phi_k.shape
    Dv = values.shape[-1]
    C = min(chunk_size, T)
    N = -(-T // C)  # chunks
    pad = N * C - T
    # padded tokens have k = 0, beta = 0 and decay 1: they leave the state as it is
    q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (phi_q, phi_k, values))
    q = q.reshape(*lead, N, C, F_)  # (..., N, C, F)
    k = k.reshape(*lead, N, C, F_)  # (..., N, C, F)
    v = v.reshape(*lead, N, C, Dv)  # (..., N, C, Dv)
    b = F.pad(betas, (0, pad)).reshape(*lead, N, C, 1)  # (..., N, C, 1)
    KK = k @ k.transpose(-1, -2)  # (..., N, C, C)
    QK = q @ k.transpose(-1, -2)  # (..., N, C, C)
    if decays is None:
        gamma = tail = None
        k_written = b * k  # (..., N, C, F): diag(beta) K
    else:
        a = F.pad(decays, (0, pad), value=1.0).reshape(*lead, N, C)  # (..., N, C)
        # Gamma[i, j] = a_{j+1} ... a_i (j <= i), the decay from token j to token i,
        # as a cumulative product down the columns of [a_l if l > j else 1]
        later = torch.ones(C, C, dtype=torch.bool, device=k.device).tril(-1)  # l > j
        Gamma = torch.where(later, a.unsqueeze(-1), 1.0).cumprod(-2)  # (.., N, C, C)
        gamma = a.cumprod(-1).unsqueeze(-1)  # (..., N, C, 1): a_1 ... a_i, from start
        tail = Gamma[..., -1, :].unsqueeze(-1)  # (..., N, C, 1): a_{i+1} ... a_C
        KK, QK = KK * Gamma, QK * Gamma
        k_written = b * gamma * k  # (..., N, C, F): diag(beta gamma) K
    # (I + A) [W | U] = [diag(beta) K | diag(beta) V] with A = strictly_lower(diag(beta)
    # K K^T): one forward substitution (the solve takes I + A's unit diagonal as given)
    A = (b * KK).tril(-1)  # (..., N, C, C)
    WU = torch.linalg.solve_triangular(
        A, torch.cat([k_written, b * v], dim=-1), upper=False, unitriangular=True
    )  # (..., N, C, F + Dv)
    W, U = WU.split([F_, Dv], dim=-1)  # (..., N, C, F), (..., N, C, Dv)
    QK = QK.tril()  # (..., N, C, C): query i reads keys j <= i
    outs = []
    for n in range(N):
        q_n, k_n, QK_n = q[..., n, :, :], k[..., n, :, :], QK[..., n, :, :]
        if gamma is not None:
            q_n = gamma[..., n, :, :] * q_n  # the carried state, decayed to token i
            k_n = tail[..., n, :, :] * k_n  # write j, decayed to the chunk's end
        if S is None:  # nothing carried (zeros): skip the products with zeros
            new_v = U[..., n, :, :]  # (..., C, Dv)
            outs.append(QK_n @ new_v)  # (..., C, Dv)
            S = new_v.transpose(-1, -2) @ k_n  # (..., Dv, F)
            continue
        # the values the chunk writes, once the carried state has been read out
        new_v = U[..., n, :, :] - W[..., n, :, :] @ S.transpose(-1, -2)  # (..., C, Dv)
        outs.append(q_n @ S.transpose(-1, -2) + QK_n @ new_v)  # (..., C, Dv)
        if gamma is not None:
            S = gamma[..., n, -1:, :] * S  # (..., 1, 1) * (..., Dv, F)
        S = S + new_v.transpose(-1, -2) @ k_n  # (..., Dv, F)
    out = torch.cat(outs, dim=-2)[..., :T, :]  # (..., T, Dv)
    return out, S


def linear_state_bytes(
    num_layers: int,
    num_heads: int,
    feature_dim: int,
    value_dim: int,
    batch_size: int = 1,
    bytes_per_element: int = 2,
    normalizer: bool = True,
) -> int:
    """Bytes a linear-attention decoding state takes: ``layers * H * (F * Dv + F) *
    batch * bytes_per_element`` -- ``S`` and (with ``normalizer``) ``z`` per head. The
    sibling of :func:`~attention_lib.kv_cache_bytes` and
    :func:`~attention_lib.mla_cache_bytes`, with no ``seq_len``: it does not grow.

    The default, 2 bytes, counts a 16-bit state like a 16-bit KV cache. In practice
    the recurrent state is kept in float32 (``bytes_per_element=4``) even when the
    model runs in 16 bits, for an accurate recurrence: flash-linear-attention's
    chunked kernels return a float32 final state, transformers' PyTorch path for
    Qwen3-Next computes in float32 and keeps the state so, and Qwen3.5's configuration
    asks serving engines for ``mamba_ssm_dtype="float32"``. Against a 16-bit KV cache
    that doubles the state's bytes, and the context length at which the cache outgrows
    the state."""
    check_count(
        "linear_state_bytes",
        num_layers=num_layers,
        num_heads=num_heads,
        feature_dim=feature_dim,
        value_dim=value_dim,
        batch_size=batch_size,
        bytes_per_element=bytes_per_element,
    )
    per_head = feature_dim * value_dim + (feature_dim if normalizer else 0)
    return num_layers * num_heads * per_head * batch_size * bytes_per_element


# -- checks --------------------------------------------------------------------------


def _check_eps(owner: str, eps) -> None:
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not eps >= 0:
        raise ValueError(f"{owner}: expected eps to be a number >= 0, got {eps!r}")


def _check_features_input(owner: str, x) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or not x.is_floating_point():
        raise ValueError(
            f"{owner}: expected a floating-point tensor of shape (..., D), got "
            f"{shape_or_type(x)}"
            + (f" of dtype {x.dtype}" if isinstance(x, torch.Tensor) else "")
        )


def _check_linear_inputs(queries, keys, values, form, chunk_size, eps) -> None:
    for name, t in (("queries", queries), ("keys", keys), ("values", values)):
        if not isinstance(t, torch.Tensor) or t.dim() < 2 or not t.is_floating_point():
            raise ValueError(
                f"{name}: expected a floating-point tensor of shape (..., T, width), "
                f"got {shape_or_type(t)}"
            )
    if queries.shape != keys.shape:
        raise ValueError(
            "queries and keys: expected the same shape (..., T, D) (causal "
            f"self-attention), got {tuple(queries.shape)} and {tuple(keys.shape)}"
        )
    if values.shape[:-1] != keys.shape[:-1]:
        raise ValueError(
            "values: expected shape (..., T, Dv) with the keys' leading dimensions and "
            f"T, {tuple(keys.shape[:-1])}, got {tuple(values.shape)}"
        )
    if not queries.dtype == keys.dtype == values.dtype:
        raise ValueError(
            "queries, keys and values: expected one dtype, got "
            f"{queries.dtype}, {keys.dtype}, {values.dtype}"
        )
    if not queries.device == keys.device == values.device:
        raise ValueError(
            "queries, keys and values: expected one device, got "
            f"{queries.device}, {keys.device}, {values.device}"
        )
    if form not in FORMS:
        raise ValueError(f"linear_attention: expected form in {FORMS}, got {form!r}")
    check_size("linear_attention", chunk_size=chunk_size)
    _check_eps("linear_attention", eps)


def _features(feature_map, queries, keys):
    if feature_map is None:
        return queries, keys
    phi_q, phi_k = feature_map(queries), feature_map(keys)
    if phi_q.shape != phi_k.shape or phi_q.shape[:-1] != queries.shape[:-1]:
        raise ValueError(
            "feature_map: expected (..., T, D) -> (..., T, F) with the same F for "
            f"queries and keys, got {tuple(phi_q.shape)} and {tuple(phi_k.shape)}"
        )
    return phi_q, phi_k


def _per_token(name, value, shape, like, upper):
    """``value`` (None, a number, or a tensor broadcastable to ``shape`` = (..., T))
    checked to lie in [0, upper], as a tensor of ``shape``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, torch.Tensor)):
        raise ValueError(
            f"{name}: expected a number or a tensor broadcastable to {shape}, got "
            f"{type(value).__name__}"
        )
    if isinstance(value, torch.Tensor) and value.device != like.device:
        raise ValueError(
            f"{name}: expected a number or a tensor on the inputs' device "
            f"{like.device}, got a tensor on {value.device}"
        )
    tensor = torch.as_tensor(value, dtype=like.dtype, device=like.device)
    try:
        tensor = torch.broadcast_to(tensor, shape)
    except RuntimeError:
        raise ValueError(
            f"{name}: expected a number or a tensor broadcastable to (..., T_new) = "
            f"{tuple(shape)}, got shape {tuple(tensor.shape)}"
        ) from None
    if not torch.isfinite(tensor).all() or (tensor < 0).any() or (tensor > upper).any():
        raise ValueError(f"{name}: expected values in [0, {upper}], got {value!r}")
    return tensor


def _warn_if_unstable(phi_k: torch.Tensor, betas: torch.Tensor) -> None:
    """Warn when some write of the delta rule expands the state: the eigenvalue
    ``1 - beta |k|^2`` of ``I - beta k k^T`` along ``k`` leaves ``[-1, 1]`` when
    ``beta |k|^2 > 2``. One reduction and one read of a number; the slack covers
    rounding (unit keys with ``beta = 2`` in 16-bit formats are not warned about)."""
    if phi_k.numel() == 0:
        return
    with torch.no_grad():
        squared_norms = torch.linalg.vector_norm(
            phi_k, dim=-1, dtype=torch.promote_types(phi_k.dtype, torch.float32)
        ).square()  # (..., T)
        worst = (betas * squared_norms).amax()
    limit = 2 * (1 + max(1e-3, 8 * torch.finfo(phi_k.dtype).eps))
    if worst > limit:
        warnings.warn(
            f"delta rule: beta * |phi(k)|^2 reaches {worst.item():.3g} > 2, so the "
            "state grows at every such write (the update multiplies S by I - beta k "
            "k^T, whose eigenvalue along k is 1 - beta |k|^2, inside [-1, 1] only for "
            "beta |k|^2 in [0, 2]); use L2-normalised keys (|phi(k)| = 1) and beta in "
            "[0, 2]",
            RuntimeWarning,
            stacklevel=4,
        )
