"""Each stability component trains a few steps on the embedded default and logs its metrics."""

from __future__ import annotations

import pytest

from align_kit.tracking.metrics_file import read_metrics

RUNS = {
    "ngrpo": (["advantage=ngrpo"], []),
    "per_domain_kl": (["kl=per_domain"], ["kl/addition", "kl/subtraction", "kl"]),
    "reweighted_kl": (["kl=reweighted"], ["kl"]),
    "adaptive_format": (["format_schedule=adaptive"], ["schedule/format_weight"]),
    "bf16_rollout": (
        ["rollout.dtype=bfloat16", "rollout.is_correction=sequence_mask"],
        ["mismatch/logp_abs_diff/mean", "mismatch/logp_abs_diff/max", "mismatch/kl", "mismatch/rescore_kl"],
    ),
}


# The default tier trains two of these (3-6 s each); the others, and the bf16 sampler (a second model, 6-10 s), train
# in the slow tier.
SLOW_RUNS = {"bf16_rollout", "per_domain_kl", "reweighted_kl"}


@pytest.mark.parametrize(
    "name",
    [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_RUNS else name for name in RUNS],
)
def test_component_trains_and_logs(name, train_once, tmp_path):
    overrides, expected_metrics = RUNS[name]
    summary = train_once(tmp_path, "logger=none", *overrides)
    assert summary["steps"] == 4
    rows = [row for row in read_metrics(tmp_path / "metrics.jsonl") if "reward" in row]
    assert rows, "no generation step was logged"
    for metric in [*expected_metrics, "mismatch/retokenize_rate"]:
        assert all(row.get(metric) is not None for row in rows), metric
