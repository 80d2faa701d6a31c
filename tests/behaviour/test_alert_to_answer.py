"""From an alert to an answer: a run whose completions hit the budget, the doctor showing the completions behind its
alerts, and its advice written as a sweep file that `align-kit sweep` accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from align_kit.doctor.command import run as doctor


@pytest.fixture(scope="module")
def cut_run(tmp_path_factory, cache_dir) -> Path:
    """3 steps at a budget of 4 tokens: the warm-started policy's answers are longer, so every completion is cut."""
    from align_kit.experiment.compose import compose
    from align_kit.train import component_choices, run
    from tests.conftest import FAST_POLICY, FAST_TRAINING

    folder = tmp_path_factory.mktemp("alert_to_answer") / "run"
    overrides = [f"paths.cache_dir={cache_dir}", *FAST_POLICY, *FAST_TRAINING, "trainer.max_completion_length=4"]
    run(compose([*overrides, "trainer.max_steps=3"]), component_choices(), str(folder))
    return folder


@pytest.mark.slow
def test_the_doctor_prints_the_completions_under_the_alert(cut_run, capsys):
    assert doctor([str(cut_run)]) == 3  # all_truncated is failing
    out = capsys.readouterr().out
    timeline = out.split("timeline:", 1)[1]
    alert_line = next(line for line in timeline.splitlines() if "all_truncated:" in line)
    after = timeline.split(alert_line, 1)[1].splitlines()
    sample_file = cut_run / "samples" / "alert-00000003-all_truncated.json"
    assert after[2].strip() == f"samples: {sample_file}"  # under the alert's detail line
    assert after[3].strip().startswith("cut at the budget (step ") and ", 4 tokens, cut): " in after[3]


def test_the_json_carries_the_samples_of_each_alert(cut_run, capsys):
    doctor([str(cut_run), "--json"])
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["samples"]["folder"] == str(cut_run / "samples")
    by_rule = {entry["rule"]: entry for entry in run["samples"]["alerts"]}
    shown = by_rule["all_truncated"]["shown"]
    assert shown and all(item["length"] == 4 and item["truncated"] for item in shown)


def test_a_run_folder_without_samples_says_so_in_one_line(cut_run, tmp_path, capsys):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(cut_run, bare, ignore=shutil.ignore_patterns("samples"))
    doctor([str(bare)])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("samples: none in")]
    assert lines == [lines[0]] and str(bare) in lines[0]


def test_the_advice_becomes_a_sweep_file_with_the_run_as_baseline(cut_run, tmp_path, capsys):
    path = tmp_path / "fix_cut.yaml"
    assert doctor([str(cut_run), "--sweep", str(path)]) == 3  # the verdict's code: writing the file changes nothing
    assert f"sweep: wrote {path}" in capsys.readouterr().out
    params = yaml.safe_load(path.read_text())["hydra"]["sweeper"]["params"]
    # Every completion was cut from step 1: the budget is swept alone, the run's own first (4, then 2 x 4), and the
    # overlong fixes are held back (no group mixes cut and finished answers for them to act on).
    assert params == {"seed": "1,2,3,4,5", "trainer.max_completion_length": "4,8"}
    assert "overlong_filter: held back: every completion was cut from step 1 to 3" in " ".join(
        line.lstrip("# ") for line in path.read_text().splitlines()
    )
    assert "--predict completions/clipped_ratio:lower" in path.read_text()
    before = path.read_text()
    assert doctor([str(cut_run), "--sweep", str(path)]) == 2  # exists: never overwritten without --force
    assert path.read_text() == before and "pass --force" in capsys.readouterr().err


def test_a_log_that_is_no_align_kit_run_gets_the_advice_and_one_line_why_no_sweep(tmp_path, capsys):
    log = tmp_path / "console.log"
    rows = [{"loss": 0.0, "reward": 0.0, "reward_std": 0.0, "completions/clipped_ratio": 1.0} for _ in range(6)]
    log.write_text("\n".join(repr({**row, "epoch": 0.1 * i}) for i, row in enumerate(rows)) + "\n")
    doctor([str(log), "--sweep", str(tmp_path / "fix.yaml")])
    out = capsys.readouterr().out
    assert "sweep: none written: " in out and "a sweep file needs an align_kit run" in out
    assert not (tmp_path / "fix.yaml").exists()
