"""Exercise 7.2: merge_heads(X (B, H, n, d)) -> (B, n, H*d), inverse of split_heads."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def merge_transpose_reshape(X):
    B, H, n, d = X.shape
    return X.transpose(1, 2).reshape(B, n, H * d)


def merge_cat_heads(X):
    return torch.cat([X[:, h] for h in range(X.shape[1])], dim=-1)


# ---------- wrong ----------
def merge_reshape_only(X):
    B, H, n, d = X.shape
    return X.reshape(B, n, H * d)


def merge_strided(X):
    B, H, n, d = X.shape
    return X.permute(0, 2, 3, 1).reshape(B, n, H * d)


def merge_view_noncontiguous(X):
    B, H, n, d = X.shape
    return X.transpose(1, 2).view(B, n, H * d)


def merge_wrong_transpose(X):
    B, H, n, d = X.shape
    return X.transpose(2, 3).reshape(B, n, H * d)


def merge_flatten_from_1(X):
    return X.transpose(1, 2).flatten(1)


SOLUTIONS = [
    dict(name="transpose_reshape", correct=True, mistake="", family="", fn=merge_transpose_reshape),
    dict(name="cat_heads", correct=True, mistake="", family="", fn=merge_cat_heads),
    dict(name="reshape_only", correct=False,
         mistake="Reshapes (B, H, n, d) to (B, n, H*d) without first moving the head axis next to d.",
         family="reshape-no-transpose", fn=merge_reshape_only),
    dict(name="strided", correct=False,
         mistake="Permutes to (B, n, d, H) before flattening, interleaving the heads' features.",
         family="strided-heads", fn=merge_strided),
    dict(name="view_noncontiguous", correct=False,
         mistake="Calls .view on the transposed (non-contiguous) tensor, which raises for more than one head.",
         family="view-non-contiguous", fn=merge_view_noncontiguous),
    dict(name="wrong_transpose", correct=False,
         mistake="Transposes the n and d axes instead of H and n before reshaping.",
         family="wrong-transpose-axes", fn=merge_wrong_transpose),
    dict(name="flatten_from_1", correct=False,
         mistake="Flattens from dim 1 instead of dim 2, merging the tokens as well.",
         family="flatten-wrong-start", fn=merge_flatten_from_1),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'reshape_only': {'reshape-without-transpose'},
    'strided': {'interleaved'},
    'view_noncontiguous': {'view-not-contiguous'},
    'wrong_transpose': {'wrong-axes-swapped'},
    'flatten_from_1': {'tokens-merged-too'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
