"""Training-health alert rules (the training-stability chapter, 16.6.1 and table 16-6; the
policy-optimization chapter, 18.3.1-18.3.4 and the alert table of 18.3.7).

`HealthMonitor.update(step, metrics)` takes the dict TRL logs at one logging step (eval metrics,
prefixed `eval_`, may come in their own call) and returns the alerts raised at that step.

Episodes: a rule fires once when its condition becomes true, stays silent while the condition
holds, and re-arms only after an evaluation finds the condition false again. A rule is evaluated
only on calls that carry one of its trigger metrics, and only once its history is long enough; an
absent metric (missing key, None or a non-finite value) leaves the rule's state unchanged, except
for `non_finite`, whose whole point is a NaN or infinite loss or grad norm.

Trend rules read smoothed series (means over `span` points, or halves of a `window`): the source
chapters speak of trends over tens to hundreds of steps, and one noisy batch must not raise a
warning (benchmarks/alert_calibration.py measures the false alarms on healthy runs).

Advice never recommends a node that is already on: it is written for the run's own composition
(`RunContext`), e.g. with Clip-Higher on, an entropy alert suggests a higher `clip.eps_high`.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from itertools import islice
from operator import itemgetter
from statistics import fmean
from typing import Any

from align_kit.monitor.settings import (
    AboveThreshold,
    ClipRatioZero,
    EntropyCollapse,
    EntropyDecline,
    EntropyDrop,
    EntropyExploding,
    GradNormVanishing,
    HealthMonitorConfig,
    KlRisingFlatReward,
    LengthGrowth,
    LengthNearMax,
    LengthPinned,
    NonFinite,
    NoSignal,
    PolicyRatioDrift,
    RewardCollapse,
    RewardDecline,
    RewardPlateau,
    Rising,
    RisingShare,
    SamplerGapDrift,
    TrainEvalDivergence,
)

# The zero-variance share: align_kit's own (from the raw reward totals) when logged, else TRL's,
# which counts a group flat only when its float32 std is below 1e-8.
FLAT_FRACTION = ("groups/flat_fraction", "frac_reward_zero_std")
# The best reward total under the weights in force, logged while a format schedule runs.
MAX_ATTAINABLE = "reward/max_attainable"
# The train/eval divergence rule pairs each evaluation with the train rewards logged since the previous one.
TRAIN_REWARD, EVAL_REWARD = "reward", "eval_reward"
# Mean |logp_train - logp_sampler|: align_kit's measure (rollout=hf with a sampler copy), or TRL's
# when rollouts come from vLLM.
LOGP_MISMATCH = ("mismatch/logp_abs_diff/mean", "sampling/sampling_logp_difference/mean")
# Mean importance-sampling ratio trainer/sampler (TRL with vLLM's IS correction).
IS_RATIO = "sampling/importance_sampling_ratio/mean"
CLIPPED = "completions/clipped_ratio"  # the share of completions cut at the length budget
MEAN_LENGTH = "completions/mean_length"


@dataclass(frozen=True)
class Alert:
    step: int
    rule: str
    action: str  # log | warn | halt
    values: dict[str, float]  # the numbers behind the decision, thresholds included
    message: str
    advice: str
    metric: str = ""  # the logged metric the rule read
    severity: str = "warning"  # failing (the run is broken) | warning (a sign to look at): Rule.severity
    first_step: int | None = None  # the step of the first logged point the decision read
    points: int = 0  # how many logged points of `metric` it read (windows count logged points, not steps)
    fixes: tuple[str, ...] = ()  # FIX ids that fit, best first (Rule.fixes_for the finding's words)
    words: dict[str, str] = field(default_factory=dict)  # the finding's non-numeric fields (e.g. difficulty)

    def to_json(self) -> str:
        """One line of alerts.jsonl."""
        return json.dumps(asdict(self))


@dataclass(frozen=True)
class Memory:
    """What a rule reads of each of its metrics: the first `head` values, the last `tail` (with their steps), and
    the running maximum of the `best_span`-point means. Nothing older is kept, so a step costs the same at step 10
    and at step 100,000."""

    head: int = 0
    tail: int = 0
    best_span: int | None = None


class Series:
    """One metric's finite values, as far as the rules read them (`Memory`): `count` logged in all, the first
    ones, the last ones with their steps, and the best smoothed value so far."""

    def __init__(self, head: int = 0, tail: int = 0, best_spans: frozenset[int] = frozenset()):
        self.count = 0
        self.start: int | None = None  # the step of the first value
        self.head_size = head
        self.first: list[float] = []
        self.steps: deque[int] = deque(maxlen=tail)
        self.values: deque[float] = deque(maxlen=tail)
        self.best: dict[int, float] = {}  # span -> the highest mean of `span` consecutive points so far
        self._best_spans = best_spans
        # span -> (first step, last step, mean) of each run of `span` kept values, and the count it was brought to
        self._smoothed: dict[int, tuple[deque[tuple[int, int, float]], list[int]]] = {}

    def append(self, step: int, value: float) -> None:
        self.count += 1
        if self.start is None:
            self.start = step
        if len(self.first) < self.head_size:
            self.first.append(value)
        self.steps.append(step)
        self.values.append(value)
        for span in self._best_spans:
            if self.count >= span:
                mean = fmean(self.last(span))
                self.best[span] = max(self.best.get(span, mean), mean)

    def last(self, n: int) -> list[float]:
        """The last `n` values (all that are kept, if fewer)."""
        return list(islice(self.values, max(len(self.values) - n, 0), None))

    def smoothed(self, span: int) -> list[tuple[int, int, float]]:
        """(first step, last step, mean) of every `span` consecutive kept values, oldest first. Each mean is computed
        once, when its last value arrives, so a rule that reads a smoothed window costs the window per step, not the
        window times the span; after a resume they are computed again from the kept values."""
        if span not in self._smoothed:
            self._smoothed[span] = (deque(maxlen=max((self.values.maxlen or 0) - span + 1, 0)), [0])
        means, brought_to = self._smoothed[span]
        new = min(self.count - brought_to[0], len(self.values))
        if new:
            values, steps = list(self.values), list(self.steps)
            for end in range(max(len(values) - new, span - 1), len(values)):
                means.append((steps[end - span + 1], steps[end], fmean(values[end - span + 1 : end + 1])))
            brought_to[0] = self.count
        return list(means)

    def step_of_last(self, n: int) -> int | None:
        """The step of the first of the last `n` values (the oldest kept, if fewer are kept)."""
        if not self.steps:
            return None
        return self.steps[max(len(self.steps) - n, 0)]

    def state_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "start": self.start,
            "first": self.first,
            "steps": list(self.steps),
            "values": list(self.values),
            "best": {str(span): value for span, value in self.best.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.count, self.first = state["count"], list(state["first"])
        self.start = state.get("start", state["steps"][0] if state["steps"] else None)  # older states lack it
        self.steps.extend(state["steps"])
        self.values.extend(state["values"])
        self.best = {int(span): value for span, value in state["best"].items()}


class TrainEvalPairs:
    """(mean train reward since the previous evaluation, eval reward) per evaluation, the last `window` of them.
    The train rewards of the interval in progress are a running sum: steps are logged in order, so every train
    reward logged after an evaluation belongs to the next one."""

    def __init__(self, window: int = 0):
        self.pairs: deque[tuple[float, float]] = deque(maxlen=window)
        self.total, self.points = 0.0, 0

    def add_train(self, value: float) -> None:
        self.total, self.points = self.total + value, self.points + 1

    def add_eval(self, value: float) -> None:
        if self.points:
            self.pairs.append((self.total / self.points, value))
        self.total, self.points = 0.0, 0

    def state_dict(self) -> dict[str, Any]:
        return {"pairs": [list(pair) for pair in self.pairs], "total": self.total, "points": self.points}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.pairs.extend(tuple(pair) for pair in state["pairs"])
        self.total, self.points = state["total"], state["points"]


class GradNormZeros:
    """Counts of rows whose grad_norm is exactly 0.0, and of those whose loss and reward spread (`reward_std`) are
    both non-zero. A batch with a reward spread has non-zero advantages, so an update that really moved nothing is
    implausible there: some logging set-ups report grad_norm as 0.0 throughout (e.g. where the norm is not gathered
    from the sharded optimizer). Most rows so: an artefact, and grad_norm says nothing about the gradients."""

    def __init__(self) -> None:
        self.rows = self.zeros = self.zeros_with_signal = 0

    def add(self, metrics: Mapping[str, Any]) -> None:
        grad_norm = _finite(metrics.get("grad_norm"))
        if grad_norm is None:
            return
        self.rows += 1
        if grad_norm == 0.0:
            self.zeros += 1
            loss, spread = _finite(metrics.get("loss")), _finite(metrics.get("reward_std"))
            self.zeros_with_signal += bool(loss and spread)  # None or 0.0: no signal seen

    def artefact(self) -> bool:
        # "Most rows": more than half of the rows exactly 0.0, and more than half of those with a signal.
        return 2 * self.zeros > self.rows and 2 * self.zeros_with_signal > self.zeros

    def state_dict(self) -> dict[str, int]:
        return {"rows": self.rows, "zeros": self.zeros, "zeros_with_signal": self.zeros_with_signal}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        self.rows, self.zeros, self.zeros_with_signal = state["rows"], state["zeros"], state["zeros_with_signal"]


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


class History(dict):
    """Metric name -> Series of its finite values (bounded by what the rules read); `latest` holds the current
    call's raw metrics and `step` its step, `train_eval` the pairs the train/eval divergence rule compares."""

    latest: Mapping[str, Any] = {}
    step: int = 0

    def __init__(self, train_eval_window: int = 0):
        super().__init__()
        self.train_eval = TrainEvalPairs(train_eval_window)
        self.grad_norm_zeros = GradNormZeros()

    def __missing__(self, name: str) -> Series:
        return Series()


