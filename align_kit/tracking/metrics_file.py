"""`metrics.jsonl`: one JSON object per logged step, everything the trainer logs (TRL's and ours).

The one reader of the file (`read_metrics_file`, `read_metrics`) and the one series type
(`Series`, built by `series_from_rows`), used by the trainer side and by compare.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
from transformers import TrainerCallback

from align_kit.core.disk_space import writing

# Wall-clock measurements: the only fields two runs with the same seed may disagree on.
TIMING_KEYS = frozenset(
    {"step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second", "tokens_per_sec"}
)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# The x-axis and the epoch counter are logged on every row but are not curves to compare.
NOT_METRICS = frozenset({"step", "epoch"})
# HF's end-of-training row (train_runtime, train_loss, ...) summarises the run; it is not a training step.
SUMMARY_ROW_KEY = "train_runtime"


class Series(NamedTuple):
    steps: np.ndarray
    values: np.ndarray


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def read_metrics_file(path: str | Path) -> tuple[list[tuple[float, dict]], int]:
    """(step, row) pairs and the number of lines skipped: not JSON, not an object, or without a numeric
    `step` (a killed run can leave a half-written last line)."""
    rows, skipped = [], 0
    for line in Path(path).read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            skipped += 1
            continue
        if not isinstance(row, dict) or not is_number(row.get("step")):
            skipped += 1
            continue
        rows.append((float(row["step"]), row))
    return rows, skipped


def read_metrics(path: str | Path) -> list[dict]:
    """The logged rows, in file order (unreadable lines skipped)."""
    return [row for _, row in read_metrics_file(path)[0]]


def series_from_rows(rows: list[tuple[float, dict]], metrics: Collection[str] | None = None) -> dict[str, Series]:
    """(step, logged row) pairs -> one series per metric (only those in `metrics`, when given), sorted by step; a
    step logged twice keeps its last value (a resumed run redoes the steps after its checkpoint)."""
    # Asked for a few metrics, look up only those: the cost follows what is compared, not the row's width.
    asked = None if metrics is None else [metric for metric in metrics if metric not in NOT_METRICS]
    points: dict[str, dict[float, float]] = {}
    for step, row in rows:
        if SUMMARY_ROW_KEY in row:
            continue
        for key in row if asked is None else asked:
            value = row.get(key)
            # A finite float is the common case: tested without a call per value.
            finite = (value.__class__ is float and math.isfinite(value)) or is_number(value)
            if finite and (asked is not None or key not in NOT_METRICS):
                points.setdefault(key, {})[step] = float(value)
    series = {}
    shared: dict[tuple[float, ...], np.ndarray] = {}
    for metric, by_step in points.items():
        steps = tuple(sorted(by_step))
        if steps not in shared:
            # Metrics logged at the same steps share one read-only steps array: half the memory of a run's series.
            shared[steps] = np.array(steps)
            shared[steps].flags.writeable = False
        series[metric] = Series(shared[steps], np.array([by_step[step] for step in steps]))
    return series


def _row_step(line: bytes) -> float | None:
    """The step of one line, or None when it is no row (not JSON, not an object, no numeric step)."""
    try:
        row = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return float(row["step"]) if isinstance(row, dict) and is_number(row.get("step")) else None


def _lines_from_end(handle: BinaryIO, block: int = 1 << 16) -> Iterator[tuple[int, bytes]]:
    """(offset, line without its newline) of a file's lines, the last first, reading blocks from its end."""
    position, rest = handle.seek(0, os.SEEK_END), b""
    while position > 0:
        size = min(block, position)
        position -= size
        handle.seek(position)
        chunk = handle.read(size) + rest
        lines = chunk.split(b"\n")
        rest = lines[0]  # it may begin in the block before: judged once that is read
        offset = position + len(chunk)
        for line in reversed(lines[1:]):
            offset -= len(line)
            yield offset, line
            offset -= 1  # the newline before it
    yield 0, rest


def drop_rows_after(path: Path, step: float) -> None:
    """Cut the file after its last row logged at or before `step`. Rows are appended in step order, so what a
    resumed run redoes (and a half-written last line) is all at the end: the file is read from there, not whole."""
    with path.open("rb+") as handle:
        keep = 0
        for offset, line in _lines_from_end(handle):
            logged = _row_step(line) if line.strip() else None
            if logged is not None and logged <= step:
                keep = offset + len(line)
                break
        handle.truncate(keep)
        if keep:
            handle.seek(keep)
            handle.write(b"\n")


class MetricsFileCallback(TrainerCallback):
    def __init__(self, path: str | Path):
        self.path = Path(path)

    def on_train_begin(self, args, state, control, **kwargs):
        # On resume, drop what a killed run logged after its last checkpoint: those steps are redone.
        if state.is_world_process_zero and self.path.exists():
            drop_rows_after(self.path, state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        row = {"step": state.global_step, **{key: _json_safe(value) for key, value in logs.items()}}
        with writing(self.path.parent, self.path.name), self.path.open("a") as handle:
            handle.write(json.dumps(row) + "\n")
