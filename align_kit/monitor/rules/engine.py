"""The engine: `HealthMonitor.update(step, metrics)` takes the dict TRL logs at one logging step (eval metrics,
prefixed `eval_`, may come in their own call) and returns the alerts raised at that step.

Episodes: a rule fires once when its condition becomes true, stays silent while the condition holds, and re-arms
only after an evaluation finds the condition false again. A rule is evaluated only on calls that carry one of its
trigger metrics, and only once its history is long enough; an absent metric (missing key, None or a non-finite
value) leaves the rule's state unchanged, except for a rule that reads non-finite values (`Rule.reads_non_finite`).

The engine knows rules only by what they declare (`Rule`'s fields); their table is `RULES`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from align_kit.monitor.rules.base import (
    EVAL_REWARD,
    MAX_ATTAINABLE,
    REGISTRY,
    TRAIN_REWARD,
    Alert,
    Finding,
    History,
    Recovery,
    Rule,
    RuleCoverage,
    Series,
)
from align_kit.monitor.rules.context import RunContext
from align_kit.monitor.rules.fixes import in_terms
from align_kit.monitor.rules.over_run import Trend
from align_kit.monitor.rules.table import RULES
from align_kit.monitor.settings import HealthMonitorConfig


class HealthMonitor:
    """Evaluates the rules on each logging step; the caller acts on the returned alerts.

    Its state is bounded by what the rules read (`Rule.memory`), whatever the run's length; `state_dict` /
    `load_state_dict` carry it over a resume without replaying the history. At the end of a history, `finish`
    lets the level rules judge a run shorter than their span, `coverage` says which rules could judge and why
    the others could not, and `artefacts` names the metrics logged in a way the rules must not read."""

    def __init__(
        self,
        config: HealthMonitorConfig,
        max_completion_length: int | None = None,
        reward_max: float = 1.0,
        context: RunContext | None = None,
        framework: str = "align_kit",
    ):
        self.config = config
        self.context = context or RunContext(max_completion_length=max_completion_length, reward_max=reward_max)
        # The terms the alerts' advice is written in (rules/fixes.py): align_kit's config nodes, or GRPOConfig's
        # fields for the plain-TRL callback.
        self.framework = framework
        self._triggers = {rule.name: rule.triggers(getattr(config, rule.name)) for rule in RULES}
        self._watched = frozenset(name for rule in RULES for name in (*self._triggers[rule.name], *rule.reads))
        self._memory = _memory_per_metric(config, self._triggers)
        self._rules = [(rule, getattr(config, rule.name), frozenset(self._triggers[rule.name])) for rule in RULES]
        # What `update` reads of each rule, looked up once: (rule, settings, triggers, name, check, kind).
        self._plan = [
            (rule, settings, triggers, rule.name, rule.check, _kind(rule)) for rule, settings, triggers in self._rules
        ]
        self.history = History(max(rule.pairs(getattr(config, rule.name)) for rule in RULES))
        self._in_episode: set[str] = set()
        self._recovers = {rule.name: rule.recovers for rule in RULES}
        self._opened: dict[str, int] = {}  # rule -> the step its open episode's alert fired
        # rule -> the steps its alerts fired, for the rules judged against the whole history at the end
        self._fired_at: dict[str, list[int]] = {}
        self.recoveries: list[Recovery] = []  # episodes whose condition the run reversed, in order
        self._judged: set[str] = set()  # rules whose check reached a decision
        self._fired: set[str] = set()
        self._seen: set[str] = set()  # watched metrics logged at least once (a NaN counts: non_finite reads it)

    @classmethod
    def from_plan(cls, plan) -> HealthMonitor:
        return cls(plan.monitor, context=RunContext.from_plan(plan))

    def update(self, step: int, metrics: Mapping[str, float | None]) -> list[Alert]:
        if not self.config.enabled:
            return []
        present = {}
        seen, history, isfinite = self._seen, self.history, math.isfinite
        for name in self._watched.intersection(metrics):
            value = metrics[name]
            if value is None:
                continue
            seen.add(name)
            if type(value) is not float:  # most values are floats already: the rest are checked and converted
                if not isinstance(value, int | float):
                    continue
                value = float(value)
            if isfinite(value):
                present[name] = value
                series = history.get(name)
                if series is None:
                    head, tail, best_spans = self._memory.get(name, (0, 0, frozenset()))
                    series = history[name] = Series(head, tail, best_spans)
                series.append(step, value)
        ceiling = metrics.get(MAX_ATTAINABLE)
        if isinstance(ceiling, int | float) and math.isfinite(ceiling):  # a format schedule moves the maximum
            self.context = replace(self.context, reward_max=float(ceiling))
        # A train reward logged at an evaluation's step belongs to the interval that evaluation closes.
        if TRAIN_REWARD in present:
            self.history.train_eval.add_train(present[TRAIN_REWARD])
        if EVAL_REWARD in present:
            self.history.train_eval.add_eval(present[EVAL_REWARD])
        self.history.grad_norm_zeros.add(metrics)
        self.history.spreadless.add(metrics)
        self.history.latest, self.history.step = metrics, step
        alerts = []
        context, judged, in_episode = self.context, self._judged, self._in_episode
        for rule, settings, triggers, name, check, kind in self._plan:
            # A rule that reads non-finite values judges a NaN too; every other needs a finite value of a trigger.
            if kind is _METRICS:
                if triggers.isdisjoint(present):
                    continue
            elif kind is _SETUP:
                if name in judged:
                    continue
            elif not any(metrics.get(trigger) is not None for trigger in triggers):
                continue
            finding = check(settings, history, context)
            if finding is None:
                continue
            judged.add(name)
            if not finding.holds:
                if name in in_episode:
                    self._close(name, step)
            elif name not in in_episode:
                self._open(name, step)
                alerts.append(self._alert(rule, settings, finding, step))
        return alerts

    def _open(self, name: str, step: int) -> None:
        self._in_episode.add(name)
        self._opened[name] = step
        if REGISTRY[name].reversed_over_run is not None:
            self._fired_at.setdefault(name, []).append(step)

    def _close(self, name: str, step: int) -> None:
        if name in self._in_episode:
            self._in_episode.discard(name)
            fired = self._opened.pop(name, None)
            if fired is not None and self._recovers[name]:
                self.recoveries.append(Recovery(name, fired, step))

    def finish(self, over_run: Trend | None = None) -> list[Alert]:
        """The end of the history: each rule that never judged because the run logged fewer points than it reads
        during a run judges once on the points there are, when they are at least the fewest it can judge from
        (`Rule.shorten`); its message says so. With `over_run` (the whole history's trend, from a caller that holds
        every point), each rule that reads it (`Rule.over_run`) and is not in an episode judges it once: an episode a
        later window closed (a decline whose latest points rose by noise) does not outweigh the whole history. Every
        episode the rest of the run reversed is in `recoveries`."""
        if not self.config.enabled:
            return []
        alerts = []
        for rule, settings, _ in self._rules:
            if rule.shorten is None or rule.name in self._judged:
                continue
            points = self._points(rule, settings)[0]
            needed = rule.needs(settings)
            shortened = rule.shorten(settings, points) if points < needed else None
            if shortened is None:
                continue
            finding = rule.check(shortened, self.history, self.context)
            if finding is None:
                continue
            self._judged.add(rule.name)
            if finding.holds and rule.name not in self._in_episode:
                self._open(rule.name, self.history.step)
                if rule.level:
                    note = f" (over {points} logged points, fewer than the span {needed})"
                else:
                    note = f" (judged at the end on {points} logged points, fewer than the {needed} it reads)"
                alerts.append(self._alert(rule, settings, finding, self.history.step, note, points))
        if over_run is not None:
            alerts += self._judge_over_run(over_run)
        self._reversed_over_run()
        return alerts

    def _judge_over_run(self, over_run: Trend) -> list[Alert]:
        alerts = []
        for rule, settings, _ in self._rules:
            if rule.over_run is None or rule.name in self._in_episode:  # still firing: said already
                continue
            finding = rule.over_run(settings, over_run, self.context)
            if finding is None:
                continue
            self._judged.add(rule.name)
            if finding.holds:
                finding.first_step = self.history[finding.metric].start
                self._open(rule.name, self.history.step)
                note = f" (read once over the whole history: {over_run.points} logged points)"
                alerts.append(self._alert(rule, settings, finding, self.history.step, note, over_run.points))
        return alerts

    def _reversed_over_run(self) -> None:
        """Each alert of a rule that the whole history reversed (`Rule.reversed_over_run`) becomes a recovered
        episode, from the step it fired to the last step."""
        for rule, settings, _ in self._rules:
            fired = self._fired_at.get(rule.name)
            if not fired or not rule.reversed_over_run(settings, self.history, self.context):
                continue
            self.recoveries += [Recovery(rule.name, step, self.history.step) for step in fired]
            self._fired_at.pop(rule.name)
            self._in_episode.discard(rule.name)
            self._opened.pop(rule.name, None)

    def coverage(self) -> list[RuleCoverage]:
        """Per rule, in RULES order: whether it judged, whether it fired, and when it did not judge, why."""
        covered = []
        for rule, settings, _ in self._rules:
            groups = rule.metric_groups(settings)
            missing = tuple(" or ".join(group) for group in groups if not self._seen.intersection(group))
            judged = rule.name in self._judged and self.config.enabled
            covered.append(
                RuleCoverage(
                    rule.name,
                    judged,
                    rule.name in self._fired,
                    "" if judged else self._reason(rule, settings, missing),
                    missing,
                )
            )
        return covered

    def artefacts(self) -> list[str]:
        """One line per metric the run logs in a way no rule should read as what it names."""
        zeros = self.history.grad_norm_zeros
        if not zeros.artefact():
            return []
        return [
            f"grad_norm is exactly 0.0 on {zeros.zeros} of {zeros.rows} logged rows while the loss and the reward "
            f"spread (reward_std) are non-zero on {zeros.zeros_with_signal} of them: a logging artefact, not "
            "vanishing gradients (grad_norm_vanishing does not judge it)"
        ]

    def _reason(self, rule: Rule, settings: Any, missing: tuple[str, ...]) -> str:
        if not self.config.enabled:
            return "the monitor is off"
        if missing:
            return "lacks " + " and ".join(missing)
        unknown = [name for name in rule.context if getattr(self.context, name) is None]
        if unknown:
            return "needs " + " and ".join(f"{name} (unknown)" for name in unknown)
        declared = rule.unjudged(settings, self.history)
        if declared:
            return declared
        if rule.setup:
            return "judged on the first logged row: the run logged none"
        points, metric = self._points(rule, settings)
        needed, fewest = rule.needs(settings), rule.fewest(settings)
        if points < fewest:
            return f"needs {fewest} logged points of {metric}, the run has {points}"
        if points < needed:
            return (
                f"needs {needed} logged points of {metric} during a run and {fewest} at its end, the run has {points}"
            )
        return "its check never reached a decision on the points logged"

    def _points(self, rule: Rule, settings: Any) -> tuple[int, str]:
        """The fewest finite logged points among the metrics the rule needs (each group's best alternative)."""
        counts = []
        for group in rule.metric_groups(settings):
            name = max(group, key=lambda n: self.history[n].count)
            counts.append((self.history[name].count, name))
        return min(counts)

    def _alert(
        self, rule: Rule, settings: Any, finding: Finding, step: int, note: str = "", points: int | None = None
    ) -> Alert:
        self._fired.add(rule.name)
        series = self.history[finding.metric]
        # What the finding says it read, else the rule's last `needs` points (or `points`), as far as logged.
        read = finding.points if finding.points is not None else min(points or rule.needs(settings), series.count)
        first_step = finding.first_step if finding.first_step is not None else series.step_of_last(read)
        words = dict(finding.words)
        fixes = rule.fixes_for(words)
        alert = Alert(
            step=step,
            rule=rule.name,
            action=settings.action,
            values=finding.values,
            message=rule.message.format(metric=finding.metric, **words, **finding.values) + note,
            advice=in_terms(fixes, self.framework, self.context) if fixes else "",
            metric=finding.metric,
            severity=finding.severity or rule.severity,
            first_step=first_step,
            points=read,
            fixes=fixes,
            words=words,
        )
        return alert

    def state_dict(self) -> dict[str, Any]:
        """Everything a later `update` depends on, JSON-safe; `memory` says what it was kept for."""
        return {
            "memory": self._memory_json(),
            "reward_max": self.context.reward_max,
            "in_episode": sorted(self._in_episode),
            "opened": dict(sorted(self._opened.items())),
            "recoveries": [[item.rule, item.fired, item.recovered] for item in self.recoveries],
            "fired_at": {name: list(steps) for name, steps in sorted(self._fired_at.items())},
            "series": {name: series.state_dict() for name, series in self.history.items()},
            "train_eval": self.history.train_eval.state_dict(),
            "grad_norm_zeros": self.history.grad_norm_zeros.state_dict(),
            "spreadless": self.history.spreadless.state_dict(),
            "judged": sorted(self._judged),
            "fired": sorted(self._fired),
            "seen": sorted(self._seen),
            "step": self.history.step,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> bool:
        """Continue from `state`; False (nothing loaded) when it was kept for other rule settings, whose windows
        it may not cover."""
        if state.get("memory") != self._memory_json():
            return False
        self.context = replace(self.context, reward_max=state["reward_max"])
        self._in_episode = set(state["in_episode"])
        self._opened = {name: int(step) for name, step in state.get("opened", {}).items()}  # older states lack it
        self.recoveries = [Recovery(*item) for item in state.get("recoveries", ())]
        self._fired_at = {name: [int(step) for step in steps] for name, steps in state.get("fired_at", {}).items()}
        for name, saved in state["series"].items():
            head, tail, best_spans = self._memory.get(name, (0, 0, frozenset()))
            self.history[name] = Series(head, tail, best_spans)
            self.history[name].load_state_dict(saved)
        self.history.train_eval.load_state_dict(state["train_eval"])
        # Saved before these were kept: what the series say.
        if "grad_norm_zeros" in state:
            self.history.grad_norm_zeros.load_state_dict(state["grad_norm_zeros"])
        if "spreadless" in state:  # states saved before it was counted start it from 0
            self.history.spreadless.load_state_dict(state["spreadless"])
        self._judged, self._fired = set(state.get("judged", ())), set(state.get("fired", ()))
        self._seen = set(state.get("seen", state["series"]))
        self.history.step = state.get("step", 0)
        return True

    def _memory_json(self) -> dict[str, Any]:
        return {
            "series": {name: [head, tail, sorted(spans)] for name, (head, tail, spans) in sorted(self._memory.items())},
            "train_eval_window": self.history.train_eval.pairs.maxlen,
        }


# How `update` decides whether a rule is evaluated on a call: a finite trigger logged, once (a setup rule), or any
# trigger logged, finite or not (a rule that reads non-finite values).
_METRICS, _SETUP, _NON_FINITE = "metrics", "setup", "non_finite"


def _kind(rule: Rule) -> str:
    return _SETUP if rule.setup else _NON_FINITE if rule.reads_non_finite else _METRICS


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
