import pytest
import torch

from d2l_reference import load_d2l


@pytest.fixture(scope="session")
def d2l():
    """d2l 1.0.3's reference code (see tests/d2l_reference.py for how it is loaded without torchvision)."""
    return load_d2l()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


TOL = {
    torch.float64: dict(atol=1e-10, rtol=1e-8),
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.float16: dict(atol=2e-3, rtol=2e-3),
    torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
}
