"""Chapter 4's claims about its trained reversal models, checked over eight seeds.

The notebook trains the attention decoder and the uniform-weights ablation once, with
seed 0 (its time budget); this test repeats every claim that section 4.8 makes about
the trained models with seeds 0..7 (initial weights drawn with `seed`, training
strings with `seed + 1`, as the chapter's `train` does), outside nbval (about a minute
single-threaded), and the chapter's run trained four times as long. It does not
copy the chapter's code: it reads the chapter's own definitions (the data, the
encoder, the decoders, the training loop, greedy decoding, the validation strings and
the upper-case constants) from the notebook and runs them; only the few lines that
measure the alignment are repeated here. One module-scoped fixture trains and measures
every seed once; each test then checks one group of claims over all the seeds, so that
a failure names the claim and the seeds.

Two claims hold for most seeds but not all, and the chapter says so: the peak sits *on*
the mirror at most digit steps, and the spill falls between steps 60 and 120. They hold
for six of the eight seeds (0..5); seeds 6 and 7 are checked to be the exceptions the
text describes.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from chapter_code import definitions, run_definitions
from torch import nn

import attention_lib as al

# Minutes of training: run by `make long-tests` (and CI), not by `make test`.
pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).parent.parent / "chapters" / "04_additive_attention.ipynb"
DEFINITIONS = {
    "reversal_batch",
    "Encoder",
    "AttentionDecoder",
    "UniformDecoder",
    "neighbour_spill",
    "train",
    "greedy_decode",
}
OTHER_NAMES = {"vocab", "_"}  # besides upper-case constants and the val_* strings
SEEDS = range(8)
# the exceptions the chapter names: the peak settles beside the mirror at many steps
OFF_MIRROR_SEEDS = (6, 7)
ON_MIRROR_SEEDS = [seed for seed in SEEDS if seed not in OFF_MIRROR_SEEDS]


# the functions and classes above, constants (upper-case names), the vocabulary and the
# validation strings
_wanted = definitions(DEFINITIONS, OTHER_NAMES, prefixes=("val_",))


def _load_chapter() -> dict:
    """The chapter's definitions, executed in one namespace, in notebook order."""
    namespace = {"torch": torch, "F": F, "nn": nn, "al": al, "math": math}
    # an upper-case tensor (W_16, ...) is not a constant: its assignment is skipped
    found = run_definitions(NOTEBOOK, namespace, _wanted)
    assert found == DEFINITIONS, f"missing in the chapter: {DEFINITIONS - found}"
    assert "val_src" in namespace, "the chapter's validation strings were not found"
    # the chapter's budget (the claims are about this budget)
    defaults = namespace["train"].__defaults__
    assert defaults == (120, True, 0), defaults
    assert (namespace["MIN_LEN"], namespace["MAX_LEN"]) == (5, 7)
    return namespace


