"""A leaner decode step for grouped-query attention: what a serving library trims.

:class:`FastGroupedQueryAttention` is :class:`~attention_lib.GroupedQueryAttention` --
the same parameters, ``state_dict``, outputs and checks -- with one more route for the
call that dominates generation: a decode step with a :class:`~attention_lib.KVCache`
and no autograd (``keys is values``, ``need_weights=False``, no masks). That route

* projects the new token's keys and values with **one** matrix product: ``W_k`` and
  ``W_v`` are stored side by side in one block of memory (still two parameters), so
  ``[W_k; W_v]`` is a view, never a copy that could go stale;
* writes keys and values into the cache's single buffer with **one** copy;
* reads the parameters from the module's dictionaries directly (``nn.Module``'s
  ``__getattr__`` costs about half a microsecond a call);
* for one new query, hands SDPA each group's query heads as rows of one query matrix
  (what ``one_query_shared_heads`` in ``attention_lib.scoring`` does for the readable
  class), shaped so straight from the projection, and its output straight back.

None of this changes the arithmetic; it trims per-call overhead that matters only when a
step takes a fraction of a millisecond (``bench/bench_decode_packed.py`` times it).
Every other call -- training, ``need_weights=True``, masks, a ``rotary`` embedding -- is
the parent's ``forward``.

Shape legend: ``B`` batch, ``Q`` queries, ``K`` new keys/values, ``T`` cached positions,
``E`` model width, ``H`` query heads, ``Hkv`` key/value heads, ``d = E / H``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .cache import KVCache
from .multihead import GroupedQueryAttention, _check_inputs
from .scoring import fused_attention

__all__ = ["FastGroupedQueryAttention"]


class FastGroupedQueryAttention(GroupedQueryAttention):
    """:class:`~attention_lib.GroupedQueryAttention` with a leaner cached decode step.

    Same constructor, attributes (``W_q``, ``W_k``, ``W_v``, ``W_o``), ``forward`` and
    results (to float round-off); the module docstring lists what the decode step trims.
    ``W_k`` and ``W_v`` are packed side by side at construction (and again by
    :func:`~attention_lib.convert_to_gqa`); after ``.to(dtype)`` or a deep copy they
    are two separate tensors and the step projects them separately.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._pack_kv()  # W_k and W_v in one block of memory, for decoding

    def forward(
        self,
        queries,
        keys,
        values,
        valid_lens=None,
        mask=None,
        need_weights: bool = True,
        is_causal: bool = False,
        kv_cache: KVCache | None = None,
    ):
        if (
            kv_cache is None
            or keys is not values
            or need_weights
            or valid_lens is not None
            or mask is not None
            or torch.is_grad_enabled()
            or self.rotary is not None
        ):
            return super().forward(
                queries, keys, values, valid_lens, mask, need_weights, is_causal,
                kv_cache,
            )  # fmt: skip
        _check_inputs(self, queries, keys, values, None, None, kv_cache)
        # the parent's @_cache_unchanged_if_it_fails written out (a wrapper costs
        # ~1 us a step): a call that raises leaves the cache as it was
        state = kv_cache._state()
        try:
            return self._decode_step(queries, keys, is_causal, kv_cache)
        except BaseException:
            kv_cache._restore(state)
            raise

    def _decode_step(self, queries, x, is_causal, kv_cache):
        """Cached attention without autograd or masks: the parent's fused path with
        less per-call work."""
        H, Hkv, d = self.num_heads, self.num_kv_heads, self.head_dim
        B, num_queries, E = queries.shape
        num_new = x.shape[1]
        # the parameter dicts directly: nn.Module's __getattr__ costs ~0.5 us a call
        q_params = self._modules["W_q"]._parameters
        o_params = self._modules["W_o"]._parameters
        q = F.linear(queries, q_params["weight"], q_params["bias"])  # (B, Q, E)
        if num_queries == 1:
            # a group's g = H / Hkv query heads as g rows of one query matrix, straight
            # from the projection: (B, 1, E) -> (B, Hkv, g, d); head h uses key/value
            # head h // g, as repeat_kv (one_query_shared_heads, two views fewer)
            q = q.view(B, Hkv, H // Hkv, d)
        else:
            q = q.view(B, num_queries, H, d).transpose(1, 2)  # (B, H, Q, d)
        fused = self._fused_kv()
        if fused is not None:
            kv = F.linear(x, *fused)  # (B, K, 2 * Hkv * d)
            # (B, K, 2, Hkv, d) -> (2, B, Hkv, K, d): keys kv[0], values kv[1]
            kv = kv.view(B, num_new, 2, Hkv, d).permute(2, 0, 3, 1, 4)
            k, v = kv_cache._append_kv(kv)  # (B, Hkv, T + K, d) each, one copy
        else:
            k = F.linear(x, self.W_k.weight, self.W_k.bias)  # (B, K, Hkv * d)
            v = F.linear(x, self.W_v.weight, self.W_v.bias)
            k = k.view(B, num_new, Hkv, d).transpose(1, 2)  # (B, Hkv, K, d)
            v = v.view(B, num_new, Hkv, d).transpose(1, 2)
            k, v = kv_cache.update(k, v)  # (B, Hkv, T + K, d) each
        p = self.dropout.p if self.training else 0.0
        if num_queries == 1:  # one query attends to every cached key, causal or not
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p)  # (B, Hkv, g, d)
            out = out.reshape(B, 1, E)  # the heads in order h = g * kv + row
        else:
            out = fused_attention(
                q, k, v, None, None,
                dropout_p=p, enable_gqa=Hkv != H, is_causal=is_causal,
            )  # fmt: skip  # (B, H, Q, d)
            # (B, H, Q, d) -> (B, Q, H, d) -> (B, Q, E)
            out = out.transpose(1, 2).reshape(B, num_queries, E)
        if self.attention_weights is not None:
            self.attention_weights = None  # (nn.Module's __setattr__ is slow)
        return F.linear(out, o_params["weight"], o_params["bias"])

    def _pack_kv(self) -> None:
        """Store ``W_k`` and ``W_v`` (weights, and biases if any) side by side in one
        tensor: the parameters stay two ``nn.Parameter`` objects, but their memory is
        one ``(2 * Hkv * d, E)`` block, so a decode step projects keys and values with
        one matmul and no copy of the weights (see :meth:`_fused_kv`)."""
        with torch.no_grad():
            for name in ("weight", "bias"):
                k, v = getattr(self.W_k, name), getattr(self.W_v, name)
                if k is not None:
                    both = torch.cat([k, v])  # (2 * Hkv * d, ...)
                    k.data, v.data = both[: len(k)], both[len(k) :]

    def _fused_kv(self):
        """``([W_k; W_v], [b_k; b_v])`` as views of the packed parameters, or None
        when they are not packed (after ``.to(dtype)`` or a deep copy, say): then the
        caller projects keys and values separately.

        The views alias the parameters' memory, so they are never stale; they are
        rebuilt only when a parameter object or its memory changes (the remembered
        view keeps the old memory alive, so an equal address means the same memory).
        """
        k_params = self._modules["W_k"]._parameters
        v_params = self._modules["W_v"]._parameters
        wk, wv = k_params["weight"], v_params["weight"]
        bk, bv = k_params["bias"], v_params["bias"]
        key = (
            wk.data_ptr(),
            wv.data_ptr(),
            None if bk is None else bk.data_ptr(),
            None if bv is None else bv.data_ptr(),
        )
        seen = self.__dict__.get("_fused_kv_seen")
        if (
            seen is not None
            and seen[0] is wk
            and seen[1] is wv
            and seen[2] is bk
            and seen[3] is bv
            and seen[4] == key
        ):
            return seen[5]
        pairs = []
        for k, v in ((wk, wv), (bk, bv)):
            if k is None or v is None:
                pairs.append(None)
                if k is not v:
                    pairs = None
                    break
                continue
            if not (
                k.is_contiguous()
                and v.is_contiguous()
                and k.dtype == v.dtype
                and v.data_ptr() == k.data_ptr() + k.numel() * k.element_size()
                and k.untyped_storage().data_ptr() == v.untyped_storage().data_ptr()
            ):
                pairs = None
                break
            # (2 * Hkv * d, ...): the memory of both parameters, in one view
            pairs.append(k.as_strided((2 * k.shape[0], *k.shape[1:]), k.stride()))
        fused = None if pairs is None else (pairs[0], pairs[1])
        # a plain attribute: not a parameter or buffer, not in the state_dict
        self.__dict__["_fused_kv_seen"] = (wk, wv, bk, bv, key, fused)
        return fused
