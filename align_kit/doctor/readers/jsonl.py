"""JSON Lines of logged points: verl's file logger (`{"step": N, "data": {...}}` per line, trainer.logger=[file],
VERL_FILE_LOGGER_PATH), LLaMA-Factory's `trainer_log.jsonl` (`current_steps`, `loss`, `reward`, `lr`, ...),
align_kit's `metrics.jsonl` read alone, OpenRLHF's or any other flat `{"step": ..., key: value}` lines, and a JSON
array of such objects. A line that is not a JSON object is skipped and counted."""

from __future__ import annotations

import json
from typing import Any

from align_kit.doctor.readers.common import RawRows, as_step, is_summary
from align_kit.doctor.readers.tables import STEP_COLUMNS

# ms-swift prints TRL's dicts as JSON with "global_step/max_steps": "5/3766"; LLaMA-Factory's trainer_log.jsonl
# states "current_steps" (src/llamafactory/train/callbacks.py, LogCallback.on_log).
STEP_KEYS = (*STEP_COLUMNS, "global_step/max_steps", "current_steps")


def _step_of(row: dict[str, Any]) -> int | None:
    for key in STEP_KEYS:
        if key in row:
            return as_step(row[key])
    return None


def object_rows(objects: list[Any]) -> tuple[RawRows, bool, list[str]]:
    """(raw rows, whether they are verl's file logger's, notes) of parsed JSON objects."""
    notes: list[str] = []
    raw: RawRows = []
    verl = False
    without_step = 0
    for number, row in enumerate(objects, start=1):
        if not isinstance(row, dict) or is_summary(row):
            continue
        data = row.get("data")
        if isinstance(data, dict) and "step" in row:
            verl = True
            step = as_step(row["step"])
            row = data
        else:
            step = _step_of(row)
        if step is None:
            without_step += 1
            step = number
        raw.append((step, row))
    if without_step:
        notes.append(f"{without_step} row(s) without a step column: their steps are the line numbers")
    return raw, verl, notes


GIVE_UP = 20  # lines that fail before any parses


def parse_lines(text: str) -> tuple[list[Any], int, tuple[int, str] | None]:
    """(objects, lines skipped, (line, error) of the first bad line)."""
    objects: list[Any] = []
    skipped, first_bad = 0, None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            objects.append(json.loads(line))
        except ValueError as error:
            skipped += 1
            if first_bad is None:
                first_bad = (number, str(error).split(":")[0])
            if not objects and skipped >= GIVE_UP:
                break  # not JSON lines (printed Python dicts, say): the text readers take it
    return objects, skipped, first_bad
