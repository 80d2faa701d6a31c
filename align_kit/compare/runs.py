"""Runs to compare, read from the command's inputs (each a `run_record.Run`: what it was and what it logged).

Local inputs are run folders, or any folder holding run folders (a multirun sweep: `0/`, `1/`, ...). A run folder
is read from `config.yaml`, `summary.json` and `metrics.jsonl`; one without `metrics.jsonl` but with an offline W&B
run is read from that run (see `wandb_source`). `wandb:ENTITY/PROJECT/GROUP` inputs go through the W&B API.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

import yaml

from align_kit.compare import CompareError
from align_kit.compare.completeness import drop_replaced_rows, unfinished
from align_kit.compare.progress import progress_bar
from align_kit.compare.run_record import Run, flatten_config, logged_values
from align_kit.compare.wandb_source import load_offline_run, load_wandb_group
from align_kit.core.run_files import CONFIG_FILE, METRICS_FILE, SUMMARY_FILE, find_folders
from align_kit.tracking.metrics_file import read_metrics_file, series_from_rows
from align_kit.tracking.wandb_offline import find_offline_runs

# The files `align-kit train` writes into a run folder.
WANDB_PREFIX = "wandb:"


def _read_yaml(path: Path) -> dict:
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise CompareError(
            f"{path} is not UTF-8 (byte {error.start}); restore it from the run's .hydra/config.yaml"
        ) from None
    except yaml.YAMLError as error:
        raise CompareError(
            f"{path} is not valid YAML ({error}); restore it from the run's .hydra/config.yaml"
        ) from None
    return loaded if isinstance(loaded, dict) else {}


def _choices_from_hydra(folder: Path, config: dict) -> dict[str, str]:
    """Node choices of a run that has not written summary.json yet (running, or killed), from Hydra's record,
    named as train.py names them in the summary."""
    from align_kit.experiment.plan import reward_choice, tagged_choices

    path = folder / ".hydra" / "hydra.yaml"
    if not path.is_file():
        return {}
    named = tagged_choices(((_read_yaml(path).get("hydra") or {}).get("runtime") or {}).get("choices") or {})
    if isinstance(config.get("reward"), dict):
        named["reward"] = reward_choice(config["reward"])
    return named


def load_run_folder(folder: Path, metrics: Collection[str] | None = None) -> Run:
    """The run in `folder`, with the series of `metrics` only (every metric when None)."""
    metrics_path = folder / METRICS_FILE
    if not metrics_path.is_file():
        return load_offline_run(folder, metrics)
    notes = []
    config = _read_yaml(folder / CONFIG_FILE) if (folder / CONFIG_FILE).is_file() else {}
    if not config:
        notes.append(f"{folder}: no {CONFIG_FILE}; every config key counts as unset for this run")
    summary = _read_summary(folder, notes)
    rows, skipped = read_metrics_file(metrics_path)
    if skipped:
        notes.append(f"{folder}: skipped {skipped} malformed line(s) of {METRICS_FILE}")
    rows, resumes = drop_replaced_rows(rows)
    notes += [f"{folder}: {resume}" for resume in resumes]
    seed = summary.get("seed", config.get("seed"))
    logged = logged_values(rows, null_counts=True)
    series = series_from_rows(rows, metrics)
    return Run(
        label=str(folder),
        config=flatten_config(config),
        # Older summaries wrote an unselected group (recipe, sweep) as "None"; newer ones leave it out.
        choices={group: str(node) for group, node in summary["choices"].items() if str(node) != "None"}
        if isinstance(summary.get("choices"), dict)
        else _choices_from_hydra(folder, config),
        seed=seed if isinstance(seed, int | float | str) and not isinstance(seed, bool) else None,
        series=series,
        skipped_lines=skipped,
        notes=notes,
        non_finite=logged.non_finite,
        text_valued=logged.text,
        folder=folder.resolve(),
        unread=logged.numeric - set(series),
        unfinished=unfinished(config, summary if (folder / SUMMARY_FILE).is_file() else None, rows),
    )


def _read_summary(folder: Path, notes: list[str]) -> dict:
    """summary.json as a mapping; anything else is noted and ignored (choices then come from Hydra's record)."""
    path = folder / SUMMARY_FILE
    if not path.is_file():
        return {}
    try:
        summary = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        notes.append(f"{folder}: {SUMMARY_FILE} is not valid JSON; node choices taken from .hydra/ instead")
        return {}
    if not isinstance(summary, dict):
        notes.append(f"{folder}: {SUMMARY_FILE} is not a JSON object; node choices taken from .hydra/ instead")
        return {}
    if "choices" in summary and not isinstance(summary["choices"], dict):
        notes.append(f"{folder}: {SUMMARY_FILE} has no mapping under 'choices'; node choices taken from .hydra/")
    return summary


def is_run_folder(folder: Path) -> bool:
    return (folder / METRICS_FILE).is_file() or bool(find_offline_runs(folder))


def find_run_folders(root: Path) -> list[Path]:
    """`root` when it is a run folder, else every run folder below it, in natural order (job 2 before job 10)."""
    return find_folders(root, is_run_folder)


def _sweep_outcomes(sweep_folder: Path, notes: list[str]) -> dict[Path, dict]:
    """Job folder -> its outcome (job, overrides, status, error) from the sweep's manifest (its job log folded in:
    a launch still running or killed has its updates there), if the folder holds one."""
    from align_kit.core.errors import ConfigError
    from align_kit.runs.sweep_manifest import read, shown_status

    try:
        manifest = read(sweep_folder)
    except ConfigError as error:
        notes.append(f"{error}; the sweep's unfinished jobs cannot be told apart, so all are compared")
        return {}
    if manifest is None:
        return {}
    # Jobs are found by folder name, so a sweep folder that was moved still matches.
    return {
        (sweep_folder / Path(job["folder"]).name).resolve(): {**job, "status": shown_status(job)}
        for job in manifest["jobs"]
        if job.get("folder")
    }


def _job_name(outcome: dict) -> str:
    return f"job {outcome.get('job')} ({' '.join(map(str, outcome.get('overrides') or []))})"


def load_inputs(inputs: list[str], metrics: Collection[str] | None = None) -> tuple[list[Run], list[str]]:
    """Every run named by the inputs (folders or `wandb:ENTITY/PROJECT/GROUP`), with the series of `metrics` only
    (every metric when None; each run still records the names of all it logged), and notes about what was left out
    and why. A folder named twice (or inside another input) counts once; a sweep job that did not finish ok (its
    manifest says failed, running or interrupted) is left out; a folder without runs is noted; no runs is an error.
    Folders are found first and read one at a time, with a progress bar when they are many."""
    notes: list[str] = []
    seen: dict[Path, int] = {}
    outcomes: dict[Path, dict] = {}
    to_read: list[Path | str] = []  # run folders to read and W&B groups, in input order
    for spec in inputs:
        if spec.startswith(WANDB_PREFIX):
            to_read.append(spec)
            continue
        if not Path(spec).is_dir():
            raise CompareError(
                f"{spec} is not a folder; pass run folders, a multirun sweep folder or wandb:ENTITY/PROJECT/GROUP"
            )
        folders = find_run_folders(Path(spec))
        if not folders:
            notes.append(f"no runs in {spec}")
        for sweep_folder in {Path(spec).resolve(), *(folder.resolve().parent for folder in folders)}:
            outcomes.update(_sweep_outcomes(sweep_folder, notes))
        for folder in folders:
            resolved = folder.resolve()
            seen[resolved] = seen.get(resolved, 0) + 1
            if seen[resolved] == 1:
                to_read.append(folder)
    notes += [f"{folder} was named {count} times; counted once" for folder, count in seen.items() if count > 1]
    left_out = {folder: outcome for folder, outcome in outcomes.items() if outcome.get("status") != "ok"}
    for folder, outcome in left_out.items():
        error = f": {outcome['error']}" if outcome.get("error") else ""
        notes.append(f"left out sweep {_job_name(outcome)} in {folder}: {outcome.get('status')}{error}")
    # A job the manifest leaves out is not read at all.
    to_read = [item for item in to_read if isinstance(item, str) or item.resolve() not in left_out]
    runs: list[Run] = []
    with progress_bar(sum(isinstance(item, Path) for item in to_read), "run folders") as bar:
        for item in to_read:
            if isinstance(item, str):
                runs += load_wandb_group(item.removeprefix(WANDB_PREFIX), metrics=metrics)
            else:
                runs.append(load_run_folder(item, metrics))
                bar.update()
    notes += [note for run in runs for note in run.notes]
    cut_short = [run for run in runs if run.unfinished]
    notes += [f"left out {run.label}, not a finished run: {run.unfinished}" for run in cut_short]
    if cut_short and len(cut_short) == len(runs):
        raise CompareError(
            f"no finished run in {', '.join(inputs)}: {cut_short[0].label}: {cut_short[0].unfinished}"
            + (f" (and {len(cut_short) - 1} more)" if len(cut_short) > 1 else "")
            + "; compare runs once they have finished"
        )
    runs = [run for run in runs if not run.unfinished]
    empty = [run.label for run in runs if not run.logged]
    if empty:
        notes.append(f"left out {len(empty)} run(s) that logged no metric: {', '.join(empty)}")
    runs = [run for run in runs if run.logged]
    if not runs and left_out:  # every run folder found was a sweep job its manifest records as not done
        folder, outcome = next(iter(left_out.items()))
        error = f": {outcome['error']}" if outcome.get("error") else ""
        raise CompareError(
            f"no finished run in {', '.join(inputs)}: sweep {_job_name(outcome)} in {folder} is "
            f"{outcome.get('status')}{error}"
            + (f" (and {len(left_out) - 1} more)" if len(left_out) > 1 else "")
            + "; finish the sweep first (align-kit sweep --resume <sweep folder>)"
        )
    if not runs:
        raise CompareError(
            f"no runs found in {', '.join(inputs)}: no {METRICS_FILE} (or wandb/offline-run-*) with a metric in them "
            "or below them; pass a run folder or a multirun sweep folder (align-kit train -m ...)"
        )
    notes += non_finite_notes(runs) + text_metric_notes(runs)
    return runs, notes


def text_metric_notes(runs: list[Run]) -> list[str]:
    """One note naming every metric logged as text (left out of tables and figures), with an example value."""
    examples: dict[str, str] = {}
    for run in runs:
        for metric, value in run.text_valued.items():
            examples.setdefault(metric, value)
    if not examples:
        return []
    named = ", ".join(f"{metric} (e.g. {examples[metric]!r})" for metric in sorted(examples))
    return [f"logged as text, not numbers, so not compared: {named}"]


def non_finite_notes(runs: list[Run]) -> list[str]:
    """One note per metric: how many non-finite values were left out, in which runs."""
    notes = []
    for metric in sorted({metric for run in runs for metric in run.non_finite}):
        counted = [(run.label, run.non_finite[metric]) for run in runs if run.non_finite.get(metric)]
        total = sum(count for _, count in counted)
        where = ", ".join(f"{label} ({count})" for label, count in counted)
        notes.append(
            f"{metric}: left out {total} non-finite value(s) (NaN, inf or null) in {len(counted)} run(s): {where}"
        )
    return notes
