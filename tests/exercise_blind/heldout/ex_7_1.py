import torch

def _c1(X, num_heads):
    B, n, E = X.shape
    d = E // num_heads
    return X.view(B, n, num_heads, d).permute(0, 2, 1, 3)

def _c2(X, num_heads):
    # explicit slices, one per head
    d = X.shape[-1] // num_heads
    return torch.stack([X[..., h * d:(h + 1) * d] for h in range(num_heads)], dim=1)

def _w_reshape_direct(X, num_heads):
    B, n, E = X.shape
    return X.reshape(B, num_heads, n, E // num_heads)

def _w_d_first(X, num_heads):
    B, n, E = X.shape
    d = E // num_heads
    return X.reshape(B, n, d, num_heads).permute(0, 3, 1, 2)

def _w_wrong_permute(X, num_heads):
    B, n, E = X.shape
    d = E // num_heads
    return X.reshape(B, n, num_heads, d).permute(0, 2, 3, 1).reshape(B, num_heads, n, d)

def _w_transpose_before(X, num_heads):
    B, n, E = X.shape
    d = E // num_heads
    return X.transpose(1, 2).reshape(B, num_heads, n, d)

def _w_chunk_tokens(X, num_heads):
    # chunks along the token axis instead of the feature axis, then reshapes
    B, n, E = X.shape
    d = E // num_heads
    return torch.stack(X.reshape(B, -1, d).chunk(num_heads, dim=1), dim=1)

SOLUTIONS = [
    dict(name="view_permute", correct=True, mistake="", family="", fn=_c1),
    dict(name="stack_slices", correct=True, mistake="", family="", fn=_c2),
    dict(name="reshape_no_transpose", correct=False, mistake="Reshapes (B, n, E) straight to (B, H, n, d) without the transpose, mixing tokens into heads.", family="reshape-vs-transpose", fn=_w_reshape_direct),
    dict(name="d_before_H", correct=False, mistake="Splits the features as (d, H) instead of (H, d), so head h gets every H-th feature (strided) instead of a contiguous block.", family="wrong-split-order", fn=_w_d_first),
    dict(name="permute_then_reshape", correct=False, mistake="Permutes to (B, H, d, n) and reshapes to (B, H, n, d), which keeps the shape but scrambles tokens and features.", family="wrong-transpose", fn=_w_wrong_permute),
    dict(name="transpose_features_first", correct=False, mistake="Transposes to (B, E, n) first and reshapes that straight to (B, H, n, d), which keeps the shape but mixes features into the token axis.", family="wrong-transpose", fn=_w_transpose_before),
    dict(name="reshape_tokens_then_chunk", correct=False, mistake="Reshapes to (B, n*H, d) and chunks along the flattened token axis, giving head h a block of rows rather than columns.", family="reshape-vs-transpose", fn=_w_chunk_tokens),
]


# -- added with the checker's tests (not by the tester), after the one run of this set
# on the final checker: the diagnosis names that rightly name each wrong solution's
# mistake, judged from its `mistake` sentence against each diagnosis's text (also the
# right ones the checker did not give); an empty set: no diagnosis would be right.
ACCEPT = {
    'reshape_no_transpose': {'reshape-without-transpose'},
    'd_before_H': {'interleaved-heads'},
    'permute_then_reshape': {'transpose-then-reshape'},
    'transpose_features_first': {'transpose-then-reshape'},
    'reshape_tokens_then_chunk': {'reshape-without-transpose'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
