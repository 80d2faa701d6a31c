"""Reward rules: flat groups, zero advantages, format hacking, decline, plateau, no signal and train/eval divergence
(16.6.1, 16.6.5 table 16-6; 18.3.2, 18.3.7)."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace

from align_kit.monitor.rules.base import (
    ACCURACY,
    EVAL_REWARD,
    FLAT_FRACTION,
    FORMAT,
    NOT_HOLDING,
    TRAIN_REWARD,
    Check,
    Finding,
    History,
    Memory,
    Rule,
    Series,
    first_logged,
    fmean,
    half_change,
    last_span,
    last_window,
    register,
    rule,
    span_points,
    window_points,
    window_shortened,
)
from align_kit.monitor.rules.context import RunContext
from align_kit.monitor.rules.over_run import FELL, FLAT, TASK_FELL, Trend
from align_kit.monitor.rules.own_noise import FLAT_T, RISE_T, ROUNDING, flat_t, rise_t, rose
from align_kit.monitor.rules.spreadless import NO_SPREAD
from align_kit.monitor.settings import (
    AboveThreshold,
    NoSignal,
    RewardCollapse,
    RewardDecline,
    RewardPlateau,
    RisingShare,
    TrainEvalDivergence,
)


def _difficulty(history: History, context: RunContext, flat: float, span: int) -> str:
    """Whether flat groups are mostly solved or mostly failed prompts (18.3.2: "the model has either mastered most
    training prompts or cannot solve them at all"). With a share `flat` of groups flat, a batch whose flat groups
    all score the maximum has its reward at least `flat` of the way up the range, one whose flat groups all score
    the minimum at most 1 - `flat`: the reward's level over the same points says which, "" when both or neither."""
    rewards, scale = history[TRAIN_REWARD], context.reward_max - context.reward_min
    if not rewards.count or scale <= 0 or not context.reward_scale_stated:  # no range: the level says nothing
        return ""
    level = (rewards.mean_last(span) - context.reward_min) / scale
    easy, hard = level >= flat, level <= 1 - flat
    return "too easy" if easy and not hard else "too hard" if hard and not easy else ""


def _difficulty_words(history: History, context: RunContext, flat: float, span: int) -> dict[str, str]:
    """The finding's words for flat groups: their difficulty, and the message's tail that says it."""
    difficulty = _difficulty(history, context, flat, span)
    return {"difficulty": difficulty, "why": _WHY[difficulty]}


# What a flat group is, by difficulty (the alert message's tail).
_WHY = {
    "too easy": " (reward near its maximum: the data is too easy)",
    "too hard": " (reward near its minimum: the data is too hard)",
    "": "",
}


def _flat_group_fixes(words: Mapping[str, str]) -> tuple[str, ...]:
    """Flat groups of solved prompts call for harder data, of failed ones for easier data or a virtual full-score
    sample (18.3.2: the data no longer matches the model, one way or the other)."""
    difficulty = words.get("difficulty", "")
    if difficulty == "too easy":
        return ("harder_data", "dynamic_sampling")
    if difficulty == "too hard":
        return ("easier_data", "dynamic_sampling", "ngrpo")
    return ("dynamic_sampling", "ngrpo", "fix_reward")


@rule(
    "zero_std_groups",
    FLAT_FRACTION,
    "{metric} mean {recent_mean:.3f} > {threshold:.3f}: the batch lost its learning signal{why}",
    reads=(TRAIN_REWARD,),
    memory=last_span,
    fixes=_flat_group_fixes,
    inputs=lambda _s: (FLAT_FRACTION,),
    points=span_points,
    level=True,
)
def _flat_groups(s: AboveThreshold, history: History, context: RunContext) -> Finding | None:
    metric = first_logged(history, FLAT_FRACTION)
    series = history[metric]
    if series.count < s.span:
        return None
    recent = series.mean_last(s.span)
    if recent <= s.threshold:  # no alert: no words to read the reward's level for
        return NOT_HOLDING
    values = {"recent_mean": recent, "threshold": s.threshold}
    return Finding(True, values, metric, _difficulty_words(history, context, recent, s.span))


def _rising_share(metric: str) -> Check:
    def check(s: RisingShare, history: History, context: RunContext) -> Finding | None:
        series = history[metric]
        if series.count < max(s.span, s.window):
            return None
        recent, change = series.mean_last(s.span), half_change(series.last(s.window))
        values_out = {"recent_mean": recent, "threshold": s.threshold, "change": change, "rise": s.rise}
        if not (recent > s.threshold and change > s.rise):
            return Finding(False, values_out, metric, points=s.window)
        words = _difficulty_words(history, context, recent, s.span)
        return Finding(True, values_out, metric, words, points=s.window)

    return check


register(
    Rule(
        "zero_advantage",
        ("adv/zero_std_fraction",),
        _rising_share("adv/zero_std_fraction"),
        "{metric} mean {recent_mean:.3f} > {threshold:.3f} and rising ({change:+.3f} over the window){why}",
        reads=(TRAIN_REWARD,),
        memory=lambda s: Memory(tail=max(s.span, s.window)),
        fixes=_flat_group_fixes,
        inputs=lambda _s: (("adv/zero_std_fraction",),),
        points=lambda s: max(s.span, s.window),
    )
)


def _components(s: RewardCollapse) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The format and the accuracy series: the concepts `format` and `accuracy` (the doctor maps a run's own
    component names to them), else align_kit's reward nodes as TRL logs them (rewards/<name>/mean)."""
    return _named_components(s.format_reward, s.correctness_reward)


@functools.cache  # asked at every step: the names are built once per pair of reward nodes
def _named_components(format_reward: str, correctness_reward: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return (FORMAT, f"rewards/{format_reward}/mean"), (ACCURACY, f"rewards/{correctness_reward}/mean")


@rule(
    "reward_collapse",
    lambda s: tuple(name for group in _components(s) for name in group),
    "{format} rose {format_gain:+.3f} while {correctness} moved {correctness_gain:+.3f}: "
    "the policy may be learning the format without the content",
    memory=lambda s: Memory(head=s.window // 2, tail=s.window),
    severity="failing",
    fixes=("gdpo", "lower_format_weight"),
    points=window_points,
    inputs=_components,
    recovers=False,  # the format's gain ends when it saturates: that is no recovery of the accuracy
    shorten=window_shortened(4),
    reversed_over_run=lambda s, history, context: _accuracy_rose_over_run(s, history, context),
    over_run=lambda _s, trend, context: _collapse_over_run(trend, context),
)
def _reward_collapse(s: RewardCollapse, history: History, context: RunContext) -> Finding | None:
    format_group, accuracy_group = _components(s)
    format_metric, accuracy_metric = first_logged(history, format_group), first_logged(history, accuracy_group)
    formats, correct = history[format_metric], history[accuracy_metric]
    if min(formats.count, correct.count) < s.window:
        return None
    format_gain = half_change(formats.last(s.window))
    unit = _component_unit(history, context, formats, correct)
    # A gain within rounding of its bound is at the bound: a * x + b rounds the last digits differently.
    if format_gain <= (s.min_format_gain + ROUNDING) * unit:  # the format did not rise: the accuracy is not read
        return NOT_HOLDING
    correctness_gain = half_change(correct.last(s.window))
    if correctness_gain >= s.max_correctness_gain * unit:
        return NOT_HOLDING
    return Finding(
        True,
        {
            "format_gain": format_gain,
            "correctness_gain": correctness_gain,
            "min_format_gain": s.min_format_gain * unit,
            "max_correctness_gain": s.max_correctness_gain * unit,
        },
        format_metric,
        {"format": _named(format_metric), "correctness": _named(accuracy_metric), "reward": s.format_reward},
    )


def _component_unit(history: History, context: RunContext, *components: Series) -> float:
    """What a gain of 1 in a reward component is: 1 (a share of [0, 1]) with a stated range; with none, the range
    the total reward covered so far (else the components' own), so the gains read the same on any scale."""
    if context.reward_scale_stated:
        return 1.0
    total = history[TRAIN_REWARD]
    if total.count and total.high > total.low:  # the common case, read at every step
        return total.high - total.low
    found = [series for series in components if series.count]
    if not found:
        return 1.0
    return max(series.high for series in found) - min(series.low for series in found)


def _accuracy_rose_over_run(s: RewardCollapse, history: History, context: RunContext) -> bool:
    """The accuracy's mean over the run's last `window` / 2 points above its first `window` / 2 by more than the
    stall the rule reads in a window (`max_correctness_gain`): over the whole run the content was learned, not
    stalled, so a window where the format outpaced it (a format learned first, as tutorials' runs do) is an episode
    the rest of the run reversed, not format hacking (18.3.2: format up while accuracy falls or stalls)."""
    accuracy = history[first_logged(history, _components(s)[1])]
    half = max(s.window // 2, 1)
    if accuracy.count < 2 * half:
        return False
    unit = _component_unit(history, context, accuracy)
    return accuracy.mean_last(half) - accuracy.mean_first(half) > s.max_correctness_gain * unit


def _collapse_over_run(trend: Trend, context: RunContext) -> Finding | None:
    """With no range stated, the whole history's reading (over_run.py): the total rose only through the other
    components while the task component (the accuracy) fell by FLAT_T standard errors of its slope, its last third
    under its first. A window's format gain can stay under the rule's bound in a slow run (a format reward climbing
    0 -> 3 over 500 steps); over the whole run the hacking is plain. Failing, as the window's reading is (18.3.2)."""
    if context.reward_scale_stated or trend.short or trend.accuracy_t is None:
        return None
    first, _, last = trend.thirds
    values = {
        "format_gain": last - first,
        "correctness_gain": trend.accuracy_change,
        "slope_t": trend.slope_t,
        "accuracy_slope_t": trend.accuracy_t,
    }
    words = {"format": "the total reward (its last third over its first)", "correctness": "the accuracy"}
    return Finding(trend.state == TASK_FELL, values, "reward", words, trend.points)


def _named(metric: str) -> str:
    """A reward component as the message names it: rewards/format/mean -> the format reward."""
    if metric.startswith("rewards/") and metric.endswith("/mean"):
        return f"the {metric[len('rewards/') : -len('/mean')]} reward"
    return metric


@rule(
    "reward_decline",
    ("reward",),
    "smoothed reward {latest:.3f} fell below {threshold:.3f} (its best so far {best:.3f}{how})",
    memory=lambda s: Memory(head=s.span, tail=s.span, best_span=s.span),
    severity="failing",
    fixes=("lower_lr", "fewer_updates", "routing_replay"),
    points=span_points,
    # A run shorter than `span`: judged at its end over all of its points, means of half of them (6 points at least).
    shorten=lambda s, points: _ShortDecline(**{**asdict(s), "span": points // 2}) if points >= 6 else None,
    over_run=lambda _s, trend, context: _decline_over_run(trend, context),
)
def _reward_decline(s: RewardDecline, history: History, context: RunContext) -> Finding | None:
    series = history["reward"]
    if isinstance(s, _ShortDecline):
        return _short_decline(s, series.last(series.count), context)
    if series.count < s.span:
        return None
    latest, best = series.mean_last(s.span), series.best[s.span]
    threshold = best - s.drop * (context.reward_max - context.reward_min)  # a share of the reward's range
    if _no_scale(context, series.low, series.high):  # the run's own spread is its only scale
        by_spread = best - SPREAD_DROP * (series.high - series.low)
        values = {"latest": latest, "best": best, "threshold": by_spread}
        if latest >= by_spread:  # or fell below its start by FALL_T standard errors (a noisy run falling throughout)
            if latest >= series.mean_first(s.span):  # not below its start at all: no t to read
                return NOT_HOLDING
            return _fell_on_own_noise(series.first[: s.span], series.last(s.span), values, "")
        how = f"; it lost more than {SPREAD_DROP:g} of the {series.low:.3g}..{series.high:.3g} its rewards covered"
        return Finding(True, values, "reward", _spread(how))
    values = {"latest": latest, "best": best, "threshold": threshold}
    return Finding(latest < threshold, values, "reward", {"basis": "scale", "how": ""})


def _decline_over_run(trend: Trend, context: RunContext) -> Finding | None:
    """With no range stated, the whole history's reading (over_run.py): fell, its slope below -FLAT_T standard
    errors with its last third below its first (one test at the end, so FLAT_T, not the FALL_T a test at every
    point needs)."""
    if context.reward_scale_stated or trend.short:
        return None
    first, _, last = trend.thirds
    values = {"latest": last, "best": max(trend.thirds), "threshold": first, "slope_t": trend.slope_t}
    how = (
        f"; no range stated: {trend.why}, below -{FLAT_T:g} with the last third under the first"
        if trend.state == FELL
        else ""
    )
    return Finding(trend.state == FELL, values, "reward", {"basis": "over_run", "how": how}, trend.points)


def _no_scale(context: RunContext, low: float, high: float) -> bool:
    """No reward range is stated: the run's own spread is the only scale (a stated range is read by the `scale`
    basis). Whatever the rewards' values: a range assumed from them would judge the same run differently once its
    rewards were shifted or scaled."""
    return not context.reward_scale_stated


def _spread(how: str) -> dict[str, str]:
    return {"basis": "spread", "how": how}


@dataclass
class _ShortDecline(RewardDecline):
    """reward_decline's settings at the end of a run shorter than its span (`span` = half the points logged)."""


# With no range stated, a fall of the latest points below the first by this many standard errors (Welch's t) is a
# decline: stricter than a rise's RISE_T, as the rule reads it at every point of a run.
FALL_T = 3.0


def _fell_on_own_noise(first: list[float], latest: list[float], values: dict[str, float], how: str) -> Finding:
    fall = rise_t(first, latest) if len(first) >= 2 and len(latest) >= 2 else 0.0
    values = {**values, "fall_t": fall}
    if fall < -FALL_T:
        how = f"; its latest {len(latest)} points below its first {len(first)} by {-fall:.1f} standard errors"
    return Finding(fall < -FALL_T, values, "reward", _spread(how))


# Without a reward scale, the run's own spread measures the fall: its smoothed reward must lose more than this share
# of the range its rewards covered (a noisy flat run's window means move far less than its single points do).
SPREAD_DROP = 0.5


def _short_decline(s: _ShortDecline, values: list[float], context: RunContext) -> Finding:
    """Over every point of a short run: the latest `span`-point mean against the best such mean, below it by `drop`
    of the reward's range (the `scale` basis), or, when the run has no scale (`_no_scale`), by SPREAD_DROP of the
    range its own rewards covered (the `spread` basis, which the doctor keeps when no scale is known)."""
    means = [fmean(values[end - s.span : end]) for end in range(s.span, len(values) + 1)]
    latest, best = means[-1], max(means)
    by_scale = best - s.drop * (context.reward_max - context.reward_min)
    if _no_scale(context, min(values), max(values)):
        by_spread = best - SPREAD_DROP * (max(values) - min(values))
        how = f"; it lost more than {SPREAD_DROP:g} of the {min(values):.3g}..{max(values):.3g} its rewards covered"
        values_out = {"latest": latest, "best": best, "threshold": by_spread}
        if latest >= by_spread:
            found = _fell_on_own_noise(values[: s.span], values[-s.span :], values_out, how)
            return replace(found, points=len(values))
        return Finding(True, values_out, "reward", _spread(how), len(values))
    values_out = {"latest": latest, "best": best, "threshold": by_scale}
    return Finding(latest < by_scale, values_out, "reward", {"basis": "scale", "how": ""}, len(values))


@rule(
    "reward_plateau",
    ("reward",),
    "reward flat at {window_mean:.4g} (change {change:+.3g}{how})",
    reads=(ACCURACY,),
    inputs=lambda _s: (("reward",),),
    memory=lambda s: Memory(head=PLATEAU_HEAD, tail=s.window),
    fixes=("fix_reward", "dynamic_sampling", "ngrpo", "easier_data"),
    points=window_points,
    shorten=lambda s, points: _ShortPlateau(**{**asdict(s), "window": points}) if points >= 1 else None,
    over_run=lambda _s, trend, context: _plateau_over_run(trend, context),
    unjudged=lambda s, history: (
        f"needs {s.fewest} logged points of reward to judge its trend (flat or not) at the end of a run shorter "
        f"than {s.window}; the run has {history['reward'].count}"
        if 0 < history["reward"].count < s.fewest
        else ""
    ),
)
def _reward_plateau(s: RewardPlateau, history: History, context: RunContext) -> Finding | None:
    """Over a window (during a run), the halves' means; over the whole of a history shorter than it (at its end,
    `_ShortPlateau`), every point: flat when they all lie within the tolerance of each other."""
    series = history["reward"]
    if series.count < s.window:
        return None
    if isinstance(s, _ShortPlateau) and s.window < s.fewest:  # fewer points judge nothing, not even "not flat"
        return None
    if not context.reward_scale_stated:
        # Read every PLATEAU_STRIDE points during a run (its statistics cost the window; a 100-point plateau is
        # no less one 9 points later), at every point at the end of a shorter history.
        if not isinstance(s, _ShortPlateau) and series.count % PLATEAU_STRIDE:
            return None
        return _plateau_on_own_noise(s, history, series.last(s.window))
    window = series.last(s.window)
    change, mean = half_change(window) if len(window) >= 2 else 0.0, fmean(window)
    scale = context.reward_max - context.reward_min  # tolerance and gap are shares of the reward's range
    # Stuck: at most `gap` below the maximum, and below the `highest` share of the range (the middle is no lower half).
    gap_ceiling, half = context.reward_max - s.gap * scale, context.reward_min + s.highest * scale
    ceiling = min(gap_ceiling, half)
    tolerance = s.tolerance * scale
    values = {
        "window_mean": mean,
        "change": change,
        "tolerance": tolerance,
        "reward_max": context.reward_max,
        "ceiling": ceiling,
    }
    how = {"how": f", tolerance {tolerance:g}, below {ceiling:.3f}"}
    accuracy = history[ACCURACY].last(s.window)
    # A run that learned: its reward in the upper part of its range, or its accuracy high or rising.
    learned = (
        mean > gap_ceiling
        or (mean >= half and s.highest < 1)
        or (len(accuracy) >= 2 and (fmean(accuracy) > s.highest or half_change(accuracy) > s.tolerance))
    )
    if learned:
        return Finding(False, values, "reward", how)
    if isinstance(s, _ShortPlateau):  # a short history's halves are noise: every point within the tolerance
        spread = max(window) - min(window)
        values["spread"] = spread
        if spread >= tolerance:
            return Finding(False, values, "reward", how)
        return Finding(True, values, "reward", how)
    return Finding(abs(change) < tolerance, values, "reward", how)


# The run's first points, the level a reward with no stated range is compared with (has it risen since?).
PLATEAU_HEAD = 10
# With no range stated, the plateau is read at every 10th logged point of a run (the window's t statistics are its
# cost per reading).
PLATEAU_STRIDE = 10


def _plateau_on_own_noise(s: RewardPlateau, history: History, window: list[float]) -> Finding:
    """With no range stated: flat when the window's slope is within FLAT_T standard errors of 0, stuck when the
    window is not above the run's first PLATEAU_HEAD points by RISE_T standard errors (a run that rose and levelled
    off learned; the upper half of a range nobody stated is unknown), and the accuracy neither rose since its first
    points nor trends up. A history shorter than the window compares its own halves."""
    series, accuracy = history["reward"], history[ACCURACY]
    if isinstance(s, _ShortPlateau):
        head, recent = window[: len(window) // 2], window[-(len(window) // 2) :]
    else:
        head, recent = series.first[:PLATEAU_HEAD], window
    # Cheapest first, each only while the plateau still holds: a rising run is told by its rise alone.
    risen = rise_t(head, recent)
    trend = flat_t(window) if risen <= RISE_T else math.nan
    accuracies = accuracy.last(s.window) if abs(trend) < FLAT_T else []
    learned = len(accuracies) >= s.fewest and (
        rose(accuracy.first[: min(PLATEAU_HEAD, len(accuracies) // 2)], accuracies) or flat_t(accuracies) >= FLAT_T
    )
    values = {
        "window_mean": fmean(window),
        "change": half_change(window),
        "trend_t": trend,
        "rise_t": risen,
        "flat_t": FLAT_T,
    }
    how = (
        f"; no range stated: its slope within {FLAT_T:g} standard errors of 0 (t {trend:+.2f}) and no higher than "
        f"its first {len(head)} points (rise t {risen:+.2f} <= {RISE_T:g})"
    )
    holds = abs(trend) < FLAT_T and risen <= RISE_T and not learned
    return Finding(holds, values, "reward", {"how": how})


def _plateau_over_run(trend: Trend, context: RunContext) -> Finding | None:
    """With no range stated, the whole history's reading (over_run.py): flat, its slope within FLAT_T standard errors
    of 0 and neither the reward nor the accuracy rose over it."""
    if context.reward_scale_stated or trend.short:
        return None
    first, _, last = trend.thirds
    values = {"window_mean": trend.mean, "change": last - first, "trend_t": trend.slope_t, "rise_t": trend.thirds_t}
    how = f"; no range stated: {trend.why}, within {FLAT_T:g} and no rise" if trend.state == FLAT else ""
    return Finding(trend.state == FLAT, values, "reward", {"how": how}, trend.points)


@dataclass
class _ShortPlateau(RewardPlateau):
    """reward_plateau's settings at the end of a run shorter than its window (`window` = the points logged)."""


@rule(
    "no_signal",
    (TRAIN_REWARD, *FLAT_FRACTION, "reward_std"),
    "{what}: {why}, nothing is learnt",
    reads=("loss", "grad_norm"),
    memory=lambda s: Memory(head=PLATEAU_HEAD, tail=max(s.span, s.rows)),
    severity="failing",
    fixes=("fix_reward", "easier_data"),
    points=span_points,
    inputs=lambda _s: ((TRAIN_REWARD, *FLAT_FRACTION, "reward_std"),),
    level=True,
    shorten=lambda s, points: _no_signal_shortened(s, points),
)
def _no_signal(s: NoSignal, history: History, context: RunContext) -> Finding | None:
    """Three readings: every reward at the scale's minimum with every group flat (the `scale` basis, over `span`
    points), or, whatever the scale, no reward spread on each of the last `rows` rows (the `spread` basis) or on
    most of the history's rows, `rows` at least (the `most` basis). A row whose reward_std is above zero has signal:
    the scale basis does not hold over a span holding one. Groups flat because every completion reached the ceiling
    are another state, saturation (`_saturated`): said so, at most a warning."""
    return _saturation_said(_no_signal_read(s, history, context), s, history, context)


def _no_signal_read(s: NoSignal, history: History, context: RunContext) -> Finding | None:
    spread = _no_spread(s, history)
    if (spread is None or not spread.holds) and history.spreadless.most(s.rows):
        counted = history.spreadless
        what = f"reward_std <= {NO_SPREAD:g} on {counted.spreadless} of the {counted.rows} rows logging it (most)"
        values = {"spreadless_rows": counted.spreadless, "rows": counted.rows}
        spread = Finding(True, values, "reward_std", {"what": what, "basis": "most", "why": _ALIKE}, counted.rows)
    rewards = history[TRAIN_REWARD]
    flat_metric = first_logged(history, FLAT_FRACTION)
    flats = history[flat_metric]
    if context.reward_scale_stated and min(rewards.count, flats.count) >= s.span:
        highest, flat = max(rewards.last(s.span)), flats.mean_last(s.span)
        spreads = history["reward_std"].last(s.span)
        signal = bool(spreads) and max(spreads) > NO_SPREAD  # some group's rewards differ: an advantage to learn from
        floor = context.reward_min + s.floor * (context.reward_max - context.reward_min)
        values = {"reward_max_seen": highest, "floor": floor, "flat_mean": flat, "flat": s.flat}
        what = (
            f"every reward of the last {s.span} logged points <= {floor:.3g} (at most {highest:.3g}) and "
            f"{flat_metric} mean {flat:.3f} >= {s.flat:g}"
        )
        if highest <= floor and flat >= s.flat and not signal:
            return Finding(True, values, TRAIN_REWARD, {"what": what, "basis": "scale", "why": _NO_EARNING})
        if spread is None or not spread.holds:
            return Finding(False, values, TRAIN_REWARD, {"what": what, "basis": "scale", "why": _NO_EARNING})
    return spread


def _saturation_said(found: Finding | None, s: NoSignal, history: History, context: RunContext) -> Finding | None:
    if found is None or not found.holds or found.words.get("basis") == "scale" or not _saturated(s, history, context):
        return found
    why = (
        "every group scores alike because the reward rose to its ceiling (saturated, not starved: the data is too "
        "easy to learn more from)"
    )
    return replace(found, words={**found.words, "why": why, "state": "saturated"}, severity="warning")


def _saturated(s: NoSignal, history: History, context: RunContext) -> bool:
    """Flat groups at the ceiling: the recent rewards at the stated maximum (within `floor` of the range), or, with
    no range stated, risen above the run's first points by RISE_T standard errors (a run that learned into it; one
    flat from its start is no signal whatever its level)."""
    rewards = history[TRAIN_REWARD]
    recent = rewards.last(max(s.rows, PLATEAU_HEAD))
    if len(recent) < 2 or rewards.count < 2 * PLATEAU_HEAD:
        return False
    if context.reward_scale_stated:
        return min(recent) >= context.reward_max - s.floor * (context.reward_max - context.reward_min)
    return rose(rewards.first[:PLATEAU_HEAD], recent)


_NO_EARNING = "no completion earns anything"
_ALIKE = "every completion of a group scores alike (no advantage, no policy gradient)"


def _no_signal_shortened(s: NoSignal, points: int) -> NoSignal | None:
    """At the end of a run shorter than `span` (or than `rows`), every row it logged: a history flat from its first
    row to its last is no signal sustained over all of it, even one row (every group of that batch flat, reward_std 0,
    no gradient: nothing more the run could show)."""
    return replace(s, span=points, rows=min(s.rows, points)) if points >= 1 else None


def _no_spread(s: NoSignal, history: History) -> Finding | None:
    """Every group flat on each of the last `rows` rows: reward_std 0, or the flat-group share at `flat` with the
    loss or grad_norm exactly 0 (no advantage, so no policy gradient; a KL term may still leave a small gradient).
    None when neither is logged on `rows` rows."""
    spreads = history["reward_std"].last(s.rows)
    if len(spreads) >= s.rows:
        highest = max(spreads)
        values = {"reward_std_max": highest}
        if highest > NO_SPREAD:  # a spread: no words to format (they are an alert's)
            return NOT_HOLDING
        what = f"reward_std <= {NO_SPREAD:g} on each of the last {s.rows} rows (every group flat)"
        words = {"what": what, "basis": "spread", "why": _ALIKE}
        # One row is one batch: flat, but not yet sustained (a batch of one easy prompt can be); a warning.
        return Finding(True, values, "reward_std", words, s.rows, severity=_once(s.rows))
    flat_metric = first_logged(history, FLAT_FRACTION)
    flats, losses, norms = (history[name].last(s.rows) for name in (flat_metric, "loss", "grad_norm"))
    if losses and norms:
        stills = [loss == 0.0 or norm == 0.0 for loss, norm in zip(losses, norms, strict=False)]
    else:  # the one logged says it
        stills = [value == 0.0 for value in losses or norms]
    if min(len(flats), len(stills)) < s.rows:
        return None
    holds = min(flats) >= s.flat and all(stills)
    what = f"{flat_metric} >= {s.flat:g} with the loss or grad_norm exactly 0 on each of the last {s.rows} rows"
    values = {"flat_min": min(flats)}
    words = {"what": what, "basis": "spread", "why": _ALIKE}
    return Finding(holds, values, flat_metric, words, s.rows, severity=_once(s.rows))


def _once(rows: int) -> str | None:
    """A zero spread read on a single row is a warning; sustained over 2 rows or more, the rule's failing."""
    return "warning" if rows < 2 else None


@rule(
    "train_eval_divergence",
    (EVAL_REWARD,),
    "train reward gained {train_gain:+.3f} while eval reward gained {eval_gain:+.3f}",
    reads=(TRAIN_REWARD,),
    fixes=("more_data", "add_kl", "raise_kl"),
    memory=last_window,
    points=window_points,
    pairs=window_points,
    unjudged=lambda s, history: (
        f"needs {s.window} evaluations paired with train rewards, the run has {len(history.train_eval.pairs)}"
    ),
)
def _train_eval_divergence(s: TrainEvalDivergence, history: History, _: RunContext) -> Finding | None:
    pairs = history.train_eval.pairs  # (mean train reward since the previous evaluation, eval reward)
    if len(pairs) < s.window:
        return None
    train_gain = half_change([t for t, _ in pairs])
    eval_gain = half_change([e for _, e in pairs])
    return Finding(
        train_gain > s.min_train_gain and eval_gain < s.max_eval_gain,
        {"train_gain": train_gain, "eval_gain": eval_gain},
        "eval_reward",
    )
