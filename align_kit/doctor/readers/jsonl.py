"""JSON Lines of logged points: verl's file logger (`{"step": N, "data": {...}}` per line, trainer.logger=[file],
VERL_FILE_LOGGER_PATH), LLaMA-Factory's `trainer_log.jsonl` (`current_steps`, `loss`, `reward`, `lr`, ...),
align_kit's `metrics.jsonl` read alone, OpenRLHF's or any other flat `{"step": ..., key: value}` lines, and a JSON
array of such objects. A line that is not a JSON object is skipped and counted."""

from __future__ import annotations

import json
from typing import Any

from align_kit.doctor.keymaps import NOT_METRICS
from align_kit.doctor.readers.common import RawRows, as_step, is_summary
from align_kit.doctor.readers.repeated_keys import RepeatedKeys
from align_kit.doctor.readers.step_columns import (
    EPOCH,
    STEP_NAMES,
    epochs_step,
    fill_steps,
    row_order_note,
    run_columns,
    split_runs,
    step_column,
)

# ms-swift prints TRL's dicts as JSON with "global_step/max_steps": "5/3766"; LLaMA-Factory's trainer_log.jsonl
# states "current_steps" (src/llamafactory/train/callbacks.py, LogCallback.on_log).
STEP_KEYS = (*STEP_NAMES, "global_step/max_steps", "current_steps")
_STEP_KEY: dict[tuple[str, ...], str | None] = {}


def _step_key(row: dict[str, Any]) -> str | None:
    """The row's step key; rows repeat one key set, so cached by it."""
    keys = tuple(row)
    if keys not in _STEP_KEY:
        if len(_STEP_KEY) > 10_000:
            _STEP_KEY.clear()
        _STEP_KEY[keys] = step_column(keys) or next((key for key in STEP_KEYS[len(STEP_NAMES) :] if key in row), None)
    return _STEP_KEY[keys]


def object_rows(objects: list[Any]) -> tuple[dict[str, RawRows], bool, list[str]]:
    """({run name: raw rows}, whether they are verl's file logger's, notes) of parsed JSON objects: one run ("")
    unless a run column tells several apart (see `step_columns`)."""
    notes: list[str] = []
    stepped: list[tuple[int | None, dict[str, Any]]] = []
    verl = False
    seen: dict[str, None] = {}
    for row in objects:
        if not isinstance(row, dict) or is_summary(row):
            continue
        data = row.get("data")
        if isinstance(data, dict) and "step" in row:
            verl = True
            step = as_step(row["step"])
            row = data
        else:
            key = _step_key(row)
            step = as_step(row[key]) if key is not None else None
            if key is not None and key not in NOT_METRICS:  # `update`, `iter`: bookkeeping, not a metric
                row = {name: value for name, value in row.items() if name != key}
        if not row.keys() <= seen.keys():
            seen.update(dict.fromkeys(row))
        stepped.append((step, row))
    without_step = sum(1 for step, _ in stepped if step is None)
    if stepped and without_step == len(stepped) and epochs_step([row.get(EPOCH) for _, row in stepped]):
        stepped = [(as_step(row[EPOCH]), row) for _, row in stepped]
        notes.append(f"no step key ({', '.join(STEP_KEYS)}): the whole-number epoch is the step")
        without_step = 0
    columns = run_columns(seen) if not verl else []
    runs, split_notes = split_runs(stepped, columns) if columns else ({"": stepped}, [])
    notes += split_notes
    if without_step:
        notes.append(row_order_note(without_step, len(runs), "line"))
    return {name: fill_steps(rows) for name, rows in runs.items()}, verl, notes


GIVE_UP = 20  # lines that fail before any parses


def parse_lines(text: str, repeats: RepeatedKeys | None = None) -> tuple[list[Any], int, tuple[int, str] | None]:
    """(objects, lines skipped, (line, error) of the first bad line); `repeats` records keys an object names twice."""
    objects: list[Any] = []
    skipped, first_bad = 0, None
    loads = repeats.loads if repeats is not None else json.loads
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if repeats is not None:
            repeats.line = number
        try:
            objects.append(loads(line))
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
