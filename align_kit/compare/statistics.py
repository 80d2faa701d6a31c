"""Per-run summaries of a metric curve, their spread over an arm's seeds, and each arm's difference from the baseline.

- final value: the mean of a run's last `last_k` logged points (default 10), so one noisy step does not decide it;
  a run with fewer points uses all of them.
- AUC/span: the area under the curve by the trapezoid rule over logged steps, divided by the step span (last step
  minus first): the curve's mean level, comparable between runs of different lengths. One logged step: its value.
- spread over seeds: mean and sample standard deviation (n - 1 in the denominator); undefined (nan) for one seed.
- difference from the baseline arm: mean(arm) - mean(baseline), with the standard error of a difference of two
  independent means, sqrt(s_arm^2 / n_arm + s_base^2 / n_base) (Welch); nan when either arm has a single seed.
- paired by seed: arms of a sweep share seeds (the same seed gives the same prompts and, at step 0, the same
  policy), so for the seeds an arm shares with the baseline, how many have a higher AUC/span than the baseline's
  run of that seed (a sign count: 5 of 5 has probability 1/32 under no effect).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from align_kit.compare.arms import Arm
from align_kit.tracking.metrics_file import Series

DEFAULT_LAST_K = 10
# Above this magnitude squares (and sums of a few values) overflow float64: statistics are taken on the values
# divided by their largest magnitude and scaled back in Python floats, so a finite 1e308 shows as itself.
HUGE = 1e150


def magnitude(values) -> float:
    """What to divide `values` by before summing or squaring them: their largest magnitude when huge, else 1."""
    peak = float(np.max(np.abs(values))) if len(values) else 0.0
    return peak if peak > HUGE else 1.0


def final_value(series: Series, last_k: int = DEFAULT_LAST_K) -> float:
    values = series.values[-last_k:]
    scale = magnitude(values)
    return float(np.mean(values / scale)) * scale


def auc_per_step(series: Series) -> float:
    span = series.steps[-1] - series.steps[0]
    if span == 0:
        return float(series.values[-1])
    scale = magnitude(series.values)
    return float(np.trapezoid(series.values / scale, series.steps) / span) * scale


@dataclass(frozen=True)
class Spread:
    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, samples: list[float]) -> Spread:
        values = np.asarray(samples, dtype=float)
        scale = magnitude(values)
        std = float(np.std(values / scale, ddof=1)) * scale if len(values) > 1 else math.nan
        return cls(float(np.mean(values / scale)) * scale, std, len(values))


@dataclass(frozen=True)
class Difference:
    delta: float
    stderr: float

    @classmethod
    def between(cls, arm: Spread, baseline: Spread) -> Difference:
        # hypot: the same sqrt(a^2 + b^2) without squaring a std near the float maximum.
        return cls(
            arm.mean - baseline.mean, math.hypot(arm.std / math.sqrt(arm.n), baseline.std / math.sqrt(baseline.n))
        )


@dataclass(frozen=True)
class ArmSummary:
    arm: Arm
    final: Spread
    auc: Spread
    final_vs_baseline: Difference | None  # None for the baseline arm itself
    auc_vs_baseline: Difference | None
    auc_above_baseline: tuple[int, int] | None = None  # (seeds with a higher AUC/span, seeds shared); None: baseline


def paired_agreement(arm: Arm, baseline: Arm, metric: str, sign: int = 1) -> tuple[int, int]:
    """Sign count of the per-seed AUC/span differences against the baseline run of the same seed: (seeds that moved
    in the direction `sign` (1 higher, -1 lower), seeds shared)."""
    base = {run.seed: auc_per_step(run.series[metric]) for run in baseline.runs}
    shared = [(auc_per_step(run.series[metric]), base[run.seed]) for run in arm.runs if run.seed in base]
    return sum(sign * (value - reference) > 0 for value, reference in shared), len(shared)


def summarise_metric(arms: list[Arm], metric: str, last_k: int = DEFAULT_LAST_K) -> list[ArmSummary]:
    """One summary per arm, in arm order; the first arm is the baseline."""
    spreads = [
        (
            Spread.of([final_value(run.series[metric], last_k) for run in arm.runs]),
            Spread.of([auc_per_step(run.series[metric]) for run in arm.runs]),
        )
        for arm in arms
    ]
    (base_final, base_auc), baseline = spreads[0], arms[0]
    return [
        ArmSummary(arm, final, auc, None, None)
        if arm is baseline
        else ArmSummary(
            arm,
            final,
            auc,
            Difference.between(final, base_final),
            Difference.between(auc, base_auc),
            paired_agreement(arm, baseline, metric),
        )
        for arm, (final, auc) in zip(arms, spreads, strict=True)
    ]
