"""Chapter 9's claims about trained models, checked over seventeen pre-training seeds.

The notebook trains with seeds 0 and 1 (its time budget) and opens seed 0; this test
repeats every claim that chapter 9 makes about the trained models with seeds 0..16
(seventeen, because readers broke earlier claims with seeds the chapter did not run;
the exceptions the chapter names are seed 4, the mean ahead of the first head right
after pooling 4 heads, and seeds 6 and 14, the first head ahead after 10 uptraining
steps with 2 key/value heads), outside nbval. It does not copy the chapter's code: it
reads the chapter's own definitions (the MQAR data, the training loop, the ablation, the
conversion and uptraining, and the sliding-window decoder, and the upper-case constants,
so the same budget of steps) from the notebook and runs them. One module-scoped fixture
trains and measures every seed once (5 to 7 minutes single-threaded, nearly all of it
training, five models a seed: the chapter's three and the two equal-parameter
controls); each test then checks one
group of claims over all the seeds, so that a failure names the claim and the seeds, and
claims that a result *varies* with the seed can be checked too.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from chapter_code import definitions, run_definitions

import attention_lib as al

# Minutes of training: run by `make long-tests` (and CI), not by `make test`.
pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).parent.parent / "chapters" / "09_watch_attention_learn.ipynb"
FUNCTIONS = {
    "mqar_batch",
    "accuracy",
    "train",
    "train_from_scratch",
    "smooth",
    "without_heads",
    "ablations",
    "convert_and_uptrain",
    "generate_window",
}
TEST_SET = {"test_tokens", "test_targets", "test_asked"}
SEEDS = tuple(range(17))


_wanted = definitions(FUNCTIONS, TEST_SET)


def _load_chapter() -> dict:
    """The chapter's definitions, executed in one namespace, in notebook order."""
    namespace = {"torch": torch, "F": F, "al": al, "math": math, "copy": copy}
    # an upper-case tensor (W, X, ...) is not a constant: its assignment is skipped
    found = run_definitions(NOTEBOOK, namespace, _wanted)
    assert found == FUNCTIONS, f"missing in the chapter: {FUNCTIONS - found}"
    assert TEST_SET <= namespace.keys(), "the chapter's test set was not found"
    # the chapter's budget (the claims are about this budget)
    assert (namespace["STEPS"], namespace["BATCH"], namespace["LR"]) == (200, 32, 3e-3)
    assert namespace["UPTRAIN_STEPS"] == 10 and namespace["CURVE_STEPS"] == (
        10,
        20,
        30,
        40,
    )
    assert namespace["MQA_WIDE"] == 312
    return namespace


