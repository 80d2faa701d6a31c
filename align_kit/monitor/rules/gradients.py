"""Gradient and loss rules: a non-finite loss or gradient (16.6.5), gradients that vanished (table 16-6)."""

from __future__ import annotations

import math
from dataclasses import replace

from align_kit.monitor.rules.base import (
    NOT_HOLDING,
    Finding,
    History,
    last_window,
    rule,
    window_points,
    window_shortened,
)
from align_kit.monitor.rules.context import RunContext
from align_kit.monitor.settings import (
    GradNormVanishing,
    NonFinite,
)


@rule(
    "non_finite",
    lambda s: tuple(s.metrics),
    "{metric} is {value}: the first non-finite value among {checked}",
    severity="failing",
    fixes=("lower_lr", "fix_reward"),
    reads_non_finite=True,  # its whole point is a NaN or infinite value
    recovers=False,
)
def _non_finite(s: NonFinite, history: History, _: RunContext) -> Finding | None:
    latest, first = history.latest, None
    for name in s.metrics:  # in the order a step computes them: the first non-finite one is named
        value = latest.get(name)
        if value is None:
            continue
        first = first or name
        if not math.isfinite(float(value)):
            words = {"value": str(float(value)), "checked": ", ".join(s.metrics)}
            return Finding(True, {}, name, words, points=1, first_step=history.step)
    return None if first is None else NOT_HOLDING


# On 1 or 2 logged points only a norm of exactly 0 (as logged) is read as vanished: too few points to read a small
# norm as a trend, but a step whose gradient is exactly 0 moved nothing, and such an excerpt is all the log has.
EXACTLY_ZERO = 1e-12
_FEWEST_FOR_FLOOR = 3  # the points from which the rule reads its `floor` at the end of a short run


def _vanishing_shortened(s: GradNormVanishing, points: int) -> GradNormVanishing | None:
    if points >= _FEWEST_FOR_FLOOR:
        return window_shortened(_FEWEST_FOR_FLOOR)(s, points)
    return replace(s, window=points, floor=min(s.floor, EXACTLY_ZERO)) if points >= 1 else None


@rule(
    "grad_norm_vanishing",
    ("grad_norm",),
    "grad_norm stayed below {floor:g} (window max {window_max:.3g})",
    memory=last_window,
    fixes=("ngrpo", "dynamic_sampling", "fix_reward"),
    points=window_points,
    shorten=lambda s, points: _vanishing_shortened(s, points),
    unjudged=lambda _s, history: (
        "grad_norm is a logging artefact (exactly 0.0 while the loss and reward_std are not)"
        if history.grad_norm_zeros.artefact()
        else ""
    ),
)
def _grad_norm_vanishing(s: GradNormVanishing, history: History, _: RunContext) -> Finding | None:
    series = history["grad_norm"]
    if series.count < s.window:
        return None
    window_max = max(series.last(s.window))
    if window_max == 0.0 and history.grad_norm_zeros.artefact():
        return None  # a logging artefact (GradNormZeros), not vanished gradients: the rule cannot judge
    if window_max >= s.floor:
        return NOT_HOLDING
    return Finding(True, {"window_max": window_max, "floor": s.floor}, "grad_norm")
