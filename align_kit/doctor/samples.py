"""The completions behind each alert, as the doctor shows them: read from a run folder's `samples/` (written by the
live monitor, align_kit/monitor/samples.py, in align_kit's trainer or the plain-TRL `HealthCallback`), a few chosen
to show the failure: the shortest and the longest, the highest and the lowest reward, and those cut at the budget.

With periodic samples (`monitor.samples.every`), "what changed": the run's first periodic samples, before the window
the worst alert read, side by side with those inside that window (reward, length, share cut, entropy, flat groups,
and a typical completion of each), so the reader sees how the writing changed, not only that a number moved."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from align_kit.monitor.samples import ALERT_PREFIX, PERIODIC_PREFIX, SAMPLES_DIR

SHOWN = 4  # completions shown under an alert
SHOWN_CHARS = 160  # of each, on the terminal (--json carries the file's text)
STRETCH_FILES = 3  # periodic files on each side of "what changed"


@dataclass
class Shown:
    """One completion shown, and why it was chosen."""

    why: str
    step: int
    prompt: str
    completion: str
    reward: float | None
    length: int | None
    truncated: bool | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class AlertSamples:
    rule: str
    step: int
    file: str
    shown: list[Shown] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "step": self.step, "file": self.file, "shown": [s.to_dict() for s in self.shown]}


def samples_folder(source: Path) -> Path | None:
    """The `samples/` folder of the run that `source` (a run folder, or a file in one) belongs to, if it has one."""
    for folder in (source, *source.parents[:2]) if source.is_dir() else source.parents[:3]:
        if (folder / SAMPLES_DIR).is_dir():
            return folder / SAMPLES_DIR
    return None


def _documents(folder: Path, prefix: str) -> list[tuple[Path, dict]]:
    found = []
    for path in sorted(folder.glob(f"{prefix}-*.json")):
        if not path.is_file():
            continue
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a file cut by a crash: the others still show
        if isinstance(document, dict) and isinstance(document.get("groups"), list):
            found.append((path, document))
    return found


def _entries(document: dict) -> list[dict]:
    rows = []
    for group in document["groups"]:
        for entry in group.get("completions", []):
            rows.append({**entry, "step": group.get("step"), "prompt": group.get("prompt", "")})
    return rows


def choose(entries: list[dict], count: int = SHOWN) -> list[Shown]:
    """Up to `count` distinct completions that show the failure: cut at the budget first (when any are), then the
    lowest and highest reward, then the shortest and longest."""
    picks: list[tuple[str, dict]] = []

    def take(why: str, entry: dict | None) -> None:
        if entry is not None and all(entry is not chosen for _, chosen in picks) and len(picks) < count:
            picks.append((why, entry))

    cut = [entry for entry in entries if entry.get("truncated")]
    take("cut at the budget", cut[0] if cut else None)
    scored = [entry for entry in entries if isinstance(entry.get("reward"), int | float)]
    take("lowest reward", min(scored, key=lambda e: e["reward"]) if scored else None)
    take("highest reward", max(scored, key=lambda e: e["reward"]) if scored else None)
    measured = [entry for entry in entries if isinstance(entry.get("length"), int)]
    take("shortest", min(measured, key=lambda e: e["length"]) if measured else None)
    take("longest", max(measured, key=lambda e: e["length"]) if measured else None)
    return [shown_entry(why, entry) for why, entry in picks]


def shown_entry(why: str, entry: dict) -> Shown:
    """A sample file's completion entry (with its group's step and prompt) as shown."""
    return Shown(
        why=why,
        step=entry.get("step"),
        prompt=str(entry.get("prompt", "")),
        completion=str(entry.get("completion", "")),
        reward=entry.get("reward"),
        length=entry.get("length"),
        truncated=entry.get("truncated"),
    )


def alert_samples(folder: Path) -> dict[tuple[str, int], AlertSamples]:
    """Each alert file of `folder` (a `samples/` folder) by (rule, step), with its chosen completions."""
    found = {}
    for path, document in _documents(folder, ALERT_PREFIX):
        rule, step = document.get("rule"), document.get("step")
        if isinstance(rule, str) and isinstance(step, int):
            found[(rule, step)] = AlertSamples(rule, step, str(path), choose(_entries(document)))
    return found


def one_line(text: str, width: int = SHOWN_CHARS) -> str:
    """A completion on one terminal line: newlines shown as ⏎, cut to `width` characters."""
    flat = text.replace("\r", "").replace("\n", " ⏎ ")
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def shown_lines(samples: AlertSamples) -> list[str]:
    lines = [f"samples: {samples.file}"]
    for shown in samples.shown:
        facts = [f"step {shown.step}"]
        if shown.reward is not None:
            facts.append(f"reward {shown.reward:.3g}")
        if shown.length is not None:
            facts.append(f"{shown.length} tokens" + (", cut" if shown.truncated else ""))
        lines.append(f"  {shown.why} ({', '.join(facts)}): {one_line(shown.completion)}")
    return lines


@dataclass
class RunSamples:
    """What a run folder holds for the doctor's alerts: `folder` its samples/ (None: it has none), `by_alert` the
    samples of each alert of the timeline (by its index), matched by rule at the nearest step."""

    run_folder: Path
    folder: Path | None
    by_alert: dict[int, AlertSamples] = field(default_factory=dict)
    changed: Changed | None = None  # the periodic samples before and inside the worst alert's window
    changed_missing: str | None = None  # why there is no "what changed", when alerts fired

    def missing_line(self) -> str:
        return (
            f"samples: none in {self.run_folder} (no samples/: a run from before align_kit wrote them, its monitor "
            "off, or a plain TRL run without align_kit's HealthCallback)"
        )


RUN_MARKERS = ("config.yaml", "metrics.jsonl", "trainer_state.json", "alerts.jsonl")


def run_folder_of(source: Path) -> Path | None:
    """The run folder (align_kit's, or a TRL output folder) that `source` is or lies in, if any."""
    for folder in (source, *source.parents[:2]) if source.is_dir() else source.parents[:2]:
        if any((folder / marker).is_file() for marker in RUN_MARKERS):
            return folder
    return None


def samples_for(source: str, alerts: list[Any]) -> RunSamples | None:
    """The samples behind `alerts` (a diagnosis's timeline) for the run read from `source`; None when `source` is no
    run folder (a pasted log, a notebook, a W&B address): there is nowhere samples could be."""
    path = Path(source)
    if source.startswith("wandb:") or not path.exists():
        return None
    run = run_folder_of(path)
    if run is None:
        return None
    folder = run / SAMPLES_DIR if (run / SAMPLES_DIR).is_dir() else None
    found = RunSamples(run, folder)
    if folder is None:
        return found
    found.changed, found.changed_missing = what_changed(folder, alerts)
    files = alert_samples(folder)
    for index, alert in enumerate(alerts):
        steps = [step for rule, step in files if rule == alert.rule]
        if steps:
            nearest = min(steps, key=lambda step: (abs(step - alert.step), step > alert.step))
            found.by_alert[index] = files[(alert.rule, nearest)]
    return found


@dataclass
class Stretch:
    """Periodic samples of one stretch of the run, summed up: means over their completions (None: not recorded)."""

    steps: list[int]
    completions: int
    reward: float | None
    length: float | None
    cut: float | None  # share cut at the budget
    entropy: float | None  # mean of the completions' mean token entropies, where computed
    flat_groups: float | None  # share of groups whose completions all got the same reward
    typical: Shown | None  # the completion of median length (else the first)

    def to_dict(self) -> dict[str, Any]:
        found = dict(self.__dict__)
        found["typical"] = self.typical.to_dict() if self.typical else None
        return found


@dataclass
class Changed:
    """ "What changed": `before` (the first periodic samples, before the window `rule` read at `step`) beside
    `during` (those inside it)."""

    rule: str
    step: int
    first_step: int
    before: Stretch
    during: Stretch
    inside: bool = True  # False: no periodic sample fell inside the window (thinned); the nearest stands in

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "step": self.step,
            "first_step": self.first_step,
            "inside": self.inside,
            "before": self.before.to_dict(),
            "during": self.during.to_dict(),
        }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def stretch(documents: list[dict]) -> Stretch:
    """The summary of `documents` (periodic sample files)."""
    entries = [entry for document in documents for entry in _entries(document)]
    groups = [group.get("completions", []) for document in documents for group in document["groups"]]

    def numbers(key: str) -> list[float]:
        return [entry[key] for entry in entries if isinstance(entry.get(key), int | float)]

    flags = [entry["truncated"] for entry in entries if isinstance(entry.get("truncated"), bool)]
    rewards_per_group = [[entry.get("reward") for entry in group] for group in groups if group]
    flat = [len(set(rewards)) == 1 for rewards in rewards_per_group if None not in rewards]
    measured = sorted(
        (entry for entry in entries if isinstance(entry.get("length"), int)), key=lambda entry: entry["length"]
    )
    middle = measured[(len(measured) - 1) // 2] if measured else (entries[0] if entries else None)
    typical = None if middle is None else shown_entry("typical (median length)" if measured else "first", middle)
    return Stretch(
        steps=[document["step"] for document in documents],
        completions=len(entries),
        reward=_mean(numbers("reward")),
        length=_mean(numbers("length")),
        cut=_mean([float(flag) for flag in flags]),
        entropy=_mean(numbers("entropy")),
        flat_groups=_mean([float(is_flat) for is_flat in flat]),
        typical=typical,
    )


def worst_alert(alerts: list[Any]) -> Any | None:
    """The alert "what changed" is about: the first failing one, else the first warning (notes are not)."""
    counted = [alert for alert in alerts if getattr(alert, "action", "warn") != "log"]
    failing = [alert for alert in counted if alert.severity == "failing"]
    return (failing or counted or [None])[0]


def what_changed(folder: Path, alerts: list[Any]) -> tuple[Changed | None, str | None]:
    """The periodic samples before the worst alert's window beside those inside it, or why there are none (None
    when nothing fired: there is no sick stretch to compare)."""
    alert = worst_alert(alerts)
    if alert is None:
        return None, None
    documents = [
        document for _, document in _documents(folder, PERIODIC_PREFIX) if isinstance(document.get("step"), int)
    ]
    if not documents:
        return None, (
            "what changed: no periodic samples (monitor.samples.every is 0); with monitor.samples.every=10 the doctor "
            "shows the early samples beside those where the alert fired"
        )
    start = alert.first_step if alert.first_step is not None else alert.step
    inside = [document for document in documents if start <= document["step"] <= alert.step]
    within = bool(inside)
    if not within:  # thinned: the periodic sample nearest the alert stands in, and the report says so
        inside = [min(documents, key=lambda document: abs(document["step"] - alert.step))]
    before = [document for document in documents if document["step"] < min(start, inside[0]["step"])]
    before = before[:STRETCH_FILES]
    if not before:
        return None, (
            f"what changed: no periodic sample before step {start}, where the window of {alert.rule} begins "
            "(a smaller monitor.samples.every writes earlier ones)"
        )
    during = stretch(inside[-STRETCH_FILES:])
    return Changed(alert.rule, alert.step, start, stretch(before), during, within), None


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def changed_lines(samples: RunSamples) -> list[str]:
    """ "What changed" as the report prints it: the two stretches side by side, then a typical completion of each."""
    if samples.changed is None:
        return [samples.changed_missing] if samples.changed_missing else []
    changed = samples.changed
    before, during = changed.before, changed.during

    def steps(part: Stretch) -> str:
        first, last = part.steps[0], part.steps[-1]
        span = f"step {first}" if first == last else f"steps {first}-{last}"
        return f"{span} ({part.completions} completions)"

    left_title = "before: " + steps(before)
    where = f"where {changed.rule} fired" if changed.inside else f"nearest {changed.rule}'s window (none inside)"
    right_title = f"{where}: " + steps(during)
    rows = [
        ("reward (mean)", _number(before.reward), _number(during.reward)),
        ("length (tokens)", _number(before.length), _number(during.length)),
        ("cut at the budget", _percent(before.cut), _percent(during.cut)),
        ("entropy (mean)", _number(before.entropy), _number(during.entropy)),
        ("flat groups", _percent(before.flat_groups), _percent(during.flat_groups)),
    ]
    width = max(len(left_title), *(len(left) for _, left, _ in rows))
    lines = [
        f"what changed (periodic samples; {changed.rule}'s window is steps {changed.first_step}-{changed.step}):",
        f"  {'':<18}  {left_title:<{width}}  {right_title}",
    ]
    lines += [f"  {name:<18}  {left:<{width}}  {right}" for name, left, right in rows]
    for label, part in (("before", before), ("where it fired" if changed.inside else "nearest its window", during)):
        if part.typical is not None:
            typical = part.typical
            lines.append(f"  {label}, {typical.why} (step {typical.step}): {one_line(typical.completion)}")
    return lines
