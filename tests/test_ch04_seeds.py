"""Chapter 4's claims about its trained reversal models, checked over eight seeds.

The notebook trains the attention decoder and the uniform-weights ablation once, with
seed 0 (its time budget); this test repeats every claim that section 4.8 makes about
the trained models with seeds 0..7 (initial weights drawn with `seed`, training
strings with `seed + 1`, as the chapter's `train` does), outside nbval, the learning
rates the two decoders are compared at (0.005, 0.01 and 0.02 for both, seeds 0..4),
and the chapter's run trained four times as long. It does not copy the chapter's code:
it reads the chapter's own definitions (the data, the encoder, the decoders, the
training loop, greedy decoding, the one-annotation decoding, the validation strings and
the upper-case constants) from the notebook and runs them; only the few lines that
measure the alignment are repeated here. Module-scoped fixtures train and measure every
seed once; each test then checks one group of claims over all the seeds, so that a
failure names the claim and the seeds.

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
    "decode_reading_one",
}
OTHER_NAMES = {"vocab", "_"}  # besides upper-case constants and the val_* strings
SEEDS = range(8)
# the exceptions the chapter names: the peak settles beside the mirror at many steps
OFF_MIRROR_SEEDS = (6, 7)
ON_MIRROR_SEEDS = [seed for seed in SEEDS if seed not in OFF_MIRROR_SEEDS]
# the learning rates both decoders are tried at, and the seeds of that sweep
RATES = (0.005, 0.01, 0.02)
RATE_SEEDS = range(5)
ATTENTION_LR = 0.005  # the chapter's `train` default, chosen for the attention model


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
    # the chapter's budget and rates (the claims are about them)
    defaults = namespace["train"].__defaults__
    assert defaults == (120, True, 0, ATTENTION_LR), defaults
    assert namespace["UNIFORM_LR"] == 0.01, namespace["UNIFORM_LR"]
    assert (namespace["MIN_LEN"], namespace["MAX_LEN"]) == (5, 7)
    return namespace


def _test_strings(ch: dict):
    """The chapter's test strings (seed 123)."""
    return ch["reversal_batch"](500, torch.Generator().manual_seed(123))


def _accuracy(ch: dict, encoder, decoder) -> dict:
    """Token and string accuracy of greedy decoding on the chapter's test strings."""
    src, lens, _, target = _test_strings(ch)
    predicted, _ = ch["greedy_decode"](encoder, decoder, src, lens)
    real = target != ch["PAD"]
    return {
        "token": (predicted == target)[real].float().mean().item(),
        "sequence": ((predicted == target) | ~real).all(1).float().mean().item(),
    }


def _measure(ch: dict, seed: int, ablation: bool = True, num_steps: int = 120) -> dict:
    """Train the attention decoder (and, with `ablation`, the uniform one at the
    chapter's UNIFORM_LR) with `seed` for `num_steps` steps and measure what section
    4.8 claims."""
    r = {}
    encoder, decoder, losses, spill = ch["train"](
        ch["AttentionDecoder"], num_steps=num_steps, seed=seed
    )
    r["losses"], r["spill"] = losses, spill
    src, lens, _, target = _test_strings(ch)
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
    r["beside_mirror_weight"] = (
        (alignment * (distance == 0)).sum(-1)[beside].mean().item()
    )
    # the one-hot ablation: the digit steps read one annotation only
    r["learned_accuracy"] = (predicted == target)[digit_steps].float().mean().item()
    r["reading_one"] = {}
    for offset in (0, 1, -1):
        one_predicted, used = ch["decode_reading_one"](
            encoder, decoder, src, lens, offset
        )
        read = (mirror + offset).clamp(0, max_len - 1)  # the position read
        r["reading_one"][offset] = (
            (one_predicted == target)[used].float().mean().item(),
            (one_predicted == src.gather(1, read))[used].float().mean().item(),
        )
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
    # the ablation: uniform weights, same seed, data and budget, its own rate
    u_encoder, u_decoder, u_losses, _ = ch["train"](
        ch["UniformDecoder"], record_spill=False, seed=seed, lr=ch["UNIFORM_LR"]
    )
    r["uniform_loss"] = u_losses[-1]
    u = _accuracy(ch, u_encoder, u_decoder)
    r["uniform_token"], r["uniform_sequence"] = u["token"], u["sequence"]
    return r