@dataclass(frozen=True)
class RunContext:
    """What the run composes, so alerts judge against its limits and advise only what is off."""

    max_completion_length: int | None = None
    reward_max: float = 1.0
    reward_min: float = 0.0  # the lowest total reward attainable: reward rules judge shares of max - min
    advantage: str = "grpo"
    clip_higher: bool = False  # token-level clip with eps_high > eps_low
    sequence_clip: bool = False  # GSPO
    eps_high: float | None = None
    kl_on: bool = False
    reward_weights: Mapping[str, float] = field(default_factory=dict)
    # Declared by the nodes themselves (Component.monitor_facts): which fix is on.
    dynamic_sampling: bool = False
    max_gen_batches: int | None = None
    overlong_shaping: bool = False  # the soft overlong punishment is a reward term
    routing_replay: bool = False

    @classmethod
    def from_plan(cls, plan) -> RunContext:
        """The GRPOConfig fields and choices in force, and the facts each node declares."""
        eps_low, eps_high = plan.effective("epsilon"), plan.effective("epsilon_high")
        token_level = plan.effective("importance_sampling_level") == "token"
        declared: dict[str, Any] = {}
        for node in plan.components.values():
            declared.update(node.monitor_facts())
        return cls(
            max_completion_length=plan.effective("max_completion_length"),
            reward_max=plan.reward_max,
            advantage=plan.choices.get("advantage", "grpo"),
            clip_higher=token_level and eps_high is not None and eps_high > eps_low,
            sequence_clip=not token_level,
            eps_high=eps_high if eps_high is not None else eps_low,
            kl_on=(plan.effective("beta") or 0.0) > 0,
            reward_weights={spec.name: spec.weight for spec in plan.rewards},
            **declared,
        )


@dataclass(frozen=True)
class Finding:
    holds: bool
    values: dict[str, float]
    metric: str  # the metric read (one of the rule's alternatives)
    words: dict[str, str] = field(default_factory=dict)  # non-numeric message fields
    # What the decision read of `metric`, when not its last `Rule.needs` points (e.g. the first and the last span).
    points: int | None = None
    first_step: int | None = None


@dataclass(frozen=True)
class RuleCoverage:
    """Whether a rule could judge the history it was given, and if not, why."""

    rule: str
    judged: bool  # its check reached a decision at least once
    fired: bool  # it raised an alert
    reason: str  # when not judged: "lacks entropy", "needs 20 logged points of entropy, the run has 7", ...
    missing: tuple[str, ...] = ()  # the metrics it reads that the run never logged (alternatives joined by " or ")


# A check returns None when it cannot evaluate yet, else a Finding.
Check = Callable[[Any, History, RunContext], Finding | None]


def _halves_growth(window: list[float]) -> tuple[float, float, float]:
    """(mean of the first half, mean of the second half, growth of the second over the first): relative to the
    first half, and infinite when the first half is exactly 0 and the second is above it."""
    half = len(window) // 2
    first, second = fmean(window[:half]), fmean(window[-half:])
    growth = (second - first) / first if first > 0 else (math.inf if second > first else 0.0)
    return first, second, growth


def _half_change(values: list[float]) -> float:
    """Mean of the second half minus mean of the first half (the middle point of an odd window is skipped)."""
    half = len(values) // 2
    return fmean(values[-half:]) - fmean(values[:half])


def _first_logged(history: History, names: tuple[str, ...]) -> str:
    """The first of several alternative metrics that this run logs."""
    return next((name for name in names if history[name].count), names[0])


def _non_finite(s: NonFinite, history: History, _: RunContext) -> Finding | None:
    present = [(name, history.latest[name]) for name in s.metrics if history.latest.get(name) is not None]
    if not present:
        return None
    broken = [(name, float(value)) for name, value in present if not math.isfinite(float(value))]
    if not broken:
        return Finding(False, {}, present[0][0], points=1, first_step=history.step)
    name, value = broken[0]  # metrics are listed in the order a step computes them
    words = {"value": str(value), "checked": ", ".join(s.metrics)}
    return Finding(True, {}, name, words, points=1, first_step=history.step)


def _entropy_collapse(s: EntropyCollapse, history: History, _: RunContext) -> Finding | None:
    series = history["entropy"]
    if series.count < 2 * s.span:  # 18.3.1's code: first and last 10 must not overlap (>= 20 points)
        return None
    early, recent = fmean(series.first[: s.span]), fmean(series.last(s.span))
    threshold = (1 - s.fall) * early
    values = {"early_mean": early, "recent_mean": recent, "threshold": threshold}
    return Finding(recent < threshold, values, "entropy", points=2 * s.span, first_step=series.start)


def _entropy_drop(s: EntropyDrop, history: History, _: RunContext) -> Finding | None:
    series = history["entropy"]
    if series.count < s.span:
        return None
    # The smoothed values whose last point lies in the window (the span - 1 points before it are read too).
    means = series.smoothed(s.span)
    since = series.steps[-1] - s.window_steps
    window = means[bisect_left(means, since, key=itemgetter(1)) :]
    latest, window_max = window[-1][2], max(window, key=itemgetter(2))[2]
    threshold = (1 - s.fall) * window_max
    values_out = {"latest": latest, "window_max": window_max, "threshold": threshold}
    return Finding(latest < threshold, values_out, "entropy", points=len(window) + s.span - 1, first_step=window[0][0])


