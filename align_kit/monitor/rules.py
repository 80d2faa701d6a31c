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
from statistics import fmean
from typing import Any

from align_kit.monitor.settings import (
    AboveThreshold,
    ClipRatioZero,
    EntropyCollapse,
    EntropyDecline,
    EntropyDrop,
    GradNormVanishing,
    HealthMonitorConfig,
    LengthGrowth,
    LengthNearMax,
    NonFinite,
    PolicyRatioDrift,
    RewardCollapse,
    RewardDecline,
    RewardPlateau,
    Rising,
    RisingShare,
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


@dataclass(frozen=True)
class Alert:
    step: int
    rule: str
    action: str  # log | warn | halt
    values: dict[str, float]  # the numbers behind the decision, thresholds included
    message: str
    advice: str
    metric: str = ""  # the logged metric the rule read

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
        self.head_size = head
        self.first: list[float] = []
        self.steps: deque[int] = deque(maxlen=tail)
        self.values: deque[float] = deque(maxlen=tail)
        self.best: dict[int, float] = {}  # span -> the highest mean of `span` consecutive points so far
        self._best_spans = best_spans

    def append(self, step: int, value: float) -> None:
        self.count += 1
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

    def state_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "first": self.first,
            "steps": list(self.steps),
            "values": list(self.values),
            "best": {str(span): value for span, value in self.best.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.count, self.first = state["count"], list(state["first"])
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


class History(dict):
    """Metric name -> Series of its finite values (bounded by what the rules read); `latest` holds the current
    call's raw metrics, `train_eval` the pairs the train/eval divergence rule compares."""

    latest: Mapping[str, Any] = {}

    def __init__(self, train_eval_window: int = 0):
        super().__init__()
        self.train_eval = TrainEvalPairs(train_eval_window)

    def __missing__(self, name: str) -> Series:
        return Series()


@dataclass(frozen=True)
class RunContext:
    """What the run composes, so alerts judge against its limits and advise only what is off."""

    max_completion_length: int | None = None
    reward_max: float = 1.0
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


# A check returns None when it cannot evaluate yet, else a Finding.
Check = Callable[[Any, History, RunContext], Finding | None]


def _smoothed(values: list[float], span: int, first: int = 0) -> list[float]:
    """Means over `span` points ending at each index from `first` on (indices with a full span only)."""
    return [fmean(values[i - span + 1 : i + 1]) for i in range(max(first, span - 1), len(values))]


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
        return Finding(False, {}, present[0][0])
    name, value = broken[0]  # metrics are listed in the order a step computes them
    return Finding(True, {}, name, {"value": str(value), "checked": ", ".join(s.metrics)})


def _entropy_collapse(s: EntropyCollapse, history: History, _: RunContext) -> Finding | None:
    series = history["entropy"]
    if series.count < 2 * s.span:  # 18.3.1's code: first and last 10 must not overlap (>= 20 points)
        return None
    early, recent = fmean(series.first[: s.span]), fmean(series.last(s.span))
    threshold = (1 - s.fall) * early
    return Finding(recent < threshold, {"early_mean": early, "recent_mean": recent, "threshold": threshold}, "entropy")


def _entropy_drop(s: EntropyDrop, history: History, _: RunContext) -> Finding | None:
    series = history["entropy"]
    if series.count < s.span:
        return None
    steps, values = list(series.steps), list(series.values)  # the window and span - 1 points before it
    first = bisect_left(steps, steps[-1] - s.window_steps)
    smoothed = _smoothed(values, s.span, first)
    latest, window_max = smoothed[-1], max(smoothed)
    threshold = (1 - s.fall) * window_max
    return Finding(latest < threshold, {"latest": latest, "window_max": window_max, "threshold": threshold}, "entropy")


def _entropy_decline(s: EntropyDecline, history: History, _: RunContext) -> Finding | None:
    series = history["entropy"]
    if series.count < s.span:
        return None
    initial, latest = fmean(series.first[: s.span]), fmean(series.last(s.span))
    threshold = (1 - s.fall) * initial
    return Finding(latest < threshold, {"initial": initial, "latest": latest, "threshold": threshold}, "entropy")


def _above_threshold(names: tuple[str, ...]) -> Check:
    def check(s: AboveThreshold, history: History, _: RunContext) -> Finding | None:
        metric = _first_logged(history, names)
        series = history[metric]
        if series.count < s.span:
            return None
        recent = fmean(series.last(s.span))
        return Finding(recent > s.threshold, {"recent_mean": recent, "threshold": s.threshold}, metric)

    return check


def _rising_share(metric: str) -> Check:
    def check(s: RisingShare, history: History, _: RunContext) -> Finding | None:
        series = history[metric]
        if series.count < max(s.span, s.window):
            return None
        recent, change = fmean(series.last(s.span)), _half_change(series.last(s.window))
        values_out = {"recent_mean": recent, "threshold": s.threshold, "change": change, "rise": s.rise}
        return Finding(recent > s.threshold and change > s.rise, values_out, metric)

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
    )


def _reward_plateau(s: RewardPlateau, history: History, context: RunContext) -> Finding | None:
    series = history["reward"]
    if series.count < s.window:
        return None
    window = series.last(s.window)
    change, mean = _half_change(window), fmean(window)
    ceiling = context.reward_max - s.gap
    return Finding(
        abs(change) < s.tolerance and mean <= ceiling,
        {
            "window_mean": mean,
            "change": change,
            "tolerance": s.tolerance,
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
    threshold = best - s.drop * context.reward_max
    return Finding(latest < threshold, {"latest": latest, "best": best, "threshold": threshold}, "reward")


def _grad_norm_vanishing(s: GradNormVanishing, history: History, _: RunContext) -> Finding | None:
    series = history["grad_norm"]
    if series.count < s.window:
        return None
    window_max = max(series.last(s.window))
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


def _fixed(text: str) -> Callable[[RunContext, Mapping[str, float]], str]:
    return lambda _context, _values: text


_FEWER_UPDATES_ADVICE = _fixed(
    "fewer updates per rollout (trainer.num_iterations, trainer.steps_per_generation) or a lower trainer.learning_rate"
)


@dataclass(frozen=True)
class Rule:
    name: str  # also the rule's key in HealthMonitorConfig and monitor/*.yaml
    trigger: tuple[str, ...] | Callable[[Any], tuple[str, ...]]  # evaluated on calls carrying one of these
    check: Check
    message: str  # formatted with the finding's values, words and `metric`
    advice: Callable[[RunContext, Mapping[str, float]], str]
    reads: tuple[str, ...] = ()  # further metrics the check reads
    memory: Callable[[Any], Memory] = lambda _settings: Memory()  # what the check reads of each of its metrics

    def triggers(self, settings: Any) -> tuple[str, ...]:
        return self.trigger(settings) if callable(self.trigger) else self.trigger


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
    ),
    Rule(
        "entropy_collapse",
        ("entropy",),
        _entropy_collapse,
        "entropy: recent mean {recent_mean:.4g} < {threshold:.4g} (early mean {early_mean:.4g})",
        _entropy_advice,
        memory=lambda s: Memory(head=s.span, tail=s.span),
    ),
    Rule(
        "entropy_drop",
        ("entropy",),
        _entropy_drop,
        "smoothed entropy {latest:.4g} < {threshold:.4g} (its maximum in the window {window_max:.4g})",
        _entropy_advice,
        # A metric is logged at most once per training step: the window holds at most window_steps + 1 points.
        memory=lambda s: Memory(tail=s.window_steps + s.span),
    ),
    Rule(
        "entropy_decline",
        ("entropy",),
        _entropy_decline,
        "smoothed entropy {latest:.4g} < {threshold:.4g} (initial mean {initial:.4g})",
        _entropy_decline_advice,
        memory=lambda s: Memory(head=s.span, tail=s.span),
    ),
    Rule(
        "zero_std_groups",
        FLAT_FRACTION,
        _above_threshold(FLAT_FRACTION),
        "{metric} mean {recent_mean:.3f} > {threshold:.3f}: the batch lost its learning signal",
        _flat_groups_advice,
        memory=_last_span,
    ),
    Rule(
        "zero_advantage",
        ("adv/zero_std_fraction",),
        _rising_share("adv/zero_std_fraction"),
        "{metric} mean {recent_mean:.3f} > {threshold:.3f} and rising ({change:+.3f} over the window)",
        _zero_advantage_advice,
        memory=lambda s: Memory(tail=max(s.span, s.window)),
    ),
    Rule(
        "reward_collapse",
        lambda s: (f"rewards/{s.format_reward}/mean", f"rewards/{s.correctness_reward}/mean"),
        _reward_collapse,
        "{format} reward rose {format_gain:+.3f} while {correctness} moved {correctness_gain:+.3f}: "
        "the policy may be learning the format without the content",
        _reward_collapse_advice,
        memory=_last_window,
    ),
    Rule(
        "reward_decline",
        ("reward",),
        _reward_decline,
        "smoothed reward {latest:.3f} fell below {threshold:.3f} (its best so far {best:.3f})",
        _reward_decline_advice,
        memory=lambda s: Memory(tail=s.span, best_span=s.span),
    ),
    Rule(
        "length_growth",
        ("completions/mean_length",),
        _length_growth,
        "mean length {recent_mean:.1f} > {threshold:.1f} (early mean {early_mean:.1f})",
        _length_growth_advice,
        memory=lambda s: Memory(head=s.span, tail=s.span),
    ),
    Rule(
        "length_near_max",
        ("completions/mean_length",),
        _length_near_max,
        "mean length {recent_mean:.1f} >= {threshold:.1f} of max_completion_length {max_completion_length:.0f}: "
        "completions are cut at the budget",
        _length_near_max_advice,
        memory=lambda s: Memory(head=1, tail=s.span),
    ),
    Rule(
        "reward_plateau",
        ("reward",),
        _reward_plateau,
        "reward flat at {window_mean:.3f} (change {change:+.3f}, tolerance {tolerance}) below {ceiling:.3f}",
        _reward_plateau_advice,
        memory=_last_window,
    ),
    Rule(
        "grad_norm_vanishing",
        ("grad_norm",),
        _grad_norm_vanishing,
        "grad_norm stayed below {floor:g} (window max {window_max:.3g})",
        _grad_norm_advice,
        memory=_last_window,
    ),
    Rule(
        "kl_rising",
        ("kl",),
        _rising("kl"),
        "kl rose monotonically from {window_first:.4g} to {latest:.4g}",
        _fixed("raise the KL coefficient (kl.beta) or check the reward is reliable"),
        memory=_last_window,
    ),
    Rule(
        "policy_ratio_drift",
        ("policy_ratio/mean",),
        _policy_ratio_drift,
        "policy ratio mean {recent_mean:.3f} is more than {deviation} away from 1.0",
        _FEWER_UPDATES_ADVICE,
        memory=_last_span,
    ),
    Rule(
        "policy_ratio_noise",
        ("policy_ratio/abs_dev",),
        _above_threshold(("policy_ratio/abs_dev",)),
        "mean |policy ratio - 1| {recent_mean:.3f} > {threshold:g}: each update moves the policy far",
        _FEWER_UPDATES_ADVICE,
        memory=_last_span,
    ),
    Rule(
        "clip_ratio_rising",
        ("clip_ratio/region_mean",),
        _rising("clip_ratio/region_mean"),
        "clip ratio rose monotonically from {window_first:.4g} to {latest:.4g}",
        _FEWER_UPDATES_ADVICE,
        memory=_last_window,
    ),
    Rule(
        "clip_ratio_zero",
        ("clip_ratio/region_mean",),
        _clip_ratio_zero,
        "clip ratio dropped to zero (it averaged {earlier_mean:.4g} over the window before)",
        _fixed("the policy has nearly stopped updating: check grad_norm and adv/zero_std_fraction"),
        memory=lambda s: Memory(tail=2 * s.window),
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
    ),
    Rule(
        "train_eval_divergence",
        (EVAL_REWARD,),
        _train_eval_divergence,
        "train reward gained {train_gain:+.3f} while eval reward gained {eval_gain:+.3f}",
        _divergence_advice,
        reads=(TRAIN_REWARD,),
    ),
)


class HealthMonitor:
    """Evaluates the rules on each logging step; the caller acts on the returned alerts.

    Its state is bounded by what the rules read (`Rule.memory`), whatever the run's length; `state_dict` /
    `load_state_dict` carry it over a resume without replaying the history."""

    def __init__(
        self,
        config: HealthMonitorConfig,
        max_completion_length: int | None = None,
        reward_max: float = 1.0,
        context: RunContext | None = None,
    ):
        self.config = config
        self.context = context or RunContext(max_completion_length=max_completion_length, reward_max=reward_max)
        self._triggers = {rule.name: rule.triggers(getattr(config, rule.name)) for rule in RULES}
        self._watched = frozenset(name for rule in RULES for name in (*self._triggers[rule.name], *rule.reads))
        self._memory = _memory_per_metric(config, self._triggers)
        self.history = History(config.train_eval_divergence.window)
        self._in_episode: set[str] = set()

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
        self.history.latest = metrics
        alerts = []
        for rule in RULES:
            if not any(metrics.get(name) is not None for name in self._triggers[rule.name]):
                continue
            if rule.name != "non_finite" and not any(name in present for name in self._triggers[rule.name]):
                continue
            settings = getattr(self.config, rule.name)
            finding = rule.check(settings, self.history, self.context)
            if finding is None:
                continue
            if not finding.holds:
                self._in_episode.discard(rule.name)
            elif rule.name not in self._in_episode:
                self._in_episode.add(rule.name)
                alerts.append(
                    Alert(
                        step=step,
                        rule=rule.name,
                        action=settings.action,
                        values=finding.values,
                        message=rule.message.format(metric=finding.metric, **finding.words, **finding.values),
                        advice=rule.advice(self.context, {**finding.values, **finding.words}),
                        metric=finding.metric,
                    )
                )
        return alerts

    def state_dict(self) -> dict[str, Any]:
        """Everything a later `update` depends on, JSON-safe; `memory` says what it was kept for."""
        return {
            "memory": self._memory_json(),
            "reward_max": self.context.reward_max,
            "in_episode": sorted(self._in_episode),
            "series": {name: series.state_dict() for name, series in self.history.items()},
            "train_eval": self.history.train_eval.state_dict(),
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