def _at_rate(ch: dict, decoder_class: str, seed: int, lr: float, num_steps=120):
    """Token and string accuracy of a decoder trained at `lr`."""
    encoder, decoder, losses, _ = ch["train"](
        ch[decoder_class], num_steps=num_steps, record_spill=False, seed=seed, lr=lr
    )
    return {**_accuracy(ch, encoder, decoder), "loss": losses[-1]}


def _single_threaded(make):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return make()
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def ch():
    return _load_chapter()


@pytest.fixture(scope="module")
def results(ch):
    """{seed: measurements}, single-threaded like the chapter."""
    return _single_threaded(lambda: {seed: _measure(ch, seed) for seed in SEEDS})


@pytest.fixture(scope="module")
def rates(ch, results):
    """{(decoder, lr): {seed: accuracies}} for both decoders at the three rates, seeds
    0..4 (the chapter's own rates taken from `results`)."""

    def make():
        out = {}
        for name, decoder_class, own in [
            ("attention", "AttentionDecoder", ATTENTION_LR),
            ("uniform", "UniformDecoder", ch["UNIFORM_LR"]),
        ]:
            for lr in RATES:
                if lr == own:
                    key = "" if name == "attention" else "uniform_"
                    out[name, lr] = {
                        seed: {
                            "token": results[seed][key + "token"],
                            "sequence": results[seed][key + "sequence"],
                        }
                        for seed in RATE_SEEDS
                    }
                else:
                    out[name, lr] = {
                        seed: _at_rate(ch, decoder_class, seed, lr)
                        for seed in RATE_SEEDS
                    }
        return out

    return _single_threaded(make)


@pytest.fixture(scope="module")
def longer(ch):
    """The chapter's run (seed 0) trained four times as long, 480 steps."""
    return _single_threaded(lambda: _measure(ch, 0, ablation=False, num_steps=480))


@pytest.fixture(scope="module")
def longer_ablation(ch):
    """Seeds 0 and 1 trained 480 steps: the uniform decoder at the chapter's rate, and
    (seed 1) the attention decoder, whose seed-0 run is the `longer` fixture's."""

    def make():
        return {
            "uniform": {
                seed: _at_rate(ch, "UniformDecoder", seed, ch["UNIFORM_LR"], 480)
                for seed in (0, 1)
            },
            "attention_1": _measure(ch, 1, ablation=False, num_steps=480),
        }

    return _single_threaded(make)


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
    """The uniform-weights ablation at its own rate (0.01): most digits right, about
    half of the strings, far behind the attention decoder after the same 120 steps."""
    for seed in SEEDS:
        r = results[seed]
        assert r["token"] > r["uniform_token"] + 0.1, seed
        assert r["sequence"] > r["uniform_sequence"] + 0.3, seed
        assert r["uniform_loss"] > 1.5 * r["losses"][-1], seed
        # the text's ranges: 80-83 % of the tokens, 51-58 % of the strings
        assert 0.79 < r["uniform_token"] < 0.835, (seed, r["uniform_token"])
        assert 0.505 < r["uniform_sequence"] < 0.585, (seed, r["uniform_sequence"])


