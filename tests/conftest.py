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


# `make test` runs two xdist workers with `--dist loadscope --no-loadscope-reorder`: a
# module -- a notebook's cells, a browser module's pages -- goes to one worker whole, in
# the order collected. Collected as is (chapters first), the site's page checks started
# last and one worker ran them alone at the end. So the longest scopes go first
# (measured in make test, seconds of one worker): then the short ones fill both workers.
LONGEST_FIRST = [
    "tests/integration/test_site_pages.py",  # 250: every page at 1280 px, dark, 390 px
    "tests/integration/test_site_zh.py",  # 30: two Chinese pages at 390 px, the switch
    "tests/integration/test_site.py",  # 90
    "chapters/09_watch_attention_learn.ipynb",  # 65: three small models trained
    "tests/integration/test_jupyterlab.py",  # 65: JupyterLab over every chapter
    "chapters/11_attention_in_a_real_model.ipynb",  # 40: SmolLM2
    "chapters/13_linear_attention.ipynb",  # 55: five small models trained
    "chapters/12_multi_head_latent_attention.ipynb",  # 30
]


# tryfirst: the Chinese notebooks (chapters/zh_CN/) under nbval are marked slow before -m
# selects: make long-tests runs them (make test, within its 9 minutes, the English ones).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.startswith("chapters/zh_CN/"):
            item.add_marker(pytest.mark.slow)
    missing = [p for p in LONGEST_FIRST if not (config.rootpath / p).is_file()]
    if missing:  # a renamed file would silently lose its place
        raise pytest.UsageError(f"tests/conftest.py LONGEST_FIRST: no {missing}")
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))

