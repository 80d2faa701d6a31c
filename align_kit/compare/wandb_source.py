"""Runs from Weights & Biases: a group of a project through `wandb.Api()`, or the offline run in a run folder.

Both are read through the public API's Run interface (`.name`, `.config`, `.scan_history()`), so the offline reader
is an adapter and tests can stand in a fake Api. HF's W&B callback logs TRL's metrics as `train/<metric>` against
`train/global_step`; align_kit adds `choice/<group>` keys to the config (`align_kit.train.run_identity`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from align_kit.compare import CompareError
from align_kit.compare.run_record import Run, count_non_finite, flatten_config, text_values
from align_kit.tracking.metrics_file import is_number, series_from_rows
from align_kit.tracking.wandb_offline import find_offline_runs, read_config, read_history, read_run_info

METRIC_PREFIX = "train/"
STEP_KEY = "train/global_step"
CHOICE_PREFIX = "choice/"


def run_from_wandb(wandb_run: Any, label: str | None = None) -> Run:
    """A Run from anything shaped like `wandb.apis.public.Run`."""
    config = dict(wandb_run.config)
    choices = {
        key.removeprefix(CHOICE_PREFIX): str(config.pop(key)) for key in list(config) if key.startswith(CHOICE_PREFIX)
    }
    rows = []
    for row in wandb_run.scan_history():
        step = row.get(STEP_KEY, row.get("_step"))
        if not is_number(step):
            continue
        # `_step`, `_runtime`, `_timestamp` are W&B's own bookkeeping, not the trainer's metrics.
        metrics = {
            key.removeprefix(METRIC_PREFIX): value
            for key, value in row.items()
            if not key.startswith("_") and key != STEP_KEY
        }
        rows.append((float(step), metrics))
    return Run(
        label=label or wandb_run.name,
        config=flatten_config(config),
        choices=choices,
        seed=config.get("seed"),
        series=series_from_rows(rows),
        non_finite=count_non_finite(rows, null_counts=False),
        text_valued=text_values(rows),
    )


def parse_group_path(path: str) -> tuple[str, str]:
    """Split ENTITY/PROJECT/GROUP into the project path the API takes and the group to filter by."""
    parts = path.split("/", 2)
    if len(parts) != 3 or not all(parts):
        raise CompareError(f"wandb:{path} names no group; write wandb:ENTITY/PROJECT/GROUP")
    return f"{parts[0]}/{parts[1]}", parts[2]


def load_wandb_group(path: str, api: Any = None) -> list[Run]:
    project, group = parse_group_path(path)
    try:
        if api is None:
            import wandb

            api = wandb.Api()
        found = list(api.runs(project, filters={"group": group}))
    except Exception as error:  # the API raises its own types for login, network and missing projects
        raise CompareError(
            f"cannot read W&B project {project} ({type(error).__name__}: {error}); "
            "run `wandb login` (or set WANDB_API_KEY) and check the path, or compare the local run folders instead"
        ) from None
    if not found:
        raise CompareError(
            f"no runs in group {group!r} of W&B project {project}; "
            "check the group in the W&B UI (a multirun sweep is grouped as <sweep>-<launch time>)"
        )
    return [run_from_wandb(run, label=f"{project}/{run.name}") for run in found]


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


def load_offline_run(run_folder: Path) -> Run:
    run = run_from_wandb(OfflineRun(find_offline_runs(run_folder)), label=str(run_folder))
    run.folder = run_folder.resolve()
    return run
