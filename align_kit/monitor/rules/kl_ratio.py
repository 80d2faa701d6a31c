"""KL and policy-ratio rules: KL rising (with a flat reward), the policy ratio drifting or noisy, clipping rising
or stopping (18.3.4, 18.3.5, 18.3.7)."""

from __future__ import annotations

from dataclasses import replace

from align_kit.monitor.rules.base import (
    NOT_HOLDING,
    TRAIN_REWARD,
    Check,
    Finding,
    History,
    Memory,
    Rule,
    above_threshold,
    fmean,
    half_change,
    halves_growth,
    last_span,
    last_window,
    register,
    rule,
    span_points,
    window_points,
)
from align_kit.monitor.rules.context import RunContext
from align_kit.monitor.rules.own_noise import is_flat, trend_t
from align_kit.monitor.settings import (
    ClipRatioZero,
    KlRisingFlatReward,
    PolicyRatioDrift,
    Rising,
)


def _rising(metric: str, from_zero: bool = True) -> Check:
    """Strictly rising over the last `window` points; with `from_zero` False, a window that starts at exactly 0 is
    not a rise: the KL to the reference is exactly 0 at the start (the policy is the reference) and rises from
    there in every run with a KL term."""

    def check(s: Rising, history: History, _: RunContext) -> Finding | None:
        series = history[metric]
        if series.count < s.window:
            return None
        # Each of the window's values above the one before: the run of rises up to the latest spans the window.
        first = series.values[-s.window]
        if series.rises < s.window - 1 or not (from_zero or first != 0.0):
            return NOT_HOLDING
        return Finding(True, {"window_first": first, "latest": series.values[-1]}, metric)

    return check


register(
    Rule(
        "kl_rising",
        ("kl",),
        _rising("kl", from_zero=False),
        "kl rose monotonically from {window_first:.4g} to {latest:.4g}",
        memory=last_window,
        fixes=("raise_kl", "add_kl", "fix_reward"),
        points=window_points,
    )
)


@rule(
    "kl_rising_flat_reward",
    ("kl",),
    "kl rose from {kl_first_half:.4g} to {kl_second_half:.4g} between the window's halves (trend t "
    "{trend_t:.2g}) while the reward moved {reward_change:+.3f} (flat within {flat:.3g})",
    reads=(TRAIN_REWARD,),
    memory=last_window,
    fixes=("raise_kl", "add_kl", "fix_reward"),
    points=lambda s: 2 * s.window,
    # A run shorter than 2 x window: its whole history from its first non-zero KL, 8 points at least.
    shorten=lambda s, points: replace(s, window=points, skip_start=False) if points >= 8 else None,
)
def _kl_rising_flat_reward(s: KlRisingFlatReward, history: History, context: RunContext) -> Finding | None:
    kl, reward = history["kl"], history[TRAIN_REWARD]
    start = s.window if s.skip_start else 0  # the first window is KL's start from 0
    if kl.count < start + s.window or reward.count < s.window:
        return None
    window = kl.last(s.window)
    if not s.skip_start:  # the whole history: its leading exact zeros are the start (the policy is the reference)
        window = window[next((i for i, value in enumerate(window) if value != 0.0), len(window)) :]
        if len(window) < 4:
            return None
    first, second, growth = halves_growth(window)
    if growth <= s.rise:  # KL did not rise: the reward is not read
        return NOT_HOLDING
    rewards = reward.last(s.window)
    reward_change = half_change(rewards)
    flat = s.tolerance * (context.reward_max - context.reward_min)
    # No range stated: the reward is flat when its slope is within its own noise (own_noise.py), on any scale.
    # The trend is read only where the halves and the reward already say a drift (its cost is the window's).
    reward_flat = growth > s.rise and (abs(reward_change) <= flat if context.reward_scale_stated else is_flat(rewards))
    candidate = growth > s.rise and reward_flat
    trend = trend_t(window) if candidate and len(window) > 2 else 0.0
    values = {
        "kl_first_half": first,
        "kl_second_half": second,
        "trend_t": trend,
        "reward_change": reward_change,
        "flat": flat,
    }
    holds = growth > s.rise and trend >= s.min_t and reward_flat
    # Read without its start-up, a rise is a drift only once the KL is far from the reference.
    holds = holds and (s.skip_start or second >= s.far)
    return Finding(holds, values, "kl", points=len(window))


@rule(
    "policy_ratio_drift",
    ("policy_ratio/mean",),
    "policy ratio mean {recent_mean:.3f} is more than {deviation} away from 1.0",
    memory=last_span,
    fixes=("fewer_updates", "lower_lr"),
    points=span_points,
    level=True,
)
def _policy_ratio_drift(s: PolicyRatioDrift, history: History, _: RunContext) -> Finding | None:
    series = history["policy_ratio/mean"]
    if series.count < s.span:
        return None
    recent = series.mean_last(s.span)
    return Finding(
        abs(recent - 1.0) > s.deviation, {"recent_mean": recent, "deviation": s.deviation}, "policy_ratio/mean"
    )


register(
    Rule(
        "policy_ratio_noise",
        ("policy_ratio/abs_dev",),
        above_threshold(("policy_ratio/abs_dev",)),
        "mean |policy ratio - 1| {recent_mean:.3f} > {threshold:g}: each update moves the policy far",
        memory=last_span,
        fixes=("fewer_updates", "lower_lr"),
        points=span_points,
        level=True,
    )
)


register(
    Rule(
        "clip_ratio_rising",
        ("clip_ratio/region_mean",),
        _rising("clip_ratio/region_mean"),
        "clip ratio rose monotonically from {window_first:.4g} to {latest:.4g}",
        memory=last_window,
        fixes=("fewer_updates", "lower_lr"),
        points=window_points,
    )
)


@rule(
    "clip_ratio_zero",
    ("clip_ratio/region_mean",),
    "clip ratio dropped to zero (it averaged {earlier_mean:.4g} over the window before)",
    memory=lambda s: Memory(tail=2 * s.window),
    fixes=("dynamic_sampling", "ngrpo"),
    points=lambda s: 2 * s.window,
)
def _clip_ratio_zero(s: ClipRatioZero, history: History, _: RunContext) -> Finding | None:
    series = history["clip_ratio/region_mean"]
    if series.count < 2 * s.window:
        return None
    window_max = max(series.last(s.window))
    if window_max != 0.0:  # clipping in the window: the window before need not be read
        return NOT_HOLDING
    # "Drops to zero while training": a run that never clipped (fully on-policy) is not a drop.
    clipped_before = fmean(series.last(2 * s.window)[: s.window])
    return Finding(
        window_max == 0.0 and clipped_before > s.min_before,
        {"window_max": window_max, "earlier_mean": clipped_before, "min_before": s.min_before},
        "clip_ratio/region_mean",
    )
