"""Runs from Weights & Biases: a group of a project through `wandb.Api()`, or the offline run in a run folder.

Both are read through the public API's Run interface (`.name`, `.config`, `.scan_history()`), so the offline reader
is an adapter and tests can stand in a fake Api. HF's W&B callback logs TRL's metrics as `train/<metric>` against
`train/global_step`; align_kit adds `choice/<group>` keys to the config (`align_kit.train.run_identity`).

Through the API only the compared metrics' keys are fetched (a paged scan per metric, as HF logs them) and a group's
runs are read one at a time as the API pages them; the values no curve holds (non-finite, text) are then counted
for those metrics only.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

from align_kit.compare import CompareError
from align_kit.compare.completeness import drop_replaced_rows, read_summary_file, unfinished
from align_kit.compare.progress import progress_bar
from align_kit.compare.run_record import Run, flatten_config, logged_values
from align_kit.core.run_files import SUMMARY_FILE
from align_kit.tracking.metrics_file import is_number, series_from_rows
from align_kit.tracking.wandb_offline import find_offline_runs, read_config, read_history, read_run_info

METRIC_PREFIX = "train/"
STEP_KEY = "train/global_step"
CHOICE_PREFIX = "choice/"


def _step_rows(history: Iterable[dict]) -> Iterator[tuple[float, dict]]:
    """W&B history rows -> (step, metrics) pairs, keyed as in metrics.jsonl."""
    for row in history:
        step = row.get(STEP_KEY, row.get("_step"))
        if not is_number(step):
            continue
        # `_step`, `_runtime`, `_timestamp` are W&B's own bookkeeping, not the trainer's metrics.
        yield (
            float(step),
            {
                key.removeprefix(METRIC_PREFIX): value
                for key, value in row.items()
                if not key.startswith("_") and key != STEP_KEY
            },
        )


def _history_rows(wandb_run: Any, metrics: Collection[str] | None) -> list[tuple[float, dict]]:
    """The run's history through the API, only the keys of `metrics` when given: one paged scan per metric, since a
    scan returns only the rows holding every key asked for (entropy logged every other step would thin the reward
    to those steps). A run holding none of them is read whole, so that what it did log can be named."""
    if metrics is not None:
        rows = [
            pair
            for metric in metrics
            for pair in _step_rows(wandb_run.scan_history(keys=[STEP_KEY, METRIC_PREFIX + metric]))
        ]
        if rows:
            return rows
    return list(_step_rows(wandb_run.scan_history()))


def _run_from_history(
    wandb_run: Any, rows: list[tuple[float, dict]], label: str, metrics: Collection[str] | None
) -> Run:
    config = dict(wandb_run.config)
    choices = {
        key.removeprefix(CHOICE_PREFIX): str(config.pop(key)) for key in list(config) if key.startswith(CHOICE_PREFIX)
    }
    logged = logged_values(rows, null_counts=False)
    series = series_from_rows(rows, metrics)
    state = getattr(wandb_run, "state", None)  # the API's: finished, running, crashed, failed, killed
    return Run(
        label=label,
        config=flatten_config(config),
        choices=choices,
        seed=config.get("seed"),
        series=series,
        non_finite=logged.non_finite,
        text_valued=logged.text,
        unread=logged.numeric - set(series),
        unfinished=f"its W&B state is {state}" if isinstance(state, str) and state != "finished" else None,
    )


def run_from_wandb(wandb_run: Any, label: str | None = None, metrics: Collection[str] | None = None) -> Run:
    """A Run from anything shaped like `wandb.apis.public.Run`, with the series of `metrics` only (all when None)."""
    return _run_from_history(wandb_run, _history_rows(wandb_run, metrics), label or wandb_run.name, metrics)


def parse_group_path(path: str) -> tuple[str, str]:
    """Split ENTITY/PROJECT/GROUP into the project path the API takes and the group to filter by."""
    parts = path.split("/", 2)
    if len(parts) != 3 or not all(parts):
        raise CompareError(f"wandb:{path} names no group; write wandb:ENTITY/PROJECT/GROUP")
    return f"{parts[0]}/{parts[1]}", parts[2]


def _unreadable(project: str, error: Exception) -> CompareError:
    return CompareError(
        f"cannot read W&B project {project} ({type(error).__name__}: {error}); "
        "run `wandb login` (or set WANDB_API_KEY) and check the path, or compare the local run folders instead"
    )


def load_wandb_group(path: str, api: Any = None, metrics: Collection[str] | None = None) -> list[Run]:
    """The runs of a W&B group, with the series of `metrics` only (all when None). The API's run list fetches its
    pages as it is iterated; each run's history is read and reduced to a `Run` before the next run is asked for."""
    project, group = parse_group_path(path)
    try:
        if api is None:
            import wandb

            api = wandb.Api()
        found = api.runs(project, filters={"group": group})
        total = len(found)
    except Exception as error:  # the API raises its own types for login, network and missing projects
        raise _unreadable(project, error) from None
    if not total:
        raise CompareError(
            f"no runs in group {group!r} of W&B project {project}; "
            "check the group in the W&B UI (a multirun sweep is grouped as <sweep>-<launch time>)"
        )
    runs = []
    with progress_bar(total, f"W&B runs of {project}/{group}") as bar:
        try:
            for wandb_run in found:
                runs.append(run_from_wandb(wandb_run, label=f"{project}/{wandb_run.name}", metrics=metrics))
                bar.update()
        except Exception as error:  # a later page or a history scan can fail as the first query can
            raise _unreadable(project, error) from None
    return runs


class OfflineRun:
    """The offline W&B run(s) of one run folder, read back with `align_kit.tracking.wandb_offline`, shaped like
    `wandb.apis.public.Run`. A resumed run leaves one offline run per launch: config and name come from the
    newest, history is their concatenation (steps redone after a resume replace the earlier values)."""

    def __init__(self, offline_folders: list[Path]):
        info = read_run_info(offline_folders[-1])
        self.name = info.get("name")
        self.group = info.get("group")
        self.tags = info.get("tags", [])
        self.config = read_config(offline_folders[-1])
        self._folders = offline_folders

    def scan_history(self) -> Iterator[dict]:
        for folder in self._folders:
            yield from read_history(folder)


def load_offline_run(run_folder: Path, metrics: Collection[str] | None = None) -> Run:
    """The offline W&B run of a run folder: its history is a local file, read once whatever `metrics` asks for."""
    try:
        offline = OfflineRun(find_offline_runs(run_folder))
        rows = list(_step_rows(offline.scan_history()))  # every launch's history in turn: a resume logs steps again
    except ValueError as error:  # a damaged run file (align_kit.tracking.wandb_offline names the record)
        raise CompareError(
            f"{run_folder} has no metrics.jsonl and its offline W&B run cannot be read ({error}); restore either "
            "file, or leave the run out"
        ) from None
    rows, resumes = drop_replaced_rows(rows)
    run = _run_from_history(offline, rows, str(run_folder), metrics)
    run.folder = run_folder.resolve()
    run.notes += [f"{run_folder}: {resume}" for resume in resumes]
    summary_path = run_folder / SUMMARY_FILE  # the run folder's own summary, as for a run read from metrics.jsonl
    summary = read_summary_file(summary_path) if summary_path.is_file() else None
    run.unfinished = unfinished(dict(offline.config), summary, rows)
    return run