def _entropy_decline(s: EntropyDecline, history: History, _: RunContext) -> Finding | None:
    series = history["entropy"]
    if series.count < s.span:
        return None
    initial, latest = fmean(series.first[: s.span]), fmean(series.last(s.span))
    threshold = (1 - s.fall) * initial
    values = {"initial": initial, "latest": latest, "threshold": threshold}
    points = min(series.count, 2 * s.span)  # the first and the last span overlap on a short history
    return Finding(latest < threshold, values, "entropy", points=points, first_step=series.start)


def _above_threshold(names: tuple[str, ...]) -> Check:
    def check(s: AboveThreshold, history: History, _: RunContext) -> Finding | None:
        metric = _first_logged(history, names)
        series = history[metric]
        if series.count < s.span:
            return None
        recent = fmean(series.last(s.span))
        return Finding(recent > s.threshold, {"recent_mean": recent, "threshold": s.threshold}, metric)

    return check


def _difficulty(history: History, context: RunContext, flat: float, span: int) -> str:
    """Whether flat groups are mostly solved or mostly failed prompts (18.3.2: "the model has either mastered most
    training prompts or cannot solve them at all"). With a share `flat` of groups flat, a batch whose flat groups
    all score the maximum has its reward at least `flat` of the way up the range, one whose flat groups all score
    the minimum at most 1 - `flat`: the reward's level over the same points says which, "" when both or neither."""
    rewards, scale = history[TRAIN_REWARD], context.reward_max - context.reward_min
    if not rewards.count or scale <= 0:
        return ""
    level = (fmean(rewards.last(span)) - context.reward_min) / scale
    easy, hard = level >= flat, level <= 1 - flat
    return "too easy" if easy and not hard else "too hard" if hard and not easy else ""


def _difficulty_words(history: History, context: RunContext, flat: float, span: int) -> dict[str, str]:
    """The finding's words for flat groups: their difficulty, and the message's tail that says it."""
    difficulty = _difficulty(history, context, flat, span)
    return {"difficulty": difficulty, "why": _WHY[difficulty]}


def _flat_groups(s: AboveThreshold, history: History, context: RunContext) -> Finding | None:
    metric = _first_logged(history, FLAT_FRACTION)
    series = history[metric]
    if series.count < s.span:
        return None
    recent = fmean(series.last(s.span))
    values = {"recent_mean": recent, "threshold": s.threshold}
    return Finding(recent > s.threshold, values, metric, _difficulty_words(history, context, recent, s.span))


# What a flat group is, by difficulty (the alert message's tail).
_WHY = {
    "too easy": " (reward near its maximum: the data is too easy)",
    "too hard": " (reward near its minimum: the data is too hard)",
    "": "",
}


def _rising_share(metric: str) -> Check:
    def check(s: RisingShare, history: History, context: RunContext) -> Finding | None:
        series = history[metric]
        if series.count < max(s.span, s.window):
            return None
        recent, change = fmean(series.last(s.span)), _half_change(series.last(s.window))
        values_out = {"recent_mean": recent, "threshold": s.threshold, "change": change, "rise": s.rise}
        words = _difficulty_words(history, context, recent, s.span)
        return Finding(recent > s.threshold and change > s.rise, values_out, metric, words, points=s.window)

    return check


def _length_growth(s: LengthGrowth, history: History, _: RunContext) -> Finding | None:
    series = history["completions/mean_length"]
    if series.count < 2 * s.span:
        return None
    early, recent = fmean(series.first[: s.span]), fmean(series.last(s.span))
    threshold = s.factor * early
    return Finding(
        recent > threshold,
        {"early_mean": early, "recent_mean": recent, "threshold": threshold},
        "completions/mean_length",
        points=2 * s.span,
        first_step=series.start,
    )


def _length_near_max(s: LengthNearMax, history: History, context: RunContext) -> Finding | None:
    series = history["completions/mean_length"]
    if context.max_completion_length is None or series.count < s.span:
        return None
    recent = fmean(series.last(s.span))
    threshold = (1 - s.margin) * context.max_completion_length
    return Finding(
        recent >= threshold,
        {
            "recent_mean": recent,
            "first": series.first[0],
            "max_completion_length": context.max_completion_length,
            "threshold": threshold,
        },
        "completions/mean_length",
        {"from_start": "yes" if series.first[0] >= threshold else "no"},
    )


def _reward_plateau(s: RewardPlateau, history: History, context: RunContext) -> Finding | None:
    series = history["reward"]
    if series.count < s.window:
        return None
    window = series.last(s.window)
    change, mean = _half_change(window), fmean(window)
    scale = context.reward_max - context.reward_min  # tolerance and gap are shares of the reward's range
    ceiling, tolerance = context.reward_max - s.gap * scale, s.tolerance * scale
    return Finding(
        abs(change) < tolerance and mean <= ceiling,
        {
            "window_mean": mean,
            "change": change,
            "tolerance": tolerance,
            "reward_max": context.reward_max,
            "ceiling": ceiling,
        },
        "reward",
    )


def _reward_collapse(s: RewardCollapse, history: History, _: RunContext) -> Finding | None:
    format_metric = f"rewards/{s.format_reward}/mean"
    formats, correct = history[format_metric], history[f"rewards/{s.correctness_reward}/mean"]
    if min(formats.count, correct.count) < s.window:
        return None
    format_gain, correctness_gain = _half_change(formats.last(s.window)), _half_change(correct.last(s.window))
    return Finding(
        format_gain > s.min_format_gain and correctness_gain < s.max_correctness_gain,
        {
            "format_gain": format_gain,
            "correctness_gain": correctness_gain,
            "min_format_gain": s.min_format_gain,
            "max_correctness_gain": s.max_correctness_gain,
        },
        format_metric,
        {"format": s.format_reward, "correctness": s.correctness_reward},
    )


def _reward_decline(s: RewardDecline, history: History, context: RunContext) -> Finding | None:
    series = history["reward"]
    if series.count < s.span:
        return None
    latest, best = fmean(series.last(s.span)), series.best[s.span]
    threshold = best - s.drop * (context.reward_max - context.reward_min)  # a share of the reward's range
    return Finding(latest < threshold, {"latest": latest, "best": best, "threshold": threshold}, "reward")


def _grad_norm_vanishing(s: GradNormVanishing, history: History, _: RunContext) -> Finding | None:
    series = history["grad_norm"]
    if series.count < s.window:
        return None
    window_max = max(series.last(s.window))
    if window_max == 0.0 and history.grad_norm_zeros.artefact():
        return None  # a logging artefact (GradNormZeros), not vanished gradients: the rule cannot judge
    return Finding(window_max < s.floor, {"window_max": window_max, "floor": s.floor}, "grad_norm")


def _rising(metric: str) -> Check:
    def check(s: Rising, history: History, _: RunContext) -> Finding | None:
        series = history[metric]
        if series.count < s.window:
            return None
        window = series.last(s.window)
        rising = all(later > earlier for earlier, later in zip(window, window[1:], strict=False))
        return Finding(rising, {"window_first": window[0], "latest": window[-1]}, metric)

    return check


def _policy_ratio_drift(s: PolicyRatioDrift, history: History, _: RunContext) -> Finding | None:
    series = history["policy_ratio/mean"]
    if series.count < s.span:
        return None
    recent = fmean(series.last(s.span))
    return Finding(
        abs(recent - 1.0) > s.deviation, {"recent_mean": recent, "deviation": s.deviation}, "policy_ratio/mean"
    )