def _measure(ch: dict, seed: int, ablation: bool = True, num_steps: int = 120) -> dict:
    """Train the attention decoder (and, with `ablation`, the uniform one) with `seed`
    for `num_steps` steps and measure what section 4.8 claims."""
    r = {}
    encoder, decoder, losses, spill = ch["train"](
        ch["AttentionDecoder"], num_steps=num_steps, seed=seed
    )
    r["losses"], r["spill"] = losses, spill
    # the chapter's test strings (seed 123) and greedy decoding
    src, lens, _, target = ch["reversal_batch"](500, torch.Generator().manual_seed(123))
    predicted, alignment = ch["greedy_decode"](encoder, decoder, src, lens)
    real = target != ch["PAD"]
    r["token"] = (predicted == target)[real].float().mean().item()
    r["sequence"] = ((predicted == target) | ~real).all(1).float().mean().item()

    # "What does it attend to?": distance of each source position from the mirror
    max_len = ch["MAX_LEN"]
    pos = torch.arange(max_len + 1)  # decoder steps t
    mirror = lens[:, None] - 1 - pos  # (500, T+1)
    digit_steps = pos < lens[:, None]  # (500, T+1)
    distance = (torch.arange(max_len) - mirror[..., None]).abs()  # (500, T+1, T)
    peak_distance = (alignment.argmax(-1) - mirror).abs()[digit_steps]
    r["peak_on_mirror"] = (peak_distance == 0).float().mean().item()
    r["peak_within_one"] = (peak_distance <= 1).float().mean().item()
    r["weight_at"] = {
        name: (alignment * where).sum(-1)[digit_steps].mean().item()
        for name, where in [
            ("mirror", distance == 0),
            ("neighbours", distance == 1),
            ("further", distance >= 2),
        ]
    }
    beside = digit_steps & (alignment.argmax(-1) != mirror)
    r["beside_accuracy"] = (predicted == target)[beside].float().mean().item()
    # does h_1 carry its neighbours' digits? (the chapter's probe, seed 5)
    with torch.no_grad():
        probe, probe_lens, _, _ = ch["reversal_batch"](
            200, torch.Generator().manual_seed(5)
        )
        h_1 = encoder(probe, probe_lens)[0][:, 1]

        def h_1_change(position):
            changed = probe.clone()
            changed[:, position] = (changed[:, position] + 5) % 10
            moved = encoder(changed, probe_lens)[0][:, 1] - h_1
            return moved.norm(dim=-1).mean().item()

        r["change_neighbour"], r["change_far"] = h_1_change(2), h_1_change(4)

    if not ablation:
        return r
    # the ablation: uniform weights, same seed, data and budget
    u_encoder, u_decoder, u_losses, _ = ch["train"](
        ch["UniformDecoder"], record_spill=False, seed=seed
    )
    u_predicted, _ = ch["greedy_decode"](u_encoder, u_decoder, src, lens)
    r["uniform_loss"] = u_losses[-1]
    r["uniform_token"] = (u_predicted == target)[real].float().mean().item()
    r["uniform_sequence"] = ((u_predicted == target) | ~real).all(1).float().mean()
    r["uniform_sequence"] = r["uniform_sequence"].item()
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


def test_it_learns_to_reverse(results):
    """Training: the loss falls from chance level, and greedy decoding is right."""
    for seed, r in results.items():
        losses = r["losses"]
        assert abs(losses[0] - math.log(13)) < 0.3, (seed, losses[0])
        assert sum(losses[-10:]) / 10 < 0.2, (seed, losses[-10:])
        assert r["token"] > 0.95 and r["sequence"] > 0.9, (seed, r["token"])
        # the text's ranges: 97.6-99.7 % of the tokens, 94-99 % of the strings
        assert 0.975 <= r["token"] and 0.935 <= r["sequence"], seed
        assert 0.04 < losses[-1] < 0.15, (seed, losses[-1])  # "0.05 to 0.14"


def test_it_needs_the_attention(results):
    """The uniform-weights ablation: most digits right, most strings wrong, far
    behind the attention decoder after the same 120 steps."""
    for seed in SEEDS:
        r = results[seed]
        assert r["token"] > r["uniform_token"] + 0.15, seed
        assert r["sequence"] > r["uniform_sequence"] + 0.4, seed
        assert r["uniform_token"] > 0.5 and r["uniform_sequence"] < 0.5, seed
        assert r["uniform_loss"] > 2 * r["losses"][-1], seed
        # the text's ranges: 66-72 % of the tokens, 25-36 % of the strings
        assert 0.655 < r["uniform_token"] < 0.725, (seed, r["uniform_token"])
        assert 0.245 < r["uniform_sequence"] < 0.365, (seed, r["uniform_sequence"])


def test_it_attends_at_or_beside_the_mirror(results):
    """The alignment: the largest weight within one position of the mirror at nearly
    every digit step, little weight further away, and the right digit written where
    it reads beside the mirror; whether the peak sits *on* the mirror varies."""
    for seed, r in results.items():
        assert r["peak_within_one"] > 0.95, (seed, r["peak_within_one"])
        assert r["weight_at"]["further"] < 0.15, (seed, r["weight_at"])
        assert r["weight_at"]["mirror"] + r["weight_at"]["neighbours"] > 0.85, seed
        assert r["beside_accuracy"] > 0.95, (seed, r["beside_accuracy"])
        assert r["change_neighbour"] > 1.5 * r["change_far"], seed


