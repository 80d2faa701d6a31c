"""What every rule is made of: the metric names the rules read, an alert, the bounded history a rule reads
(`Series`, `History`), a check's `Finding`, the `Rule` itself and the registry (`rule`) each family module declares
its rules with, beside their checks and advice (verl's `@register_adv_est` shape).

A rule declares what the engine needs to know of it (`Rule`'s fields): what it reads, how many points it needs,
whether a non-finite value is its input, why it may not have judged. The engine names no rule.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from itertools import islice
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from align_kit.monitor.rules.own_noise import RISE_T, rise_t
from align_kit.monitor.rules.spreadless import SpreadlessRows


def fmean(values: Any) -> float:
    """The mean of a list of floats, as `statistics.fmean` computes it (fsum / n) without its dispatch: the rules
    take tens of means per logged step."""
    return math.fsum(values) / len(values)


if TYPE_CHECKING:
    from align_kit.monitor.rules.context import RunContext
    from align_kit.monitor.rules.over_run import Trend

# The zero-variance share: align_kit's own (from the raw reward totals) when logged, else TRL's,
# which counts a group flat only when its float32 std is below 1e-8.
FLAT_FRACTION = ("groups/flat_fraction", "frac_reward_zero_std")
# The best reward total under the weights in force, logged while a format schedule runs.
MAX_ATTAINABLE = "reward/max_attainable"
# The train/eval divergence rule pairs each evaluation with the train rewards logged since the previous one.
TRAIN_REWARD, EVAL_REWARD = "reward", "eval_reward"
# Mean |logp_train - logp_sampler|: align_kit's measure (rollout=hf with a sampler copy), or TRL's
# when rollouts come from vLLM.
LOGP_MISMATCH = ("mismatch/logp_abs_diff/mean", "sampling/sampling_logp_difference/mean")
# Mean importance-sampling ratio trainer/sampler (TRL with vLLM's IS correction).
IS_RATIO = "sampling/importance_sampling_ratio/mean"
# The reward components by role (18.3.2): the doctor maps a run's own component names to these concepts.
ACCURACY, FORMAT = "accuracy", "format"
CLIPPED = "completions/clipped_ratio"  # the share of completions cut at the length budget
MEAN_LENGTH = "completions/mean_length"
MAX_LENGTH = "completions/max_length"  # the longest completion of the batch: at a hard cap, the budget


@dataclass(frozen=True)
class Alert:
    step: int
    rule: str
    action: str  # log | warn | halt
    values: dict[str, float]  # the numbers behind the decision, thresholds included
    message: str
    advice: str
    metric: str = ""  # the logged metric the rule read
    severity: str = "warning"  # failing (the run is broken) | warning (a sign to look at): Rule.severity
    first_step: int | None = None  # the step of the first logged point the decision read
    points: int = 0  # how many logged points of `metric` it read (windows count logged points, not steps)
    fixes: tuple[str, ...] = ()  # FIX ids that fit, best first (Rule.fixes_for the finding's words)
    words: dict[str, str] = field(default_factory=dict)  # the finding's non-numeric fields (e.g. difficulty)

    def to_json(self) -> str:
        """One line of alerts.jsonl."""
        return json.dumps(asdict(self))


@dataclass(frozen=True)
class Memory:
    """What a rule reads of each of its metrics: the first `head` values, the last `tail` (with their steps), and
    the running maximum of the `best_span`-point means. Nothing older is kept, so a step costs the same at step 10
    and at step 100,000."""

    head: int = 0
    tail: int = 0
    best_span: int | None = None


class Series:
    """One metric's finite values, as far as the rules read them (`Memory`): `count` logged in all, the first
    ones, the last ones with their steps, and the best smoothed value so far."""

    # Fixed attributes: read tens of times a step by the rules, a slot is quicker to reach than a dict entry.
    __slots__ = (
        "count",
        "start",
        "head_size",
        "first",
        "steps",
        "values",
        "best",
        "_best_spans",
        "_smoothed",
        "_highest",
        "_means",
        "_head_means",
        "low",
        "high",
        "rises",
    )

    def __init__(self, head: int = 0, tail: int = 0, best_spans: frozenset[int] = frozenset()):
        self.count = 0
        self.start: int | None = None  # the step of the first value
        self.head_size = head
        self.first: list[float] = []
        self.steps: deque[int] = deque(maxlen=tail)
        self.values: deque[float] = deque(maxlen=tail)
        self.best: dict[int, float] = {}  # span -> the highest mean of `span` consecutive points so far
        self._best_spans = best_spans
        # span -> (first step, last step, mean) of each run of `span` kept values, and the count it was brought to
        self._smoothed: dict[int, tuple[deque[tuple[int, int, float]], list[int]]] = {}
        # span -> (last step, mean) of the smoothed means that are the highest of all after them: the window's
        # maximum is its first one still in the window (a monotone queue), not a pass over the window per value
        self._highest: dict[int, deque[tuple[int, float]]] = {}
        self._means: dict[int, float] = {}  # n -> the mean of the last n values, for the latest value only
        self._head_means: dict[int, float] = {}  # n -> the mean of the first n values, once all n are logged
        self.low, self.high = math.inf, -math.inf  # the range of every value logged
        self.rises = 0  # how many values in a row, up to the latest, each strictly above the one before

    def append(self, step: int, value: float) -> None:
        count = self.count = self.count + 1
        if count == 1:
            self.start = step
        if count <= self.head_size:
            self.first.append(value)
        values = self.values
        self.rises = self.rises + 1 if values and value > values[-1] else 0
        self.steps.append(step)
        values.append(value)
        if value < self.low:
            self.low = value
        if value > self.high:
            self.high = value
        if self._means:
            self._means = {}
        for span in self._best_spans:
            if count >= span:
                mean = self.mean_last(span)
                self.best[span] = max(self.best.get(span, mean), mean)

    def mean_last(self, n: int) -> float:
        """The mean of the last `n` values (of all that are kept, if fewer), computed once per logged value: several
        rules read the same window's mean at each step."""
        mean = self._means.get(n)
        if mean is None:
            mean = self._means[n] = fmean(self.last(n))
        return mean

    def mean_first(self, n: int) -> float:
        """The mean of the first `n` values (of all kept, if fewer): computed once, when the n-th arrives, since the
        first values never change after (several rules compare their window with the run's start at each step)."""
        mean = self._head_means.get(n)
        if mean is None:
            mean = fmean(self.first[:n])
            if len(self.first) >= n:
                self._head_means[n] = mean
        return mean

    def last(self, n: int) -> list[float]:
        """The last `n` values (all that are kept, if fewer)."""
        if n >= len(self.values):
            return list(self.values)
        tail = list(islice(reversed(self.values), n))  # walks n values from the end, not the whole deque
        tail.reverse()
        return tail

    def smoothed(self, span: int) -> list[tuple[int, int, float]]:
        """(first step, last step, mean) of every `span` consecutive kept values, oldest first. Each mean is computed
        once, when its last value arrives, so a rule that reads a smoothed window costs the window per step, not the
        window times the span; after a resume they are computed again from the kept values."""
        return list(self._smoothed_means(span))

    def smoothed_window(self, span: int, since: int) -> tuple[float, float, int, int] | None:
        """Of the smoothed means (`smoothed`) whose last step is `since` or later: (the latest, the highest, the
        first step the first of them reads, how many they are); None when there are none. Each step costs a constant
        on average (a monotone queue of the highest), not the window."""
        means = self._smoothed_means(span)
        start = bisect_left(means, since, key=itemgetter(1))
        if start == len(means):
            return None
        highest, oldest = self._highest[span], means[start][1]
        while highest[0][0] < oldest:
            highest.popleft()
        return means[-1][2], highest[0][1], means[start][0], len(means) - start

    def _smoothed_means(self, span: int) -> deque[tuple[int, int, float]]:
        if span not in self._smoothed:
            self._smoothed[span] = (deque(maxlen=max((self.values.maxlen or 0) - span + 1, 0)), [0])
            self._highest[span] = deque()
        means, brought_to = self._smoothed[span]
        new = min(self.count - brought_to[0], len(self.values))
        if new == 1 and len(self.values) >= span:  # one more value: one more mean, from the tail alone
            self._add_smoothed(span, (self.steps[-span], self.steps[-1], self.mean_last(span)))
            brought_to[0] = self.count
        elif new:
            values, steps = list(self.values), list(self.steps)
            for end in range(max(len(values) - new, span - 1), len(values)):
                self._add_smoothed(span, (steps[end - span + 1], steps[end], fmean(values[end - span + 1 : end + 1])))
            brought_to[0] = self.count
        return means

    def _add_smoothed(self, span: int, mean: tuple[int, int, float]) -> None:
        self._smoothed[span][0].append(mean)
        highest = self._highest[span]
        while highest and highest[-1][1] <= mean[2]:  # never again the highest: a later one is as high
            highest.pop()
        highest.append((mean[1], mean[2]))

    def step_of_last(self, n: int) -> int | None:
        """The step of the first of the last `n` values (the oldest kept, if fewer are kept)."""
        if not self.steps:
            return None
        return self.steps[max(len(self.steps) - n, 0)]

    def state_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "start": self.start,
            "first": self.first,
            "steps": list(self.steps),
            "values": list(self.values),
            "best": {str(span): value for span, value in self.best.items()},
            "range": [self.low, self.high] if self.count else None,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.count, self.first = state["count"], list(state["first"])
        self.start = state.get("start", state["steps"][0] if state["steps"] else None)  # older states lack it
        self.steps.extend(state["steps"])
        self.values.extend(state["values"])
        self._means, self._head_means = {}, {}
        kept = list(self.values)
        self.rises = next((i for i in range(len(kept) - 1) if kept[-1 - i] <= kept[-2 - i]), max(len(kept) - 1, 0))
        kept = state["values"] or [math.inf]  # saved before the range was kept: what the kept values say
        self.low, self.high = state.get("range") or (min(kept), max(state["values"] or [-math.inf]))
        self.best = {int(span): value for span, value in state["best"].items()}


