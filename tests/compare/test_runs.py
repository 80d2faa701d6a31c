"""Reading run folders: malformed metric lines skipped and counted, job folders in number order, only the series
asked for kept."""

from __future__ import annotations

import json

import numpy as np
import pytest

from align_kit.compare.command import compare
from align_kit.compare.runs import find_run_folders, load_inputs
from tests.compare.sweep_by_hand import LAST_K, assert_expected_statistics


def test_malformed_lines_are_skipped_and_counted(sweep, tmp_path):
    metrics = sweep / "0" / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    # Not JSON, not an object, and an object without a step: three skipped lines; the blank line is not counted.
    metrics.write_text("\n".join([lines[0], "{not json", "[1, 2]", '{"reward": 9.0}', "", *lines[1:]]) + "\n")

    result = compare([str(sweep)], last_k=LAST_K, out=tmp_path / "out")

    assert_expected_statistics(result)  # the skipped lines change nothing
    assert result.arms[0].runs[0].skipped_lines == 3
    assert any("skipped 3 malformed line(s)" in note for note in result.notes)
    assert "skipped 3 malformed line(s)" in result.report.read_text()


def test_job_folders_sort_by_number(tmp_path):
    for name in ("10", "2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text("")
    assert [folder.name for folder in find_run_folders(tmp_path)] == ["2", "10"]


def test_runs_keep_only_the_series_asked_for_and_know_what_else_they_logged(sweep):
    every, _ = load_inputs([str(sweep)])
    asked, _ = load_inputs([str(sweep)], ["reward"])

    for full, kept in zip(every, asked, strict=True):
        assert set(kept.series) == {"reward"}
        assert np.array_equal(kept.series["reward"].steps, full.series["reward"].steps)
        assert np.array_equal(kept.series["reward"].values, full.series["reward"].values)
        # sweep_by_hand: every run logs reward and entropy, the clip_higher ones kl too.
        assert (
            kept.logged
            == full.logged
            == ({"reward", "entropy", "kl"} if "kl" in full.series else {"reward", "entropy"})
        )


def test_runs_logging_none_of_the_default_metrics_are_compared_on_what_they_share(tmp_path):
    # loss 1 - 0.1 t at t = 1..4, the same in both runs; grad_norm only in run a.
    for name, seed in (("a", 1), ("b", 2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps({"choices": {}, "seed": seed}))
        rows = [{"step": t, "loss": 1 - 0.1 * t, **({"grad_norm": 1.0} if name == "a" else {})} for t in range(1, 5)]
        (tmp_path / name / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = compare([str(tmp_path)], out=tmp_path / "out")
    assert list(result.tables) == ["loss"]
    # AUC/span of a line over [1, 4] is its value at t = 2.5: 0.75.
    assert result.tables["loss"][0].auc.mean == pytest.approx(0.75)
