"""Toy tasks the course trains on: multi-query associative recall (MQAR, chapter 9).

MQAR (Arora et al., 2023, https://arxiv.org/abs/2312.04927) puts a small database in
every sequence and then asks questions about it. A sequence holds ``N`` records (key,
value) with distinct keys drawn from ``num_keys`` possible keys and values drawn from
``num_values`` possible values, followed by ``N`` questions, each a key followed by its
value (the answer the model must predict)::

    tokens: record_0 .. record_{N-1}  question_0 answer_0 .. question_{N-1} answer_{N-1}

Token ids (``K = num_keys``, ``V = num_values``): the record of key ``k`` and value
``v`` is ``V k + v`` (``0 .. K V - 1``), the question about key ``k`` is ``K V + k`` and
the answer ``v`` is ``K V + K + v``; :func:`mqar_vocab_size` is ``K V + K + V``. Every
question asks about a different record, in a random order.
"""

from __future__ import annotations

import torch

from ._checks import check_size

__all__ = ["MQAR_IGNORE", "mqar_vocab_size", "mqar_batch"]

MQAR_IGNORE = -100
"""The target at positions with nothing to predict (``F.cross_entropy``'s default
``ignore_index``)."""


def mqar_vocab_size(num_keys: int = 8, num_values: int = 8) -> int:
    """The number of token ids of MQAR: ``K V`` records, ``K`` questions, ``V``
    answers."""
    check_size("mqar_vocab_size", num_keys=num_keys, num_values=num_values)
    return num_keys * num_values + num_keys + num_values


def mqar_batch(
    batch_size: int,
    generator: torch.Generator,
    num_keys: int = 8,
    num_values: int = 8,
    num_records: int = 6,
):
    """A batch of MQAR sequences: ``tokens (B, 3N)``, ``targets (B, 3N)`` and the record
    each question asks about, ``asked (B, N)`` (``N = num_records``).

    ``targets[b, i]`` is the answer the model must predict after reading ``tokens[b,
    :i+1]`` (at question positions), or :data:`MQAR_IGNORE`. ``asked[b, j]`` is the
    index ``0 .. N-1`` of the record that question ``j`` is about. The random numbers
    come from ``generator`` only (three draws a batch, always in the same order), so a
    seeded generator gives the same batches on every computer.
    """
    check_size(
        "mqar_batch",
        batch_size=batch_size,
        num_keys=num_keys,
        num_values=num_values,
        num_records=num_records,
    )
    if not isinstance(generator, torch.Generator):
        raise ValueError(
            f"generator: expected a torch.Generator, got {type(generator).__name__}"
        )
    if num_records > num_keys:
        raise ValueError(
            f"num_records: expected at most num_keys={num_keys} records (their keys "
            f"are distinct), got {num_records}"
        )
    B, N, K, V = batch_size, num_records, num_keys, num_values
    question0, answer0 = K * V, K * V + K  # first id of each kind; records start at 0
    keys = torch.rand(B, K, generator=generator).argsort(dim=1)[:, :N]  # (B, N)
    values = torch.randint(0, V, (B, N), generator=generator)  # (B, N) repeats allowed
    asked = torch.rand(B, N, generator=generator).argsort(dim=1)  # (B, N) permutation
    records = V * keys + values  # (B, N)
    questions = question0 + keys.gather(1, asked)  # (B, N)
    answers = answer0 + values.gather(1, asked)  # (B, N)
    qa = torch.stack([questions, answers], dim=2).reshape(B, 2 * N)  # (B, 2N)
    tokens = torch.cat([records, qa], dim=1)  # (B, 3N)
    targets = torch.full_like(tokens, MQAR_IGNORE)
    targets[:, N::2] = answers  # after each question token, predict its answer
    return tokens, targets, asked