def _measure(ch: dict, seed: int) -> dict:
    """Train the three models of 9.3 with `seed` and measure everything the chapter
    claims about them."""
    tokens, targets, asked = ch["test_tokens"], ch["test_targets"], ch["test_asked"]
    smooth, accuracy = ch["smooth"], ch["accuracy"]
    N, SEQ_LEN, H = ch["N"], ch["SEQ_LEN"], ch["H"]
    r = {}

    # 9.3: three models trained from scratch
    runs = {n: ch["train_from_scratch"](k, seed) for n, k in ch["KV_HEADS"].items()}
    r["acc"] = {name: accuracy(m, tokens, targets) for name, (m, _) in runs.items()}
    r["curve"] = {name: smooth(losses) for name, (_, losses) in runs.items()}
    r["first_loss"] = {name: losses[0] for name, (_, losses) in runs.items()}
    # 9.3's equal-parameter control: MQA with a wider MLP (the chapter's), and MHA with
    # a narrower one (fewer parameters than MQA)
    for name, kv, hidden in (("MQA wide", 1, ch["MQA_WIDE"]), ("MHA narrow", H, 200)):
        model, losses = ch["train_from_scratch"](kv, seed, mlp_hidden=hidden)
        r["acc"][name] = accuracy(model, tokens, targets)
        r["curve"][name] = smooth(losses)
        r.setdefault("params", {})[name] = sum(p.numel() for p in model.parameters())
    r["params"]["MHA"], r["params"]["MQA"] = (
        sum(p.numel() for p in runs[n][0].parameters()) for n in ("MHA", "MQA")
    )

    # 9.4: where the questions look, and the head ablation
    mha = runs["MHA"][0].eval()
    with torch.no_grad():
        mha(tokens, need_weights=True)
    W = mha.attention_weights[0][:, :, torch.arange(N, SEQ_LEN, 2)]  # (B, H, N, n)
    on_records = W[..., :N]  # (B, H, N, N)
    r["per_head"] = [
        (on_records[:, h].argmax(dim=-1) == asked).float().mean().item()
        for h in range(H)
    ]
    r["combined"] = (on_records.mean(1).argmax(-1) == asked).float().mean().item()
    r["anywhere"] = (W.mean(dim=1).argmax(dim=-1) == asked).float().mean().item()
    # exercise 2: per head, the hit rate by questioned key
    keys = tokens[:, torch.arange(N, SEQ_LEN, 2)] - ch["QUESTION0"]  # (B, N)
    right = torch.stack([on_records[:, h].argmax(-1) == asked for h in range(H)])
    by_key = torch.stack(
        [right[:, keys == k].float().mean(dim=1) for k in range(ch["NUM_KEYS"])], dim=1
    )  # (H, keys)
    r["key_spread"] = (by_key.max(dim=1).values - by_key.min(dim=1).values).tolist()
    r["drop_one"], r["only_one"] = ch["ablations"](mha)
    r["none_left"] = accuracy(ch["without_heads"](mha, range(H)), tokens, targets)

    # 9.5: conversion and uptraining, the chapter's function: {(Hkv, method): [right
    # after conversion, after 10, 20, 30, 40 steps]}
    curves = ch["convert_and_uptrain"](mha)
    r["converted"] = {key: curve[0] for key, curve in curves.items()}
    r["up"] = {
        key: dict(zip(ch["CURVE_STEPS"], curve[1:], strict=True))
        for key, curve in curves.items()
    }

    # 9.6: generating with and without the cache
    prompts = tokens[:200, : N + 1]
    r["same_tokens"], r["first_answer"] = {}, {}
    for name, (model, _) in runs.items():
        model.eval()
        cached = model.generate(prompts, SEQ_LEN - N - 1)
        uncached = model.generate(prompts, SEQ_LEN - N - 1, use_cache=False)
        r["same_tokens"][name] = torch.equal(cached, uncached)
        r["first_answer"][name] = (
            (cached[:, N + 1] == targets[:200, N]).float().mean().item()
        )

    # exercise 1: the sliding window
    r["window"] = {}
    for window in (4, 2):
        out = ch["generate_window"](mha, tokens[:, : N + 1], 1, window=window)
        r["window"][window] = (out[:, N + 1] == targets[:, N]).float().mean().item()
    return r


@pytest.fixture(scope="module")
def ch():
    return _load_chapter()


@pytest.fixture(scope="module")
def results(ch):
    """{seed: measurements}, single-threaded like the chapter."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {seed: _measure(ch, seed) for seed in SEEDS}
    finally:
        torch.set_num_threads(threads)


def test_all_three_learn_the_lookup_mha_first(ch, results):
    """9.3 and its loss figure."""
    three = ("MHA", "GQA", "MQA")  # the chapter's models (the controls: next test)
    mqa_before_gqa = set()
    for seed, r in results.items():
        acc = {name: r["acc"][name] for name in three}
        curve = {name: r["curve"][name] for name in three}
        assert all(a >= 0.95 for a in acc.values()), (seed, acc)
        assert curve["MHA"][99] < min(curve["GQA"][99], curve["MQA"][99]), seed
        assert all(c[-1] < 0.15 for c in curve.values()), seed  # seed 11: MQA 0.114
        assert all(abs(c[39] - math.log(8)) < 0.15 for c in curve.values()), seed
        assert all(
            abs(loss - math.log(ch["VOCAB"])) < 0.5 for loss in r["first_loss"].values()
        ), seed
        if curve["MQA"][99] < curve["GQA"][99]:
            mqa_before_gqa.add(seed)
    # "In these seeds [0, 1] GQA clicks before MQA, but ... with seed 6, for one, MQA
    # clicked first"
    assert 6 in mqa_before_gqa and not {0, 1} & mqa_before_gqa, mqa_before_gqa


def test_multi_head_first_is_a_tendency(ch):
    """9.3: "MHA before MQA with every one of 26 seeds, but with seed 20 GQA level with
    MHA (its loss at step 100 a little lower)": seeds 17..25, the first 100 steps of
    the chapter's three models (the same batches give the same first 100 steps as a run
    of 200)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        at_100 = {
            (name, seed): ch["smooth"](
                ch["train_from_scratch"](kv, seed, steps=100)[1]
            )[99]
            for seed in range(17, 26)
            for name, kv in ch["KV_HEADS"].items()
        }
    finally:
        torch.set_num_threads(threads)
    for seed in range(17, 26):
        assert at_100["MHA", seed] < at_100["MQA", seed], (seed, at_100)
    gqa_first = {s for s in range(17, 26) if at_100["GQA", s] < at_100["MHA", s]}
    assert gqa_first == {20}, gqa_first
    assert at_100["MHA", 20] - at_100["GQA", 20] < 0.1, at_100  # level: a little lower


