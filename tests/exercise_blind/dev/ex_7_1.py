"""Exercise 7.1: split_heads(X (B, n, E), num_heads) -> (B, H, n, d)."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def split_reshape_transpose(X, num_heads):
    B, n, E = X.shape
    return X.reshape(B, n, num_heads, E // num_heads).transpose(1, 2)


def split_stack_slices(X, num_heads):
    d = X.shape[-1] // num_heads
    return torch.stack([X[:, :, h * d : (h + 1) * d] for h in range(num_heads)], dim=1)


# ---------- wrong ----------
def split_reshape_only(X, num_heads):
    B, n, E = X.shape
    return X.reshape(B, num_heads, n, E // num_heads)


def split_strided(X, num_heads):
    B, n, E = X.shape
    return X.reshape(B, n, E // num_heads, num_heads).permute(0, 3, 1, 2)


def split_transpose_then_reshape(X, num_heads):
    B, n, E = X.shape
    return X.transpose(1, 2).reshape(B, num_heads, n, E // num_heads)


def split_chunk_tokens(X, num_heads):
    return torch.stack(X.chunk(num_heads, dim=1), dim=1)


def split_wrong_size_var(X, num_heads):
    B, n, E = X.shape
    d = n // num_heads  # meant E // num_heads
    return X.view(B, n, num_heads, d).transpose(1, 2)


SOLUTIONS = [
    dict(name="reshape_transpose", correct=True, mistake="", family="", fn=split_reshape_transpose),
    dict(name="stack_slices", correct=True, mistake="", family="", fn=split_stack_slices),
    dict(name="reshape_only", correct=False,
         mistake="Reshapes straight to (B, H, n, d) without the transpose, mixing tokens into heads.",
         family="reshape-no-transpose", fn=split_reshape_only),
    dict(name="strided", correct=False,
         mistake="Reshapes to (B, n, d, H), so head h takes every H-th feature instead of a contiguous block.",
         family="strided-heads", fn=split_strided),
    dict(name="transpose_then_reshape", correct=False,
         mistake="Transposes (B, n, E) to (B, E, n) before the reshape, which gives the right shape but scrambled features.",
         family="transpose-then-reshape", fn=split_transpose_then_reshape),
    dict(name="chunk_tokens", correct=False,
         mistake="Chunks along the token axis instead of the feature axis.",
         family="chunk-wrong-axis", fn=split_chunk_tokens),
    dict(name="wrong_size_var", correct=False,
         mistake="Computes the head width from the sequence length n instead of the width E.",
         family="wrong-size-variable", fn=split_wrong_size_var),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'reshape_only': {'reshape-without-transpose'},
    'strided': {'interleaved-heads'},
    'transpose_then_reshape': {'transpose-then-reshape'},
    'chunk_tokens': {'tokens-split'},
    'wrong_size_var': set(),
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
