"""Entropy rules: collapse, fast drop, slow decline and explosion (18.3.1, 18.3.3, 18.3.7, figure 18-8; 16.6)."""

from __future__ import annotations

from collections.abc import Mapping

from align_kit.monitor.rules.base import (
    ACCURACY,
    CLIPPED,
    NOT_HOLDING,
    TRAIN_REWARD,
    Check,
    Finding,
    History,
    Memory,
    Progress,
    halves_shortened,
    progress,
    rule,
    span_points,
)
from align_kit.monitor.rules.context import RunContext
from align_kit.monitor.settings import (
    EntropyCollapse,
    EntropyDecline,
    EntropyDrop,
    EntropyExploding,
)

ENTROPY_FIXES = ("clip_higher", "raise_eps_high", "lower_lr")


def _progress_words(found: Progress | None, rise: float) -> dict[str, str]:
    """The message's tail that says how the accuracy (else the reward) moved over the points the rule compared."""
    if found is None:
        return {"while": " (neither accuracy nor reward logged to tell collapse from convergence)"}
    verb = "rose" if found.rose(rise) else "stalled or fell"
    return {"while": f" while {found.metric} {verb} ({found.early:.4g} -> {found.recent:.4g})"}


def _entropy_fall(converging: bool) -> Check:
    """Entropy's recent mean below (1 - fall) x its early mean, read as collapse (`converging` False: the accuracy
    or reward stalled or fell, or neither is logged) or as convergence (`converging`: it rose more than `rise`)."""

    def check(s: EntropyCollapse, history: History, context: RunContext) -> Finding | None:
        series = history["entropy"]
        if series.count < 2 * s.span:  # 18.3.1's code: first and last 10 must not overlap (>= 20 points)
            return None
        early, recent = series.mean_first(s.span), series.mean_last(s.span)
        threshold = (1 - s.fall) * early
        if recent >= threshold:  # no fall: what the accuracy did does not matter (and is not read)
            return NOT_HOLDING
        values = {"early_mean": early, "recent_mean": recent, "threshold": threshold}
        found = progress(history, context, s.span)
        rose = found is not None and found.rose(s.rise)
        words = _progress_words(found, s.rise)
        return Finding(rose == converging, values, "entropy", words, points=2 * s.span, first_step=series.start)

    return check


# 16.6, figure 16-11 and 18.3.1: collapse is entropy falling while the model stops getting better (and repeats itself).
rule(
    "entropy_collapse",
    ("entropy",),
    "entropy: recent mean {recent_mean:.4g} < {threshold:.4g} (early mean {early_mean:.4g}){while}",
    reads=(ACCURACY, TRAIN_REWARD),
    inputs=lambda _s: (("entropy",),),  # without accuracy or reward, entropy alone decides (18.3.1's code)
    memory=lambda s: Memory(head=s.span, tail=s.span),
    severity="failing",
    fixes=ENTROPY_FIXES,
    points=lambda s: 2 * s.span,
    shorten=halves_shortened(3),
)(_entropy_fall(converging=False))

rule(
    "entropy_converging",
    ("entropy",),
    "entropy: recent mean {recent_mean:.4g} < {threshold:.4g} (early mean {early_mean:.4g}){while}: the policy is "
    "converging, not collapsing",
    reads=(ACCURACY, TRAIN_REWARD),
    inputs=lambda _s: (("entropy",), (ACCURACY, TRAIN_REWARD)),
    memory=lambda s: Memory(head=s.span, tail=s.span),
    severity="note",
    points=lambda s: 2 * s.span,
    shorten=halves_shortened(3),
)(_entropy_fall(converging=True))


@rule(
    "entropy_drop",
    ("entropy",),
    "smoothed entropy {latest:.4g} < {threshold:.4g} (its maximum in the window {window_max:.4g})",
    reads=(ACCURACY, TRAIN_REWARD),
    inputs=lambda _s: (("entropy",),),
    # A metric is logged at most once per training step: the window holds at most window_steps + 1 points.
    memory=lambda s: Memory(tail=s.window_steps + s.span),
    fixes=ENTROPY_FIXES,
    points=span_points,
)
def _entropy_drop(s: EntropyDrop, history: History, context: RunContext) -> Finding | None:
    series = history["entropy"]
    if series.count < s.span:
        return None
    # The smoothed values whose last point lies in the window (the span - 1 points before it are read too).
    latest, window_max, first, means = series.smoothed_window(s.span, series.steps[-1] - s.window_steps)
    threshold = (1 - s.fall) * window_max
    if latest >= threshold:
        return NOT_HOLDING
    # Falling while the accuracy (else the reward) rose over the same steps is convergence.
    found = progress(history, context, s.span, since=first)
    if found is not None and found.rose(s.rise):
        return NOT_HOLDING
    values_out = {"latest": latest, "window_max": window_max, "threshold": threshold}
    return Finding(True, values_out, "entropy", points=means + s.span - 1, first_step=first)


@rule(
    "entropy_decline",
    ("entropy",),
    "smoothed entropy {latest:.4g} < {threshold:.4g} (initial mean {initial:.4g})",
    memory=lambda s: Memory(head=s.span, tail=s.span),
    fixes=ENTROPY_FIXES,
    points=span_points,
)
def _entropy_decline(s: EntropyDecline, history: History, _: RunContext) -> Finding | None:
    series = history["entropy"]
    if series.count < s.span:
        return None
    initial, latest = series.mean_first(s.span), series.mean_last(s.span)
    threshold = (1 - s.fall) * initial
    if latest >= threshold:
        return NOT_HOLDING
    values = {"initial": initial, "latest": latest, "threshold": threshold}
    points = min(series.count, 2 * s.span)  # the first and the last span overlap on a short history
    return Finding(latest < threshold, values, "entropy", points=points, first_step=series.start)


def _entropy_exploding_fixes(words: Mapping[str, str]) -> tuple[str, ...]:
    if words.get("truncated") == "no":
        return ("lower_lr", "fewer_updates", "clip_higher")
    return ("overlong_filter", "overlong_shaping", "lower_lr", "clip_higher")


@rule(
    "entropy_exploding",
    ("entropy",),
    "entropy: recent mean {recent_mean:.4g} > {threshold:.4g} (early mean {early_mean:.4g}): entropy is exploding",
    reads=(CLIPPED,),
    inputs=lambda _s: (("entropy",),),
    memory=lambda s: Memory(head=s.span, tail=s.span),
    severity="failing",
    fixes=_entropy_exploding_fixes,
    shorten=halves_shortened(4),
    points=lambda s: 2 * s.span,
)
def _entropy_exploding(s: EntropyExploding, history: History, _: RunContext) -> Finding | None:
    series = history["entropy"]
    if series.count < 2 * s.span:  # the start and the recent span must not overlap
        return None
    early, recent = series.mean_first(s.span), series.mean_last(s.span)
    threshold = s.factor * early
    if recent <= threshold:
        return NOT_HOLDING
    values = {"early_mean": early, "recent_mean": recent, "threshold": threshold}
    # Figure 18-8's cause is truncated samples; without truncation, the updates themselves are too large.
    clipped = history[CLIPPED]
    truncated = "unknown" if not clipped.count else "yes" if clipped.mean_last(s.span) >= s.truncated else "no"
    words = {"truncated": truncated}
    return Finding(recent > threshold, values, "entropy", words, points=2 * s.span, first_step=series.start)
