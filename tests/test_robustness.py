"""What an outside test of the library found: kept autograd graphs, silent bad lengths
and sizes, and graph breaks under torch.compile / torch.export. Each test pins the fix.
"""

import copy

import pytest
import torch

import attention_lib as al


def modules_with_weights():
    return [
        (al.MultiHeadAttention(8, 2), lambda m, x: m(x, x, x)),
        (al.GroupedQueryAttention(8, 4, 2), lambda m, x: m(x, x, x)),
        (al.SelfAttention(8, 4), lambda m, x: m(x)),
        (al.DotProductAttention(), lambda m, x: m(x, x, x)),
        (al.AdditiveAttention(8, 8, 6), lambda m, x: m(x, x, x)),
    ]


@pytest.mark.parametrize("index", range(5))
def test_attention_weights_keep_no_autograd_graph(index):
    module, call = modules_with_weights()[index]
    x = torch.randn(2, 3, 8, requires_grad=True)
    call(module, x).sum().backward()  # the forward itself still trains
    assert x.grad is not None
    assert (
        module.attention_weights is not None
        and module.attention_weights.grad_fn is None
    )
    assert not module.attention_weights.requires_grad
    copy.deepcopy(
        module
        # raised "Only Tensors created explicitly by the user support the deepcopy
        # protocol"
    )


def test_nadaraya_watson_module_keeps_no_graph():
    model = al.NadarayaWatson(bandwidth=0.5)
    x = torch.linspace(0, 1, 5)
    model(x, x, x).sum().backward()
    assert model.attention_weights.grad_fn is None
    copy.deepcopy(model)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 2.5])
def test_non_finite_or_fractional_valid_lens_are_refused(bad):
    scores = torch.randn(2, 3, 4)
    with pytest.raises(
        ValueError,
        match=r"expected whole-number lengths .* got \[3\.0, (nan|inf|2\.5)\]",
    ):
        al.masked_softmax(scores, torch.tensor([3.0, bad]))
    with pytest.raises(ValueError, match="whole-number lengths"):
        al.MultiHeadAttention(8, 2)(
            torch.randn(2, 3, 8),
            torch.randn(2, 4, 8),
            torch.randn(2, 4, 8),
            valid_lens=torch.tensor([3.0, bad]),
            need_weights=False,
        )


def test_whole_float_valid_lens_mean_what_integer_ones_do():
    scores = torch.randn(2, 3, 4)
    torch.testing.assert_close(
        al.masked_softmax(scores, torch.tensor([3.0, 1.0])),
        al.masked_softmax(scores, torch.tensor([3, 1])),
    )


@pytest.mark.parametrize(
    "args,match",
    [
        ((-8, 2), "num_hiddens to be a positive integer, got -8"),
        ((8, 2.0), "num_heads to be a positive integer, got 2.0"),
        ((0, 2), "num_hiddens to be a positive integer, got 0"),
        ((8, 0), "num_heads to be a positive integer, got 0"),
        ((8, True), "num_heads to be a positive integer, got True"),
    ],
)
def test_multihead_sizes_must_be_positive_integers(args, match):
    with pytest.raises(ValueError, match=match):
        al.MultiHeadAttention(*args)


@pytest.mark.parametrize(
    "make,match",
    [
        (
            lambda: al.GroupedQueryAttention(8, 4, -2),
            "num_kv_heads to be a positive integer, got -2",
        ),
        (lambda: al.SelfAttention(0, 4), "d_in to be a positive integer, got 0"),
        (lambda: al.SelfAttention(4, 4, 2.5), "d_v to be a positive integer, got 2.5"),
        (
            lambda: al.AdditiveAttention(4, 4, -1),
            "num_hiddens to be a positive integer, got -1",
        ),
        (
            lambda: al.PositionalEncoding(8, max_len=0),
            "max_len to be a positive integer, got 0",
        ),
        (
            lambda: al.MultiHeadAttention(8, 2, dropout="0.1"),
            r"dropout: expected a probability in \[0, 1\), got '0.1'",
        ),
    ],
)
def test_other_constructors_validate_their_sizes(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("need_weights", [True, False])
def test_valid_lens_do_not_break_the_graph(need_weights):
    """torch.compile(fullgraph=True) and torch.export used to fail on `(valid_lens <
    0).any()`, a data-dependent branch; the values are now checked only in eager mode.
    """
    torch.manual_seed(0)
    mha = al.MultiHeadAttention(16, 4).eval()
    x, lens = torch.randn(2, 5, 16), torch.tensor([5, 3])
    compiled = torch.compile(mha, fullgraph=True, backend="eager")
    torch.testing.assert_close(
        compiled(x, x, x, valid_lens=lens, need_weights=need_weights),
        mha(x, x, x, valid_lens=lens, need_weights=need_weights),
    )

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, x, lens):
            return self.mha(x, x, x, valid_lens=lens, need_weights=need_weights)

    # export: the fused path (storing .attention_weights on the readable one is a side
    # effect)
    if need_weights:
        return
    exported = torch.export.export(Wrapper(), (x, lens))
    torch.testing.assert_close(
        exported.module()(x, lens),
        mha(x, x, x, valid_lens=lens, need_weights=need_weights),
    )
