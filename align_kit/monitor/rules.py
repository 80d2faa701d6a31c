"""Training-health alert rules (seed 000 §16.6.1 and table 16-6; seed 002 §18.3.1-18.3.4, 18.3.7).

`HealthMonitor.update(step, metrics)` takes the dict TRL logs at one logging step (eval metrics,
prefixed `eval_`, may come in their own call) and returns the alerts raised at that step.

Episodes: a rule fires once when its condition becomes true, stays silent while the condition
holds, and re-arms only after an evaluation finds the condition false again. A rule is evaluated
only on calls that carry its trigger metric, and only once its history is long enough; an absent
metric (missing key, None or a non-finite value) leaves the rule's state unchanged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from statistics import fmean
from typing import Any

from align_kit.monitor.config import (
    AboveThreshold,
    ClipRatioZero,
    EntropyCollapse,
    EntropyDecline,
    EntropyDrop,
    GradNormVanishing,
    HealthMonitorConfig,
    LengthGrowth,
    LengthNearMax,
    PolicyRatioDrift,
    RewardPlateau,
    Rising,
    TrainEvalDivergence,
)


@dataclass(frozen=True)
class Alert:
    step: int
    rule: str
    action: str  # log | warn | halt
    values: dict[str, float]  # the numbers behind the decision, thresholds included
    message: str
    advice: str

    def to_json(self) -> str:
        """One line of alerts.jsonl."""
        return json.dumps(asdict(self))


@dataclass
class Series:
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def since(self, first_step: int) -> list[float]:
        return [v for s, v in zip(self.steps, self.values, strict=True) if s >= first_step]

    def between(self, after_step: float, up_to_step: int) -> list[float]:
        return [v for s, v in zip(self.steps, self.values, strict=True) if after_step < s <= up_to_step]


@dataclass(frozen=True)
class RunLimits:
    max_completion_length: int | None
    reward_max: float


# The best reward total under the weights in force, logged while a format schedule runs.
MAX_ATTAINABLE = "reward/max_attainable"

# A check returns None when it cannot evaluate yet, else (condition holds, values).
Verdict = tuple[bool, dict[str, float]] | None
History = Mapping[str, Series]


def _entropy_collapse(s: EntropyCollapse, history: History, _: RunLimits) -> Verdict:
    values = history["entropy"].values
    if len(values) < 2 * s.span:  # seed 002 §18.3.1: first and last 10 must not overlap (>= 20 points)
        return None
    early, recent = fmean(values[: s.span]), fmean(values[-s.span :])
    threshold = (1 - s.fall) * early
    return recent < threshold, {"early_mean": early, "recent_mean": recent, "threshold": threshold}


def _entropy_drop(s: EntropyDrop, history: History, _: RunLimits) -> Verdict:
    series = history["entropy"]
    latest = series.values[-1]
    window_max = max(series.since(series.steps[-1] - s.window_steps))
    threshold = (1 - s.fall) * window_max
    return latest < threshold, {"latest": latest, "window_max": window_max, "threshold": threshold}


def _entropy_decline(s: EntropyDecline, history: History, _: RunLimits) -> Verdict:
    values = history["entropy"].values
    initial, latest = values[0], values[-1]
    threshold = (1 - s.fall) * initial
    return latest < threshold, {"initial": initial, "latest": latest, "threshold": threshold}


def _above_threshold(metric: str) -> Callable[[AboveThreshold, History, RunLimits], Verdict]:
    def check(s: AboveThreshold, history: History, _: RunLimits) -> Verdict:
        values = history[metric].values
        if len(values) < s.span:
            return None
        recent = fmean(values[-s.span :])
        return recent > s.threshold, {"recent_mean": recent, "threshold": s.threshold}

    return check


def _length_growth(s: LengthGrowth, history: History, _: RunLimits) -> Verdict:
    values = history["completions/mean_length"].values
    if len(values) < 2 * s.span:
        return None
    early, recent = fmean(values[: s.span]), fmean(values[-s.span :])
    threshold = s.factor * early
    return recent > threshold, {"early_mean": early, "recent_mean": recent, "threshold": threshold}


def _length_near_max(s: LengthNearMax, history: History, limits: RunLimits) -> Verdict:
    values = history["completions/mean_length"].values
    if limits.max_completion_length is None or len(values) < s.span:
        return None
    recent = fmean(values[-s.span :])
    threshold = (1 - s.margin) * limits.max_completion_length
    return recent >= threshold, {
        "recent_mean": recent,
        "max_completion_length": limits.max_completion_length,
        "threshold": threshold,
    }


def _half_change(values: list[float]) -> float:
    """Mean of the second half minus mean of the first half (the middle point of an odd window is skipped)."""
    half = len(values) // 2
    return fmean(values[-half:]) - fmean(values[:half])


def _reward_plateau(s: RewardPlateau, history: History, limits: RunLimits) -> Verdict:
    values = history["reward"].values
    if len(values) < s.window:
        return None
    window = values[-s.window :]
    change, mean = _half_change(window), fmean(window)
    ceiling = limits.reward_max - s.gap
    return abs(change) < s.tolerance and mean <= ceiling, {
        "window_mean": mean,
        "change": change,
        "tolerance": s.tolerance,
        "reward_max": limits.reward_max,
        "ceiling": ceiling,
    }


def _grad_norm_vanishing(s: GradNormVanishing, history: History, _: RunLimits) -> Verdict:
    values = history["grad_norm"].values
    if len(values) < s.window:
        return None
    window_max = max(values[-s.window :])
    return window_max < s.floor, {"window_max": window_max, "floor": s.floor}


def _rising(metric: str) -> Callable[[Rising, History, RunLimits], Verdict]:
    def check(s: Rising, history: History, _: RunLimits) -> Verdict:
        values = history[metric].values
        if len(values) < s.window:
            return None
        window = values[-s.window :]
        rising = all(later > earlier for earlier, later in zip(window, window[1:], strict=False))
        return rising, {"window_first": window[0], "latest": window[-1]}

    return check


def _policy_ratio_drift(s: PolicyRatioDrift, history: History, _: RunLimits) -> Verdict:
    values = history["policy_ratio/mean"].values
    if len(values) < s.span:
        return None
    recent = fmean(values[-s.span :])
    return abs(recent - 1.0) > s.deviation, {"recent_mean": recent, "deviation": s.deviation}


def _clip_ratio_zero(s: ClipRatioZero, history: History, _: RunLimits) -> Verdict:
    values = history["clip_ratio/region_mean"].values
    if len(values) <= s.window:
        return None
    # "Drops to zero while training": a run that never clipped (fully on-policy) is not a drop.
    clipped_before = max(values[: -s.window])
    window_max = max(values[-s.window :])
    return window_max == 0.0 and clipped_before > 0.0, {"window_max": window_max, "earlier_max": clipped_before}


def _train_eval_divergence(s: TrainEvalDivergence, history: History, _: RunLimits) -> Verdict:
    evals, train = history["eval_reward"], history["reward"]
    pairs = []  # (mean train reward since the previous evaluation, eval reward)
    previous_step: float = -math.inf
    for step, eval_reward in zip(evals.steps, evals.values, strict=True):
        interval = train.between(previous_step, step)
        if interval:
            pairs.append((fmean(interval), eval_reward))
        previous_step = step
    if len(pairs) < s.window:
        return None
    train_gain = _half_change([t for t, _ in pairs[-s.window :]])
    eval_gain = _half_change([e for _, e in pairs[-s.window :]])
    return train_gain > s.min_train_gain and eval_gain < s.max_eval_gain, {
        "train_gain": train_gain,
        "eval_gain": eval_gain,
    }


@dataclass(frozen=True)
class Rule:
    name: str  # also the rule's key in HealthMonitorConfig and monitor/*.yaml
    trigger: str  # the rule is evaluated on calls that carry this metric
    check: Callable[[Any, History, RunLimits], Verdict]
    message: str  # formatted with the verdict's values
    advice: str


_ENTROPY_ADVICE = "enable Clip-Higher (eps_high >= 0.28): clip=clip_higher"
_DYNAMIC_SAMPLING_ADVICE = "enable dynamic sampling or adjust the data difficulty: sampling=dynamic"
_OVERLONG_ADVICE = "enable overlong reward shaping: overlong=soft_punish"
_FEWER_UPDATES_ADVICE = (
    "fewer updates per rollout (trainer.num_iterations, trainer.steps_per_generation) or a lower trainer.learning_rate"
)

RULES: tuple[Rule, ...] = (
    Rule(
        "entropy_collapse",
        "entropy",
        _entropy_collapse,
        "entropy: recent mean {recent_mean:.4g} < {threshold:.4g} (early mean {early_mean:.4g})",
        _ENTROPY_ADVICE,
    ),
    Rule(
        "entropy_drop",
        "entropy",
        _entropy_drop,
        "entropy {latest:.4g} < {threshold:.4g} (window max {window_max:.4g})",
        _ENTROPY_ADVICE,
    ),
    Rule(
        "entropy_decline",
        "entropy",
        _entropy_decline,
        "entropy {latest:.4g} < {threshold:.4g} (initial {initial:.4g})",
        _ENTROPY_ADVICE + "; check that response length rises while entropy holds",
    ),
    Rule(
        "zero_std_groups",
        "groups/flat_fraction",
        _above_threshold("groups/flat_fraction"),
        "groups/flat_fraction mean {recent_mean:.3f} > {threshold:.3f}: the batch lost its learning signal",
        "inject a virtual full-score sample (advantage=ngrpo), refine the reward function, or sampling=dynamic",
    ),
    Rule(
        "zero_advantage",
        "adv/zero_std_fraction",
        _above_threshold("adv/zero_std_fraction"),
        "adv/zero_std_fraction mean {recent_mean:.3f} > {threshold:.3f}",
        _DYNAMIC_SAMPLING_ADVICE,
    ),
    Rule(
        "length_growth",
        "completions/mean_length",
        _length_growth,
        "mean length {recent_mean:.1f} > {threshold:.1f} (early mean {early_mean:.1f})",
        _OVERLONG_ADVICE,
    ),
    Rule(
        "length_near_max",
        "completions/mean_length",
        _length_near_max,
        "mean length {recent_mean:.1f} >= {threshold:.1f} of max_completion_length {max_completion_length:.0f}: "
        "the model may be looping",
        _OVERLONG_ADVICE,
    ),
    Rule(
        "reward_plateau",
        "reward",
        _reward_plateau,
        "reward flat at {window_mean:.3f} (change {change:+.3f}, tolerance {tolerance}) below {ceiling:.3f}",
        "check the reward's attainable maximum ({reward_max:g}) is 1.0; if it is, the data may be too hard: "
        "sampling=dynamic or advantage=ngrpo",
    ),
    Rule(
        "grad_norm_vanishing",
        "grad_norm",
        _grad_norm_vanishing,
        "grad_norm stayed below {floor:g} (window max {window_max:.3g})",
        "check zero-variance groups (groups/flat_fraction) or gradients cancelling between rewards: "
        "advantage=ngrpo, sampling=dynamic",
    ),
    Rule(
        "kl_rising",
        "kl",
        _rising("kl"),
        "kl rose monotonically from {window_first:.4g} to {latest:.4g}",
        "raise the KL coefficient (kl.beta) or check the reward is reliable",
    ),
    Rule(
        "policy_ratio_drift",
        "policy_ratio/mean",
        _policy_ratio_drift,
        "policy ratio mean {recent_mean:.3f} is more than {deviation} away from 1.0",
        _FEWER_UPDATES_ADVICE,
    ),
    Rule(
        "clip_ratio_rising",
        "clip_ratio/region_mean",
        _rising("clip_ratio/region_mean"),
        "clip ratio rose monotonically from {window_first:.4g} to {latest:.4g}",
        _FEWER_UPDATES_ADVICE,
    ),
    Rule(
        "clip_ratio_zero",
        "clip_ratio/region_mean",
        _clip_ratio_zero,
        "clip ratio dropped to zero (it reached {earlier_max:.4g} before)",
        "the policy has nearly stopped updating: check grad_norm and adv/zero_std_fraction",
    ),
    Rule(
        "logp_mismatch",
        "mismatch/logp_abs_diff/mean",
        _above_threshold("mismatch/logp_abs_diff/mean"),
        "train/inference |logp difference| mean {recent_mean:.4g} > {threshold:g}",
        "align the inference engine's precision with the trainer's (e.g. bf16 on both) and check "
        "tokenization round-trips; for MoE models use routing replay",
    ),
    Rule(
        "train_eval_divergence",
        "eval_reward",
        _train_eval_divergence,
        "train reward gained {train_gain:+.3f} while eval reward gained {eval_gain:+.3f}",
        "possible reward hacking or overfitting: add training data or a KL constraint (kl=constant)",
    ),
)
# train_eval_divergence also reads the train reward, which reward_plateau already watches.
WATCHED_METRICS = frozenset(rule.trigger for rule in RULES)


class HealthMonitor:
    """Evaluates the rules on each logging step; the caller acts on the returned alerts."""

    def __init__(self, config: HealthMonitorConfig, max_completion_length: int | None, reward_max: float):
        self.config = config
        self.limits = RunLimits(max_completion_length, reward_max)
        self.history: dict[str, Series] = {name: Series() for name in WATCHED_METRICS}
        self._in_episode: set[str] = set()

    def update(self, step: int, metrics: Mapping[str, float | None]) -> list[Alert]:
        if not self.config.enabled:
            return []
        present = {
            name: float(value)
            for name, value in metrics.items()
            if name in WATCHED_METRICS and value is not None and math.isfinite(value)
        }
        ceiling = metrics.get(MAX_ATTAINABLE)
        if ceiling is not None and math.isfinite(ceiling):  # a format schedule moves the reward's maximum
            self.limits = replace(self.limits, reward_max=float(ceiling))
        for name, value in present.items():
            self.history[name].steps.append(step)
            self.history[name].values.append(value)
        alerts = []
        for rule in RULES:
            if rule.trigger not in present:
                continue
            settings = getattr(self.config, rule.name)
            verdict = rule.check(settings, self.history, self.limits)
            if verdict is None:
                continue
            holds, values = verdict
            if not holds:
                self._in_episode.discard(rule.name)
            elif rule.name not in self._in_episode:
                self._in_episode.add(rule.name)
                alerts.append(
                    Alert(
                        step=step,
                        rule=rule.name,
                        action=settings.action,
                        values=values,
                        message=rule.message.format(**values),
                        advice=rule.advice.format(**values),
                    )
                )
        return alerts
