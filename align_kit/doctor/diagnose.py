"""A run's logged history replayed through the live health monitor (`align_kit.monitor.rules`, unchanged: one
implementation of every rule), then a verdict, the timeline of what fired, which rules could judge and the advice.

Verdict: failing when an alert of severity failing fired; warning when a warning fired; unjudged when nothing fired
but no rule could judge the history, or none could judge whether the run learns (its reward's trend: a healthy
verdict the doctor never established is not given, nor a warning nothing raised); healthy otherwise, saying how many
rules judged. The summary ends with the central questions answered and not (questions.py). Alerts whose
action is `log` are notes: listed in the timeline, not counted in the verdict and not advised on.

The reward scale (`reward_min`, `reward_max`): what the caller or the log states; else, when every reward logged
lies in [0, 1], [0, 1] is assumed and the diagnosis says so; else the rules that read rewards as shares of the
range cannot judge, and the coverage says to pass --reward-max / --reward-min.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from align_kit.doctor.advice import Advice, advise
from align_kit.doctor.history import RunHistory
from align_kit.doctor.keymaps import finite_number
from align_kit.doctor.questions import LEARNS, answered, questions_line, why_unanswered
from align_kit.monitor.rules import RULES, Alert, HealthMonitor, Recovery, RuleCoverage, RunContext
from align_kit.monitor.settings import HealthMonitorConfig

# The rules whose thresholds are shares of the reward range (reward_max - reward_min).
REWARD_SCALE_RULES = ("reward_plateau", "reward_decline", "no_signal")
# Reward-scale rules that judge a run with no scale on its own spread instead (RunContext.reward_scale_stated).
SPREAD_READERS = ("reward_decline",)
# Rules whose words name the reward level (too easy / too hard): without a scale, the difficulty is unknown.
DIFFICULTY_RULES = ("zero_std_groups", "zero_advantage")
SCALE_UNKNOWN = "reward scale unknown: pass --reward-max/--reward-min"
# In the order the worst of several runs is taken: a run nothing judged outranks a healthy one (the set is not shown
# healthy), a warning outranks both.
VERDICTS = ("healthy", "unjudged", "warning", "failing")
_RULE = {rule.name: rule for rule in RULES}


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
        self.context = RunContext.from_stated(stated, max_completion_length, reward_max, reward_min)
        self.monitor = HealthMonitor(config or HealthMonitorConfig(), context=self.context)
        self.alerts: list[Alert] = []
        self.low, self.high = math.inf, -math.inf  # the range of the rewards logged

    def feed(self, rows: Iterable[tuple[int, Mapping[str, float]]]) -> list[Alert]:
        fired: list[Alert] = []
        for step, row in rows:
            reward = row.get("reward")
            if reward is not None and math.isfinite(reward):
                self.low, self.high = min(self.low, reward), max(self.high, reward)
            fired += self.monitor.update(step, row)
        self.alerts += fired
        return fired

    @property
    def scale_known(self) -> bool:
        """The reward range is stated, or every reward logged lies in [0, 1] (or none was logged)."""
        return self.scale_stated or self.high == -math.inf or (self.low >= 0.0 and self.high <= 1.0)

    def finish(self) -> Diagnosis:
        self.alerts += self.monitor.finish()
        alerts = _recovered(sorted(self.alerts, key=lambda alert: alert.step), self.monitor.recoveries)
        coverage = list(self.monitor.coverage())
        notes: list[str] = []
        if not self.scale_stated and self.high != -math.inf:
            if self.scale_known:
                notes.append(
                    "reward scale not stated: the rewards logged lie in [0, 1], so [0, 1] is assumed "
                    "(pass --reward-max/--reward-min if it differs)"
                )
            else:
                alerts, coverage = _without_scale(alerts, coverage)
                unjudged = [item.rule for item in coverage if item.reason == SCALE_UNKNOWN]
                notes.append(
                    f"{SCALE_UNKNOWN} (rewards logged from {self.low:g} to {self.high:g})"
                    + (f"; {', '.join(unjudged)} could not judge" if unjudged else "")
                )
        return _conclude(self.history, alerts, coverage, list(self.monitor.artefacts()), notes, self.context)


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


def _without_scale(alerts: list[Alert], coverage: list[RuleCoverage]) -> tuple[list[Alert], list[RuleCoverage]]:
    """Drop what the reward range decided: the reward-scale rules' alerts, and the difficulty of flat groups."""
    kept = []
    for alert in alerts:
        # no_signal's zero-spread reading and reward_decline's fall against the run's own spread need no scale.
        if alert.rule in REWARD_SCALE_RULES and alert.words.get("basis") != "spread":
            continue
        if alert.rule in DIFFICULTY_RULES and alert.words.get("difficulty"):
            words = {**alert.words, "difficulty": ""}
            alert = replace(alert, words=words, fixes=_RULE[alert.rule].fixes_for(words))
        kept.append(alert)
    # Rules that judged on a reading needing no scale: those with alerts kept, and reward_decline, which reads the
    # run's own spread whenever its rewards left [0, 1] with no range stated (the only case with no scale).
    spread = {alert.rule for alert in kept} | set(SPREAD_READERS)
    covered = [
        replace(item, judged=False, fired=False, reason=SCALE_UNKNOWN)
        if item.rule in REWARD_SCALE_RULES and item.rule not in spread
        else item
        for item in coverage
    ]
    return kept, covered


def _conclude(
    history: RunHistory,
    alerts: list[Alert],
    coverage: list[RuleCoverage],
    artefacts: list[str],
    notes: list[str],
    context: RunContext,
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
    else:
        verdict, summary = "healthy", f"healthy: {judged} of {len(coverage)} rules judged, none fired"
    summary = f"{summary}; {questions_line(answers)}"
    setup = context
    if setup.learning_rate is None:  # the learning rate the run logged last, when the log states none
        last = next((row["learning_rate"] for _, row in reversed(history.rows) if "learning_rate" in row), None)
        if last is not None and math.isfinite(last) and last > 0:
            setup = replace(setup, learning_rate=last)
    advice = advise(((alert.rule, tuple(alert.fixes)) for alert in counted), history.framework, setup)
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