def _clip_ratio_zero(s: ClipRatioZero, history: History, _: RunContext) -> Finding | None:
    series = history["clip_ratio/region_mean"]
    if series.count < 2 * s.window:
        return None
    # "Drops to zero while training": a run that never clipped (fully on-policy) is not a drop.
    values = series.last(2 * s.window)
    clipped_before = fmean(values[: s.window])
    window_max = max(values[s.window :])
    return Finding(
        window_max == 0.0 and clipped_before > s.min_before,
        {"window_max": window_max, "earlier_mean": clipped_before, "min_before": s.min_before},
        "clip_ratio/region_mean",
    )


def _train_eval_divergence(s: TrainEvalDivergence, history: History, _: RunContext) -> Finding | None:
    pairs = history.train_eval.pairs  # (mean train reward since the previous evaluation, eval reward)
    if len(pairs) < s.window:
        return None
    train_gain = _half_change([t for t, _ in pairs])
    eval_gain = _half_change([e for _, e in pairs])
    return Finding(
        train_gain > s.min_train_gain and eval_gain < s.max_eval_gain,
        {"train_gain": train_gain, "eval_gain": eval_gain},
        "eval_reward",
    )


def _entropy_exploding(s: EntropyExploding, history: History, _: RunContext) -> Finding | None:
    series = history["entropy"]
    if series.count < 2 * s.span:  # the start and the recent span must not overlap
        return None
    early, recent = fmean(series.first[: s.span]), fmean(series.last(s.span))
    threshold = s.factor * early
    values = {"early_mean": early, "recent_mean": recent, "threshold": threshold}
    # Figure 18-8's cause is truncated samples; without truncation, the updates themselves are too large.
    clipped = history[CLIPPED]
    truncated = "unknown" if not clipped.count else "yes" if fmean(clipped.last(s.span)) >= s.truncated else "no"
    words = {"truncated": truncated}
    return Finding(recent > threshold, values, "entropy", words, points=2 * s.span, first_step=series.start)


def _entropy_exploding_fixes(words: Mapping[str, str]) -> tuple[str, ...]:
    if words.get("truncated") == "no":
        return ("lower_lr", "fewer_updates", "clip_higher")
    return ("overlong_filter", "overlong_shaping", "lower_lr", "clip_higher")


def _length_pinned(s: LengthPinned, history: History, context: RunContext) -> Finding | None:
    clipped = history[CLIPPED]
    if clipped.count < s.span:
        return None
    share = fmean(clipped.last(s.span))
    values = {"clipped_mean": share, "clipped": s.clipped}
    holds = share >= s.clipped
    lengths, budget = history[MEAN_LENGTH], context.max_completion_length
    if budget is not None and lengths.count:
        length, threshold = fmean(lengths.last(s.span)), (1 - s.margin) * budget
        values.update(recent_length=length, length_threshold=threshold, max_completion_length=budget)
        holds = holds and length >= threshold
        also = f"; mean length {length:.1f} >= {threshold:.1f} of max_completion_length {budget}"
    else:  # the truncated share alone says it
        also = "" if budget is not None else " (max_completion_length unknown: judged on the truncated share)"
    return Finding(holds, values, CLIPPED, {"also": also})


def _sampler_gap_drift(s: SamplerGapDrift, history: History, _: RunContext) -> Finding | None:
    ratio = history[IS_RATIO]
    gap_metric = _first_logged(history, LOGP_MISMATCH)
    gap = history[gap_metric]
    judged = None
    if ratio.count >= s.span:
        recent = fmean(ratio.last(s.span))
        values = {"recent_mean": recent, "ratio_deviation": s.ratio_deviation}
        if abs(recent - 1.0) > s.ratio_deviation:
            words = {
                "what": f"the IS ratio trainer/sampler averages {recent:.4g}, more than {s.ratio_deviation:g} from 1"
            }
            return Finding(True, values, IS_RATIO, words)
        judged = Finding(False, values, IS_RATIO, {"what": ""})
    if gap.count >= s.window:
        first, second, growth = _halves_growth(gap.last(s.window))
        values = {"first_half": first, "second_half": second, "rise": s.rise, "min_gap": s.min_gap}
        what = f"{gap_metric} rose from {first:.4g} to {second:.4g} between the halves of the window"
        return Finding(growth > s.rise and second > s.min_gap, values, gap_metric, {"what": what}, points=s.window)
    return judged


def _trend_t(values: list[float]) -> float:
    """The t-statistic of the least-squares slope of `values` against their index (inf for an exact line)."""
    n = len(values)
    mean_x, mean_y = (n - 1) / 2, fmean(values)
    sxx = sum((x - mean_x) ** 2 for x in range(n))
    slope = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(values)) / sxx
    residual = sum((y - mean_y - slope * (x - mean_x)) ** 2 for x, y in enumerate(values)) / (n - 2)
    if residual == 0:
        return math.copysign(math.inf, slope) if slope else 0.0
    return slope / math.sqrt(residual / sxx)


def _kl_rising_flat_reward(s: KlRisingFlatReward, history: History, context: RunContext) -> Finding | None:
    kl, reward = history["kl"], history[TRAIN_REWARD]
    if kl.count < 2 * s.window or reward.count < s.window:  # the first window is KL's start from 0
        return None
    window = kl.last(s.window)
    first, second, growth = _halves_growth(window)
    trend = _trend_t(window) if len(window) > 2 else 0.0
    reward_change = _half_change(reward.last(s.window))
    flat = s.tolerance * (context.reward_max - context.reward_min)
    values = {
        "kl_first_half": first,
        "kl_second_half": second,
        "trend_t": trend,
        "reward_change": reward_change,
        "flat": flat,
    }
    holds = growth > s.rise and trend >= s.min_t and abs(reward_change) <= flat
    return Finding(holds, values, "kl", points=s.window)


def _no_signal(s: NoSignal, history: History, context: RunContext) -> Finding | None:
    rewards = history[TRAIN_REWARD]
    flat_metric = _first_logged(history, FLAT_FRACTION)
    flats = history[flat_metric]
    if min(rewards.count, flats.count) < s.span:
        return None
    highest, flat = max(rewards.last(s.span)), fmean(flats.last(s.span))
    floor = context.reward_min + s.floor * (context.reward_max - context.reward_min)
    values = {"reward_max_seen": highest, "floor": floor, "flat_mean": flat, "flat": s.flat}
    words = {"flat_metric": flat_metric, "points_read": str(s.span)}
    return Finding(highest <= floor and flat >= s.flat, values, TRAIN_REWARD, words)


# --- advice: each function writes the intervention for the run's own composition ---------------


def _options(options: list[tuple[str, bool]], fallback: str) -> str:
    """The options whose node is not on yet, joined; `fallback` when every one is on."""
    remaining = [text for text, already_on in options if not already_on]
    return ", ".join(remaining) if remaining else fallback


def _entropy_advice(context: RunContext, _: Mapping[str, float]) -> str:
    if context.sequence_clip:
        return (
            f"GSPO clips sequence ratios: raise clip.eps_high (now {context.eps_high:g}) or lower trainer.learning_rate"
        )
    if context.clip_higher:
        return (
            f"Clip-Higher is already on (clip.eps_high={context.eps_high:g}): raise clip.eps_high "
            "(DAPO, arXiv 2503.14476, uses 0.28; try 0.3-0.4) or lower trainer.learning_rate"
        )
    return "enable Clip-Higher (eps_high >= 0.28): clip=clip_higher"


def _entropy_decline_advice(context: RunContext, values: Mapping[str, float]) -> str:
    return _entropy_advice(context, values) + "; check that response length rises while entropy holds"


def _dynamic_sampling_is_on(context: RunContext) -> str:
    return (
        f"dynamic sampling is on, yet the batch that trains still holds flat groups (filled from dropped ones "
        f"once sampling.max_gen_batches={context.max_gen_batches} rounds were spent): raise "
        "sampling.max_gen_batches or change the data difficulty"
    )