def test_usually_on_the_mirror_but_not_always(results):
    """Seeds 0..5: the peak on the mirror at most digit steps, the mirror getting the
    most weight, and a spill lower at step 120 than at step 60 (the undertraining part).
    Seeds 6 and 7: the peak on the mirror at fewer steps (about half with seed 6, about
    three quarters with 7), nearly as much weight on the two neighbours as on the mirror
    (more with seed 6), and a spill that grows from step 60 to step 120."""
    for seed in ON_MIRROR_SEEDS:
        r = results[seed]
        assert r["peak_on_mirror"] > 0.8, (seed, r["peak_on_mirror"])
        assert r["weight_at"]["mirror"] > 0.5, (seed, r["weight_at"])
        assert r["weight_at"]["neighbours"] > 0.25, (seed, r["weight_at"])
        assert r["spill"][120] < r["spill"][60] - 0.03, (seed, r["spill"])
    peaks = {seed: results[seed]["peak_on_mirror"] for seed in OFF_MIRROR_SEEDS}
    assert 0.35 < peaks[6] < 0.6 and 0.7 < peaks[7] < 0.8, peaks  # "47 %", "77 %"
    for seed in OFF_MIRROR_SEEDS:
        r = results[seed]
        assert r["weight_at"]["neighbours"] > 0.85 * r["weight_at"]["mirror"], seed
        assert r["spill"][120] > r["spill"][60], (seed, r["spill"])
    weight_at = results[6]["weight_at"]
    assert weight_at["neighbours"] > weight_at["mirror"], weight_at  # seed 6: more


@pytest.fixture(scope="module")
def longer(ch):
    """The chapter's run (seed 0) trained four times as long, 480 steps."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _measure(ch, 0, ablation=False, num_steps=480)
    finally:
        torch.set_num_threads(threads)


def test_longer_training_spills_less_but_still_spills(results, longer):
    """The chapter's run trained four times as long, 480 steps, to a last-batch loss of
    about 0.001, still spills 0.27 of its weight onto the neighbours, against 0.38 after
    120 steps: more training lowers the spill, but not by much."""
    assert 0.0005 < longer["losses"][-1] < 0.002, longer["losses"][-1]
    after_120 = results[0]["weight_at"]["neighbours"]
    assert abs(after_120 - 0.38) < 0.015, after_120  # the chapter's printed 0.38
    assert abs(longer["weight_at"]["neighbours"] - 0.27) < 0.015, longer["weight_at"]
    assert longer["token"] > 0.99, longer["token"]


def _uniform_480(ch: dict, seed: int) -> dict:
    """The uniform-weights ablation trained 480 steps, with `seed`, on the chapter's
    test strings (seed 123)."""
    encoder, decoder, _, _ = ch["train"](
        ch["UniformDecoder"], num_steps=480, record_spill=False, seed=seed
    )
    src, lens, _, target = ch["reversal_batch"](500, torch.Generator().manual_seed(123))
    predicted, _ = ch["greedy_decode"](encoder, decoder, src, lens)
    real = target != ch["PAD"]
    return {
        "token": (predicted == target)[real].float().mean().item(),
        "sequence": ((predicted == target) | ~real).all(1).float().mean().item(),
    }


@pytest.fixture(scope="module")
def longer_ablation(ch):
    """Seeds 0 and 1 trained 480 steps: the uniform decoder, and (seed 1) the attention
    decoder, whose seed-0 run is the `longer` fixture's."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {
            "uniform": {seed: _uniform_480(ch, seed) for seed in (0, 1)},
            "attention_1": _measure(ch, 1, ablation=False, num_steps=480),
        }
    finally:
        torch.set_num_threads(threads)


def test_a_longer_run_narrows_the_ablation_gap_without_reversing_it(
    longer, longer_ablation
):
    """Section 4.8: trained four times as long (480 steps, seeds 0 and 1) the uniform
    decoder gets about 97 % of the tokens and 92-94 % of the strings right, against
    100 % with attention: a gap of about 7 points of string accuracy, not reversed."""
    attention = {0: longer, 1: longer_ablation["attention_1"]}
    for seed, u in longer_ablation["uniform"].items():
        a = attention[seed]
        assert a["token"] > 0.995 and a["sequence"] > 0.99, (seed, a["sequence"])
        assert 0.96 < u["token"] < 0.98, (seed, u)
        assert 0.915 < u["sequence"] < 0.945, (seed, u)
        assert 0.04 < a["sequence"] - u["sequence"] < 0.1, (seed, a, u)
