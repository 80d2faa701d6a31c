"""Completion-length rules: growth, the budget reached, completions pinned at it (18.3.1, 18.3.7 figure 18-8;
table 16-6)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from align_kit.monitor.rules.base import (
    CLIPPED,
    MAX_LENGTH,
    MEAN_LENGTH,
    NOT_HOLDING,
    Finding,
    History,
    Memory,
    halves_shortened,
    last_span,
    rule,
    span_points,
)
from align_kit.monitor.rules.context import RunContext
from align_kit.monitor.settings import (
    AllTruncated,
    LengthCollapse,
    LengthGrowth,
    LengthNearMax,
    LengthPinned,
)


@rule(
    "length_growth",
    ("completions/mean_length",),
    "mean length {recent_mean:.1f} > {threshold:.1f} (early mean {early_mean:.1f})",
    memory=lambda s: Memory(head=s.span, tail=s.span),
    fixes=("overlong_shaping", "overlong_filter"),
    points=lambda s: 2 * s.span,
    shorten=halves_shortened(6),
)
def _length_growth(s: LengthGrowth, history: History, _: RunContext) -> Finding | None:
    series = history["completions/mean_length"]
    if series.count < 2 * s.span:
        return None
    early, recent = series.mean_first(s.span), series.mean_last(s.span)
    threshold = s.factor * early
    if recent <= threshold:
        return NOT_HOLDING
    return Finding(
        True,
        {"early_mean": early, "recent_mean": recent, "threshold": threshold},
        "completions/mean_length",
        points=2 * s.span,
        first_step=series.start,
    )


def _length_near_max_fixes(words: Mapping[str, str]) -> tuple[str, ...]:
    if words.get("from_start") == "yes":  # at the budget from the first step: the budget is too short
        return ("raise_max_length", "overlong_filter", "overlong_shaping")
    return ("overlong_shaping", "overlong_filter", "raise_max_length")


@rule(
    "length_near_max",
    (MEAN_LENGTH, CLIPPED),
    "{what}: completions are cut at the budget",
    reads=(MAX_LENGTH,),
    inputs=lambda _s: ((MEAN_LENGTH, CLIPPED),),
    memory=lambda s: Memory(head=1, tail=max(s.span, s.clipped_span, 2)),
    fixes=_length_near_max_fixes,
    points=lambda s: max(s.span, s.clipped_span),
    context=("max_completion_length",),  # what coverage names when neither a budget nor the truncated share is known
    # A run shorter than its spans: judged at its end on every point there is.
    shorten=lambda s, points: replace(s, span=min(s.span, points), clipped_span=points) if points >= 1 else None,
)
def _length_near_max(s: LengthNearMax, history: History, context: RunContext) -> Finding | None:
    """The mean length within `margin` of the budget (stated, or a hard cap in the longest completion); or, whatever
    the budget, the truncated share averaging at least `clipped`: most completions end at the budget."""
    series = history[MEAN_LENGTH]
    limit = budget(history, context, s.span)
    near = None
    if limit is not None and series.count >= s.span:
        recent = series.mean_last(s.span)
        threshold = (1 - s.margin) * limit
        near = NOT_HOLDING
        if recent >= threshold:  # its values and words, only for an alert (formatting them is a step's cost)
            values = {
                "recent_mean": recent,
                "first": series.first[0],
                "max_completion_length": limit,
                "threshold": threshold,
            }
            what = f"mean length {recent:.1f} >= {threshold:.1f} of max_completion_length {limit:.0f}"
            words = {"from_start": "yes" if series.first[0] >= threshold else "no", "what": what}
            return Finding(True, values, MEAN_LENGTH, words)
    clipped = history[CLIPPED]
    if clipped.count < s.clipped_span:
        return near
    share = clipped.mean_last(s.clipped_span)
    if share < s.clipped:
        return NOT_HOLDING
    values = {"clipped_mean": share, "clipped": s.clipped}
    what = f"truncated share ({CLIPPED}) mean {share:.3f} >= {s.clipped:g}"
    words = {"from_start": "yes" if clipped.first[0] >= s.clipped else "no", "what": what}
    return Finding(True, values, CLIPPED, words)


@rule(
    "length_pinned",
    (CLIPPED,),
    "truncated share ({metric}) mean {clipped_mean:.3f} >= {clipped:g}{also}: completions are pinned at the "
    "length budget",
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
    share = clipped.mean_last(s.span)
    if share < s.clipped:
        return NOT_HOLDING
    values = {"clipped_mean": share, "clipped": s.clipped}
    holds = True  # the truncated share alone says it, unless a budget is known: then the length must be at it too
    lengths, budget = history[MEAN_LENGTH], context.max_completion_length
    if budget is not None and lengths.count:
        length, threshold = lengths.mean_last(s.span), (1 - s.margin) * budget
        values.update(recent_length=length, length_threshold=threshold, max_completion_length=budget)
        holds = length >= threshold
        also = f"; mean length {length:.1f} >= {threshold:.1f} of max_completion_length {budget}"
    else:  # the truncated share alone says it
        also = "" if budget is not None else " (max_completion_length unknown: judged on the truncated share)"
    return Finding(holds, values, CLIPPED, {"also": also})


def budget(history: History, context: RunContext, span: int) -> float | None:
    """The length budget: max_completion_length when the run states it, else the longest completion
    (`completions/max_length`) when it is the same on each of the last `span` rows (2 at least): a hard cap hit
    on every batch."""
    if context.max_completion_length is not None:
        return float(context.max_completion_length)
    longest = history[MAX_LENGTH].last(max(span, 2))
    return longest[0] if len(longest) >= 2 and min(longest) == max(longest) > 0 else None


@rule(
    "all_truncated",
    (CLIPPED, MEAN_LENGTH),
    "{what}: every completion is cut at the length budget",
    reads=("entropy", MAX_LENGTH),
    inputs=lambda _s: ((CLIPPED, MEAN_LENGTH),),
    memory=lambda s: Memory(head=1, tail=max(s.rows, 2)),
    severity="failing",
    fixes=("raise_max_length", "overlong_filter", "overlong_shaping"),
    points=lambda s: s.rows,
)
def _all_truncated(s: AllTruncated, history: History, context: RunContext) -> Finding | None:
    clipped, lengths, entropy = history[CLIPPED], history[MEAN_LENGTH], history["entropy"]
    if clipped.count:
        shares = clipped.last(s.rows)
        if len(shares) < s.rows:
            return None
        lowest = min(shares)
        values = {"lowest_share": lowest, "clipped": s.clipped}
        sustained = lowest >= s.clipped
        # One fully cut row with entropy gone: the truncation collapse of figure 18-8's kind, at any length.
        latest = shares[-1] >= s.clipped
        if not (sustained or latest):  # no row to read further (nor words to format)
            return NOT_HOLDING
        what = f"the truncated share ({CLIPPED}) is >= {s.clipped:g} on each of the last {s.rows} rows"
        collapsed = entropy.count >= 2 and entropy.last(1)[0] < (1 - s.entropy_fall) * entropy.first[0]
        if latest and collapsed and not sustained:
            what = (
                f"the truncated share ({CLIPPED}) reached {shares[-1]:.3g} while entropy fell from "
                f"{entropy.first[0]:.3g} to {entropy.last(1)[0]:.3g}"
            )
        return Finding(sustained or (latest and collapsed), values, CLIPPED, {"what": what}, points=len(shares))
    limit = budget(history, context, s.rows)
    if limit is None or lengths.count < s.rows:
        return None
    recent = lengths.last(s.rows)
    values = {"lowest_length": min(recent), "budget": limit}
    found = Finding(min(recent) >= limit - 0.5, values, MEAN_LENGTH, points=len(recent))
    if found.holds:
        found.words = {
            "what": f"the mean completion length is at the budget {limit:g} on each of the last {s.rows} rows"
        }
    return found


@rule(
    "length_collapse",
    (MEAN_LENGTH,),
    "mean length fell from {early_length:.3g} to {recent_length:.3g} tokens while entropy fell from "
    "{early_entropy:.3g} to {recent_entropy:.3g}: the policy answers with a few fixed tokens",
    reads=("entropy",),
    memory=lambda s: Memory(head=s.span, tail=s.span),
    severity="failing",
    fixes=("fix_reward", "clip_higher", "raise_eps_high", "lower_lr"),
    points=lambda s: 2 * s.span,
    shorten=halves_shortened(3),
)
def _length_collapse(s: LengthCollapse, history: History, _: RunContext) -> Finding | None:
    lengths, entropy = history[MEAN_LENGTH], history["entropy"]
    if min(lengths.count, entropy.count) < 2 * s.span:
        return None
    recent_length = lengths.mean_last(s.span)
    if recent_length > s.few:  # answers longer than a few tokens: nothing else needs reading
        return NOT_HOLDING
    early_length = lengths.mean_first(s.span)
    early_entropy, recent_entropy = entropy.mean_first(s.span), entropy.mean_last(s.span)
    values = {
        "early_length": early_length,
        "recent_length": recent_length,
        "early_entropy": early_entropy,
        "recent_entropy": recent_entropy,
    }
    short = recent_length <= s.few and recent_length <= s.shrink * early_length
    holds = short and recent_entropy < (1 - s.fall) * early_entropy
    return Finding(holds, values, MEAN_LENGTH, points=2 * s.span, first_step=lengths.start)
