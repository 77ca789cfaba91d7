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
# the order collected. Collected as is (chapters first, then tests/ in alphabetical order),
# a long scope could start last and leave one worker running it alone at the end. So the
# longest scopes go first (seconds of one worker in make test, 2026-11-29), then the many
# short ones fill both workers.
LONGEST_FIRST = [
    "chapters/09_watch_attention_learn.ipynb",  # 110: three small models trained
    "chapters/11_attention_in_a_real_model.ipynb",  # 105: SmolLM2
    "chapters/13_linear_attention.ipynb",  # 75: five small models trained
    "tests/test_exercises.py",  # 75: every exercise's checker, the blind solutions
    "tests/test_portable.py",  # 55
    "chapters/12_multi_head_latent_attention.ipynb",  # 50
    "tests/integration/test_site.py",  # 50: the search, the landing page, a phone
    "tests/integration/test_site_pages.py",  # 45: IN_MAKE_TEST's pages, light/dark/phone
    "chapters/10_how_attention_runs_fast.ipynb",  # 40
    "tests/integration/test_jupyterlab.py",  # 35: three chapters in JupyterLab
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