def test_mha_first_is_not_the_parameter_count(results):
    """9.3's control: MQA with MHA's parameters still clicks after MHA, and MHA with
    fewer parameters than MQA still clicks first; both learn the lookup."""
    for seed, r in results.items():
        params, acc, at_100 = (
            r["params"],
            r["acc"],
            {k: c[99] for k, c in r["curve"].items()},
        )
        assert params == {
            "MQA wide": 60232,
            "MHA narrow": 52952,
            "MHA": 60176,
            "MQA": 53008,
        }
        assert at_100["MHA"] < at_100["MQA wide"], (seed, at_100)
        assert at_100["MHA narrow"] < min(at_100["MQA"], at_100["GQA"]), (seed, at_100)
        assert acc["MQA wide"] >= 0.95 and acc["MHA narrow"] >= 0.95, (seed, acc)


def test_questions_look_at_the_record(results):
    """9.4: single heads find the record for only part of the questions, their mean
    for most."""
    for seed, r in results.items():
        assert max(r["per_head"]) < 0.8, (seed, r["per_head"])
        assert r["combined"] >= 0.9 and r["combined"] > max(r["per_head"]) + 0.15, seed
    # "over all positions ... from 0.71 to 0.96 over the seeds of the test"
    anywhere = [r["anywhere"] for r in results.values()]
    assert (round(min(anywhere), 2), round(max(anywhere), 2)) == (0.71, 0.96), anywhere


def test_head_ablation(results):
    """9.4: no head does it alone, none is indispensable, the cheapest costs at most two
    points (seed 16: 1.1), and whether every head costs something varies with the seed
    (seed 0, the chapter's figure: every head at least half a point; seed 1: one head
    nothing)."""
    every_head_costs = set()
    for seed, r in results.items():
        drop_one, only_one = r["drop_one"], r["only_one"]
        assert max(only_one) < 0.6 and min(only_one) > 1 / 8, (seed, only_one)
        assert min(drop_one) > 0.85, (seed, drop_one)
        assert max(drop_one) > r["acc"]["MHA"] - 0.02, (seed, drop_one)
        assert abs(r["none_left"] - 1 / 8) < 0.05, seed
        if max(drop_one) < r["acc"]["MHA"] - 0.005:
            every_head_costs.add(seed)
    assert 0 in every_head_costs and 1 not in every_head_costs, every_head_costs