def test_each_decoder_at_its_own_rate(rates):
    """The learning rates (seeds 0..4): 0.005, chosen for the attention decoder, leaves
    the uniform one at about a third of the strings; at 0.01 or 0.02 it gets more than
    half, the two within a few points of each other, while the attention decoder gets
    96-99 % at all three. At each decoder's best rate of the three, attention still
    leads by 38-45 points of string accuracy."""
    for seed in RATE_SEEDS:
        uniform = {lr: rates["uniform", lr][seed]["sequence"] for lr in RATES}
        attention = {lr: rates["attention", lr][seed]["sequence"] for lr in RATES}
        assert uniform[0.005] < 0.4, (seed, uniform)  # "about a third" (32-36 %)
        assert min(uniform[0.01], uniform[0.02]) > uniform[0.005] + 0.15, seed
        assert min(uniform[0.01], uniform[0.02]) > 0.5, (seed, uniform)
        assert abs(uniform[0.01] - uniform[0.02]) < 0.06, (seed, uniform)
        assert min(attention.values()) > 0.95, (seed, attention)  # "96-99 %"
        gap = max(attention.values()) - max(uniform.values())
        assert 0.36 < gap < 0.48, (seed, gap, attention, uniform)


def test_it_attends_at_or_beside_the_mirror(results):
    """The alignment: the largest weight within one position of the mirror at nearly
    every digit step, little weight further away, and the right digit written where
    it reads beside the mirror, with about a third of the weight still on the mirror
    there; whether the peak sits *on* the mirror varies."""
    for seed, r in results.items():
        assert r["peak_within_one"] > 0.95, (seed, r["peak_within_one"])
        assert r["weight_at"]["further"] < 0.15, (seed, r["weight_at"])
        assert r["weight_at"]["mirror"] + r["weight_at"]["neighbours"] > 0.85, seed
        assert r["beside_accuracy"] > 0.95, (seed, r["beside_accuracy"])
        assert 0.25 < r["beside_mirror_weight"] < 0.45, (seed, r)
        assert r["change_neighbour"] > 1.5 * r["change_far"], seed


def test_it_copies_from_the_mirror(results):
    """The one-hot ablation: reading only the mirror's annotation at every digit step,
    the decoder writes the digits as well as with its learned weights (or better);
    reading only a neighbour's, it writes the neighbour's own digit, so the right one
    at about 1 step in 10 (where the two digits are equal)."""
    for seed, r in results.items():
        mirror_right = r["reading_one"][0][0]
        assert mirror_right > r["learned_accuracy"] - 0.01, (seed, r["reading_one"])
        assert mirror_right > 0.99, (seed, mirror_right)
        for offset in (1, -1):
            right, own = r["reading_one"][offset]
            assert right < 0.2, (seed, offset, right)
            assert own > 0.95, (seed, offset, own)


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


def test_longer_training_spills_less_but_still_spills(results, longer):
    """The chapter's run trained four times as long, 480 steps, to a last-batch loss of
    about 0.001, still spills 0.27 of its weight onto the neighbours, against 0.38 after
    120 steps: more training lowers the spill, but not by much."""
    assert 0.0005 < longer["losses"][-1] < 0.002, longer["losses"][-1]
    after_120 = results[0]["weight_at"]["neighbours"]
    assert abs(after_120 - 0.38) < 0.015, after_120  # the chapter's printed 0.38
    assert abs(longer["weight_at"]["neighbours"] - 0.27) < 0.015, longer["weight_at"]
    assert longer["token"] > 0.99, longer["token"]


def test_a_longer_run_narrows_the_ablation_gap_without_reversing_it(
    longer, longer_ablation
):
    """Section 4.8: trained four times as long (480 steps, seeds 0 and 1, each decoder
    at the chapter's rate for it) the uniform decoder gets about 97 % of the tokens and
    92 % of the strings right, against 100 % with attention: a gap of about 8 points of
    string accuracy, not reversed."""
    attention = {0: longer, 1: longer_ablation["attention_1"]}
    for seed, u in longer_ablation["uniform"].items():
        a = attention[seed]
        assert a["token"] > 0.995 and a["sequence"] > 0.99, (seed, a["sequence"])
        assert 0.96 < u["token"] < 0.98, (seed, u)
        assert 0.905 < u["sequence"] < 0.94, (seed, u)
        assert 0.05 < a["sequence"] - u["sequence"] < 0.1, (seed, a, u)
