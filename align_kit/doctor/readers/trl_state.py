"""HF Trainer's `trainer_state.json` (TRL's GRPOTrainer writes one into every checkpoint): `log_history`, one entry
per logged point with its `step`; and the output or checkpoint folder holding it, where the newest wins."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from align_kit.core.run_files import CHECKPOINT, TRAINER_STATE
from align_kit.doctor.history import DoctorInputError, RunHistory, UnreadInput
from align_kit.doctor.readers.common import as_step, history_from_rows, input_error, is_summary, read_bounded


def load_json(path: Path, text: str | None = None) -> Any:
    """A JSON file, or the input error naming where it breaks."""
    try:
        return json.loads(read_bounded(path) if text is None else text)
    except json.JSONDecodeError as error:
        raise input_error(
            path, f"corrupt JSON ({error.msg} at line {error.lineno}, column {error.colno}); expected a whole file"
        ) from None


def is_state(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("log_history"), list)


def state_file(folder: Path) -> tuple[Path | None, list[str]]:
    """The trainer_state.json to read in an output folder, a checkpoint folder, or None; and a note saying which
    was chosen among how many. The newest: the highest checkpoint-N, or the folder's own when its global_step is
    at least that checkpoint's (the final save after training)."""
    own = folder / TRAINER_STATE
    checkpoints = sorted(
        (int(match.group(1)), folder / name / TRAINER_STATE)
        for name in (entry.name for entry in folder.iterdir() if entry.is_dir())
        if (match := CHECKPOINT.match(name)) and (folder / name / TRAINER_STATE).is_file()
    )
    if not checkpoints:
        return (own if own.is_file() else None), []
    number, newest = checkpoints[-1]
    skipped: list[str] = []
    if own.is_file():
        try:
            own_step = as_step(json.loads(read_bounded(own)).get("global_step"))
        except (ValueError, AttributeError) as error:
            own_step = None
            skipped.append(f"{folder.name}/{TRAINER_STATE} not read: it is not valid JSON ({error})")
        except UnreadInput:
            raise  # what it holds is unknown: it may be the newest
        except DoctorInputError as error:  # empty
            own_step = None
            skipped.append(f"{folder.name}/{TRAINER_STATE} not read: {str(error).removeprefix(f'{own}: ')}")
        if own_step is None and not skipped:
            skipped.append(f"{folder.name}/{TRAINER_STATE} not read: it states no global_step")
        if own_step is not None and own_step >= number:
            return own, [
                f"read {folder.name}/{TRAINER_STATE} (global step {own_step}), newer than its "
                f"{len(checkpoints)} checkpoint(s) (newest checkpoint-{number})"
            ]
    return newest, [*skipped, f"newest of {len(checkpoints)} checkpoint(s): checkpoint-{number}"]


def read_state(
    path: Path, data: Mapping[str, Any], key_map: Mapping[str, str] | None = None, notes: list[str] | None = None
) -> RunHistory:
    notes = list(notes or [])
    raw = []
    for entry in data["log_history"]:
        if not isinstance(entry, dict) or is_summary(entry):
            continue
        step = as_step(entry.get("step"))
        if step is not None:
            raw.append((step, entry))
    folder = path.parent
    name = folder.parent.name if CHECKPOINT.match(folder.name) else folder.name
    return history_from_rows(path, "trl_state", raw, key_map=key_map, notes=notes, name=name)
