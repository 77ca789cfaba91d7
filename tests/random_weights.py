"""Weights for the tests that compare two models' greedy choices token for token."""

import torch


def big_random_weights(model: torch.nn.Module) -> torch.nn.Module:
    """Draw O(1) random weights in place (matrices N(0, 0.3^2), vectors U(0.5, 1.5));
    returns the model in eval mode. The default small initialisations (transformers'
    N(0, 0.02^2)) give nearly uniform logits, so greedy choices could hinge on round-off."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
            else:
                p.uniform_(0.5, 1.5)
    return model.eval()