def _flat_groups_advice(context: RunContext, _: Mapping[str, float]) -> str:
    options = _options(
        [
            ("inject a virtual full-score sample (advantage=ngrpo)", context.advantage == "ngrpo"),
            ("refine the reward function", False),
            ("sampling=dynamic", context.dynamic_sampling),
        ],
        "",
    )
    return f"{_dynamic_sampling_is_on(context)}; or {options}" if context.dynamic_sampling else options


def _zero_advantage_advice(context: RunContext, _: Mapping[str, float]) -> str:
    if context.dynamic_sampling:
        return _dynamic_sampling_is_on(context)
    return "enable dynamic sampling or adjust the data difficulty: sampling=dynamic"


def _length_near_max_advice(context: RunContext, values: Mapping[str, float]) -> str:
    if values["first"] >= values["threshold"]:
        return (
            f"completions filled the budget from the first step: trainer.max_completion_length="
            f"{context.max_completion_length} is too short for this task; raise it"
        )
    return _length_growth_advice(context, values)


def _length_growth_advice(context: RunContext, _: Mapping[str, float]) -> str:
    if context.overlong_shaping:
        return "overlong reward shaping is already on: raise overlong.punish_weight or widen overlong.cache_length"
    return "enable overlong reward shaping: overlong=soft_punish"


def _reward_plateau_advice(context: RunContext, values: Mapping[str, float]) -> str:
    harder = _options(
        [("sampling=dynamic", context.dynamic_sampling), ("advantage=ngrpo", context.advantage == "ngrpo")],
        "change the data difficulty",
    )
    return (
        f"check the reward's attainable maximum ({values['reward_max']:g}) is 1.0; if it is, the data may be "
        f"too hard: {harder.replace(', ', ' or ')}"
    )


def _grad_norm_advice(context: RunContext, _: Mapping[str, float]) -> str:
    fixes = _options(
        [("advantage=ngrpo", context.advantage == "ngrpo"), ("sampling=dynamic", context.dynamic_sampling)],
        "refine the reward or the data difficulty",
    )
    return f"check zero-variance groups (groups/flat_fraction) or gradients cancelling between rewards: {fixes}"


def _reward_collapse_advice(context: RunContext, values: Mapping[str, float]) -> str:
    weight = context.reward_weights.get(values["format"])
    lower = f"lower the format weight (reward.{values['format']}.weight" + (f", now {weight:g})" if weight else ")")
    if context.advantage == "gdpo":
        return f"GDPO is already on: {lower}, or refine the correctness reward"
    return (
        "normalise each reward in its group before summing (GDPO, the training-stability chapter, 16.6.3: "
        f"advantage=gdpo) or {lower}"
    )


def _reward_decline_advice(context: RunContext, _: Mapping[str, float]) -> str:
    advice = (
        "the policy is getting worse: lower trainer.learning_rate or take fewer updates per rollout "
        "(trainer.steps_per_generation, trainer.num_iterations)"
    )
    return advice if context.routing_replay else advice + "; on an MoE model, routing_replay=r2"


def _divergence_advice(context: RunContext, _: Mapping[str, float]) -> str:
    constraint = "raise kl.beta" if context.kl_on else "a KL constraint (kl=constant)"
    return f"possible reward hacking or overfitting: add training data or {constraint}"


def _overlong_advice(context: RunContext, _: Mapping[str, float]) -> str:
    if context.overlong_shaping:
        return (
            "overlong reward shaping is already on: also mask truncated completions out of the loss "
            "(overlong=filter_and_punish) or lower trainer.learning_rate"
        )
    return "mask truncated completions out of the loss (overlong=filter) or shape their reward (overlong=soft_punish)"


def _entropy_exploding_advice(context: RunContext, values: Mapping[str, float]) -> str:
    if values.get("truncated") == "no":
        return (
            "few completions are truncated, so the updates themselves are too large: lower trainer.learning_rate "
            "or take fewer updates per rollout (trainer.steps_per_generation, trainer.num_iterations)"
        )
    # Figure 18-8: without overlong filtering, truncated samples' noisy rewards make entropy explode.
    return f"{_overlong_advice(context, values)}; or lower trainer.learning_rate"


def _length_pinned_advice(context: RunContext, values: Mapping[str, float]) -> str:
    budget = context.max_completion_length
    raise_it = f"raise trainer.max_completion_length (now {budget})" if budget else "raise the length budget"
    return f"the answers are cut before they end: {raise_it}; {_overlong_advice(context, values)}"


def _sampler_gap_advice(context: RunContext, _: Mapping[str, float]) -> str:
    advice = (
        "the sampler and the trainer disagree more and more: run the sampler in the trainer's precision (bf16 on "
        "both), correct with importance sampling (rollout.is_correction)"
    )
    return advice if context.routing_replay else advice + ", and on an MoE model use routing_replay=r2"


def _kl_flat_reward_advice(context: RunContext, _: Mapping[str, float]) -> str:
    constraint = "raise kl.beta" if context.kl_on else "add a KL constraint (kl=constant)"
    return f"the policy moves away from the reference without earning reward: {constraint}, or check the reward"


def _no_signal_advice(context: RunContext, _: Mapping[str, float]) -> str:
    return (
        "no completion earns reward, so every advantage is zero: check the reward function scores these "
        "completions (format, parsing), or use easier prompts"
    )


def _fixed(text: str) -> Callable[[RunContext, Mapping[str, float]], str]:
    return lambda _context, _values: text


_FEWER_UPDATES_ADVICE = _fixed(
    "fewer updates per rollout (trainer.num_iterations, trainer.steps_per_generation) or a lower trainer.learning_rate"
)


# FIX ids (the doctor writes each in the run's framework's terms), best first; a rule whose fitting fixes depend on
# what it found gives a function of the finding's words instead (`Rule.fixes_for`).
Fixes = tuple[str, ...] | Callable[[Mapping[str, str]], tuple[str, ...]]


@dataclass(frozen=True)
class Rule:
    name: str  # also the rule's key in HealthMonitorConfig and monitor/*.yaml
    trigger: tuple[str, ...] | Callable[[Any], tuple[str, ...]]  # evaluated on calls carrying one of these
    check: Check
    message: str  # formatted with the finding's values, words and `metric`
    advice: Callable[[RunContext, Mapping[str, float]], str]
    reads: tuple[str, ...] = ()  # further metrics the check reads
    memory: Callable[[Any], Memory] = lambda _settings: Memory()  # what the check reads of each of its metrics
    severity: str = "warning"  # failing: the run is broken or trains on garbage; warning: a sign to look at
    fixes: Fixes = ()
    # The logged points of its metrics the check needs before it decides (`needs`).
    points: Callable[[Any], int] = lambda _settings: 1
    # The metrics it cannot judge without: groups of alternatives, one of each group logged. None: its triggers
    # (alternatives of one another), then each of `reads`.
    inputs: Callable[[Any], tuple[tuple[str, ...], ...]] | None = None
    context: tuple[str, ...] = ()  # RunContext fields it cannot judge without (None there: unknown)
    # A level rule (a mean over `span` points against a threshold): `HealthMonitor.finish` judges it once on the
    # points there are when the run ended before `span` of them.
    level: bool = False

    def triggers(self, settings: Any) -> tuple[str, ...]:
        return self.trigger(settings) if callable(self.trigger) else self.trigger

    def needs(self, settings: Any) -> int:
        """How many logged points of each metric it reads the rule needs before it can decide."""
        return self.points(settings)

    def fixes_for(self, words: Mapping[str, str]) -> tuple[str, ...]:
        """The FIX ids that fit what the rule found (its finding's words), best first."""
        return self.fixes(words) if callable(self.fixes) else self.fixes

    def metric_groups(self, settings: Any) -> tuple[tuple[str, ...], ...]:
        if self.inputs is not None:
            return self.inputs(settings)
        return (self.triggers(settings), *((name,) for name in self.reads))


