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
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
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


@dataclass
class Series:
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def between(self, after_step: float, up_to_step: int) -> list[float]:
        return [v for s, v in zip(self.steps, self.values, strict=True) if after_step < s <= up_to_step]


class History(dict):
    """Metric name -> Series of its finite values; `latest` holds the current call's raw metrics."""

    latest: Mapping[str, Any] = {}

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
    return next((name for name in names if history[name].values), names[0])


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
    values = history["entropy"].values
    if len(values) < 2 * s.span:  # 18.3.1's code: first and last 10 must not overlap (>= 20 points)
        return None
    early, recent = fmean(values[: s.span]), fmean(values[-s.span :])
    threshold = (1 - s.fall) * early
    return Finding(recent < threshold, {"early_mean": early, "recent_mean": recent, "threshold": threshold}, "entropy")


def _entropy_drop(s: EntropyDrop, history: History, _: RunContext) -> Finding | None:
    series = history["entropy"]
    if len(series.values) < s.span:
        return None
    first = bisect_left(series.steps, series.steps[-1] - s.window_steps)
    smoothed = _smoothed(series.values, s.span, first)
    latest, window_max = smoothed[-1], max(smoothed)
    threshold = (1 - s.fall) * window_max
    return Finding(latest < threshold, {"latest": latest, "window_max": window_max, "threshold": threshold}, "entropy")


def _entropy_decline(s: EntropyDecline, history: History, _: RunContext) -> Finding | None:
    values = history["entropy"].values
    if len(values) < s.span:
        return None
    initial, latest = fmean(values[: s.span]), fmean(values[-s.span :])
    threshold = (1 - s.fall) * initial
    return Finding(latest < threshold, {"initial": initial, "latest": latest, "threshold": threshold}, "entropy")


def _above_threshold(names: tuple[str, ...]) -> Check:
    def check(s: AboveThreshold, history: History, _: RunContext) -> Finding | None:
        metric = _first_logged(history, names)
        values = history[metric].values
        if len(values) < s.span:
            return None
        recent = fmean(values[-s.span :])
        return Finding(recent > s.threshold, {"recent_mean": recent, "threshold": s.threshold}, metric)

    return check


def _rising_share(metric: str) -> Check:
    def check(s: RisingShare, history: History, _: RunContext) -> Finding | None:
        values = history[metric].values
        if len(values) < max(s.span, s.window):
            return None
        recent, change = fmean(values[-s.span :]), _half_change(values[-s.window :])
        values_out = {"recent_mean": recent, "threshold": s.threshold, "change": change, "rise": s.rise}
        return Finding(recent > s.threshold and change > s.rise, values_out, metric)

    return check


def _length_growth(s: LengthGrowth, history: History, _: RunContext) -> Finding | None:
    values = history["completions/mean_length"].values
    if len(values) < 2 * s.span:
        return None
    early, recent = fmean(values[: s.span]), fmean(values[-s.span :])
    threshold = s.factor * early
    return Finding(
        recent > threshold,
        {"early_mean": early, "recent_mean": recent, "threshold": threshold},
        "completions/mean_length",
    )


def _length_near_max(s: LengthNearMax, history: History, context: RunContext) -> Finding | None:
    values = history["completions/mean_length"].values
    if context.max_completion_length is None or len(values) < s.span:
        return None
    recent = fmean(values[-s.span :])
    threshold = (1 - s.margin) * context.max_completion_length
    return Finding(
        recent >= threshold,
        {
            "recent_mean": recent,
            "first": values[0],
            "max_completion_length": context.max_completion_length,
            "threshold": threshold,
        },
        "completions/mean_length",
    )


def _reward_plateau(s: RewardPlateau, history: History, context: RunContext) -> Finding | None:
    values = history["reward"].values
    if len(values) < s.window:
        return None
    window = values[-s.window :]
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
    formats, correct = history[format_metric].values, history[f"rewards/{s.correctness_reward}/mean"].values
    if min(len(formats), len(correct)) < s.window:
        return None
    format_gain, correctness_gain = _half_change(formats[-s.window :]), _half_change(correct[-s.window :])
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
    values = history["reward"].values
    if len(values) < s.span:
        return None
    smoothed = _smoothed(values, s.span)
    latest, best = smoothed[-1], max(smoothed)
    threshold = best - s.drop * context.reward_max
    return Finding(latest < threshold, {"latest": latest, "best": best, "threshold": threshold}, "reward")


def _grad_norm_vanishing(s: GradNormVanishing, history: History, _: RunContext) -> Finding | None:
    values = history["grad_norm"].values
    if len(values) < s.window:
        return None
    window_max = max(values[-s.window :])
    return Finding(window_max < s.floor, {"window_max": window_max, "floor": s.floor}, "grad_norm")


def _rising(metric: str) -> Check:
    def check(s: Rising, history: History, _: RunContext) -> Finding | None:
        values = history[metric].values
        if len(values) < s.window:
            return None
        window = values[-s.window :]
        rising = all(later > earlier for earlier, later in zip(window, window[1:], strict=False))
        return Finding(rising, {"window_first": window[0], "latest": window[-1]}, metric)

    return check


def _policy_ratio_drift(s: PolicyRatioDrift, history: History, _: RunContext) -> Finding | None:
    values = history["policy_ratio/mean"].values
    if len(values) < s.span:
        return None
    recent = fmean(values[-s.span :])
    return Finding(
        abs(recent - 1.0) > s.deviation, {"recent_mean": recent, "deviation": s.deviation}, "policy_ratio/mean"
    )


