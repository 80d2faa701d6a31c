"""The rows of metrics.jsonl that compare two runs: optimizer steps only, without the wall-clock measurements."""

from __future__ import annotations

from align_kit.tracking.metrics_file import TIMING_KEYS


def without_timing(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in TIMING_KEYS} for row in rows]


def step_rows(rows: list[dict]) -> list[dict]:
    return [row for row in rows if "loss" in row]
