"""One run as compare sees it, whatever it was read from: what it was (flattened config, node choices, seed) and
what it logged (one series per metric, and the values no curve can hold: non-finite and text ones). Run folders
(`runs`) and W&B runs (`wandb_source`) are both turned into a `Run` with these functions."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from align_kit.tracking.metrics_file import NOT_METRICS, SUMMARY_ROW_KEY, Series


@dataclass
class Run:
    label: str
    config: dict[str, Any]  # flattened: {"clip.eps_high": 0.28, ...}
    choices: dict[str, str]  # the node of each config group: {"clip": "clip_higher", ...}
    seed: Any
    series: dict[str, Series]
    skipped_lines: int = 0
    notes: list[str] = field(default_factory=list)
    non_finite: dict[str, int] = field(default_factory=dict)  # metric -> values left out (NaN, inf, null)
    text_valued: dict[str, str] = field(default_factory=dict)  # metric logged as text -> its first such value
    folder: Path | None = None  # resolved, for a run read from a folder


def count_non_finite(rows: list[tuple[float, dict]], null_counts: bool) -> dict[str, int]:
    """Per metric, the logged values `series_from_rows` leaves out for not being finite numbers. metrics.jsonl
    writes NaN and inf as null (`null_counts`); W&B keeps them as floats and leaves unlogged keys out."""
    counts: dict[str, int] = {}
    for _, row in rows:
        if SUMMARY_ROW_KEY in row:
            continue
        for key, value in row.items():
            bad = (value is None and null_counts) or (isinstance(value, float) and not math.isfinite(value))
            if key not in NOT_METRICS and bad:
                counts[key] = counts.get(key, 0) + 1
    return counts


def text_values(rows: list[tuple[float, dict]]) -> dict[str, str]:
    """Per metric logged as text somewhere (a phase name, a status), its first text value: no curve to compare."""
    found: dict[str, str] = {}
    for _, row in rows:
        for key, value in row.items():
            if isinstance(value, str) and key not in NOT_METRICS:
                found.setdefault(key, value)
    return found


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
