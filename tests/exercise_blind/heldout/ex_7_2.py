import torch

def _c1(X):
    B, H, n, d = X.shape
    return X.transpose(1, 2).reshape(B, n, H * d)

def _c2(X):
    # concatenate the heads along the features
    return torch.cat(X.unbind(dim=1), dim=-1)

def _w_reshape_direct(X):
    B, H, n, d = X.shape
    return X.reshape(B, n, H * d)

def _w_view_after_transpose(X):
    # permutes the wrong pair of axes, then reshapes
    B, H, n, d = X.shape
    return X.permute(0, 2, 3, 1).reshape(B, n, H * d)

def _w_stack_wrong_dim(X):
    B, H, n, d = X.shape
    return torch.stack(X.unbind(1), dim=-2).transpose(-1, -2).reshape(B, n, H * d)

def _w_sum_heads(X):
    B, H, n, d = X.shape
    return X.sum(1).repeat(1, 1, H)

def _w_cat_tokens(X):
    B, H, n, d = X.shape
    return torch.cat(X.unbind(1), dim=1).reshape(B, n, H * d)

SOLUTIONS = [
    dict(name="transpose_reshape", correct=True, mistake="", family="", fn=_c1),
    dict(name="cat_unbind", correct=True, mistake="", family="", fn=_c2),
    dict(name="reshape_no_transpose", correct=False, mistake="Reshapes (B, H, n, d) straight to (B, n, H*d) without moving the head axis, mixing tokens.", family="reshape-vs-transpose", fn=_w_reshape_direct),
    dict(name="permute_d_before_H", correct=False, mistake="Permutes to (B, n, d, H) before flattening, so the features come out interleaved across heads.", family="wrong-split-order", fn=_w_view_after_transpose),
    dict(name="stack_then_transpose", correct=False, mistake="Stacks the heads and transposes the last two axes, producing (d, H) feature order instead of (H, d).", family="wrong-split-order", fn=_w_stack_wrong_dim),
    dict(name="sum_then_repeat", correct=False, mistake="Sums the heads and repeats the result H times instead of concatenating them.", family="wrong-formula", fn=_w_sum_heads),
    dict(name="cat_along_tokens", correct=False, mistake="Concatenates the heads along the token axis and then reshapes, so the rows of the result mix tokens.", family="reshape-vs-transpose", fn=_w_cat_tokens),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'reshape_no_transpose': {'reshape-without-transpose'},
    'permute_d_before_H': {'interleaved'},
    'stack_then_transpose': {'interleaved'},
    'sum_then_repeat': set(),
    'cat_along_tokens': {'reshape-without-transpose'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