def _clip_ratio_zero(s: ClipRatioZero, history: History, _: RunContext) -> Finding | None:
    values = history["clip_ratio/region_mean"].values
    if len(values) < 2 * s.window:
        return None
    # "Drops to zero while training": a run that never clipped (fully on-policy) is not a drop.
    clipped_before = fmean(values[-2 * s.window : -s.window])
    window_max = max(values[-s.window :])
    return Finding(
        window_max == 0.0 and clipped_before > s.min_before,
        {"window_max": window_max, "earlier_mean": clipped_before, "min_before": s.min_before},
        "clip_ratio/region_mean",
    )


def _train_eval_divergence(s: TrainEvalDivergence, history: History, _: RunContext) -> Finding | None:
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

    def triggers(self, settings: Any) -> tuple[str, ...]:
        return self.trigger(settings) if callable(self.trigger) else self.trigger


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
    ),
    Rule(
        "entropy_drop",
        ("entropy",),
        _entropy_drop,
        "smoothed entropy {latest:.4g} < {threshold:.4g} (its maximum in the window {window_max:.4g})",
        _entropy_advice,
    ),
    Rule(
        "entropy_decline",
        ("entropy",),
        _entropy_decline,
        "smoothed entropy {latest:.4g} < {threshold:.4g} (initial mean {initial:.4g})",
        _entropy_decline_advice,
    ),
    Rule(
        "zero_std_groups",
        FLAT_FRACTION,
        _above_threshold(FLAT_FRACTION),
        "{metric} mean {recent_mean:.3f} > {threshold:.3f}: the batch lost its learning signal",
        _flat_groups_advice,
    ),
    Rule(
        "zero_advantage",
        ("adv/zero_std_fraction",),
        _rising_share("adv/zero_std_fraction"),
        "{metric} mean {recent_mean:.3f} > {threshold:.3f} and rising ({change:+.3f} over the window)",
        _zero_advantage_advice,
    ),
    Rule(
        "reward_collapse",
        lambda s: (f"rewards/{s.format_reward}/mean", f"rewards/{s.correctness_reward}/mean"),
        _reward_collapse,
        "{format} reward rose {format_gain:+.3f} while {correctness} moved {correctness_gain:+.3f}: "
        "the policy may be learning the format without the content",
        _reward_collapse_advice,
    ),
    Rule(
        "reward_decline",
        ("reward",),
        _reward_decline,
        "smoothed reward {latest:.3f} fell below {threshold:.3f} (its best so far {best:.3f})",
        _reward_decline_advice,
    ),
    Rule(
        "length_growth",
        ("completions/mean_length",),
        _length_growth,
        "mean length {recent_mean:.1f} > {threshold:.1f} (early mean {early_mean:.1f})",
        _length_growth_advice,
    ),
    Rule(
        "length_near_max",
        ("completions/mean_length",),
        _length_near_max,
        "mean length {recent_mean:.1f} >= {threshold:.1f} of max_completion_length {max_completion_length:.0f}: "
        "completions are cut at the budget",
        _length_near_max_advice,
    ),
    Rule(
        "reward_plateau",
        ("reward",),
        _reward_plateau,
        "reward flat at {window_mean:.3f} (change {change:+.3f}, tolerance {tolerance}) below {ceiling:.3f}",
        _reward_plateau_advice,
    ),
    Rule(
        "grad_norm_vanishing",
        ("grad_norm",),
        _grad_norm_vanishing,
        "grad_norm stayed below {floor:g} (window max {window_max:.3g})",
        _grad_norm_advice,
    ),
    Rule(
        "kl_rising",
        ("kl",),
        _rising("kl"),
        "kl rose monotonically from {window_first:.4g} to {latest:.4g}",
        _fixed("raise the KL coefficient (kl.beta) or check the reward is reliable"),
    ),
    Rule(
        "policy_ratio_drift",
        ("policy_ratio/mean",),
        _policy_ratio_drift,
        "policy ratio mean {recent_mean:.3f} is more than {deviation} away from 1.0",
        _FEWER_UPDATES_ADVICE,
    ),
    Rule(
        "policy_ratio_noise",
        ("policy_ratio/abs_dev",),
        _above_threshold(("policy_ratio/abs_dev",)),
        "mean |policy ratio - 1| {recent_mean:.3f} > {threshold:g}: each update moves the policy far",
        _FEWER_UPDATES_ADVICE,
    ),
    Rule(
        "clip_ratio_rising",
        ("clip_ratio/region_mean",),
        _rising("clip_ratio/region_mean"),
        "clip ratio rose monotonically from {window_first:.4g} to {latest:.4g}",
        _FEWER_UPDATES_ADVICE,
    ),
    Rule(
        "clip_ratio_zero",
        ("clip_ratio/region_mean",),
        _clip_ratio_zero,
        "clip ratio dropped to zero (it averaged {earlier_mean:.4g} over the window before)",
        _fixed("the policy has nearly stopped updating: check grad_norm and adv/zero_std_fraction"),
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
    ),
    Rule(
        "train_eval_divergence",
        ("eval_reward",),
        _train_eval_divergence,
        "train reward gained {train_gain:+.3f} while eval reward gained {eval_gain:+.3f}",
        _divergence_advice,
        reads=("reward",),
    ),
)


class HealthMonitor:
    """Evaluates the rules on each logging step; the caller acts on the returned alerts."""

    def __init__(
        self,
        config: HealthMonitorConfig,
        max_completion_length: int | None = None,
        reward_max: float = 1.0,
        context: RunContext | None = None,
    ):
        self.config = config
        self.context = context or RunContext(max_completion_length=max_completion_length, reward_max=reward_max)
        self.history = History()
        self._triggers = {rule.name: rule.triggers(getattr(config, rule.name)) for rule in RULES}
        self._watched = frozenset(name for rule in RULES for name in (*self._triggers[rule.name], *rule.reads))
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
            series = self.history.setdefault(name, Series())
            series.steps.append(step)
            series.values.append(value)
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
