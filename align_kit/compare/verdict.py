"""A verdict per arm on a predicted direction: was the comparison reproduced, weakly, or not?

A prediction names a metric and the direction an arm should move it relative to the baseline arm (`--predict
entropy:higher`), stated before the runs, as a sweep file states it. The verdict compares each arm's AUC/span (the
curve's mean level) with the baseline's:

- reproduced: the mean difference lies in the predicted direction and is at least 2 standard errors, and at least
  80% of the seeds the arm shares with the baseline moved in the predicted direction (8 of 10 paired seeds);
- weak: the mean difference lies in the predicted direction and misses exactly one of those two bars;
- not reproduced: otherwise (both bars missed, or the difference zero or against the prediction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from align_kit.compare import CompareError
from align_kit.compare.arms import Arm
from align_kit.compare.statistics import ArmSummary, paired_agreement

DIRECTIONS = {"higher": 1, "lower": -1}
MIN_STANDARD_ERRORS = 2.0
MIN_PAIRED_SHARE = 0.8
RULE = (
    "reproduced = Δ AUC/span in the predicted direction with |Δ| >= 2 SE and the predicted direction in at least "
    "80% of paired seeds (8 of 10); weak = Δ in the predicted direction, exactly one bar missed; not reproduced = "
    "otherwise (both bars missed, or Δ zero or against the prediction)"
)


@dataclass(frozen=True)
class Prediction:
    metric: str
    direction: str  # "higher" or "lower" than the baseline arm

    @classmethod
    def parse(cls, text: str) -> Prediction:
        metric, _, direction = text.rpartition(":")
        if not metric or direction not in DIRECTIONS:
            raise CompareError(
                f"--predict {text!r}: write METRIC:higher or METRIC:lower (the direction each arm should move "
                "METRIC relative to the baseline arm), e.g. --predict entropy:higher"
            )
        return cls(metric, direction)


@dataclass(frozen=True)
class Verdict:
    arm: str
    prediction: Prediction
    label: str  # reproduced | weak | not reproduced
    delta: float
    stderr: float
    agreeing: int  # paired seeds that moved in the predicted direction
    paired: int

    def line(self, baseline: str) -> str:
        ratio = abs(self.delta) / self.stderr if self.stderr > 0 else math.inf
        shown = "n/a" if math.isnan(self.stderr) else f"{self.stderr:.3g} ({ratio:.1f} SE)"
        return (
            f"{self.arm} vs {baseline}, {self.prediction.metric} {self.prediction.direction}: **{self.label}** "
            f"(Δ AUC/span {self.delta:+.3g} ± {shown}; {self.prediction.direction} in {self.agreeing} of "
            f"{self.paired} paired seeds)"
        )


def judge(summary: ArmSummary, baseline: Arm, prediction: Prediction) -> Verdict:
    sign = DIRECTIONS[prediction.direction]
    difference = summary.auc_vs_baseline
    agreeing, paired = paired_agreement(summary.arm, baseline, prediction.metric, sign)
    in_direction = sign * difference.delta > 0
    large = not math.isnan(difference.stderr) and abs(difference.delta) >= MIN_STANDARD_ERRORS * difference.stderr
    consistent = paired > 0 and agreeing >= MIN_PAIRED_SHARE * paired
    bars = int(large) + int(consistent)
    label = "not reproduced" if not in_direction or bars == 0 else "reproduced" if bars == 2 else "weak"
    return Verdict(summary.arm.name, prediction, label, difference.delta, difference.stderr, agreeing, paired)


def verdicts(arms: list[Arm], tables: dict[str, list[ArmSummary]], predictions: list[Prediction]) -> list[Verdict]:
    """One verdict per (prediction, arm other than the baseline)."""
    found = []
    for prediction in predictions:
        if prediction.metric not in tables:
            raise CompareError(
                f"--predict {prediction.metric}:{prediction.direction}: {prediction.metric} is not among the "
                f"compared metrics ({', '.join(tables)}); add it with --metrics"
            )
        found += [judge(summary, arms[0], prediction) for summary in tables[prediction.metric][1:]]
    return found
