import pytest
import torch

from d2l_reference import load_d2l


@pytest.fixture(scope="session")
def d2l():
    """d2l 1.0.3's reference code (see tests/d2l_reference.py for how it is loaded
    without torchvision)."""
    return load_d2l()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
