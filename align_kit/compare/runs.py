"""Runs to compare: what each was (flattened config, node choices, seed) and what it logged (one series per metric).

Local inputs are run folders, or any folder holding run folders (a multirun sweep: `0/`, `1/`, ...). A run folder
is read from `config.yaml`, `summary.json` and `metrics.jsonl`; one without `metrics.jsonl` but with an offline W&B
run is read from that run (see `wandb_source`). `wandb:ENTITY/PROJECT/GROUP` inputs go through the W&B API.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from align_kit.compare import CompareError
from align_kit.tracking.metrics_file import Series, is_number, read_metrics_file, series_from_rows
from align_kit.tracking.wandb_offline import find_offline_runs

__all__ = ["Run", "Series", "is_number", "read_metrics_file", "series_from_rows"]

# The files `align-kit train` writes into a run folder.
METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.yaml"
SUMMARY_FILE = "summary.json"
WANDB_PREFIX = "wandb:"


@dataclass
class Run:
    label: str
    config: dict[str, Any]  # flattened: {"clip.eps_high": 0.28, ...}
    choices: dict[str, str]  # the node of each config group: {"clip": "clip_higher", ...}
    seed: Any
    series: dict[str, Series]
    skipped_lines: int = 0
    notes: list[str] = field(default_factory=list)


def flatten_config(config: dict, prefix: str = "") -> dict[str, Any]:
    """{"clip": {"eps_high": 0.28}} -> {"clip.eps_high": 0.28}; lists become JSON text so values compare and print."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_config(value, f"{name}."))
        else:
            flat[name] = json.dumps(value) if isinstance(value, list) else value
    return flat


def _read_yaml(path: Path) -> dict:
    try:
        loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise CompareError(
            f"{path} is not valid YAML ({error}); restore it from the run's .hydra/config.yaml"
        ) from None
    return loaded if isinstance(loaded, dict) else {}


def _choices_from_hydra(folder: Path, config: dict) -> dict[str, str]:
    """Node choices of a run that has not written summary.json yet (running, or killed), from Hydra's record,
    named as train.py names them in the summary."""
    from align_kit.plan import reward_choice, tagged_choices

    path = folder / ".hydra" / "hydra.yaml"
    if not path.is_file():
        return {}
    named = tagged_choices(((_read_yaml(path).get("hydra") or {}).get("runtime") or {}).get("choices") or {})
    if isinstance(config.get("reward"), dict):
        named["reward"] = reward_choice(config["reward"])
    return named


def load_run_folder(folder: Path) -> Run:
    metrics_path = folder / METRICS_FILE
    if not metrics_path.is_file():
        from align_kit.compare.wandb_source import load_offline_run

        return load_offline_run(folder)
    notes = []
    config = _read_yaml(folder / CONFIG_FILE) if (folder / CONFIG_FILE).is_file() else {}
    if not config:
        notes.append(f"{folder}: no {CONFIG_FILE}; every config key counts as unset for this run")
    summary = {}
    if (folder / SUMMARY_FILE).is_file():
        try:
            summary = json.loads((folder / SUMMARY_FILE).read_text())
        except json.JSONDecodeError:
            notes.append(f"{folder}: {SUMMARY_FILE} is not valid JSON; node choices ignored")
    rows, skipped = read_metrics_file(metrics_path)
    if skipped:
        notes.append(f"{folder}: skipped {skipped} malformed line(s) of {METRICS_FILE}")
    return Run(
        label=str(folder),
        config=flatten_config(config),
        # Older summaries wrote an unselected group (recipe, sweep) as "None"; newer ones leave it out.
        choices={group: str(node) for group, node in summary["choices"].items() if str(node) != "None"}
        if "choices" in summary
        else _choices_from_hydra(folder, config),
        seed=summary.get("seed", config.get("seed")),
        series=series_from_rows(rows),
        skipped_lines=skipped,
        notes=notes,
    )


def is_run_folder(folder: Path) -> bool:
    return (folder / METRICS_FILE).is_file() or bool(find_offline_runs(folder))


def _natural_order(path: Path) -> list:
    # Job folders 0, 1, ..., 10 sort by number, not as text ("10" before "2").
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def find_run_folders(root: Path) -> list[Path]:
    """`root` when it is a run folder, else every run folder below it, in natural order (job 2 before job 10)."""
    found = []
    for current, subfolders, _ in os.walk(root):
        if is_run_folder(Path(current)):
            found.append(Path(current))
            subfolders.clear()  # checkpoints and W&B files inside a run folder hold no further runs
        else:
            subfolders[:] = [name for name in subfolders if not name.startswith(".")]
    return sorted(found, key=_natural_order)


def load_inputs(inputs: list[str]) -> tuple[list[Run], list[str]]:
    """Every run named by the inputs (folders or `wandb:ENTITY/PROJECT/GROUP`), and notes about what was skipped.
    A folder without runs (a failed launch among `outputs/runs/*`) is noted; no runs at all is an error."""
    runs: list[Run] = []
    notes: list[str] = []
    for spec in inputs:
        if spec.startswith(WANDB_PREFIX):
            from align_kit.compare.wandb_source import load_wandb_group

            runs += load_wandb_group(spec.removeprefix(WANDB_PREFIX))
            continue
        if not Path(spec).is_dir():
            raise CompareError(
                f"{spec} is not a folder; pass run folders, a multirun sweep folder or wandb:ENTITY/PROJECT/GROUP"
            )
        folders = find_run_folders(Path(spec))
        if not folders:
            notes.append(f"no runs in {spec}")
        runs += [load_run_folder(folder) for folder in folders]
    notes += [note for run in runs for note in run.notes]
    empty = [run.label for run in runs if not run.series]
    if empty:
        notes.append(f"left out {len(empty)} run(s) that logged no metric: {', '.join(empty)}")
    runs = [run for run in runs if run.series]
    if not runs:
        raise CompareError(
            f"no runs found in {', '.join(inputs)}: no {METRICS_FILE} (or wandb/offline-run-*) with a metric in them "
            "or below them; pass a run folder or a multirun sweep folder (align-kit train -m ...)"
        )
    return runs, notes
