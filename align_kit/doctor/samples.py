"""The completions behind each alert, as the doctor shows them: read from a run folder's `samples/` (written by the
live monitor, align_kit/monitor/samples.py, in align_kit's trainer or the plain-TRL `HealthCallback`), a few chosen
to show the failure: the shortest and the longest, the highest and the lowest reward, and those cut at the budget."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from align_kit.monitor.samples import ALERT_PREFIX, SAMPLES_DIR

SHOWN = 4  # completions shown under an alert
SHOWN_CHARS = 160  # of each, on the terminal (--json carries the file's text)


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
    return [
        Shown(
            why=why,
            step=entry.get("step"),
            prompt=str(entry.get("prompt", "")),
            completion=str(entry.get("completion", "")),
            reward=entry.get("reward"),
            length=entry.get("length"),
            truncated=entry.get("truncated"),
        )
        for why, entry in picks
    ]


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
    files = alert_samples(folder)
    for index, alert in enumerate(alerts):
        steps = [step for rule, step in files if rule == alert.rule]
        if steps:
            nearest = min(steps, key=lambda step: (abs(step - alert.step), step > alert.step))
            found.by_alert[index] = files[(alert.rule, nearest)]
    return found
