"""Every exercise, in the book's order."""

from __future__ import annotations

from .heads import EX_7_1, EX_7_2, EX_7_3, EX_8_1, EX_8_2
from .masks import EX_3_1, EX_6_1
from .mla import EX_12_1
from .mqar import EX_9_1
from .online import EX_10_1, EX_10_2
from .recurrent import EX_13_1, EX_13_2
from .rope import EX_11_1, EX_11_2
from .scores import EX_1_1, EX_2_1, EX_4_1, EX_5_1

EXERCISES = (
    EX_1_1,
    EX_2_1,
    EX_3_1,
    EX_4_1,
    EX_5_1,
    EX_6_1,
    EX_7_1,
    EX_7_2,
    EX_7_3,
    EX_8_1,
    EX_8_2,
    EX_9_1,
    EX_10_1,
    EX_10_2,
    EX_11_1,
    EX_11_2,
    EX_12_1,
    EX_13_1,
    EX_13_2,
)
