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


def columnar_rows(document: dict[str, Any]) -> tuple[RawRows, list[str]] | None:
    """A JSON object of series, one per metric: `{"train/reward": {"1": 0.5, "2": 0.6}, ...}` (step -> value, as
    NeMo-RL's tests dump TensorBoard logs to metrics.json) or `{"reward": [0.5, 0.6], ...}` (values by index,
    steps 1, 2, ...). None when most of its values are not such series."""
    series = {key: value for key, value in document.items() if isinstance(value, dict | list) and value}
    if not series or len(series) * 2 < len(document):
        return None
    by_step: dict[int, dict[str, Any]] = {}
    indexed = False
    for key, values in series.items():
        if isinstance(values, dict):
            pairs = [(as_step(step), value) for step, value in values.items()]
            if any(step is None for step, _ in pairs):
                return None
        else:
            indexed = True
            pairs = list(enumerate(values, start=1))
        for step, value in pairs:
            if isinstance(value, dict | list):
                return None
            by_step.setdefault(step, {})[key] = value
    notes = ["a list of values per metric: steps are their positions 1, 2, ..."] if indexed else []
    return sorted(by_step.items()), notes
