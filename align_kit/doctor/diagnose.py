"""A run's logged history replayed through the live health monitor (`align_kit.monitor.rules`, unchanged: one
implementation of every rule), then a verdict, the timeline of what fired, which rules could judge and the advice.

Verdict: failing when an alert of severity failing fired; warning when a warning fired; unjudged when nothing fired
but no rule could judge the history, or none could judge whether the run learns (its reward's trend: a healthy
verdict the doctor never established is not given, nor a warning nothing raised); healthy otherwise, saying how many
rules judged. The summary ends with the central questions answered and not (questions.py). Alerts whose
action is `log` are notes: listed in the timeline, not counted in the verdict and not advised on.

The reward scale (`reward_min`, `reward_max`): what the caller or the log states; else none is assumed, whatever
the rewards' values: the reward rules judge the run against its own noise (monitor/rules/own_noise.py), so a run
gets the same verdict on any scale (a * reward + b, a > 0), and the notes say so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from align_kit.doctor.advice import Advice, advise
from align_kit.doctor.budget import inferred_budget
from align_kit.doctor.budget_first import budget_first
from align_kit.doctor.history import RunHistory
from align_kit.doctor.keymaps import finite_number
from align_kit.doctor.questions import LEARNS, answered, questions_line, why_unanswered
from align_kit.monitor.rules import Alert, HealthMonitor, Recovery, RuleCoverage, RunContext
from align_kit.monitor.rules.base import ACCURACY, MEAN_LENGTH, TRAIN_REWARD, fmean
from align_kit.monitor.rules.context import count
from align_kit.monitor.rules.over_run import LEARNED, TASK_FELL, TASK_FLAT, Trend, trend
from align_kit.monitor.rules.own_noise import RISE_T, rise_t
from align_kit.monitor.settings import HealthMonitorConfig

SCALE_FREE = (
    "reward scale not stated: the reward rules judged the run against its own noise (a flat or rising reward by its "
    "slope's standard error, a decline by the range its rewards covered), so the verdict is the same on any scale; "
    "flat groups are not called too easy or too hard (pass --reward-max/--reward-min to judge shares of the range)"
)
# In the order the worst of several runs is taken: a run nothing judged outranks a healthy one (the set is not shown
# healthy), a warning outranks both.
VERDICTS = ("healthy", "unjudged", "warning", "failing")


@dataclass
class Diagnosis:
    history: RunHistory
    verdict: str  # healthy | unjudged | warning | failing
    summary: str  # the verdict line's reason
    alerts: list[Alert]  # the timeline, in step order, notes (action log) included
    coverage: list[RuleCoverage]
    artefacts: list[str]
    advice: list[Advice]
    notes: list[str] = field(default_factory=list)  # how the doctor read it (reward scale assumed, ...)
    context: RunContext | None = None
    questions: dict[str, bool] = field(default_factory=dict)  # the central questions -> answered (questions.py)

    @property
    def counted(self) -> list[Alert]:
        """The alerts that decide the verdict (not the `log` notes)."""
        return [alert for alert in self.alerts if alert.action != "log"]

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]


EXIT_CODES = {"healthy": 0, "warning": 1, "failing": 3, "unjudged": 4}


def worst(verdicts: Iterable[str]) -> str:
    return max(verdicts, key=VERDICTS.index, default="healthy")


class Replay:
    """The monitor fed a history row by row (`feed`), then `finish`: the same path for a whole file (`diagnose`)
    and for a growing one (`--follow`)."""

    def __init__(
        self,
        history: RunHistory,
        config: HealthMonitorConfig | None = None,
        max_completion_length: int | None = None,
        reward_max: float | None = None,
        reward_min: float | None = None,
    ):
        self.history = history
        stated = history.context
        self.scale_stated = (
            reward_max if reward_max is not None else finite_number(stated.get("reward_max"))
        ) is not None
        self.budget_note = ""
        if max_completion_length is None and count(stated.get("max_completion_length")) is None:
            inferred = inferred_budget(history.rows)  # no option, no statement: the lengths' own cap, said so
            if inferred is not None:
                max_completion_length, how = inferred
                self.budget_note = f"length budget not stated: inferred as {max_completion_length} ({how})"
        self.context = RunContext.from_stated(stated, max_completion_length, reward_max, reward_min)
        self.monitor = HealthMonitor(config or HealthMonitorConfig(), context=self.context)
        self.alerts: list[Alert] = []
        self.rewarded = False  # whether a finite reward was logged

    def feed(self, rows: Iterable[tuple[int, Mapping[str, float]]]) -> list[Alert]:
        fired: list[Alert] = []
        for step, row in rows:
            reward = row.get("reward")
            self.rewarded = self.rewarded or (reward is not None and math.isfinite(reward))
            fired += self.monitor.update(step, row)
        self.alerts += fired
        return fired

    def finish(self) -> Diagnosis:
        learning = self._trend()
        self.alerts += self.monitor.finish(learning)
        alerts = _recovered(sorted(self.alerts, key=lambda alert: alert.step), self.monitor.recoveries)
        alerts = [_saturation_noted(alert) for alert in alerts]
        learned = _rose_over_run(self.history)
        if learned is not None:
            alerts = [_cut_while_learning(alert, learned) for alert in alerts]
        coverage = list(self.monitor.coverage())
        notes = [SCALE_FREE] if not self.scale_stated and self.rewarded else []
        notes += [self.budget_note] if self.budget_note else []
        artefacts = list(self.monitor.artefacts())
        return _conclude(self.history, alerts, coverage, artefacts, notes, self.context, learning)

    def _trend(self) -> Trend | None:
        """The reward's trend over every logged point (over_run.py), when no range is stated: the doctor holds the
        whole history, the live monitor only its windows."""
        if self.context.reward_scale_stated:
            return None
        rewards, accuracies = (
            [value for _, row in self.history.rows if (value := finite_number(row.get(name))) is not None]
            for name in (TRAIN_REWARD, ACCURACY)
        )
        return trend(rewards, accuracies)


def _recovered(alerts: list[Alert], recoveries: list[Recovery]) -> list[Alert]:
    """Each alert whose condition the rest of the run reversed, judged against the whole history: a note (action
    log) saying the span of the episode, not the verdict (an entropy dip that recovered, a flat reward that later
    rose)."""
    spans = {(item.rule, item.fired): item.recovered for item in recoveries}
    kept = []
    for alert in alerts:
        until = spans.get((alert.rule, alert.step))
        if until is not None:
            alert = replace(
                alert,
                action="log",
                message=f"{alert.message} [recovered: an episode from step {alert.step} to {until}, which the rest "
                "of the run reversed]",
                words={**alert.words, "recovered": str(until)},
            )
        kept.append(alert)
    return kept


def _saturation_noted(alert: Alert) -> Alert:
    """Flat groups because every completion reached the ceiling (no_signal's `saturated` state): the run learned
    what its data holds, a note saying so, not the verdict (the chapters' no signal is a run that never could learn)."""
    if alert.words.get("state") != "saturated" or alert.action == "log":
        return alert
    return replace(alert, action="log", message=f"{alert.message} [saturated: a state of a run that learned, a note]")


# The rules that say completions are cut at the length budget.
TRUNCATION_RULES = ("length_near_max", "length_pinned", "all_truncated")
# Points of the reward at the run's start and at its end compared to tell whether it learned.
ENDS = 10


def _rose_over_run(history: RunHistory) -> float | None:
    """Welch's t of the reward's last ENDS points over its first ENDS, when it rose by more than RISE_T (a run that
    learned, on any scale) while the mean completion length's last ENDS points fell below its first ENDS (the cut
    receding); None otherwise or with fewer than 2 x ENDS points of either."""
    rewards, lengths = (
        [row[name] for _, row in history.rows if math.isfinite(row.get(name, math.nan))]
        for name in ("reward", MEAN_LENGTH)
    )
    if min(len(rewards), len(lengths)) < 2 * ENDS or fmean(lengths[-ENDS:]) >= fmean(lengths[:ENDS]):
        return None
    t = rise_t(rewards[:ENDS], rewards[-ENDS:])
    return t if t > RISE_T else None


def _cut_while_learning(alert: Alert, t: float) -> Alert:
    """Completions cut at the budget in a run whose reward rose over the run: the cut did not stop it learning (as
    in Unsloth's notebooks, cut at 200 tokens while the reward climbs), a note; where the reward is flat or falls,
    the truncation stands as the rule's severity."""
    if alert.rule not in TRUNCATION_RULES or alert.action == "log":
        return alert
    note = (
        f" [the reward rose over the run (Welch t {t:.1f} of its last {ENDS} points over its first) and the lengths "
        "came down from the budget: cut while it learns, a note]"
    )
    return replace(alert, action="log", message=alert.message + note)


def _conclude(
    history: RunHistory,
    alerts: list[Alert],
    coverage: list[RuleCoverage],
    artefacts: list[str],
    notes: list[str],
    context: RunContext,
    learning: Trend | None = None,
) -> Diagnosis:
    counted = [alert for alert in alerts if alert.action != "log"]
    judged = sum(item.judged for item in coverage)
    failing = sorted({alert.rule for alert in counted if alert.severity == "failing"})
    warning = sorted({alert.rule for alert in counted if alert.severity != "failing"})
    answers = answered(coverage)
    if failing:
        verdict, summary = (
            "failing",
            f"failing: {', '.join(failing)}" + (f"; warnings: {', '.join(warning)}" * bool(warning)),
        )
    elif warning:
        verdict, summary = "warning", f"warning: {', '.join(warning)}"
    elif not judged:
        verdict = "unjudged"
        summary = f"unjudged: read, but no rule could judge this history (0 of {len(coverage)} rules judged; see below)"
    elif not answers[LEARNS]:  # nothing fired, but nothing judged the trend either: not shown healthy
        verdict = "unjudged"
        summary = (
            f"unjudged: nothing fired ({judged} of {len(coverage)} rules judged), but whether the run learns could "
            f"not be judged ({why_unanswered(LEARNS, coverage)})"
        )
    elif learning is not None and learning.state != LEARNED:
        # Over a whole history with no stated range, only a rise establishes that the run learns (over_run.py).
        answers[LEARNS] = False
        verdict = "unjudged"
        rise = "no rise of the task component" if learning.state in (TASK_FLAT, TASK_FELL) else "no rise"
        summary = (
            f"unjudged: nothing fired ({judged} of {len(coverage)} rules judged), but that the run learns was not "
            f"established ({learning.why}: {rise})"
        )
    else:
        verdict, summary = "healthy", f"healthy: {judged} of {len(coverage)} rules judged, none fired"
    summary = f"{summary}; {questions_line(answers)}"
    setup = context
    if setup.learning_rate is None:  # the learning rate the run logged last, when the log states none
        last = next((row["learning_rate"] for _, row in reversed(history.rows) if "learning_rate" in row), None)
        if last is not None and math.isfinite(last) and last > 0:
            setup = replace(setup, learning_rate=last)
    advice = advise(((alert.rule, tuple(alert.fixes)) for alert in counted), history.framework, setup)
    advice = budget_first(advice, history)  # every completion cut from the start: the budget before the filters
    return Diagnosis(history, verdict, summary, alerts, coverage, artefacts, advice, notes, context, answers)


def diagnose(
    history: RunHistory,
    config: HealthMonitorConfig | None = None,
    max_completion_length: int | None = None,
    reward_max: float | None = None,
    reward_min: float | None = None,
) -> Diagnosis:
    """Replay `history` through the health monitor and conclude (verdict, timeline, coverage, advice)."""
    replay = Replay(history, config, max_completion_length, reward_max, reward_min)
    replay.feed(history.rows)
    return replay.finish()
