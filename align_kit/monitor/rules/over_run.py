"""The reward's trend read once over a whole history, when no reward range is stated (own_noise.py's t statistics,
unchanged by a * x + b with a > 0). The live monitor keeps a bounded memory (base.Memory) and tests windows at every
point; a caller that holds every logged point (the doctor) reads the trend once more at the end, over all of them.

Over every point (FEWEST or more), the run learned when its reward, or its accuracy, rose: the least-squares slope
above FLAT_T standard errors, or its last third above its first third by RISE_T (Welch's t). It is flat when the
reward's slope is within FLAT_T of 0 and neither rose; it fell when the slope is below -FLAT_T, its last third below
its first and the accuracy did not rise. Why a second reading: the live plateau rule compares its window with the
run's first 10 points, and 10 noisy points can sit low by chance, so a run within its noise reads as one that rose
and levelled off; one test over the whole history has no such head, and one test (not one per point) needs no
stricter bound than a flat window's. On a shorter history (FEWEST_SLOPE or more) only a rise of the slope is read:
it shows that the run learns; without it the run is not shown healthy, and the short rules alone may alert.

When the task component is logged (the concept `accuracy`: the answer-checking reward the doctor finds by its name,
doctor/reward_roles.py, or a logged accuracy), whether the run learns is its question, not the total's: a total that
rises only through the format or other auxiliary rewards is no run learning its task (18.3.2; 18.3.3's reward
breakdown, "format rising fast while correctness stalls: very likely reward collapse"). So with the accuracy logged
the run learned only when the accuracy rose. The total rising while the accuracy fell (its slope below -FLAT_T,
its last third under its first) is TASK_FELL: the format learned at the content's cost, the reward-hacking rule's
failure read over the whole run. The total rising while the accuracy stayed within its noise is TASK_FLAT: not
shown to learn, so not healthy; no alert, since a task reward that did not move can also be a run whose authors
aim at another component (a language reward) or a slow rise the points cannot yet show."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from align_kit.monitor.rules.own_noise import FLAT_T, RISE_T, flat_t, fmean, rise_t

# The fewest points the whole-history reading alerts from (its thirds hold 6 each); shorter histories are the short
# rules' (reward.py's `_ShortPlateau`, `_ShortDecline`), and on them only a rise of the slope (3 points at least)
# shows that the run learns: too few points to call a flat or falling trend from, too few to call it healthy without.
FEWEST = 20
FEWEST_SLOPE = 3
LEARNED, FLAT, FELL, UNCLEAR = "rose", "flat", "fell", "unclear"
# The total rose while the task component (the accuracy) did not: it fell, or stayed within its noise.
TASK_FELL, TASK_FLAT = "task fell", "task flat"


@dataclass(frozen=True)
class Trend:
    """The whole history's reading: `state` (LEARNED, FLAT, FELL, UNCLEAR, TASK_FELL or TASK_FLAT) and the numbers
    behind it."""

    state: str
    points: int  # reward points read
    slope_t: float  # the reward's least-squares slope in standard errors
    thirds_t: float  # the reward's last third over its first, Welch's t
    thirds: tuple[float, float, float]  # the reward's mean over each third
    mean: float  # the reward's mean over every point
    short: bool = False  # under FEWEST points: the slope's rise alone is read (state LEARNED or UNCLEAR)
    accuracy_t: float | None = None  # the accuracy's slope t, when it has FEWEST points
    accuracy_thirds_t: float | None = None
    accuracy_change: float = math.nan  # the accuracy's last third (or half, short) mean minus its first

    @property
    def why(self) -> str:
        if self.state in (TASK_FELL, TASK_FLAT):
            moved = "fell" if self.state == TASK_FELL else "did not rise"
            thirds = "" if self.short else f" and thirds {self.accuracy_thirds_t:+.2f}"
            return (
                f"over {self.points} points the total reward rose (slope {self.slope_t:+.2f} standard errors) while "
                f"the task component (accuracy) {moved} (slope {self.accuracy_t:+.2f}{thirds})"
            )
        if self.short:
            accuracy = f"; the accuracy's {self.accuracy_t:+.2f}" if self.accuracy_t is not None else ""
            return f"over its {self.points} points the reward's slope is {self.slope_t:+.2f} standard errors{accuracy}"
        accuracy = (
            f"; the accuracy's slope {self.accuracy_t:+.2f} and thirds {self.accuracy_thirds_t:+.2f}"
            if self.accuracy_t is not None
            else ""
        )
        return (
            f"over its whole history of {self.points} points the reward's slope is {self.slope_t:+.2f} standard "
            f"errors and its last third over its first {self.thirds_t:+.2f}{accuracy}"
        )


def trend(rewards: Sequence[float], accuracies: Sequence[float] = ()) -> Trend | None:
    """The reading over every finite point logged; None under FEWEST_SLOPE reward points."""
    if len(rewards) < FEWEST_SLOPE:
        return None
    if len(rewards) < FEWEST:
        return _short(rewards, accuracies)
    slope, thirds = flat_t(rewards), _thirds_t(rewards)
    task = len(accuracies) >= FEWEST
    accuracy = (flat_t(accuracies), _thirds_t(accuracies)) if task else (None, None)
    total_rose, task_rose = _rose(slope, thirds), task and _rose(*accuracy)
    third = len(rewards) // 3
    means = (fmean(rewards[:third]), fmean(rewards[third:-third]), fmean(rewards[-third:]))
    change = (
        fmean(accuracies[-(len(accuracies) // 3) :]) - fmean(accuracies[: len(accuracies) // 3]) if task else math.nan
    )
    if task_rose or (total_rose and not task):
        state = LEARNED
    elif total_rose:  # only through the other components: the task's own trend says what the run learned
        state = TASK_FELL if accuracy[0] < -FLAT_T and change < 0 else TASK_FLAT
    elif abs(slope) < FLAT_T:
        state = FLAT
    elif means[2] < means[0]:
        state = FELL
    else:  # falling by its slope, yet its last third not below its first: neither reading holds
        state = UNCLEAR
    return Trend(
        state,
        len(rewards),
        slope,
        thirds,
        means,
        fmean(rewards),
        accuracy_t=accuracy[0],
        accuracy_thirds_t=accuracy[1],
        accuracy_change=change,
    )


def _short(rewards: Sequence[float], accuracies: Sequence[float]) -> Trend:
    """Under FEWEST points: learned when the slope is above FLAT_T, the accuracy's when it is logged (the task's
    question), else the reward's; a total rising while the accuracy does not is TASK_FLAT (too few points to call
    it fallen); else unclear."""
    slope = flat_t(rewards)
    accuracy = flat_t(accuracies) if len(accuracies) >= FEWEST_SLOPE else None
    mean = fmean(rewards)
    if accuracy is None:
        state = LEARNED if slope > FLAT_T else UNCLEAR
    else:
        state = LEARNED if accuracy > FLAT_T else TASK_FLAT if slope > FLAT_T else UNCLEAR
    return Trend(state, len(rewards), slope, math.nan, (mean,) * 3, mean, short=True, accuracy_t=accuracy)


def _rose(slope_t: float, thirds_t: float) -> bool:
    return slope_t > FLAT_T or thirds_t > RISE_T


def _thirds_t(values: Sequence[float]) -> float:
    third = len(values) // 3
    return rise_t(list(values[:third]), list(values[-third:]))
