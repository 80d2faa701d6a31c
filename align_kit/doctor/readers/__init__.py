"""Read any GRPO run's logged history into `RunHistory` objects, the format told from the content (see `detect`):
align_kit run and sweep folders, HF/TRL `trainer_state.json` and the folders holding it, TRL's printed log dicts
and verl's console lines in any text (console logs, SLURM output, markdown excerpts, notebooks), the Trainer's
progress table, verl's JSONL, W&B runs (offline folders, the API, CSV exports), OpenRLHF's keys, and any CSV/JSONL
with a key map."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from align_kit.doctor.history import DoctorInputError, RunHistory
from align_kit.doctor.readers import detect, wandb_runs
from align_kit.doctor.readers.common import input_error, not_regular, unreadable


def read_runs(
    path: str,
    key_map: Mapping[str, str] | None = None,
    logging_steps: int | None = None,
    api: Any = None,
) -> list[RunHistory]:
    """The runs at `path` (a file, a folder, or `wandb:ENTITY/PROJECT/RUN_ID`); a sweep folder or a multi-run W&B
    export gives one per run. `key_map` is {concept: column} and wins over the built-in names; `logging_steps`
    gives the steps of log lines that carry none; `api` stands in for `wandb.Api()`. A bad input raises
    DoctorInputError, one line naming the input and what was expected."""
    if logging_steps is not None and logging_steps < 1:
        raise DoctorInputError(f"--logging-steps {logging_steps}: expected a whole number of steps >= 1")
    if path.startswith(wandb_runs.WANDB_PREFIX):
        return [wandb_runs.read_api(path, api, key_map)]
    target = Path(path)
    try:
        info = target.stat()
    except FileNotFoundError:
        raise DoctorInputError(f"{path}: no such file or folder; expected a run's log file or folder") from None
    except OSError as error:
        raise unreadable(path, error) from None
    kind = not_regular(info)
    if kind is not None and kind != "a folder":
        raise input_error(path, f"is {kind}, not a regular file; expected a run's log file or folder")
    try:
        if kind == "a folder":
            return detect.read_folder(target, key_map)
        return detect.read_file(target, key_map, logging_steps)
    except OSError as error:  # a file in the folder, or gone between listing and reading
        raise unreadable(error.filename or path, error) from None
