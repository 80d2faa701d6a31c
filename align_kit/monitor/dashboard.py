"""The dashboard of the policy-optimization chapter (18.3.7), with the window's alerts appended.

One block per generation step, at most every `trainer.logging_steps`: the mini-steps that reuse a
generation's samples log no reward, so their values join the next printed block (the mean over
the window since the last block) instead of printing lines of `-`.

[Step 150/500] loss=0.42 reward_avg=0.625 format_reward_avg=0.875
  kl=0.003 tok/sec=2450.3 avg_resp_len=287.4
  adv_avg=0.00 adv_std=0.82 entropy_avg=0.47 policy_ratio=1.02
  ALERT entropy_collapse (warn): <message>; advice: <advice>
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from align_kit.monitor.rules import Alert

MISSING = "-"
# A logged step that carries this metric generated (and scored) completions.
GENERATION_METRIC = "reward"

# (label, logged metric, decimals), one tuple per printed line.
DASHBOARD_FIELDS: tuple[tuple[tuple[str, str, int], ...], ...] = (
    (("loss", "loss", 2), ("reward_avg", "reward", 3), ("format_reward_avg", "rewards/format/mean", 3)),
    (("kl", "kl", 3), ("tok/sec", "tokens_per_sec", 1), ("avg_resp_len", "completions/mean_length", 1)),
    (
        ("adv_avg", "adv/mean", 2),
        ("adv_std", "adv/std", 2),
        ("entropy_avg", "entropy", 2),
        ("policy_ratio", "policy_ratio/mean", 2),
    ),
)


DASHBOARD_METRICS = tuple(metric for line in DASHBOARD_FIELDS for _, metric, _ in line)


def _format(value: float | None, decimals: int) -> str:
    if value is None or not math.isfinite(value):
        return MISSING
    text = f"{value:.{decimals}f}"
    # Group-normalised advantages average about zero: print 0.00, not -0.00.
    return text.removeprefix("-") if float(text) == 0 else text


def dashboard_line(
    step: int, max_steps: int | None, metrics: Mapping[str, float | None], alerts: Sequence[Alert] = ()
) -> str:
    """The dashboard text for one logging step; `max_steps` None or <= 0 (unknown) shows as `-`."""
    total = str(max_steps) if max_steps is not None and max_steps > 0 else MISSING
    lines = [
        " ".join(f"{label}={_format(metrics.get(metric), decimals)}" for label, metric, decimals in fields)
        for fields in DASHBOARD_FIELDS
    ]
    lines[0] = f"[Step {step}/{total}] {lines[0]}"
    lines[1:] = [f"  {line}" for line in lines[1:]]
    lines += [f"  {alert_line(alert)}" for alert in alerts]
    return "\n".join(lines)


def alert_line(alert: Alert) -> str:
    return f"ALERT {alert.rule} ({alert.action}): {alert.message}; advice: {alert.advice}"


class Dashboard:
    """Collects the logged training steps of one window and prints them on a generation step.

    The window is kept as a running sum and count per dashboard metric, so a step costs the same however long
    the window. Alerts are never held back: on a step that prints no block they print on their own lines."""

    def __init__(self) -> None:
        self._sums: dict[str, tuple[float, int]] = {}

    def update(
        self, step: int, max_steps: int | None, metrics: Mapping[str, float | None], alerts: Sequence[Alert] = ()
    ) -> str | None:
        """The text to print after this logged training step, or None."""
        for metric in DASHBOARD_METRICS:
            value = metrics.get(metric)
            if value is not None and math.isfinite(value):
                total, count = self._sums.get(metric, (0.0, 0))
                self._sums[metric] = (total + value, count + 1)
        if metrics.get(GENERATION_METRIC) is None:
            return "\n".join(alert_line(alert) for alert in alerts) or None
        block = dashboard_line(step, max_steps, self.window_means(), alerts)
        self._sums = {}
        return block

    def window_means(self) -> dict[str, float]:
        """Per dashboard metric, the mean of its finite values over the window's logged steps so far."""
        return {metric: total / count for metric, (total, count) in self._sums.items()}
