"""`metrics.jsonl`: one JSON object per logged step, everything the trainer logs (TRL's and ours)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

# Wall-clock measurements: the only fields two runs with the same seed may disagree on.
TIMING_KEYS = frozenset(
    {"step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second", "tokens_per_sec"}
)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def read_metrics(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


class MetricsFileCallback(TrainerCallback):
    def __init__(self, path: str | Path):
        self.path = Path(path)

    def on_train_begin(self, args, state, control, **kwargs):
        # On resume, drop what a killed run logged after its last checkpoint: those steps are redone.
        if state.is_world_process_zero and self.path.exists():
            kept = [row for row in read_metrics(self.path) if row.get("step", 0) <= state.global_step]
            self.path.write_text("".join(json.dumps(row) + "\n" for row in kept))

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        row = {"step": state.global_step, **{key: _json_safe(value) for key, value in logs.items()}}
        with self.path.open("a") as handle:
            handle.write(json.dumps(row) + "\n")
