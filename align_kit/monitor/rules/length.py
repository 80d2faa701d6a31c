"""Completion-length rules: growth, the budget reached, completions pinned at it (18.3.1, 18.3.7 figure 18-8;
table 16-6)."""

from __future__ import annotations

from collections.abc import Mapping
from statistics import fmean

from align_kit.monitor.rules.base import (
    CLIPPED,
    MEAN_LENGTH,
    Finding,
    History,
    Memory,
    last_span,
    rule,
    span_points,
)
from align_kit.monitor.rules.context import RunContext
from align_kit.monitor.settings import (
    LengthGrowth,
    LengthNearMax,
    LengthPinned,
)


def overlong_advice(context: RunContext, _: Mapping[str, float]) -> str:
    if context.overlong_shaping:
        return (
            "overlong reward shaping is already on: also mask truncated completions out of the loss "
            "(overlong=filter_and_punish) or lower trainer.learning_rate"
        )
    return "mask truncated completions out of the loss (overlong=filter) or shape their reward (overlong=soft_punish)"


def _length_growth_advice(context: RunContext, _: Mapping[str, float]) -> str:
    if context.overlong_shaping:
        return "overlong reward shaping is already on: raise overlong.punish_weight or widen overlong.cache_length"
    return "enable overlong reward shaping: overlong=soft_punish"


@rule(
    "length_growth",
    ("completions/mean_length",),
    "mean length {recent_mean:.1f} > {threshold:.1f} (early mean {early_mean:.1f})",
    _length_growth_advice,
    memory=lambda s: Memory(head=s.span, tail=s.span),
    fixes=("overlong_shaping", "overlong_filter"),
    points=lambda s: 2 * s.span,
)
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


def _length_near_max_advice(context: RunContext, values: Mapping[str, float]) -> str:
    if values["first"] >= values["threshold"]:
        return (
            f"completions filled the budget from the first step: trainer.max_completion_length="
            f"{context.max_completion_length} is too short for this task; raise it"
        )
    return _length_growth_advice(context, values)


def _length_near_max_fixes(words: Mapping[str, str]) -> tuple[str, ...]:
    if words.get("from_start") == "yes":  # at the budget from the first step: the budget is too short
        return ("raise_max_length", "overlong_filter", "overlong_shaping")
    return ("overlong_shaping", "overlong_filter", "raise_max_length")


@rule(
    "length_near_max",
    ("completions/mean_length",),
    "mean length {recent_mean:.1f} >= {threshold:.1f} of max_completion_length {max_completion_length:.0f}: "
    "completions are cut at the budget",
    _length_near_max_advice,
    memory=lambda s: Memory(head=1, tail=s.span),
    fixes=_length_near_max_fixes,
    points=span_points,
    context=("max_completion_length",),
    level=True,
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


def _length_pinned_advice(context: RunContext, values: Mapping[str, float]) -> str:
    budget = context.max_completion_length
    raise_it = f"raise trainer.max_completion_length (now {budget})" if budget else "raise the length budget"
    return f"the answers are cut before they end: {raise_it}; {overlong_advice(context, values)}"


@rule(
    "length_pinned",
    (CLIPPED,),
    "truncated share ({metric}) mean {clipped_mean:.3f} >= {clipped:g}{also}: completions are pinned at the "
    "length budget",
    _length_pinned_advice,
    reads=(MEAN_LENGTH,),
    memory=last_span,
    severity="failing",
    fixes=("raise_max_length", "overlong_filter", "overlong_shaping"),
    points=span_points,
    inputs=lambda _s: ((CLIPPED,),),
    level=True,
)
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
