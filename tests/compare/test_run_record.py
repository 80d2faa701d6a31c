"""What a run logged, read in one pass: finite metrics, non-finite values left out, text values."""

from __future__ import annotations

import numpy as np

from align_kit.compare.run_record import logged_values

NAN, INF = float("nan"), float("inf")
ROWS = [
    (1.0, {"step": 1, "epoch": 0.5, "reward": 0.5, "loss": NAN, "count": 3, "done": True, "note": None, "tags": [1]}),
    (2.0, {"step": 2, "epoch": 1.0, "reward": INF, "loss": None, "phase": "warmup", "kl": np.float64(0.1)}),
    # HF's end-of-training row: neither a finite point nor a left-out value, but its text is still text.
    (2.0, {"step": 2, "train_runtime": 1.5, "train_loss": NAN, "reward": None, "status": "done"}),
]


def test_numbers_non_finite_and_text_values_per_metric():
    # From metrics.jsonl, null counts as a left-out value: reward inf; loss nan and null; note null.
    logged = logged_values(ROWS, null_counts=True)
    assert logged.numeric == {"reward", "count", "kl"}  # bool and list are not numbers; step and epoch not metrics
    assert logged.non_finite == {"reward": 1, "loss": 2, "note": 1}
    assert logged.text == {"phase": "warmup", "status": "done"}


def test_w_and_b_rows_do_not_count_null():
    logged = logged_values(ROWS, null_counts=False)
    assert logged.non_finite == {"reward": 1, "loss": 1}
