"""Feeding hand-built histories to the monitor: rows in, (step, rule) pairs out."""

from __future__ import annotations

from collections.abc import Mapping

from align_kit.monitor import HealthMonitor, HealthMonitorConfig
from align_kit.monitor.rules import Alert, RunContext


def replay(rows: list[Mapping[str, float]], context: RunContext | None = None) -> tuple[HealthMonitor, list[Alert]]:
    """The shipped defaults fed `rows` at steps 1, 2, ..., then finished: the monitor and every alert raised."""
    monitor = HealthMonitor(HealthMonitorConfig(), context=context or RunContext())
    alerts = [alert for step, row in enumerate(rows, start=1) for alert in monitor.update(step, row)]
    return monitor, alerts + monitor.finish()


def fired(alerts: list[Alert], *rules: str) -> list[tuple[int, str]]:
    """(step, rule) of the alerts of `rules` (all when none is named)."""
    return [(alert.step, alert.rule) for alert in alerts if not rules or alert.rule in rules]
