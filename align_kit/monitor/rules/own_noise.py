"""Scale-free readings: a reward judged against its own noise when no range is stated (RunContext.reward_scale_stated
false). Each is a t-statistic, unchanged when the rewards are mapped by a * x + b with a > 0 (the change and the
noise both scale by a, the shift cancels), so a run logged on any scale, a sum of custom reward functions included,
gets the same verdict as the same run on [0, 1].

Flat: the least-squares slope over the window is within `FLAT_T` of its standard error (base.trend_t: the noise is
the points' scatter around the line). Risen: the later points' mean above the earlier ones' by more than `RISE_T`
standard errors of the difference (Welch's t)."""

from __future__ import annotations

import math
from operator import mul

# |t| below this is no trend the points can tell from their noise (a two-sided 5 % test, normal approximation).
FLAT_T = 2.0
# A rise larger than this many standard errors is a rise (the same 5 %, one-sided 2.5 %).
RISE_T = 2.0
# A difference this small a share of the values is rounding (float64 rounds at about 1e-16 of a value).
ROUNDING = 1e-9


def flat_t(values: list[float]) -> float:
    """The slope's t over `values` (0 for a constant series, inf for an exact line)."""
    return trend_t(values) if len(values) > 2 and max(values) > min(values) else 0.0


def is_flat(values: list[float]) -> bool:
    return abs(flat_t(values)) < FLAT_T


def rise_t(early: list[float], recent: list[float]) -> float:
    """Welch's t of mean(recent) - mean(early); inf (or -inf, 0) when both are constant."""
    change = fmean(recent) - fmean(early)
    error = math.sqrt(_variance(early) / len(early) + _variance(recent) / len(recent))
    # Within rounding of the values' size (the mean of 13 x 0.7 is not exactly 0.7): no change.
    if abs(change) <= ROUNDING * max(abs(early[0]), abs(recent[-1]), 1e-300):
        return 0.0
    if error == 0.0:
        return math.copysign(math.inf, change)
    return change / error


def rose(early: list[float], recent: list[float]) -> bool:
    return rise_t(early, recent) > RISE_T


def trend_t(values: list[float]) -> float:
    """The t-statistic of the least-squares slope of `values` against their index (inf for an exact line).

    In closed form over the index 0..n-1: Sxx = n (n^2 - 1) / 12, Sxy = sum(x y) - n mean_x mean_y, the residual sum
    of squares Syy - slope Sxy; a residual within rounding of 0 (1e-12 of Syy) is an exact line."""
    n = len(values)
    mean_y = fmean(values)
    sxx = n * (n * n - 1) / 12
    centred = [y - mean_y for y in values]
    sxy = math.fsum(map(mul, range(n), centred))  # sum((x - mean_x)(y - mean_y)) = sum(x (y - mean_y))
    syy = math.fsum(map(mul, centred, centred))
    slope = sxy / sxx
    residual_ss = syy - slope * sxy
    if residual_ss <= 1e-12 * syy or syy == 0:
        return math.copysign(math.inf, slope) if slope else 0.0
    return slope / math.sqrt(residual_ss / (n - 2) / sxx)


def fmean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def _variance(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = fmean(values)
    centred = [value - mean for value in values]
    return math.fsum(map(mul, centred, centred)) / (len(values) - 1)
