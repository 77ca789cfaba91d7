"""Exercise 9.1: mqar_accuracy(logits (B,T,V), targets (B,T)) -> share of asked positions right."""
import math

import torch
import numpy as np
import attention_lib as al


# ---------- correct ----------
def acc_masked_mean(logits, targets):
    predictions = logits.argmax(dim=-1)
    asked = targets != al.MQAR_IGNORE
    return (predictions[asked] == targets[asked]).float().mean().item()


def acc_python_loop(logits, targets):
    right = total = 0
    B, T, V = logits.shape
    for b in range(B):
        for t in range(T):
            target = int(targets[b, t])
            if target == al.MQAR_IGNORE:
                continue
            total += 1
            right += int(torch.argmax(logits[b, t]).item() == target)
    return right / total


# ---------- wrong ----------
def acc_all_positions(logits, targets):
    return (logits.argmax(-1) == targets).float().mean().item()


def acc_wrong_denominator(logits, targets):
    asked = targets != al.MQAR_IGNORE
    correct = ((logits.argmax(-1) == targets) & asked).sum()
    return (correct / targets.numel()).item()


def acc_argmax_wrong_axis(logits, targets):
    predictions = logits.argmax(dim=1)  # (B, V) ... over the time axis
    asked = targets != al.MQAR_IGNORE
    return (predictions[asked] == targets[asked]).float().mean().item()


def acc_prob_threshold(logits, targets):
    asked = targets != al.MQAR_IGNORE
    probs = logits.softmax(-1)
    p_target = probs[asked].gather(-1, targets[asked][:, None]).squeeze(-1)
    return (p_target > 0.5).float().mean().item()


def acc_shifted(logits, targets):
    # next-token habit: the logits at t predict the target at t + 1
    predictions = logits[:, :-1].argmax(-1)
    shifted = targets[:, 1:]
    asked = shifted != al.MQAR_IGNORE
    return (predictions[asked] == shifted[asked]).float().mean().item()


def acc_ignore_zero(logits, targets):
    asked = targets != 0  # treats 0 as the padding id
    predictions = logits.argmax(-1)
    return (predictions[asked] == targets[asked]).float().mean().item()


SOLUTIONS = [
    dict(name="masked_mean", correct=True, mistake="", family="", fn=acc_masked_mean),
    dict(name="python_loop", correct=True, mistake="", family="", fn=acc_python_loop),
    dict(name="all_positions", correct=False,
         mistake="Averages over every position, counting the ignored ones as wrong.",
         family="counts-ignored-positions", fn=acc_all_positions),
    dict(name="wrong_denominator", correct=False,
         mistake="Counts only asked positions in the numerator but divides by all B*T positions.",
         family="wrong-denominator", fn=acc_wrong_denominator),
    dict(name="argmax_wrong_axis", correct=False,
         mistake="Takes the argmax over the time axis instead of the vocabulary.",
         family="wrong-axis", fn=acc_argmax_wrong_axis),
    dict(name="prob_threshold", correct=False,
         mistake="Counts a position right when the target's probability exceeds 0.5 instead of when it is the most likely token.",
         family="threshold-not-argmax", fn=acc_prob_threshold),
    dict(name="shifted", correct=False,
         mistake="Shifts the targets by one as in next-token loss code, though targets[b, t] is already aligned with logits[b, t].",
         family="shifted-targets", fn=acc_shifted),
    dict(name="ignore_zero", correct=False,
         mistake="Treats 0 as the ignore value instead of al.MQAR_IGNORE.",
         family="wrong-ignore-value", fn=acc_ignore_zero),
]


# -- added with the checker's tests (not by the tester): the checker's diagnosis names
# that rightly name each wrong solution's mistake, judged from its `mistake` sentence
# against each diagnosis's text; an empty set: no diagnosis would be right.
ACCEPT = {
    'all_positions': {'counts-ignored'},
    'wrong_denominator': {'counts-ignored'},
    'argmax_wrong_axis': {'argmax-over-positions'},
    'prob_threshold': {'probability-threshold'},
    'shifted': {'shifted'},
    'ignore_zero': {'ignore-value-zero'},
}
for _solution in SOLUTIONS:
    _solution["accept"] = ACCEPT.get(_solution["name"], set())