def _span_points(settings: Any) -> int:
    return settings.span


def _window_points(settings: Any) -> int:
    return settings.window


ENTROPY_FIXES = ("clip_higher", "raise_eps_high", "lower_lr")
SAMPLER_FIXES = ("match_sampler_precision", "is_correction", "routing_replay")


def _flat_group_fixes(words: Mapping[str, str]) -> tuple[str, ...]:
    """Flat groups of solved prompts call for harder data, of failed ones for easier data or a virtual full-score
    sample (18.3.2: the data no longer matches the model, one way or the other)."""
    difficulty = words.get("difficulty", "")
    if difficulty == "too easy":
        return ("harder_data", "dynamic_sampling")
    if difficulty == "too hard":
        return ("easier_data", "dynamic_sampling", "ngrpo")
    return ("dynamic_sampling", "ngrpo", "fix_reward")


def _length_near_max_fixes(words: Mapping[str, str]) -> tuple[str, ...]:
    if words.get("from_start") == "yes":  # at the budget from the first step: the budget is too short
        return ("raise_max_length", "overlong_filter", "overlong_shaping")
    return ("overlong_shaping", "overlong_filter", "raise_max_length")


def _last_span(settings: Any) -> Memory:
    return Memory(tail=settings.span)


def _last_window(settings: Any) -> Memory:
    return Memory(tail=settings.window)


RULES: tuple[Rule, ...] = (
    Rule(
        "non_finite",
        lambda s: tuple(s.metrics),
        _non_finite,
        "{metric} is {value}: the first non-finite value among {checked}",
        _fixed("lower trainer.learning_rate or check the rewards and the data for NaN/inf values"),
        severity="failing",
        fixes=("lower_lr", "fix_reward"),
    ),
    Rule(
        "entropy_collapse",
        ("entropy",),
        _entropy_collapse,
        "entropy: recent mean {recent_mean:.4g} < {threshold:.4g} (early mean {early_mean:.4g})",
        _entropy_advice,
        memory=lambda s: Memory(head=s.span, tail=s.span),
        severity="failing",
        fixes=ENTROPY_FIXES,
        points=lambda s: 2 * s.span,
    ),
    Rule(
        "entropy_drop",
        ("entropy",),
        _entropy_drop,
        "smoothed entropy {latest:.4g} < {threshold:.4g} (its maximum in the window {window_max:.4g})",
        _entropy_advice,
        # A metric is logged at most once per training step: the window holds at most window_steps + 1 points.
        memory=lambda s: Memory(tail=s.window_steps + s.span),
        fixes=ENTROPY_FIXES,
        points=_span_points,
    ),
    Rule(
        "entropy_decline",
        ("entropy",),
        _entropy_decline,
        "smoothed entropy {latest:.4g} < {threshold:.4g} (initial mean {initial:.4g})",
        _entropy_decline_advice,
        memory=lambda s: Memory(head=s.span, tail=s.span),
        fixes=ENTROPY_FIXES,
        points=_span_points,
    ),
    Rule(
        "zero_std_groups",
        FLAT_FRACTION,
        _flat_groups,
        "{metric} mean {recent_mean:.3f} > {threshold:.3f}: the batch lost its learning signal{why}",
        _flat_groups_advice,
        reads=(TRAIN_REWARD,),  # the reward's level says whether flat groups are solved or failed prompts
        memory=_last_span,
        fixes=_flat_group_fixes,
        inputs=lambda _s: (FLAT_FRACTION,),
        points=_span_points,
        level=True,
    ),
    Rule(
        "zero_advantage",
        ("adv/zero_std_fraction",),
        _rising_share("adv/zero_std_fraction"),
        "{metric} mean {recent_mean:.3f} > {threshold:.3f} and rising ({change:+.3f} over the window){why}",
        _zero_advantage_advice,
        reads=(TRAIN_REWARD,),
        memory=lambda s: Memory(tail=max(s.span, s.window)),
        fixes=_flat_group_fixes,
        inputs=lambda _s: (("adv/zero_std_fraction",),),
        points=lambda s: max(s.span, s.window),
    ),
    Rule(
        "reward_collapse",
        lambda s: (f"rewards/{s.format_reward}/mean", f"rewards/{s.correctness_reward}/mean"),
        _reward_collapse,
        "{format} reward rose {format_gain:+.3f} while {correctness} moved {correctness_gain:+.3f}: "
        "the policy may be learning the format without the content",
        _reward_collapse_advice,
        memory=_last_window,
        severity="failing",
        fixes=("gdpo", "lower_format_weight"),
        points=_window_points,
        inputs=lambda s: ((f"rewards/{s.format_reward}/mean",), (f"rewards/{s.correctness_reward}/mean",)),
    ),
    Rule(
        "reward_decline",
        ("reward",),
        _reward_decline,
        "smoothed reward {latest:.3f} fell below {threshold:.3f} (its best so far {best:.3f})",
        _reward_decline_advice,
        memory=lambda s: Memory(tail=s.span, best_span=s.span),
        severity="failing",
        fixes=("lower_lr", "fewer_updates", "routing_replay"),
        points=_span_points,
    ),
    Rule(
        "length_growth",
        ("completions/mean_length",),
        _length_growth,
        "mean length {recent_mean:.1f} > {threshold:.1f} (early mean {early_mean:.1f})",
        _length_growth_advice,
        memory=lambda s: Memory(head=s.span, tail=s.span),
        fixes=("overlong_shaping", "overlong_filter"),
        points=lambda s: 2 * s.span,
    ),
    Rule(
        "length_near_max",
        ("completions/mean_length",),
        _length_near_max,
        "mean length {recent_mean:.1f} >= {threshold:.1f} of max_completion_length {max_completion_length:.0f}: "
        "completions are cut at the budget",
        _length_near_max_advice,
        memory=lambda s: Memory(head=1, tail=s.span),
        fixes=_length_near_max_fixes,
        points=_span_points,
        context=("max_completion_length",),
        level=True,
    ),
    Rule(
        "reward_plateau",
        ("reward",),
        _reward_plateau,
        "reward flat at {window_mean:.3f} (change {change:+.3f}, tolerance {tolerance}) below {ceiling:.3f}",
        _reward_plateau_advice,
        memory=_last_window,
        fixes=("fix_reward", "dynamic_sampling", "ngrpo", "easier_data"),
        points=_window_points,
    ),
    Rule(
        "grad_norm_vanishing",
        ("grad_norm",),
        _grad_norm_vanishing,
        "grad_norm stayed below {floor:g} (window max {window_max:.3g})",
        _grad_norm_advice,
        memory=_last_window,
        fixes=("ngrpo", "dynamic_sampling", "fix_reward"),
        points=_window_points,
    ),
    Rule(
        "kl_rising",
        ("kl",),
        _rising("kl"),
        "kl rose monotonically from {window_first:.4g} to {latest:.4g}",
        _fixed("raise the KL coefficient (kl.beta) or check the reward is reliable"),
        memory=_last_window,
        fixes=("raise_kl", "add_kl", "fix_reward"),
        points=_window_points,
    ),
    Rule(
        "policy_ratio_drift",
        ("policy_ratio/mean",),
        _policy_ratio_drift,
        "policy ratio mean {recent_mean:.3f} is more than {deviation} away from 1.0",
        _FEWER_UPDATES_ADVICE,
        memory=_last_span,
        fixes=("fewer_updates", "lower_lr"),
        points=_span_points,
        level=True,
    ),
    Rule(
        "policy_ratio_noise",
        ("policy_ratio/abs_dev",),
        _above_threshold(("policy_ratio/abs_dev",)),
        "mean |policy ratio - 1| {recent_mean:.3f} > {threshold:g}: each update moves the policy far",
        _FEWER_UPDATES_ADVICE,
        memory=_last_span,
        fixes=("fewer_updates", "lower_lr"),
        points=_span_points,
        level=True,
    ),
    Rule(
        "clip_ratio_rising",
        ("clip_ratio/region_mean",),
        _rising("clip_ratio/region_mean"),
        "clip ratio rose monotonically from {window_first:.4g} to {latest:.4g}",
        _FEWER_UPDATES_ADVICE,
        memory=_last_window,
        fixes=("fewer_updates", "lower_lr"),
        points=_window_points,
    ),
    Rule(
        "clip_ratio_zero",
        ("clip_ratio/region_mean",),
        _clip_ratio_zero,
        "clip ratio dropped to zero (it averaged {earlier_mean:.4g} over the window before)",
        _fixed("the policy has nearly stopped updating: check grad_norm and adv/zero_std_fraction"),
        memory=lambda s: Memory(tail=2 * s.window),
        fixes=("dynamic_sampling", "ngrpo"),
        points=lambda s: 2 * s.window,
    ),
    Rule(
        "logp_mismatch",
        LOGP_MISMATCH,
        _above_threshold(LOGP_MISMATCH),
        "train/inference |logp difference| ({metric}) mean {recent_mean:.4g} > {threshold:g}",
        _fixed(
            "align the inference engine's precision with the trainer's (e.g. bf16 on both) and check "
            "tokenization round-trips; for MoE models use routing replay"
        ),
        memory=_last_span,
        fixes=SAMPLER_FIXES,
        points=_span_points,
        level=True,
    ),
    Rule(
        "entropy_exploding",
        ("entropy",),
        _entropy_exploding,
        "entropy: recent mean {recent_mean:.4g} > {threshold:.4g} (early mean {early_mean:.4g}): entropy is exploding",
        _entropy_exploding_advice,
        reads=(CLIPPED,),
        inputs=lambda _s: (("entropy",),),  # the truncated share only orders the advice
        memory=lambda s: Memory(head=s.span, tail=s.span),
        severity="failing",
        fixes=_entropy_exploding_fixes,
        points=lambda s: 2 * s.span,
    ),
    Rule(
        "length_pinned",
        (CLIPPED,),
        _length_pinned,
        "truncated share ({metric}) mean {clipped_mean:.3f} >= {clipped:g}{also}: completions are pinned at the "
        "length budget",
        _length_pinned_advice,
        reads=(MEAN_LENGTH,),
        memory=_last_span,
        severity="failing",
        fixes=("raise_max_length", "overlong_filter", "overlong_shaping"),
        points=_span_points,
        inputs=lambda _s: ((CLIPPED,),),  # the mean length only sharpens it
        level=True,
    ),
    Rule(
        "sampler_gap_drift",
        (IS_RATIO, *LOGP_MISMATCH),
        _sampler_gap_drift,
        "{what}: the sampler drifts away from the trainer",
        _sampler_gap_advice,
        memory=lambda s: Memory(tail=max(s.span, s.window)),
        fixes=SAMPLER_FIXES,
        points=lambda s: min(s.span, s.window),
    ),
    Rule(
        "kl_rising_flat_reward",
        ("kl",),
        _kl_rising_flat_reward,
        "kl rose from {kl_first_half:.4g} to {kl_second_half:.4g} between the window's halves (trend t "
        "{trend_t:.2g}) while the reward moved {reward_change:+.3f} (flat within {flat:.3g})",
        _kl_flat_reward_advice,
        reads=(TRAIN_REWARD,),
        memory=_last_window,
        fixes=("raise_kl", "add_kl", "fix_reward"),
        points=lambda s: 2 * s.window,
    ),
    Rule(
        "no_signal",
        (TRAIN_REWARD,),
        _no_signal,
        "every reward of the last {points_read} logged points <= {floor:.3g} (at most {reward_max_seen:.3g}) and "
        "{flat_metric} mean {flat_mean:.3f} >= {flat:g}: no completion earns anything, nothing is learnt",
        _no_signal_advice,
        reads=FLAT_FRACTION,
        memory=_last_span,
        severity="failing",
        fixes=("fix_reward", "easier_data"),
        points=_span_points,
        inputs=lambda _s: ((TRAIN_REWARD,), FLAT_FRACTION),
        level=True,
    ),
    Rule(
        "train_eval_divergence",
        (EVAL_REWARD,),
        _train_eval_divergence,
        "train reward gained {train_gain:+.3f} while eval reward gained {eval_gain:+.3f}",
        _divergence_advice,
        reads=(TRAIN_REWARD,),
        fixes=("more_data", "add_kl", "raise_kl"),
        memory=_last_window,
        points=_window_points,
    ),
)


