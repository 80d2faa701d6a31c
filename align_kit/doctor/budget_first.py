"""The length budget advised first when every completion was cut from the first logged step.

Overlong filtering and soft punishment (18.3.7; `overlong=filter`, `overlong=soft_punish`, first in 18.3.8's tuning
order as data fixes) act on groups that mix cut and finished answers: filtering masks the cut ones so the finished
ones carry the group's signal, punishment scores the cut ones below the finished ones. When the truncated share is 1
from the first logged step, no group holds a finished answer: filtering masks every completion (no gradient) and
punishment lowers every one alike (flat groups, no advantage). Measured in docs/alert-to-answer.md, loop 1 (a budget
of 12 tokens, seeds 1-5): neither moved the truncated share from 1. The budget is then the one fix that can act, so
the doctor names it first and says why, and the sweep from the advice (doctor/advice_sweep.py) holds the other two
back.
"""

from __future__ import annotations

import dataclasses

from align_kit.doctor.advice import Advice
from align_kit.doctor.history import RunHistory
from align_kit.monitor.rules.base import CLIPPED

BUDGET_FIX = "raise_max_length"
HELD_BACK = ("overlong_filter", "overlong_shaping")  # act only on groups that mix cut and finished answers
MIN_POINTS = 2  # logged points of the truncated share at 1 from the first: one row alone does not decide
ALL_CUT = 1.0 - 1e-9  # the share TRL logs is a count over a count: 1 exactly when every completion was cut


def cut_from_the_start(history: RunHistory) -> tuple[int, int, int] | None:
    """(first step, last step, points) of the run's opening stretch in which every logged truncated share was 1, when
    it begins at the first logged share and spans at least MIN_POINTS logged points; else None."""
    shares = [(step, row[CLIPPED]) for step, row in history.rows if CLIPPED in row]
    stretch = []
    for step, share in shares:
        if not share >= ALL_CUT:  # NaN ends it too
            break
        stretch.append(step)
    if len(stretch) < MIN_POINTS:
        return None
    return stretch[0], stretch[-1], len(stretch)


def held_back_reason(stretch: tuple[int, int, int]) -> str:
    first, last, points = stretch
    return (
        f"every completion was cut from step {first} to {last} ({points} logged points at a truncated share of 1): "
        "no group mixes cut and finished answers, so this cannot act until the budget lets some finish"
    )


def budget_first(advice: list[Advice], history: RunHistory) -> list[Advice]:
    """`advice` (18.3.8's order) with the budget line first when every completion was cut from the first logged
    step, the overlong fixes after it, each saying why; unchanged otherwise."""
    budget = next((line for line in advice if line.fix == BUDGET_FIX), None)
    stretch = cut_from_the_start(history)
    if budget is None or stretch is None:
        return advice
    first, last, _ = stretch
    lead = dataclasses.replace(
        budget,
        text=f"{budget.text} first: every completion was cut from step {first} to {last}, so no group mixes cut "
        "and finished answers and the overlong fixes below cannot act until the budget lets some finish",
    )
    rest = [
        dataclasses.replace(line, text=f"{line.text} (after the budget: it acts on groups that mix cut and finished)")
        if line.fix in HELD_BACK
        else line
        for line in advice
        if line is not budget
    ]
    return [lead, *rest]
