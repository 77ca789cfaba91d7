"""Exercises 10.1 (the online softmax) and 10.2 (merging two partial results)."""

from __future__ import annotations

import math

import torch

from ..scoring import dot_product_attention
from ..tiled import merge_attention
from .families import MERGE, ONLINE, SCALE, merge, mistakes, online
from .spec import Case, Constraint, Exercise, in_float32, integer, randn

# -- 10.1 the online softmax --


def online_attention(q, keys, values, block_size):
    """Attention of one query ``q (D,)`` over ``keys (K, D)``, ``values (K, Dv)``, the
    keys read ``block_size`` at a time with a running max, a running sum and a running
    output (the online softmax) -> ``(Dv,)``; scores ``q . k / sqrt(D)``."""
    return dot_product_attention(q[None, None], keys[None], values[None])[0][0, 0]


def _online_inputs(scale=1.0, block=None, negative=False):
    def make(g):
        K, D, Dv = integer(g, 1, 13), integer(g, 1, 6), integer(g, 1, 4)
        b = block or integer(g, 1, 5)
        q, keys = scale * randn(g, D), scale * randn(g, K, D)
        if negative:  # every key points away from q: every score far below 0
            q = 3 * randn(g, D)
            scores = -(1500 + 40 * torch.rand(K, generator=g, dtype=torch.float64))
            keys = (scores * math.sqrt(D) / q.dot(q))[:, None] * q[None, :]
        return (q, keys, randn(g, K, Dv), b), {}

    return make


class _WholeKeys(torch.Tensor):
    """``keys`` that notice being used whole: a computation (a product, a sum, ...)
    with all of them at once is recorded; slicing out a block, and reading shapes,
    are not."""

    used_whole = False
    _MOVES = {
        "__getitem__",
        "split",
        "chunk",
        "narrow",
        "unbind",
        "select",
        "index_select",
        "tensor_split",
        "split_with_sizes",
        "view",
        "reshape",
        "transpose",
        "t",
        "permute",
        "contiguous",
        "to",
        "double",
        "float",
        "half",
        "clone",
        "detach",
        "flatten",
        "unflatten",
        "squeeze",
        "unsqueeze",
        "expand",
        "movedim",
        "swapaxes",
        "__get__",
        "type",
        "type_as",
        "view_as",
        "reshape_as",
        "__iter__",
        "unfold",
    }

    #: reading about the keys, or making a tensor like them, is not computing with them
    _LOOKS = {
        "new_zeros",
        "new_ones",
        "new_full",
        "new_empty",
        "new_tensor",
        "size",
        "dim",
        "numel",
        "__len__",
        "is_floating_point",
        "element_size",
        "stride",
        "is_contiguous",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "__format__",
        "__repr__",
        "__str__",
        "__hash__",
        "data_ptr",
        "nelement",
        "ndimension",
    }

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        with torch._C.DisableTorchFunctionSubclass():
            whole = [a for a in _flat(args, kwargs) if isinstance(a, _WholeKeys)]
            result = func(*args, **kwargs)
            if not whole:
                return result
            if name in cls._LOOKS:
                return _wrap(result, None)
            if name not in cls._MOVES:
                if isinstance(result, (torch.Tensor, tuple, list)):
                    _WholeKeys.used_whole = True
                return _wrap(result, None)
            return _wrap(result, whole[0].numel())


def _flat(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, (tuple, list)):
            yield from _flat(a, {})
        else:
            yield a


def _wrap(result, size):
    if isinstance(result, torch.Tensor):
        if size is not None and result.numel() == size and result.dim() >= 1:
            return result.as_subclass(_WholeKeys)
        return result.as_subclass(torch.Tensor)
    if isinstance(result, (tuple, list)):
        return type(result)(_wrap(r, size) for r in result)
    return result


def _reads_all_keys_at_once(fn, draws) -> bool:
    """Whether ``fn`` computes with all the keys at once (one softmax over all K
    scores), on the cases with more keys than a block."""
    for draw in draws:
        q, keys, values, block = draw.args
        if keys.shape[0] <= block or draw.number % 3:
            continue
        _WholeKeys.used_whole = False
        wrapped = keys.clone().as_subclass(_WholeKeys)
        try:
            fn(q.clone(), wrapped, values.clone(), block)
        except Exception:
            continue  # it runs on plain tensors: cannot tell
        if _WholeKeys.used_whole:
            return True
    return False


EX_10_1 = Exercise(
    "10.1",
    "online_attention",
    "online_attention(q, keys, values, block_size)",
    online_attention,
    (
        Case("random sizes and block sizes", _online_inputs(), 16),
        Case("float32", in_float32(_online_inputs()), 6),
        Case("one key per block", _online_inputs(block=1), 2),
        Case("large scores (exp would overflow)", _online_inputs(scale=40.0), 4),
        Case("every score below -1500", _online_inputs(negative=True), 4),
    ),
    mistakes(
        lambda **o: lambda q, k, v, b: online(q, k, v, b, **o),
        ONLINE,
        SCALE,
        only=tuple(n for n, _, _ in ONLINE) + ("no-scale", "divide-by-width"),
    ),
    constraint=Constraint(
        "all-keys-at-once",
        "it computes with all the keys at once (e.g. keys @ q): the online softmax "
        "reads block_size keys at a time, keys[start : start + block_size], and never "
        "holds all K scores",
        _reads_all_keys_at_once,
    ),
)


# -- 10.2 merging two partial results --


def merge_reference(out1, lse1, out2, lse2):
    """Attention over two chunks of keys, merged: ``out1, out2 (Q, Dv)`` and ``lse1,
    lse2 (Q,)`` (each chunk's log-sum-exp of the scores) -> ``(out (Q, Dv), lse
    (Q,))``. A query that saw no key in a chunk has ``lse = -inf`` there (and output
    0); one that saw no key in either gets output 0 and ``lse = -inf``."""
    return merge_attention([out1, out2], [lse1, lse2])


def _merge_inputs(shift=0.0, empty=None):
    def make(g):
        Q, Dv = integer(g, 1, 5), integer(g, 1, 4)
        o1, o2 = randn(g, Q, Dv), randn(g, Q, Dv)
        l1 = randn(g, Q) * 2 + shift
        l2 = randn(g, Q) * 4 + shift
        if empty is not None:
            row = integer(g, 0, Q - 1)
            for o, l in ((o1, l1), (o2, l2))[: 2 if empty == "both" else 1]:
                o[row], l[row] = 0.0, -math.inf
        return (o1, l1, o2, l2), {}

    return make


EX_10_2 = Exercise(
    "10.2",
    "merge_partial_attention",
    "merge_partial_attention(out1, lse1, out2, lse2)",
    merge_reference,
    (
        Case("random sizes", _merge_inputs(), 14),
        Case("float32", in_float32(_merge_inputs()), 5),
        Case("large log-sum-exps (around 800)", _merge_inputs(shift=800.0), 4),
        Case("a query that saw no key in one chunk", _merge_inputs(empty="one"), 3),
        Case("a query that saw no key in either chunk", _merge_inputs(empty="both"), 3),
    ),
    mistakes(lambda **o: lambda a, b, c, d: merge(a, b, c, d, **o), MERGE),
    results=("the output", "the log-sum-exp"),
)