class HealthMonitor:
    """Evaluates the rules on each logging step; the caller acts on the returned alerts.

    Its state is bounded by what the rules read (`Rule.memory`), whatever the run's length; `state_dict` /
    `load_state_dict` carry it over a resume without replaying the history. At the end of a history, `finish`
    lets the level rules judge a run shorter than their span, `coverage` says which rules could judge and why
    the others could not, and `artefacts` names the metrics logged in a way the rules must not read."""

    def __init__(
        self,
        config: HealthMonitorConfig,
        max_completion_length: int | None = None,
        reward_max: float = 1.0,
        context: RunContext | None = None,
        advice: Callable[[Alert, RunContext], str] | None = None,
    ):
        self.config = config
        self.context = context or RunContext(max_completion_length=max_completion_length, reward_max=reward_max)
        # The advice in another framework's terms (from the alert's fixes); the rules' own text is align_kit's.
        self._advice = advice
        self._triggers = {rule.name: rule.triggers(getattr(config, rule.name)) for rule in RULES}
        self._watched = frozenset(name for rule in RULES for name in (*self._triggers[rule.name], *rule.reads))
        self._memory = _memory_per_metric(config, self._triggers)
        self._rules = [(rule, getattr(config, rule.name), frozenset(self._triggers[rule.name])) for rule in RULES]
        self.history = History(config.train_eval_divergence.window)
        self._in_episode: set[str] = set()
        self._judged: set[str] = set()  # rules whose check reached a decision
        self._fired: set[str] = set()
        self._seen: set[str] = set()  # watched metrics logged at least once (a NaN counts: non_finite reads it)

    @classmethod
    def from_plan(cls, plan) -> HealthMonitor:
        return cls(plan.monitor, context=RunContext.from_plan(plan))

    def update(self, step: int, metrics: Mapping[str, float | None]) -> list[Alert]:
        if not self.config.enabled:
            return []
        present = {
            name: float(value)
            for name, value in metrics.items()
            if name in self._watched and isinstance(value, int | float) and math.isfinite(value)
        }
        self._seen.update(name for name in self._watched.intersection(metrics) if metrics[name] is not None)
        ceiling = metrics.get(MAX_ATTAINABLE)
        if isinstance(ceiling, int | float) and math.isfinite(ceiling):  # a format schedule moves the maximum
            self.context = replace(self.context, reward_max=float(ceiling))
        for name, value in present.items():
            if name not in self.history:
                head, tail, best_spans = self._memory.get(name, (0, 0, frozenset()))
                self.history[name] = Series(head, tail, best_spans)
            self.history[name].append(step, value)
        # A train reward logged at an evaluation's step belongs to the interval that evaluation closes.
        if TRAIN_REWARD in present:
            self.history.train_eval.add_train(present[TRAIN_REWARD])
        if EVAL_REWARD in present:
            self.history.train_eval.add_eval(present[EVAL_REWARD])
        self.history.grad_norm_zeros.add(metrics)
        self.history.latest, self.history.step = metrics, step
        alerts = []
        for rule, settings, triggers in self._rules:
            # non_finite reads a NaN too; every other rule needs a finite value of one of its triggers.
            if rule.name == "non_finite":
                if not any(metrics.get(name) is not None for name in triggers):
                    continue
            elif triggers.isdisjoint(present):
                continue
            finding = rule.check(settings, self.history, self.context)
            if finding is None:
                continue
            self._judged.add(rule.name)
            if not finding.holds:
                self._in_episode.discard(rule.name)
            elif rule.name not in self._in_episode:
                self._in_episode.add(rule.name)
                alerts.append(self._alert(rule, settings, finding, step))
        return alerts

    def finish(self) -> list[Alert]:
        """The end of the history: each level rule (`Rule.level`) that never judged because the run logged fewer
        than `span` points judges once on the points there are (at least one); its message says so."""
        if not self.config.enabled:
            return []
        alerts = []
        for rule, settings, _ in self._rules:
            if not rule.level or rule.name in self._judged:
                continue
            points = self._points(rule, settings)[0]
            if not 1 <= points < settings.span:
                continue
            finding = rule.check(replace(settings, span=points), self.history, self.context)
            if finding is None:
                continue
            self._judged.add(rule.name)
            if finding.holds and rule.name not in self._in_episode:
                self._in_episode.add(rule.name)
                note = f" (over {points} logged points, fewer than the span {settings.span})"
                alerts.append(self._alert(rule, settings, finding, self.history.step, note, points))
        return alerts

    def coverage(self) -> list[RuleCoverage]:
        """Per rule, in RULES order: whether it judged, whether it fired, and when it did not judge, why."""
        covered = []
        for rule, settings, _ in self._rules:
            groups = rule.metric_groups(settings)
            missing = tuple(" or ".join(group) for group in groups if not self._seen.intersection(group))
            judged = rule.name in self._judged and self.config.enabled
            covered.append(
                RuleCoverage(
                    rule.name,
                    judged,
                    rule.name in self._fired,
                    "" if judged else self._reason(rule, settings, missing),
                    missing,
                )
            )
        return covered

    def artefacts(self) -> list[str]:
        """One line per metric the run logs in a way no rule should read as what it names."""
        zeros = self.history.grad_norm_zeros
        if not zeros.artefact():
            return []
        return [
            f"grad_norm is exactly 0.0 on {zeros.zeros} of {zeros.rows} logged rows while the loss and the reward "
            f"spread (reward_std) are non-zero on {zeros.zeros_with_signal} of them: a logging artefact, not "
            "vanishing gradients (grad_norm_vanishing does not judge it)"
        ]

    def _reason(self, rule: Rule, settings: Any, missing: tuple[str, ...]) -> str:
        if not self.config.enabled:
            return "the monitor is off"
        if missing:
            return "lacks " + " and ".join(missing)
        unknown = [name for name in rule.context if getattr(self.context, name) is None]
        if unknown:
            return "needs " + " and ".join(f"{name} (unknown)" for name in unknown)
        if rule.name == "grad_norm_vanishing" and self.history.grad_norm_zeros.artefact():
            return "grad_norm is a logging artefact (exactly 0.0 while the loss and reward_std are not)"
        if rule.name == "train_eval_divergence":
            pairs = len(self.history.train_eval.pairs)
            return f"needs {settings.window} evaluations paired with train rewards, the run has {pairs}"
        points, metric = self._points(rule, settings)
        needed = rule.needs(settings)
        if points < needed:
            return f"needs {needed} logged points of {metric}, the run has {points}"
        return "its check never reached a decision on the points logged"

    def _points(self, rule: Rule, settings: Any) -> tuple[int, str]:
        """The fewest finite logged points among the metrics the rule needs (each group's best alternative)."""
        counts = []
        for group in rule.metric_groups(settings):
            name = max(group, key=lambda n: self.history[n].count)
            counts.append((self.history[name].count, name))
        return min(counts)

    def _alert(
        self, rule: Rule, settings: Any, finding: Finding, step: int, note: str = "", points: int | None = None
    ) -> Alert:
        self._fired.add(rule.name)
        series = self.history[finding.metric]
        # What the finding says it read, else the rule's last `needs` points (or `points`), as far as logged.
        read = finding.points if finding.points is not None else min(points or rule.needs(settings), series.count)
        first_step = finding.first_step if finding.first_step is not None else series.step_of_last(read)
        words = dict(finding.words)
        alert = Alert(
            step=step,
            rule=rule.name,
            action=settings.action,
            values=finding.values,
            message=rule.message.format(metric=finding.metric, **words, **finding.values) + note,
            advice=rule.advice(self.context, {**finding.values, **words}),
            metric=finding.metric,
            severity=rule.severity,
            first_step=first_step,
            points=read,
            fixes=rule.fixes_for(words),
            words=words,
        )
        return alert if self._advice is None else replace(alert, advice=self._advice(alert, self.context))

    def state_dict(self) -> dict[str, Any]:
        """Everything a later `update` depends on, JSON-safe; `memory` says what it was kept for."""
        return {
            "memory": self._memory_json(),
            "reward_max": self.context.reward_max,
            "in_episode": sorted(self._in_episode),
            "series": {name: series.state_dict() for name, series in self.history.items()},
            "train_eval": self.history.train_eval.state_dict(),
            "grad_norm_zeros": self.history.grad_norm_zeros.state_dict(),
            "judged": sorted(self._judged),
            "fired": sorted(self._fired),
            "seen": sorted(self._seen),
            "step": self.history.step,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> bool:
        """Continue from `state`; False (nothing loaded) when it was kept for other rule settings, whose windows
        it may not cover."""
        if state.get("memory") != self._memory_json():
            return False
        self.context = replace(self.context, reward_max=state["reward_max"])
        self._in_episode = set(state["in_episode"])
        for name, saved in state["series"].items():
            head, tail, best_spans = self._memory.get(name, (0, 0, frozenset()))
            self.history[name] = Series(head, tail, best_spans)
            self.history[name].load_state_dict(saved)
        self.history.train_eval.load_state_dict(state["train_eval"])
        # Saved before these were kept: what the series say.
        if "grad_norm_zeros" in state:
            self.history.grad_norm_zeros.load_state_dict(state["grad_norm_zeros"])
        self._judged, self._fired = set(state.get("judged", ())), set(state.get("fired", ()))
        self._seen = set(state.get("seen", state["series"]))
        self.history.step = state.get("step", 0)
        return True

    def _memory_json(self) -> dict[str, Any]:
        return {
            "series": {name: [head, tail, sorted(spans)] for name, (head, tail, spans) in sorted(self._memory.items())},
            "train_eval_window": self.history.train_eval.pairs.maxlen,
        }


def _memory_per_metric(
    config: HealthMonitorConfig, triggers: Mapping[str, tuple[str, ...]]
) -> dict[str, tuple[int, int, frozenset[int]]]:
    """Per metric, the most any rule reads of it: (head, tail, spans whose best mean is tracked)."""
    memory: dict[str, tuple[int, int, frozenset[int]]] = {}
    for rule in RULES:
        need = rule.memory(getattr(config, rule.name))
        for name in (*triggers[rule.name], *rule.reads):
            head, tail, spans = memory.get(name, (0, 0, frozenset()))
            best = frozenset({need.best_span}) if need.best_span is not None else frozenset()
            memory[name] = (max(head, need.head), max(tail, need.tail), spans | best)
    return memory
