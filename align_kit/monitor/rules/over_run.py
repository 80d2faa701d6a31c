"""The reward's trend read once over a whole history, when no reward range is stated (own_noise.py's t statistics,
unchanged by a * x + b with a > 0). The live monitor keeps a bounded memory (base.Memory) and tests windows at every
point; a caller that holds every logged point (the doctor) reads the trend once more at the end, over all of them.

Over every point, the run learned when its reward, or its accuracy, rose: the least-squares slope above FLAT_T
standard errors, or its last third above its first third by RISE_T (Welch's t). It is flat when the reward's slope is
within FLAT_T of 0 and neither rose; it fell when the slope is below -FLAT_T, its last third below its first and the
accuracy did not rise. Why a second reading: the live plateau rule compares its window with the run's first 10
points, and 10 noisy points can sit low by chance, so a run within its noise reads as one that rose and levelled off;
one test over the whole history has no such head, and one test (not one per point) needs no stricter bound than a
flat window's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from align_kit.monitor.rules.own_noise import FLAT_T, RISE_T, flat_t, fmean, rise_t

# The fewest points the whole-history reading judges from (its thirds hold 6 each); shorter histories are the short
# rules' (reward.py's `_ShortPlateau`, `_ShortDecline`).
FEWEST = 20
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
    accuracy_t: float | None = None  # the accuracy's slope t, when it has FEWEST points
    accuracy_thirds_t: float | None = None

    @property
    def why(self) -> str:
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
    """The reading over every finite point logged; None under FEWEST reward points."""
    if len(rewards) < FEWEST:
        return None
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
    return Trend(state, len(rewards), slope, thirds, means, fmean(rewards), *accuracy)


def _rose(slope_t: float, thirds_t: float) -> bool:
    return slope_t > FLAT_T or thirds_t > RISE_T


def _thirds_t(values: Sequence[float]) -> float:
    third = len(values) // 3
    return rise_t(list(values[:third]), list(values[-third:]))