NOTHING_LOGGED = Series()  # what a rule reads of a metric the run never logged


class TrainEvalPairs:
    """(mean train reward since the previous evaluation, eval reward) per evaluation, the last `window` of them.
    The train rewards of the interval in progress are a running sum: steps are logged in order, so every train
    reward logged after an evaluation belongs to the next one."""

    def __init__(self, window: int = 0):
        self.pairs: deque[tuple[float, float]] = deque(maxlen=window)
        self.total, self.points = 0.0, 0

    def add_train(self, value: float) -> None:
        self.total, self.points = self.total + value, self.points + 1

    def add_eval(self, value: float) -> None:
        if self.points:
            self.pairs.append((self.total / self.points, value))
        self.total, self.points = 0.0, 0

    def state_dict(self) -> dict[str, Any]:
        return {"pairs": [list(pair) for pair in self.pairs], "total": self.total, "points": self.points}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.pairs.extend(tuple(pair) for pair in state["pairs"])
        self.total, self.points = state["total"], state["points"]


class GradNormZeros:
    """Counts of rows whose grad_norm is exactly 0.0, and of those whose loss and reward spread (`reward_std`) are
    both non-zero. A batch with a reward spread has non-zero advantages, so an update that really moved nothing is
    implausible there: some logging set-ups report grad_norm as 0.0 throughout (e.g. where the norm is not gathered
    from the sharded optimizer). Most rows so: an artefact, and grad_norm says nothing about the gradients."""

    def __init__(self) -> None:
        self.rows = self.zeros = self.zeros_with_signal = 0

    def add(self, metrics: Mapping[str, Any]) -> None:
        grad_norm = finite(metrics.get("grad_norm"))
        if grad_norm is None:
            return
        self.rows += 1
        if grad_norm == 0.0:
            self.zeros += 1
            loss, spread = finite(metrics.get("loss")), finite(metrics.get("reward_std"))
            self.zeros_with_signal += bool(loss and spread)  # None or 0.0: no signal seen

    def artefact(self) -> bool:
        # "Most rows": more than half of the rows exactly 0.0, and more than half of those with a signal.
        return 2 * self.zeros > self.rows and 2 * self.zeros_with_signal > self.zeros

    def state_dict(self) -> dict[str, int]:
        return {"rows": self.rows, "zeros": self.zeros, "zeros_with_signal": self.zeros_with_signal}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        self.rows, self.zeros, self.zeros_with_signal = state["rows"], state["zeros"], state["zeros_with_signal"]


