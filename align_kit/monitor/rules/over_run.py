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
it shows that the run learns; without it the run is not shown healthy, and the short rules alone may alert."""

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


@dataclass(frozen=True)
class Trend:
    """The whole history's reading: `state` (LEARNED, FLAT, FELL or UNCLEAR) and the numbers behind it."""

    state: str
    points: int  # reward points read
    slope_t: float  # the reward's least-squares slope in standard errors
    thirds_t: float  # the reward's last third over its first, Welch's t
    thirds: tuple[float, float, float]  # the reward's mean over each third
    mean: float  # the reward's mean over every point
    short: bool = False  # under FEWEST points: the slope's rise alone is read (state LEARNED or UNCLEAR)
    accuracy_t: float | None = None  # the accuracy's slope t, when it has FEWEST points
    accuracy_thirds_t: float | None = None

    @property
    def why(self) -> str:
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
    accuracy = (flat_t(accuracies), _thirds_t(accuracies)) if len(accuracies) >= FEWEST else (None, None)
    rose = _rose(slope, thirds) or (accuracy[0] is not None and _rose(*accuracy))
    third = len(rewards) // 3
    means = (fmean(rewards[:third]), fmean(rewards[third:-third]), fmean(rewards[-third:]))
    if rose:
        state = LEARNED
    elif abs(slope) < FLAT_T:
        state = FLAT
    elif means[2] < means[0]:
        state = FELL
    else:  # falling by its slope, yet its last third not below its first: neither reading holds
        state = UNCLEAR
    return Trend(
        state, len(rewards), slope, thirds, means, fmean(rewards), accuracy_t=accuracy[0], accuracy_thirds_t=accuracy[1]
    )


def _short(rewards: Sequence[float], accuracies: Sequence[float]) -> Trend:
    """Under FEWEST points: learned when the reward's or the accuracy's slope is above FLAT_T, else unclear."""
    slope = flat_t(rewards)
    accuracy = flat_t(accuracies) if len(accuracies) >= FEWEST_SLOPE else None
    rose = slope > FLAT_T or (accuracy is not None and accuracy > FLAT_T)
    mean = fmean(rewards)
    state = LEARNED if rose else UNCLEAR
    return Trend(state, len(rewards), slope, math.nan, (mean,) * 3, mean, short=True, accuracy_t=accuracy)


def _rose(slope_t: float, thirds_t: float) -> bool:
    return slope_t > FLAT_T or thirds_t > RISE_T


def _thirds_t(values: Sequence[float]) -> float:
    third = len(values) // 3
    return rise_t(list(values[:third]), list(values[-third:]))
