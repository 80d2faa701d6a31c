"""How many paired seeds a comparison needs for `--predict` to call it reproduced (`align-kit compare --power`).

compare's "reproduced" (verdict.py) has two bars, both on the arms' AUC/span: the mean difference in the predicted
direction is at least 2 SE, with SE = sqrt(s_arm^2 / n + s_base^2 / n) (statistics.py: Welch's, from each arm's own
spread, not from the paired differences), and at least 80 % of the paired seeds moved in that direction. Power is the
chance that a sweep of n paired seeds clears both, when each seed gives the pair (arm, baseline) drawn from a
bivariate normal with mean difference `effect`, sd of the paired difference `sd_diff` and per-arm sd `sd_arm` (the
same in both arms; from it the arms' correlation, rho = 1 - sd_diff^2 / (2 sd_arm^2)).

- SE bar alone, normal approximation (SE taken as known): the difference of means has sd sd_diff / sqrt(n) and
  must reach 2 sigma / sqrt(n), sigma = sqrt(2) sd_arm, so P = Phi((sqrt(n) |effect| - 2 sigma) / sd_diff); it
  reaches 80 % at n = ((2 sigma + z_0.8 sd_diff) / effect)^2, z_0.8 = 0.8416. Seeds that share prompts and the
  starting policy are positively correlated (rho > 0): then sigma > sd_diff, and compare's Welch SE asks for more
  seeds than a paired test would. Without sd_arm the arms are taken as independent (sigma = sd_diff).
- sign bar alone, exact under normality: P(Binomial(n, p) >= ceil(0.8 n)), p = Phi(|effect| / sd_diff). When
  p < 0.8 this falls towards 0 as n grows: no number of seeds reaches 80 % power, and the answer says so.
- both bars: by Monte Carlo (the bars are correlated and the SE is itself estimated), with a fixed seed; the answer is
  the smallest n whose simulated power is at least `target` (power is not monotone in n: ceil(0.8 n) jumps).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from align_kit.compare import CompareError
from align_kit.compare.verdict import MIN_PAIRED_SHARE, MIN_STANDARD_ERRORS

TARGET = 0.8
RATIO_LIMIT = 1e6  # the largest effect/sd (and sd per arm / sd) a power analysis takes, and its inverse the smallest
MAX_SEEDS = 100
DRAWS = 20_000


def normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def needed_agreeing(n: int) -> int:
    """Paired seeds that must move in the predicted direction, as verdict.judge counts them."""
    return math.ceil(MIN_PAIRED_SHARE * n - 1e-9)


def se_bar_power(n: int, effect: float, sd_diff: float, sd_arm: float | None = None) -> float:
    sigma = math.sqrt(2) * sd_arm if sd_arm is not None else sd_diff
    return normal_cdf((math.sqrt(n) * abs(effect) - MIN_STANDARD_ERRORS * sigma) / sd_diff)


def sign_bar_power(n: int, effect: float, sd_diff: float) -> float:
    p = normal_cdf(abs(effect) / sd_diff)
    return sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(needed_agreeing(n), n + 1))


def simulated_power(
    n: int, effect: float, sd_diff: float, sd_arm: float | None = None, draws: int = DRAWS, seed: int = 0
) -> float:
    """Share of `draws` simulated sweeps of n paired seeds that compare would call reproduced."""
    import numpy as np

    sd_arm = sd_diff / math.sqrt(2) if sd_arm is None else sd_arm
    rho = min(1.0, max(-1.0, 1 - sd_diff**2 / (2 * sd_arm**2)))
    first, second = np.random.default_rng(seed).standard_normal((2, draws, n))
    base = sd_arm * first  # the arm: correlation rho with its baseline run of the same seed
    arm = abs(effect) + sd_arm * (rho * first + math.sqrt(1 - rho**2) * second)
    delta = arm.mean(1) - base.mean(1)
    stderr = np.sqrt(arm.var(1, ddof=1) / n + base.var(1, ddof=1) / n)
    agreeing = (arm > base).sum(1)
    reproduced = (delta > 0) & (delta >= MIN_STANDARD_ERRORS * stderr) & (agreeing >= needed_agreeing(n))
    return float(reproduced.mean())


@dataclass(frozen=True)
class PowerAnswer:
    seeds: int | None  # the smallest n reaching the target; None: none up to max_seeds
    best: int  # the n with the highest simulated power (== seeds when found)
    power: float  # simulated power at `seeds` (or at `best`)
    effect: float
    sd_diff: float
    sd_arm: float | None
    unit: float = 1.0  # effect and sds are in units of this (the stated sd of the paired difference)
    capped_from: float | None = None  # the stated effect / sd, where it was beyond RATIO_LIMIT (computed there)

    def line(self, target: float = TARGET) -> str:
        n = self.seeds if self.seeds is not None else self.best
        bars = (
            f"SE bar {se_bar_power(n, self.effect, self.sd_diff, self.sd_arm):.2f}, "
            f"sign bar {sign_bar_power(n, self.effect, self.sd_diff):.2f}"
        )
        # The effect and sds as stated; where the ratio was capped, the stated effect (not the one computed with).
        scale = self.unit if self.capped_from is None else self.unit * self.capped_from / abs(self.effect)
        given = f"effect {self.effect * scale:+.3g}, sd of paired difference {self.sd_diff * self.unit:.3g}" + (
            f", sd per arm {self.sd_arm * scale:.3g}" if self.sd_arm is not None else " (arms taken as independent)"
        )
        if self.capped_from is not None:
            given += (
                f" [effect / sd = {self.capped_from:.3g}, beyond {RATIO_LIMIT:g}: computed at effect / sd = "
                f"{RATIO_LIMIT:g}, where the answer no longer changes]"
            )
        if self.seeds is not None:
            return f"{given}: {n} paired seeds for {self.power:.0%} power to be called reproduced ({bars} alone)"
        p = normal_cdf(abs(self.effect) / self.sd_diff)
        why = (
            f"; a seed moves in the effect's direction with p = {p:.2f} < {MIN_PAIRED_SHARE}, so the "
            "sign bar gets harder with more seeds"
            if p < MIN_PAIRED_SHARE
            else ""
        )
        return (
            f"{given}: no n up to {MAX_SEEDS} paired seeds reaches {target:.0%} power; the best is n = {n} at "
            f"{self.power:.0%} ({bars} alone){why}"
        )


def seeds_needed(
    effect: float,
    sd_diff: float,
    sd_arm: float | None = None,
    target: float = TARGET,
    max_seeds: int = MAX_SEEDS,
    draws: int = DRAWS,
    seed: int = 0,
) -> PowerAnswer:
    """The smallest number of paired seeds (2 .. max_seeds) whose simulated power reaches `target`."""
    if not (math.isfinite(effect) and effect != 0):
        raise CompareError(f"--power: effect {effect} must be a finite, non-zero mean paired difference")
    if not (math.isfinite(sd_diff) and sd_diff > 0):
        raise CompareError(f"--power: sd {sd_diff} of the paired difference must be finite and > 0")
    if sd_arm is not None and not (math.isfinite(sd_arm) and sd_arm >= sd_diff / 2):
        raise CompareError(
            f"--power: sd per arm {sd_arm} must be finite and at least half the paired difference's sd "
            f"({sd_diff / 2:.3g}): sd_diff^2 = 2 sd_arm^2 (1 - rho) with rho >= -1"
        )
    # Power depends on the ratios alone: computed at sd_diff = 1, so huge or tiny numbers cannot overflow; a ratio
    # beyond RATIO_LIMIT either way is no question a sweep asks (2 seeds, or none reach it) and is refused.
    ratio, arm_ratio = abs(effect) / sd_diff, (sd_arm / sd_diff if sd_arm is not None else None)
    # Seeds that differ by a near-constant amount (measured runs that share everything but the arm) give a huge
    # effect/sd: that is a real answer (2 seeds suffice), so it is computed at the limit, not refused.
    capped_from = None
    if ratio > RATIO_LIMIT and (arm_ratio is None or arm_ratio <= ratio):
        arm_ratio = None if arm_ratio is None else arm_ratio * RATIO_LIMIT / ratio
        ratio, capped_from = RATIO_LIMIT, ratio
    for name, value in (("effect / sd", ratio), ("sd per arm / sd", arm_ratio)):
        if value is not None and not (1 / RATIO_LIMIT <= value <= RATIO_LIMIT):
            raise CompareError(
                f"--power: {name} is {value:.3g}, outside [{1 / RATIO_LIMIT:g}, {RATIO_LIMIT:g}]; state the effect and "
                "sds in the same units (the metric's), e.g. --power 0.05:0.03"
            )
    unit = sd_diff
    effect, sd_diff, sd_arm = math.copysign(ratio, effect), 1.0, arm_ratio
    simulated = {}
    for n in range(2, max_seeds + 1):
        if sign_bar_power(n, effect, sd_diff) < target:
            continue  # both bars together are no likelier than the (exact) sign bar alone
        simulated[n] = simulated_power(n, effect, sd_diff, sd_arm, draws, seed)
        if simulated[n] >= target:
            return PowerAnswer(n, n, simulated[n], effect, sd_diff, sd_arm, unit, capped_from)
    if not simulated:  # the n where the weaker bar alone is strongest
        n = max(range(2, max_seeds + 1), key=lambda n: min(se_bar_power(n, effect, sd_diff, sd_arm),
                                                             sign_bar_power(n, effect, sd_diff)))  # fmt: skip
        simulated[n] = simulated_power(n, effect, sd_diff, sd_arm, draws, seed)
    best = max(simulated, key=simulated.get)
    return PowerAnswer(None, best, simulated[best], effect, sd_diff, sd_arm, unit, capped_from)


def parse_numbers(text: str) -> tuple[float, float, float | None] | None:
    """EFFECT:SD[:SD_ARM] as numbers, or None when `text` has no colon (then it names a metric)."""
    if ":" not in text:
        return None
    try:
        numbers = [float(part) for part in text.split(":")]
    except ValueError:
        numbers = []
    if len(numbers) not in (2, 3):
        raise CompareError(
            f"--power {text!r}: write EFFECT:SD (mean paired difference and its sd over seeds), EFFECT:SD:SD_ARM, "
            "or a METRIC with run folders to read them from"
        )
    return numbers[0], numbers[1], numbers[2] if len(numbers) == 3 else None


def paired_inputs(arm, baseline, metric: str) -> tuple[float, float, float]:
    """(mean paired difference, its sd, the arms' pooled sd) of AUC/span over the seeds `arm` shares with the
    baseline: the inputs a power analysis of this comparison takes."""
    import numpy as np

    from align_kit.compare.statistics import auc_per_step

    base = {run.seed: auc_per_step(run.series[metric]) for run in baseline.runs}
    pairs = [(auc_per_step(run.series[metric]), base[run.seed]) for run in arm.runs if run.seed in base]
    if len(pairs) < 2:
        raise CompareError(f"--power {metric}: arm {arm.name} shares {len(pairs)} seed(s) with the baseline; need 2+")
    values, references = np.array(pairs).T
    difference = values - references
    pooled = math.sqrt((values.var(ddof=1) + references.var(ddof=1)) / 2)
    return float(difference.mean()), float(difference.std(ddof=1)), pooled


def report_power(spec: str, inputs: list[str]) -> list[str]:
    """`align-kit compare --power`: print (and return) the seeds needed, from numbers or from the runs' AUC/span of a
    metric (each arm against the baseline arm, over the seeds they share: a tuning sweep)."""
    numbers = parse_numbers(spec)
    if numbers is not None:
        if inputs:
            raise CompareError(f"--power {spec} takes numbers, not runs; drop {inputs[0]} or pass --power METRIC")
        lines = [seeds_needed(*numbers).line()]
    else:
        from align_kit.compare.arms import drop_duplicate_seeds, group_into_arms
        from align_kit.compare.runs import load_inputs

        if not inputs:
            raise CompareError(f"--power {spec}: name the runs to read {spec} from, or pass EFFECT:SD")
        runs, notes = load_inputs(inputs, [spec])
        for note in notes:  # what was left out (unfinished runs, failed sweep jobs) is said here as in compare
            print(f"align-kit: note: {note}", file=sys.stderr)
        if any(spec not in run.series for run in runs):
            raise CompareError(f"--power {spec}: not logged by every run; pass a metric the runs log")
        arms = group_into_arms(runs)
        drop_duplicate_seeds(arms)
        if len(arms) < 2:
            raise CompareError(f"--power {spec}: the runs form one arm; a power analysis compares two")
        lines = [
            f"{arm.name} vs {arms[0].name}, {spec} AUC/span: " + seeds_needed(*paired_inputs(arm, arms[0], spec)).line()
            for arm in arms[1:]
        ]
    lines.append(
        f"(power: the chance of compare's 'reproduced', from {DRAWS} simulated sweeps, seed 0; compare/power.py)"
    )
    print("\n".join(lines))
    return lines
