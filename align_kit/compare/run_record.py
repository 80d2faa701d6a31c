"""One run as compare sees it, whatever it was read from: what it was (flattened config, node choices, seed) and
what it logged (one series per metric it may compare, the names of the others, and the values no curve can hold:
non-finite and text ones). Run folders
(`runs`) and W&B runs (`wandb_source`) are both turned into a `Run` with these functions."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from align_kit.tracking.metrics_file import NOT_METRICS, SUMMARY_ROW_KEY, Series


@dataclass
class Run:
    label: str
    config: dict[str, Any]  # flattened: {"clip.eps_high": 0.28, ...}
    choices: dict[str, str]  # the node of each config group: {"clip": "clip_higher", ...}
    seed: Any
    series: dict[str, Series]  # the metrics read: those compare may compare, not everything the run logged
    skipped_lines: int = 0
    notes: list[str] = field(default_factory=list)
    non_finite: dict[str, int] = field(default_factory=dict)  # metric -> values left out (NaN, inf, null)
    text_valued: dict[str, str] = field(default_factory=dict)  # metric logged as text -> its first such value
    folder: Path | None = None  # resolved, for a run read from a folder
    unread: frozenset[str] = frozenset()  # metrics logged with a finite value whose series was not kept
    unfinished: str | None = None  # why the run is no finished run (compare/completeness.py); None: finished

    @property
    def logged(self) -> frozenset[str]:
        """Every metric the run is known to have logged with a finite value, read or not (a W&B run read through
        the API for a few metrics knows those only)."""
        return frozenset(self.series) | self.unread


class LoggedValues(NamedTuple):
    numeric: frozenset[str]  # metrics with a finite number somewhere (HF's end-of-training row aside)
    non_finite: dict[str, int]
    text: dict[str, str]


def logged_values(rows: list[tuple[float, dict]], null_counts: bool) -> LoggedValues:
    """What a run logged, per metric, in one pass over its rows whatever compare keeps of them: whether it logged a
    finite number; how many values `series_from_rows` leaves out for not being finite numbers (metrics.jsonl writes
    NaN and inf as null, `null_counts`; W&B keeps them as floats and leaves unlogged keys out); and, for a metric
    logged as text somewhere (a phase name, a status), its first text value: no curve to compare."""
    numeric: set[str] = set()
    non_finite: dict[str, int] = {}
    text: dict[str, str] = {}
    for _, row in rows:
        summary_row = SUMMARY_ROW_KEY in row
        for key, value in row.items():
            kind = type(value)  # the exact type first: the common case, without isinstance chains per value
            if kind is float:
                finite = math.isfinite(value)
            elif kind is int:
                finite = True
            elif isinstance(value, str):
                text.setdefault(key, value)
                continue
            elif value is None:
                finite = False
                if not null_counts:
                    continue
            elif isinstance(value, bool) or not isinstance(value, int | float):
                continue
            else:  # a subclass of int or float
                finite = math.isfinite(value)
            if summary_row:
                continue
            if finite:
                numeric.add(key)
            else:
                non_finite[key] = non_finite.get(key, 0) + 1
    return LoggedValues(
        frozenset(numeric - NOT_METRICS),
        {key: count for key, count in non_finite.items() if key not in NOT_METRICS},
        {key: value for key, value in text.items() if key not in NOT_METRICS},
    )


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
