"""Verdicts on a predicted direction: the fixture sweep by hand, the rule on made-up runs, and bad predictions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from align_kit.compare import CompareError
from align_kit.compare.command import compare
from tests.compare.sweep_by_hand import LAST_K, choices, run_config


def test_verdicts_on_the_fixture_sweep_by_hand(sweep, tmp_path):
    # reward: Δ AUC 0.3 with SE sqrt(0.05/3) = 0.129 (2.3 SE); clip_higher's AUC beats symmetric's in 3 of 3 seeds.
    result = compare([str(sweep)], last_k=LAST_K, out=tmp_path / "out", predictions=["reward:higher", "entropy:lower"])
    assert [(v.prediction.metric, v.label, v.agreeing, v.paired) for v in result.verdicts] == [
        ("reward", "reproduced", 3, 3),
        ("entropy", "not reproduced", 0, 3),  # entropy rose by 0.45
    ]
    report = result.report.read_text()
    assert "Rule: reproduced = Δ AUC/span in the predicted direction with |Δ| >= 2 SE" in report
    assert (
        "- clip=clip_higher vs clip=symmetric, reward higher: **reproduced** (Δ AUC/span +0.3 ± 0.129 (2.3 SE); "
        "higher in 3 of 3 paired seeds)" in report
    )


def constant_runs(root: Path, arm_values: dict[str, list[float]]) -> Path:
    """Run folders whose reward is one constant per run (so its AUC/span is that constant), seeds 1..n per arm."""
    number = 0
    for node, values in arm_values.items():
        for seed, value in enumerate(values, start=1):
            folder = root / str(number)
            folder.mkdir(parents=True)
            (folder / "config.yaml").write_text(json.dumps(run_config(node, seed)))
            (folder / "summary.json").write_text(json.dumps({"choices": choices(node, seed), "seed": seed}))
            rows = [{"step": step, "reward": value} for step in (1, 2, 3)]
            (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
            number += 1
    return root


@pytest.mark.parametrize(
    ("baseline", "arm", "label"),
    [
        # 8 of 10 seeds up by 1, 2 down by 0.1: Δ +0.78, sample std 0.464, SE 0.147 (5.3 SE), 8 of 10 paired.
        ([0.0] * 10, [1.0] * 8 + [-0.1] * 2, "reproduced"),
        # 7 of 10 up: Δ +0.67, std 0.531, SE 0.168 (4.0 SE), but only 7 of 10 paired seeds: weak.
        ([0.0] * 10, [1.0] * 7 + [-0.1] * 3, "weak"),
        # 10 of 10 up, but the baseline's one -1.0 makes it noisy: Δ 0.055 - (-0.1) = 0.155, SE sqrt(0.1/10 +
        # 0.000917/10) = 0.100 (1.5 SE): weak.
        ([0.0] * 9 + [-1.0], [0.01 * k for k in range(1, 11)], "weak"),
        ([0.0] * 10, [-0.1] * 10, "not reproduced"),
        # In the predicted direction but both bars missed: Δ 0.022 - (-0.1) = 0.122, SE sqrt(0.1/10 +
        # 0.001307/10) = 0.101 (1.2 SE), and 7 of 10 paired seeds up (seeds 1-6, and 10 against -1.0).
        ([0.0] * 9 + [-1.0], [0.05] * 6 + [-0.02] * 4, "not reproduced"),
    ],
)
def test_the_verdict_rule_on_made_up_runs(tmp_path, baseline, arm, label):
    root = constant_runs(tmp_path / "sweep", {"symmetric": baseline, "clip_higher": arm})
    result = compare([str(root)], metrics=["reward"], last_k=1, out=tmp_path / "out", predictions=["reward:higher"])
    (verdict,) = result.verdicts
    assert verdict.label == label


def test_a_predicted_metric_is_compared_without_being_requested(sweep, tmp_path):
    # Only reward is requested; entropy, logged by every run, joins because a prediction names it (Δ AUC +0.45).
    result = compare(
        [str(sweep)], metrics=["reward"], last_k=LAST_K, out=tmp_path / "out", predictions=["entropy:higher"]
    )
    assert list(result.tables) == ["reward", "entropy"]
    (verdict,) = result.verdicts
    assert (verdict.prediction.metric, verdict.label, verdict.agreeing) == ("entropy", "reproduced", 3)


def test_a_bad_prediction_is_a_one_line_error(sweep, tmp_path):
    with pytest.raises(CompareError, match=r"--predict 'entropy:up': write METRIC:higher or METRIC:lower"):
        compare([str(sweep)], out=tmp_path / "out", predictions=["entropy:up"])
    with pytest.raises(CompareError, match="kl is not among the compared metrics"):
        compare([str(sweep)], out=tmp_path / "out", predictions=["kl:higher"])
