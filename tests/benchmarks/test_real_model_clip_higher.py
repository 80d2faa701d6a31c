"""Clip-Higher on SmolLM2 by seed-arm (benchmarks/real_model_clip_higher.py): the engagement per generation read
from a run's metrics, and the refusals that come before anything trains."""

from __future__ import annotations

import json
import sys

import pytest

from benchmarks import real_model_clip_higher
from benchmarks.real_model_clip_higher import by_generation


def write_metrics(folder, rows) -> None:
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_engagement_per_generation_takes_the_bound_over_off_policy_steps(tmp_path):
    # Two generations of two steps; the first step of each is on-policy (the bound's share logged as 0 there).
    write_metrics(
        tmp_path,
        [
            {"step": 1, "entropy": 2.0, "rewards/correctness/mean": 0.25, "clip/upper_bound_low_prob": 0.0},
            {"step": 2, "entropy": 1.5, "clip/upper_bound_low_prob": 0.5, "clip_ratio/high_mean": 0.1},
            {"step": 2, "eval_loss": 3.0},  # a row without entropy (an eval row) is not a step
            {"step": 3, "entropy": 1.0, "rewards/correctness/mean": 0.75, "clip/upper_bound_low_prob": 0.0},
            {"step": 4, "entropy": 0.5},  # no positive-advantage token: the share is absent
        ],
    )
    first, second = by_generation(tmp_path, 2)
    assert first["steps"] == [1, 2] and first["entropy_first_last"] == [2.0, 1.5]
    assert first["entropy"] == 1.75  # (2.0 + 1.5) / 2, over both steps
    assert first["clip/upper_bound_low_prob"] == 0.5  # step 2 alone, not (0 + 0.5) / 2
    assert first["clip_ratio/high_mean"] == 0.1
    assert first["rewards/correctness/mean"] == 0.25
    assert second["steps"] == [3, 4] and second["entropy_first_last"] == [1.0, 0.5]
    assert second["clip/upper_bound_low_prob"] is None  # logged only on-policy, where it says nothing
    assert second["rewards/correctness/mean"] == 0.75


def run_main(monkeypatch, *argv: str) -> None:
    monkeypatch.setattr(sys, "argv", ["real_model_clip_higher.py", *argv])
    real_model_clip_higher.main()


def test_an_unfinished_run_folder_is_refused_before_anything_trains(tmp_path, monkeypatch, capsys):
    runs, out = tmp_path / "runs", tmp_path / "out"
    (runs / "eps0.28_seed3").mkdir(parents=True)  # no summary.json: killed or still running
    trained = []
    monkeypatch.setattr(real_model_clip_higher, "train", lambda *args: trained.append(args))
    with pytest.raises(SystemExit) as stop:
        run_main(monkeypatch, "--seeds", "3", "--eps-high", "0.2", "0.28", "--runs", str(runs), "--out", str(out))
    assert stop.value.code == 2
    assert trained == []  # not even the first arm, whose folder is free
    assert capsys.readouterr().err.strip() == (
        f"{runs / 'eps0.28_seed3'} holds an unfinished run: resume it or remove it, then run this again"
    )


def test_no_seeds_and_no_report_is_refused(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit) as stop:
        run_main(monkeypatch, "--out", str(tmp_path))
    assert stop.value.code == 2
    assert "--seeds: name the seeds to run" in capsys.readouterr().err


def test_held_out_difference_is_welch_and_counts_ties_as_not_lower():
    def result(eps_high, seed, accuracy):
        return {"eps_high": eps_high, "seed": seed, "held_out_after": {"accuracy": accuracy}}

    results = [result(0.2, 1, 0.5), result(0.2, 2, 0.25), result(0.28, 1, 0.5), result(0.28, 2, 0.75)]
    # 0.2: mean 0.375, variance 0.03125; 0.28: mean 0.625, variance 0.03125; SE = sqrt(0.03125/2 * 2) = 0.177
    assert real_model_clip_higher.held_out_difference(results) == (
        "held-out accuracy, eps_high 0.28 vs 0.2: +0.250 ± 0.177 (Welch SE), not lower in 2/2 paired seeds"
    )
    assert real_model_clip_higher.held_out_difference(results[:3]) == ""  # one seed in an arm: no spread
