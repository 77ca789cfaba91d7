"""The key/value cache of one attention layer, for decoding one token at a time.

Shape legend: ``B`` batch, ``Hkv`` key/value heads, ``T`` cached positions, ``n`` new
positions, ``d`` head width.

When a decoder generates token ``t + 1`` it needs the keys and values of tokens ``0 ..
t``. They do not change, so each layer keeps them: the cache holds ``(B, Hkv, T, d)``
keys and values -- only the ``Hkv`` key/value heads, never repeated to ``H`` (that
saving is the point of grouped-query attention, chapter 8). Decoding reads the whole
cache at every step and is limited by memory traffic, so an append must not copy it:
like a Python list, the cache keeps spare capacity and doubles it when full, so
appending ``n`` positions costs ``O(n)`` amortised.
"""

from __future__ import annotations

import torch

from ._checks import check_rank

__all__ = ["KVCache"]


class KVCache:
    """Keys and values ``(B, Hkv, T, d)`` of one attention layer, grown in place.

    Pass it to :class:`~attention_lib.GroupedQueryAttention` (or
    :class:`~attention_lib.MultiHeadAttention`)::

        cache = KVCache()
        # prefill: x (B, T, E); the cache now holds T
        y = gqa(x, x, x, is_causal=True, kv_cache=cache)
        # x1 (B, 1, E) attends to all T + 1 positions
        y1 = gqa(x1, x1, x1, is_causal=True, kv_cache=cache)

    Each call appends that call's projected keys and values and attends over everything
    cached. ``keys`` and ``values`` are views of the first ``len(cache)`` positions of
    preallocated buffers. A cache belongs to one layer and one batch: appending keys of
    another batch size, head count, head width, dtype or device raises ``ValueError``.
    Meant for inference (``torch.no_grad()`` or ``torch.inference_mode()``; a prefill
    under one and decoding under the other works: buffers made in inference mode are
    moved into ordinary tensors, once, at the first write outside it). When the new
    keys require grad the cache concatenates instead of writing in place, so autograd
    stays correct.

    Args:
        capacity: positions to allocate at the first append (default: what that append
            needs plus 256); the buffers double whenever they are full.
    """

    def __init__(self, capacity: int | None = None):
        if capacity is not None and (
            isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0
        ):
            raise ValueError(
                "KVCache: expected capacity to be a positive int or None, got "
                f"{capacity!r}"
            )
        self._capacity_hint = capacity
        self._keys: torch.Tensor | None = None  # (B, Hkv, capacity, d)
        self._values: torch.Tensor | None = None  # (B, Hkv, capacity, dv)
        # When d == dv both live in one buffer (2, B, Hkv, capacity, d): _keys is
        # _kv[0] and _values is _kv[1], so a decode step writes both with one copy.
        self._kv: torch.Tensor | None = None
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        shape = None if self._keys is None else tuple(self.keys.shape)
        return f"KVCache(length={self._length}, capacity={self.capacity}, keys={shape})"

    @property
    def capacity(self) -> int:
        """Positions the buffers can hold before they are reallocated."""
        return 0 if self._keys is None else self._keys.shape[2]

    @property
    def keys(self) -> torch.Tensor | None:
        """The cached keys ``(B, Hkv, T, d)`` (a view), or None while empty."""
        return None if self._keys is None else self._keys.narrow(2, 0, self._length)

    @property
    def values(self) -> torch.Tensor | None:
        """The cached values ``(B, Hkv, T, dv)`` (a view), or None while empty."""
        return None if self._values is None else self._values.narrow(2, 0, self._length)

    def reset(self) -> None:
        """Forget everything (the next append may have another batch size)."""
        self._keys = self._values = self._kv = None
        self._length = 0

    def crop(self, length: int) -> None:
        """Keep only the first ``length`` positions (e.g. to drop a rejected draft); the
        memory is kept."""
        if (
            isinstance(length, bool)
            or not isinstance(length, int)
            or not 0 <= length <= self._length
        ):
            raise ValueError(
                f"KVCache.crop: expected a length in 0 .. {self._length}, got "
                f"{length!r}"
            )
        self._length = length

    def update(
        self, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``keys (B, Hkv, n, d)`` and ``values (B, Hkv, n, dv)``; return all
        cached ``(B, Hkv, T + n, .)``."""
        # Decoding calls this once per layer and token, so the checks are plain shape
        # comparisons; the detailed messages are built only when one fails.
        if not (
            isinstance(keys, torch.Tensor)
            and keys.dim() == 4
            and isinstance(values, torch.Tensor)
            and values.dim() == 4
        ):
            check_rank("keys", keys, (4,), "(B, Hkv, n, d)")
            check_rank("values", values, (4,), "(B, Hkv, n, dv)")
        if keys.shape[:3] != values.shape[:3]:
            raise ValueError(
                f"keys and values must share (B, Hkv, n): got keys {tuple(keys.shape)} "
                f"and values {tuple(values.shape)}"
            )
        ck = self._keys
        if ck is not None and (
            ck.shape[0] != keys.shape[0]
            or ck.shape[1] != keys.shape[1]
            or ck.shape[3] != keys.shape[3]
            or self._values.shape[3] != values.shape[3]
            or ck.dtype != keys.dtype
            or self._values.dtype != values.dtype
            or ck.device != keys.device
        ):
            self._check_matches("keys", keys, ck)
            self._check_matches("values", values, self._values)
        n = keys.shape[2]
        if (
            ck is not None
            and ck.is_inference()
            and not torch.is_inference_mode_enabled()
        ):
            # Buffers made under torch.inference_mode() (say a prefill) cannot be
            # written outside it (say a decode step under torch.no_grad()): move the
            # cached positions into ordinary tensors, once.
            self._grow(keys, values, self.capacity)
        if (
            keys.requires_grad or values.requires_grad
        ):  # autograd: no in-place writes into shared buffers
            self._kv = None
            self._keys = (
                keys if self._keys is None else torch.cat([self.keys, keys], dim=2)
            )
            self._values = (
                values
                if self._values is None
                else torch.cat([self.values, values], dim=2)
            )
            self._length += n
            return self.keys, self.values
        start, needed = self._length, self._length + n
        if needed > self.capacity:
            first = self._keys is None
            capacity = (
                (self._capacity_hint or needed + 256) if first else 2 * self.capacity
            )
            self._grow(keys, values, max(capacity, needed))
        self._keys.narrow(2, start, n).copy_(
            keys
        )  # in place: O(n), the cached positions are not touched
        self._values.narrow(2, start, n).copy_(values)
        self._length = needed
        return self._keys.narrow(2, 0, needed), self._values.narrow(2, 0, needed)

    def _append_kv(self, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`update` for keys and values stacked as ``kv (2, B, Hkv, n, d)`` (a
        view of one fused K/V projection), the decode step's fast path: when the
        packed buffer has room and matches, one copy and a few shape comparisons;
        anything else goes through :meth:`update` (its checks, errors and growth)."""
        buf, n = self._kv, kv.shape[3]
        if (
            buf is None
            or kv.shape[1] != buf.shape[1]
            or kv.shape[2] != buf.shape[2]
            or kv.shape[4] != buf.shape[4]
            or self._length + n > buf.shape[3]
            or kv.dtype != buf.dtype
            or kv.device != buf.device
            or kv.requires_grad
            or (buf.is_inference() and not torch.is_inference_mode_enabled())
        ):
            return self.update(kv[0], kv[1])
        start = self._length
        buf.narrow(3, start, n).copy_(kv)  # keys and values of the n new positions
        self._length = start + n
        return self._keys.narrow(2, 0, start + n), self._values.narrow(2, 0, start + n)

    def _state(self) -> tuple:
        """What :meth:`_restore` needs to undo later appends (buffers are not
        copied: an append writes only beyond the current length)."""
        return self._keys, self._values, self._kv, self._length

    def _restore(self, state: tuple) -> None:
        self._keys, self._values, self._kv, self._length = state

    def _grow(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
        B, Hkv, _, d = keys.shape
        dv = values.shape[3]
        if d == dv and keys.dtype == values.dtype and keys.device == values.device:
            kv = keys.new_empty(2, B, Hkv, capacity, d)  # (2, B, Hkv, capacity, d)
            new_keys, new_values = kv[0], kv[1]
        else:
            kv = None
            new_keys = keys.new_empty(B, Hkv, capacity, d)  # (B, Hkv, capacity, d)
            new_values = values.new_empty(B, Hkv, capacity, dv)  # (.., dv)
        if self._keys is not None:
            # the one copy, when the capacity doubles
            new_keys.narrow(2, 0, self._length).copy_(self.keys)
            new_values.narrow(2, 0, self._length).copy_(self.values)
        self._keys, self._values, self._kv = new_keys, new_values, kv

    def _check_matches(
        self, name: str, new: torch.Tensor, cached: torch.Tensor
    ) -> None:
        B, Hkv, _, d = cached.shape
        got_B, got_Hkv, _, got_d = new.shape
        for what, want, got in (
            ("batch size B", B, got_B),
            ("key/value heads Hkv", Hkv, got_Hkv),
            ("head width d", d, got_d),
        ):
            if want != got:
                raise ValueError(
                    f"KVCache: {name} of shape {tuple(new.shape)} do not fit this "
                    "cache, which holds "
                    f"{tuple(cached.narrow(2, 0, self._length).shape)}: expected "
                    f"{what} = {want}, got {got} (one cache per layer and batch; call "
                    "reset() to start another sequence)"
                )
        if new.dtype != cached.dtype or new.device != cached.device:
            raise ValueError(
                f"KVCache: expected {name} of dtype {cached.dtype} on {cached.device}, "
                f"got {new.dtype} on {new.device}"
            )