def finite(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


class History(dict):
    """Metric name -> Series of its finite values (bounded by what the rules read); `latest` holds the current
    call's raw metrics and `step` its step, `train_eval` the pairs the train/eval divergence rule compares."""

    latest: Mapping[str, Any] = {}
    step: int = 0

    def __init__(self, train_eval_window: int = 0):
        super().__init__()
        self.train_eval = TrainEvalPairs(train_eval_window)
        self.grad_norm_zeros = GradNormZeros()
        self.spreadless = SpreadlessRows()
        self.first_of: dict[tuple[str, ...], str] = {}  # first_logged's answers while no metric is added

    def __missing__(self, name: str) -> Series:
        return NOTHING_LOGGED  # read only: the engine stores a metric's own Series when it is first logged

    def __setitem__(self, name: str, series: Series) -> None:
        super().__setitem__(name, series)
        self.first_of.clear()  # a metric logged for the first time may be the first of its alternatives


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs ~1 us a field, and every rule makes one a step
class Finding:
    holds: bool
    values: dict[str, float]
    metric: str  # the metric read (one of the rule's alternatives)
    words: dict[str, str] = field(default_factory=dict)  # non-numeric message fields
    # What the decision read of `metric`, when not its last `Rule.needs` points (e.g. the first and the last span).
    points: int | None = None
    first_step: int | None = None
    # A milder severity than the rule's, where what it read is too little to call the run broken (one row).
    severity: str | None = None


# What a check returns when its condition does not hold (the common case, at most steps): the engine reads no more
# of it than `holds`, so one shared instance spares a Finding and its values a step. Never mutated: it never holds.
NOT_HOLDING = Finding(False, {}, "")


@dataclass(frozen=True)
class Recovery:
    """An episode the rest of the run reversed: `rule` fired at `fired` and found its condition false again at
    `recovered` (an entropy dip that recovered, a flat reward that later rose)."""

    rule: str
    fired: int
    recovered: int


@dataclass(frozen=True)
class RuleCoverage:
    """Whether a rule could judge the history it was given, and if not, why."""

    rule: str
    judged: bool  # its check reached a decision at least once
    fired: bool  # it raised an alert
    reason: str  # when not judged: "lacks entropy", "needs 20 logged points of entropy, the run has 7", ...
    missing: tuple[str, ...] = ()  # the metrics it reads that the run never logged (alternatives joined by " or ")


# A check returns None when it cannot evaluate yet, else a Finding.
Check = Callable[[Any, History, "RunContext"], Finding | None]


def halves_growth(window: list[float]) -> tuple[float, float, float]:
    """(mean of the first half, mean of the second half, growth of the second over the first): relative to the
    first half, and infinite when the first half is exactly 0 and the second is above it."""
    half = len(window) // 2
    first, second = fmean(window[:half]), fmean(window[-half:])
    growth = (second - first) / first if first > 0 else (math.inf if second > first else 0.0)
    return first, second, growth


def half_change(values: list[float]) -> float:
    """Mean of the second half minus mean of the first half (the middle point of an odd window is skipped)."""
    half = len(values) // 2
    return fmean(values[-half:]) - fmean(values[:half])


def first_logged(history: History, names: tuple[str, ...]) -> str:
    """The first of several alternative metrics that this run logs (kept until the history gains a metric: several
    rules ask at every step)."""
    found = history.first_of.get(names)
    if found is None:
        found = history.first_of[names] = next((name for name in names if history[name].count), names[0])
    return found


# FIX ids (the doctor writes each in the run's framework's terms), best first; a rule whose fitting fixes depend on
# what it found gives a function of the finding's words instead (`Rule.fixes_for`).
Fixes = tuple[str, ...] | Callable[[Mapping[str, str]], tuple[str, ...]]


@dataclass(frozen=True)
class Rule:
    name: str  # also the rule's key in HealthMonitorConfig and monitor/*.yaml
    trigger: tuple[str, ...] | Callable[[Any], tuple[str, ...]]  # evaluated on calls carrying one of these
    check: Check
    message: str  # formatted with the finding's values, words and `metric`
    reads: tuple[str, ...] = ()  # further metrics the check reads
    memory: Callable[[Any], Memory] = lambda _settings: Memory()  # what the check reads of each of its metrics
    # failing: the run is broken or trains on garbage; warning: a sign to look at; note: a fact, never a fault (its
    # fixes are none)
    severity: str = "warning"
    fixes: Fixes = ()
    # The logged points of its metrics the check needs before it decides (`needs`).
    points: Callable[[Any], int] = lambda _settings: 1
    # The metrics it cannot judge without: groups of alternatives, one of each group logged. None: its triggers
    # (alternatives of one another), then each of `reads`.
    inputs: Callable[[Any], tuple[tuple[str, ...], ...]] | None = None
    context: tuple[str, ...] = ()  # RunContext fields it cannot judge without (None there: unknown)
    # At the end of a run shorter than `needs`: the settings that judge the points there are, None when they are
    # fewer than the fewest the rule can judge from (`HealthMonitor.finish`). None: the rule never judges short runs.
    shorten: Callable[[Any, int], Any] | None = None
    # A level rule (a mean over `span` points against a threshold): shortened, it judges the mean of every point.
    level: bool = False
    # Whether a later evaluation that finds the condition false again reverses the alert (`Recovery`); False where
    # the damage stays (a NaN in the weights is not undone by finite values after it).
    recovers: bool = True
    # Judged at the end against the whole history (`HealthMonitor.finish`): whether the run as a whole reversed what
    # the rule's alerts said (the accuracy rose over the run after a window where it stalled); each of its alerts is
    # then a recovered episode. None: only a later evaluation that finds the condition false can reverse one.
    reversed_over_run: Callable[[Any, History, RunContext], bool] | None = None
    # Judged once at the end on the whole history's trend (over_run.Trend), when the caller holds every point (the
    # doctor) and the rule has not fired: a finding, or None where the reading is not the rule's to make.
    over_run: Callable[[Any, Trend, RunContext], Finding | None] | None = None
    # The evaluations it pairs with the train rewards logged since the previous one (History.train_eval keeps the
    # most any rule reads), 0 for a rule that reads none.
    pairs: Callable[[Any], int] = lambda _settings: 0
    # A setup rule judges the run's composition (`RunContext`), not its metrics: once, on the first logged row.
    setup: bool = False
    # Judged on a call whose trigger is logged but not finite (a NaN is what the rule looks for).
    reads_non_finite: bool = False
    # Why it did not judge when the generic reasons (a missing metric, too few points) do not say: a function of
    # its settings and the history, returning "" when it has nothing to add.
    unjudged: Callable[[Any, History], str] = lambda _settings, _history: ""

    def __post_init__(self) -> None:
        if self.level and self.shorten is None:
            object.__setattr__(self, "shorten", _level_shortened)

    def triggers(self, settings: Any) -> tuple[str, ...]:
        return self.trigger(settings) if callable(self.trigger) else self.trigger

    def needs(self, settings: Any) -> int:
        """How many logged points of each metric it reads the rule needs before it can decide."""
        return self.points(settings)

    def fewest(self, settings: Any) -> int:
        """The fewest logged points it can judge from: at the end of a run (`shorten`), else `needs`."""
        needed = self.needs(settings)
        if self.shorten is None:
            return needed
        return next((points for points in range(1, needed) if self.shorten(settings, points) is not None), needed)

    def fixes_for(self, words: Mapping[str, str]) -> tuple[str, ...]:
        """The FIX ids that fit what the rule found (its finding's words), best first."""
        return self.fixes(words) if callable(self.fixes) else self.fixes

    def metric_groups(self, settings: Any) -> tuple[tuple[str, ...], ...]:
        if self.setup:  # it reads the run's composition, no metric
            return ()
        if self.inputs is not None:
            return self.inputs(settings)
        return (self.triggers(settings), *((name,) for name in self.reads))


def _level_shortened(settings: Any, points: int) -> Any:
    return replace(settings, span=points) if points >= 1 else None


def halves_shortened(fewest: int, name: str = "span") -> Callable[[Any, int], Any]:
    """For a rule comparing the first and the last `name` points: on `points` >= `fewest`, half of them each."""

    def shorten(settings: Any, points: int) -> Any:
        return replace(settings, **{name: points // 2}) if points >= fewest else None

    return shorten


def window_shortened(fewest: int) -> Callable[[Any, int], Any]:
    """For a rule reading the last `window` points: on `points` >= `fewest`, all of them."""

    def shorten(settings: Any, points: int) -> Any:
        return replace(settings, window=points) if points >= fewest else None

    return shorten


def span_points(settings: Any) -> int:
    return settings.span


def window_points(settings: Any) -> int:
    return settings.window


def last_span(settings: Any) -> Memory:
    return Memory(tail=settings.span)


def last_window(settings: Any) -> Memory:
    return Memory(tail=settings.window)


# Every rule, by name, as the family modules declare them (`rule`); `RULES` orders them as HealthMonitorConfig does.
REGISTRY: dict[str, Rule] = {}


def register(declared: Rule) -> Rule:
    if declared.name in REGISTRY:
        raise ValueError(f"rule {declared.name!r} is declared twice")
    REGISTRY[declared.name] = declared
    return declared


def rule(name: str, trigger: Any, message: str, **facts: Any) -> Callable[[Check], Check]:
    """Declare the decorated check as the rule `name` (the other arguments are `Rule`'s fields); its advice is its
    fixes, in the run's framework's terms (rules/fixes.py)."""

    def declare(check: Check) -> Check:
        register(Rule(name, trigger, check, message, **facts))
        return check

    return declare


def above_threshold(names: tuple[str, ...]) -> Check:
    def check(s: Any, history: History, _: RunContext) -> Finding | None:
        metric = first_logged(history, names)
        series = history[metric]
        if series.count < s.span:
            return None
        recent = series.mean_last(s.span)
        return Finding(recent > s.threshold, {"recent_mean": recent, "threshold": s.threshold}, metric)

    return check


@dataclass(frozen=True)
class Progress:
    """How the accuracy (else the reward) moved between the first and the last points a rule compares."""

    metric: str
    early: float
    recent: float
    scale: float  # its range: 1 for the accuracy, reward_max - reward_min for the reward
    rise_t: float | None = None  # a reward with no stated range: the rise against its own noise (own_noise.py)

    @property
    def change(self) -> float:
        return self.recent - self.early

    def rose(self, share: float) -> bool:
        if self.rise_t is not None:
            return self.rise_t > RISE_T
        return self.change > share * self.scale


def progress(history: History, context: RunContext, span: int, since: int | None = None) -> Progress | None:
    """The accuracy's (else the reward's) mean over its first `span` points and over its last `span` (from the step
    `since` on, when given); None when neither has two points there."""
    for name, scale in ((ACCURACY, 1.0), (TRAIN_REWARD, context.reward_max - context.reward_min)):
        series = history[name]
        if since is None:
            values, recent, count = series.first[:span], series.last(span), series.count
        else:
            values = [value for step, value in zip(series.steps, series.values, strict=True) if step >= since]
            values, recent, count = values[:span], values[-span:], len(values)
        if count >= 2 and values and scale > 0:
            if name == TRAIN_REWARD and not context.reward_scale_stated:
                return Progress(name, fmean(values), fmean(recent), scale, rise_t(values, recent))
            return Progress(name, fmean(values), fmean(recent), scale)
    return None