def test_conversion_and_uptraining(ch, results):
    """9.5: the bar chart, the recovery curve and the five observations."""
    ten, forty = ch["UPTRAIN_STEPS"], ch["CURVE_STEPS"][-1]
    mqa_mean_ahead_at_10, gqa4_mean_ahead_converted = set(), set()
    gqa2_first_ahead_at_10, gqa2_mean_ahead_converted = set(), set()
    for seed, r in results.items():
        acc, conv, up = r["acc"], r["converted"], r["up"]
        u10 = {key: tested[ten] for key, tested in up.items()}
        scratch = {2: acc["GQA"], 1: acc["MQA"]}
        for n in (4, 2, 1):
            for method in ("mean", "first"):
                assert conv[n, method] < acc["MHA"] - 0.1, (seed, n, method)
                assert u10[n, method] > conv[n, method], (seed, n, method)
                if n in scratch:
                    assert u10[n, method] < scratch[n], (seed, n, method)
        for method in ("mean", "first"):  # fewer heads, bigger loss
            assert conv[4, method] > conv[2, method] > conv[1, method], (seed, method)
        assert conv[4, "mean"] > 0.55, seed  # "GQA with 4 ... keeps more than half"
        if conv[4, "mean"] > conv[4, "first"]:
            gqa4_mean_ahead_converted.add(seed)
        assert u10[4, "mean"] >= 0.9, seed
        assert u10[4, "mean"] > u10[2, "mean"] > u10[1, "mean"], seed
        assert u10[4, "mean"] > u10[4, "first"], seed  # after 10 steps the mean wins
        if u10[2, "mean"] <= u10[2, "first"]:
            gqa2_first_ahead_at_10.add(seed)
        assert conv[1, "first"] > conv[1, "mean"], seed  # pooling 8: the first ahead
        if conv[2, "mean"] >= conv[2, "first"]:  # pooling 4: the first ahead, but ...
            gqa2_mean_ahead_converted.add(seed)
        assert u10[1, "mean"] < acc["MQA"] - 0.3, seed  # MQA: far below, 10 steps
        assert up[1, "mean"][forty] > up[1, "first"][forty], seed  # mean wins at 40
        assert all(up[n, "mean"][forty] >= 0.9 for n in (4, 2)), seed
        assert up[1, "mean"][forty] >= 0.8, seed
        assert up[1, "mean"][forty] > up[1, "mean"][ten] + 0.2, seed
        # the recovery curve: with mean-pooling GQA gets most of the loss back within
        # 20 steps (10 %), MQA more slowly
        back = {
            n: (up[n, "mean"][20] - conv[n, "mean"]) / (acc["MHA"] - conv[n, "mean"])
            for n in (4, 2, 1)
        }
        assert back[1] < back[2] and min(back[4], back[2]) > 0.5, (seed, back)
        if u10[1, "mean"] > u10[1, "first"]:
            mqa_mean_ahead_at_10.add(seed)
    # "for our MQA, which of the two is ahead after 10 steps changes with the seed"
    assert 0 < len(mqa_mean_ahead_at_10) < len(SEEDS), mqa_mean_ahead_at_10
    # "with 4 [heads pooled], with every seed but one of the seventeen (seed 4)"; "(with
    # 2 key/value heads, [the mean wins after 10 steps] with every seed but two of the
    # seventeen, seeds 6 and 14)"
    assert gqa2_mean_ahead_converted == {4}, gqa2_mean_ahead_converted
    assert gqa2_first_ahead_at_10 == {6, 14}, gqa2_first_ahead_at_10
    # "with 2 heads pooled [Hkv = 4], which is ahead right after conversion changes
    # with the seed: the mean with both seeds here and with 12 of the 17 seeds of the
    # test, the first head with the other five"
    assert {0, 1} <= gqa4_mean_ahead_converted, gqa4_mean_ahead_converted
    assert len(gqa4_mean_ahead_converted) == 12, gqa4_mean_ahead_converted
    # "MQA by the mean: not much more than chance, 0.13 to 0.19 over the seventeen
    # seeds"
    mqa_mean = [r["converted"][1, "mean"] for r in results.values()]
    assert (round(min(mqa_mean), 2), round(max(mqa_mean), 2)) == (0.13, 0.19), mqa_mean
    # "GQA with 4 key/value heads keeps more than half (0.58 to 0.81 ...)"
    gqa4_mean = [r["converted"][4, "mean"] for r in results.values()]
    assert (round(min(gqa4_mean), 2), round(max(gqa4_mean), 2)) == (0.58, 0.81), (
        gqa4_mean
    )
    # "with 2 key/value heads 0.17 to 0.50 of the answers are left, by either method"
    gqa2 = [r["converted"][2, m] for r in results.values() for m in ("mean", "first")]
    assert (round(min(gqa2), 2), round(max(gqa2), 2)) == (0.17, 0.50), gqa2


def test_generation_with_and_without_cache(results):
    """9.6: the cache changes the cost, not the tokens; the first answer is right."""
    for seed, r in results.items():
        assert all(r["same_tokens"].values()), seed
        assert all(a >= 0.95 for a in r["first_answer"].values()), (seed, r)


def test_exercises(ch, results):
    """Exercise 1 (a sliding window answers as predicted, within 0.05) and exercise 2
    (every head is clearly better at some keys than at others)."""
    N = ch["N"]
    for seed, r in results.items():
        for window, measured in r["window"].items():
            visible = (window - 1) / N
            predicted = visible + (1 - visible) / ch["NUM_VALUES"]
            assert abs(measured - predicted) < 0.05, (seed, window, measured)
        assert min(r["key_spread"]) > 0.15, (seed, r["key_spread"])  # seed 8: 0.18
