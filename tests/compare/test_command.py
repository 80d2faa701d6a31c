"""`align-kit compare` on the sweep of tests/compare/sweep_by_hand.py: statistics, figures and report, its errors and
the command line, and nothing counted twice or left out silently."""

from __future__ import annotations

import json
import math
import warnings

import pytest

from align_kit import cli
from align_kit.compare import CompareError
from align_kit.compare.command import compare
from tests.compare.sweep_by_hand import (
    EXPECTED,
    LAST_K,
    SEEDS,
    assert_expected_statistics,
    assert_valid_png,
    choices,
    jobs,
    run_config,
    write_run_folder,
)


def test_sweep_folder_gives_arms_statistics_figures_and_report(sweep, tmp_path):
    result = compare([str(sweep)], last_k=LAST_K, out=tmp_path / "out")

    assert_expected_statistics(result)
    assert all("train_loss" not in run.series for arm in result.arms for run in arm.runs)
    names = sorted(figure.path.name for figure in result.figures)
    # No correctness metric here, so the accuracy panel falls back to the reward; no clip ratio, length or flips.
    assert names == ["accuracy_entropy.png", "reward.png"]
    for figure in result.figures:
        assert_valid_png(figure.path)
    report = result.report.read_text()
    assert "](accuracy_entropy.png)" in report and "](reward.png)" in report
    # Markdown rows: 0.9 ± 0.2 final, Δ +0.45 ± sqrt(0.05/3) = 0.1291 (3 significant digits).
    # Paired by seed, clip_higher's AUC/span 0.6 + d beats symmetric's 0.3 + c for every seed: 3/3.
    assert "| clip=clip_higher | 3 | 0.9 ± 0.2 | +0.45 ± 0.129 | 0.6 ± 0.2 | +0.3 ± 0.129 | 3/3 |" in report
    assert "| clip=symmetric | 3 | 0.45 ± 0.1 | baseline | 0.3 ± 0.1 | baseline | baseline |" in report
    assert "not in every run, so left out" not in report  # kl was never asked for


def test_default_output_folder_is_inside_the_first_input(sweep):
    result = compare([str(sweep)], last_k=LAST_K)
    assert result.report == sweep / "compare" / "report.md"


def test_a_run_still_in_progress_takes_its_choices_from_hydras_record(sweep, tmp_path):
    # Job 4 (clip_higher, seed 2) has not finished: no summary.json yet, only what Hydra wrote at its start.
    job = sweep / "4"
    (job / "summary.json").unlink()
    (job / ".hydra").mkdir()
    hydra_choices = {**choices("clip_higher", 2), "trainer": "default", "hydra/launcher": "basic", "recipe": None}
    (job / ".hydra" / "hydra.yaml").write_text(json.dumps({"hydra": {"runtime": {"choices": hydra_choices}}}))
    result = compare([str(sweep)], last_k=LAST_K, out=tmp_path / "out")
    assert_expected_statistics(result)


def test_empty_folder_is_a_clear_error(tmp_path):
    with pytest.raises(CompareError, match="no runs found in"):
        compare([str(tmp_path)])


def test_runs_with_no_common_metric_are_a_clear_error(tmp_path):
    for name, metric in (("a", "reward"), ("b", "entropy")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text(json.dumps({"step": 1, metric: 0.5}) + "\n")
    with pytest.raises(CompareError, match="share no metric"):
        compare([str(tmp_path)])


def test_requested_metrics_none_common_is_a_clear_error(sweep):
    with pytest.raises(CompareError, match="kl is logged by every run; metrics common to all runs: entropy, reward"):
        compare([str(sweep)], metrics=["kl"])


# --- CLI -----------------------------------------------------------------------------------------------------------


def test_cli_compare_prints_tables_and_writes_the_report(sweep, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")  # rich wraps cells to the terminal's width; keep each number on one line
    out = tmp_path / "cli-out"
    cli.main(
        ["compare", str(sweep), "--metrics", "reward,entropy", "--smooth", "3", "--last-k", "2", "--out", str(out)]
    )
    printed = capsys.readouterr().out
    assert "clip=clip_higher" in printed and "+0.45 ± 0.129" in printed
    assert "6 runs in 2 arms" in printed
    assert (out / "report.md").is_file()
    assert_valid_png(out / "accuracy_entropy.png")


def test_cli_compare_error_is_one_line_and_nonzero(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", str(tmp_path)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("align-kit: compare error: no runs found in") and "\n" not in error


def test_cli_compare_rejects_a_fractional_window(sweep):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", str(sweep), "--smooth", "1.5"])
    assert exit_info.value.code == 2


# --- nothing counted twice, nothing left out silently -------------------------------------------------------------


def test_a_run_folder_named_several_ways_counts_once(sweep, tmp_path, monkeypatch):
    monkeypatch.chdir(sweep)
    # Job 0 three times: relative, absolute, and inside the sweep folder.
    result = compare(["0", str(sweep / "0"), str(sweep)], last_k=LAST_K, out=tmp_path / "out")
    assert_expected_statistics(result)  # n = 3 seeds per arm, not 5 for the baseline
    assert f"{sweep / '0'} was named 3 times; counted once" in result.notes
    assert f"{sweep / '0'} was named 3 times; counted once" in result.report.read_text()


def test_a_duplicate_arm_and_seed_is_counted_once_with_a_warning(sweep, tmp_path, capsys):
    # Job 6 repeats job 0's arm and seed (symmetric, seed 1) with other numbers; counted twice it would shift the
    # baseline's mean and std.
    write_run_folder(sweep / "6", "clip_higher", 1)
    (sweep / "6" / "config.yaml").write_text(json.dumps(run_config("symmetric", 1)))
    (sweep / "6" / "summary.json").write_text(json.dumps({"choices": choices("symmetric", 1), "seed": 1}))
    cli.main(["compare", str(sweep), "--last-k", str(LAST_K), "--out", str(tmp_path / "out")])
    warning = (
        f"warning: duplicate (arm, seed): arm 'clip=symmetric' has seed 1 in {sweep / '0'} and in {sweep / '6'}; "
        f"counted once, {sweep / '6'} left out"
    )
    assert f"align-kit: {warning}" in capsys.readouterr().err.splitlines()
    assert f"- {warning}" in (tmp_path / "out" / "report.md").read_text()
    assert_expected_statistics(compare([str(sweep)], last_k=LAST_K, out=tmp_path / "again"))


def test_non_finite_values_are_counted_per_metric_and_listed(sweep, tmp_path):
    metrics = sweep / "0" / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    rows[0]["reward"] = float("nan")  # Python's json writes NaN; align_kit's metrics file writes null
    rows[0]["entropy"] = None
    rows[1]["reward"] = float("inf")
    metrics.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = compare([str(sweep)], last_k=LAST_K, out=tmp_path / "out")
    # The final value averages steps 4-5 (reward) and 3-5 (entropy), which stay finite: unchanged.
    for metric, node in (("reward", "symmetric"), ("entropy", "symmetric")):
        assert result.tables[metric][0].final.mean == pytest.approx(EXPECTED[(metric, node)]["final"][0])
    expected = [
        f"entropy: left out 1 non-finite value(s) (NaN, inf or null) in 1 run(s): {sweep / '0'} (1)",
        f"reward: left out 2 non-finite value(s) (NaN, inf or null) in 1 run(s): {sweep / '0'} (2)",
    ]
    assert [note for note in result.notes if "non-finite" in note] == expected
    report = result.report.read_text()
    assert all(f"- {note}" in report for note in expected)


def test_a_metric_without_finite_values_in_one_run_is_named_when_its_table_goes(sweep, tmp_path):
    metrics = sweep / "2" / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    metrics.write_text(
        "".join(json.dumps({**row, "entropy": None} if "entropy" in row else row) + "\n" for row in rows)
    )
    result = compare([str(sweep)], last_k=LAST_K, out=tmp_path / "out")
    assert list(result.tables) == ["reward"]
    assert f"entropy: left out, not logged with a finite value by 1 run(s): {sweep / '2'}" in result.notes


def test_sweep_jobs_that_did_not_finish_ok_are_left_out_and_named(sweep, tmp_path):
    # From the sweep's manifest: job 4 (clip_higher, seed 2) failed after logging; job 5 (clip_higher, seed 3) was
    # running when its process died; job 6 failed before logging anything.
    entries = [
        {"job": n, "overrides": [f"clip={node}", f"seed={seed}"], "status": "done", "outcome": "ok", "error": None}
        for n, node, seed in jobs()
    ]
    for entry in entries:
        entry["folder"] = f"/elsewhere/{entry['job']}"  # found by name: the sweep folder may have moved
    entries[4] |= {"status": "failed", "outcome": "failed", "error": "RuntimeError: at step 3"}
    entries[5] |= {"status": "running", "outcome": None, "pid": None}
    entries.append(
        {"job": 6, "overrides": ["seed=9"], "status": "failed", "outcome": "config error", "error": "bad row"}
        | {"folder": "/elsewhere/6"}
    )
    (sweep / "sweep_manifest.json").write_text(json.dumps({"task_overrides": [], "jobs": entries}))
    result = compare([str(sweep)], last_k=LAST_K, out=tmp_path / "out")
    assert [arm.seeds for arm in result.arms] == [[1, 2, 3], [1]]
    expected = [
        f"left out sweep job 4 (clip=clip_higher seed=2) in {sweep / '4'}: failed: RuntimeError: at step 3",
        f"left out sweep job 5 (clip=clip_higher seed=3) in {sweep / '5'}: interrupted",
        f"left out sweep job 6 (seed=9) in {sweep / '6'}: config error: bad row",
    ]
    assert [note for note in result.notes if note.startswith("left out sweep")] == expected
    assert all(f"- {note}" in result.report.read_text() for note in expected)


@pytest.mark.parametrize(
    ("summary", "note"),
    [
        (lambda seed: [1, 2], "summary.json is not a JSON object; node choices taken from .hydra/ instead"),
        (
            lambda seed: {"choices": None, "seed": seed},
            "summary.json has no mapping under 'choices'; node choices taken from .hydra/",
        ),
    ],
    ids=["list", "choices-null"],
)
def test_a_malformed_summary_is_noted_and_the_choices_come_from_hydra(sweep, tmp_path, summary, note):
    for number, _node, seed in jobs():
        (sweep / str(number) / "summary.json").write_text(json.dumps(summary(seed)))
    result = compare([str(sweep)], last_k=LAST_K, out=tmp_path / "out")
    # No choices anywhere, so arms are named by the differing key; seeds come from config.yaml.
    assert [arm.name for arm in result.arms] == ["clip.eps_high=0.2", "clip.eps_high=0.28"]
    assert [arm.seeds for arm in result.arms] == [list(SEEDS), list(SEEDS)]
    assert f"{sweep / '0'}: {note}" in result.notes


def test_out_pointing_at_a_file_is_a_one_line_error(sweep, tmp_path, capsys):
    target = tmp_path / "taken.txt"
    target.write_text("keep me")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", str(sweep), "--out", str(target)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == (
        f"align-kit: compare error: --out {target} is a file; pass a folder (created if missing)"
    )
    assert target.read_text() == "keep me"


def test_text_valued_metrics_are_named_once_not_dropped_silently(sweep, tmp_path, capsys, monkeypatch):
    for number in (0, 3):  # a text-valued metric in two runs of different arms: one note names it
        metrics = sweep / str(number) / "metrics.jsonl"
        rows = [json.loads(line) for line in metrics.read_text().splitlines()]
        metrics.write_text("".join(json.dumps({**row, "phase": "warmup", "status": "ok"}) + "\n" for row in rows))
    monkeypatch.setenv("COLUMNS", "160")
    cli.main(["compare", str(sweep), "--metrics", "reward,phase", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.splitlines()
    note = "align-kit: note: logged as text, not numbers, so not compared: phase (e.g. 'warmup'), status (e.g. 'ok')"
    assert [line for line in err if "phase" in line] == [note]
    assert f"- {note.removeprefix('align-kit: note: ')}" in (tmp_path / "out" / "report.md").read_text()


def test_finite_values_near_the_float_maximum_show_as_themselves(tmp_path, capsys, monkeypatch):
    # One arm of two seeds: seed 1 logs 1e308 at every step, seed 2 -1e308. Final and AUC/span per run are
    # +-1e308; over the seeds the mean is 0 and the sample std sqrt(2 * (1e308)^2 / 1) = 1.414e308.
    for seed, value in ((1, 1e308), (2, -1e308)):
        folder = tmp_path / "sweep" / str(seed - 1)
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps({"choices": {"clip": "symmetric"}, "seed": seed}))
        rows = [{"step": step, "big": value, "reward": 0.5} for step in range(1, 6)]
        (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    monkeypatch.setenv("COLUMNS", "160")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow RuntimeWarning would fail the test
        result = compare([str(tmp_path / "sweep")], metrics=["big"], out=tmp_path / "out")
    (summary,) = result.tables["big"]
    assert (summary.final.mean, summary.auc.mean) == (0.0, 0.0)
    assert summary.final.std == pytest.approx(math.sqrt(2) * 1e308)
    assert "0 ± 1.41e+308" in capsys.readouterr().out
    assert_valid_png(tmp_path / "out" / "metric_big.png")


def test_a_killed_launch_s_job_log_counts_for_which_jobs_are_compared(sweep, tmp_path):
    # The launch was killed before folding its job log into sweep_manifest.json: the JSON still says job 4 is
    # running, its last line in sweep_manifest.jobs.jsonl says it failed, and job 3's says it finished.
    entries = [
        {"job": n, "overrides": [f"clip={node}", f"seed={seed}"], "status": "running", "outcome": None, "error": None}
        | {"folder": str(sweep / str(n)), "pid": None}
        for n, node, seed in jobs()
    ]
    (sweep / "sweep_manifest.json").write_text(json.dumps({"task_overrides": [], "jobs": entries}))
    updates = [{"job": n, "status": "done", "outcome": "ok"} for n, _node, _seed in jobs() if n != 4]
    updates.append({"job": 4, "status": "failed", "outcome": "failed", "error": "RuntimeError: at step 3"})
    (sweep / "sweep_manifest.jobs.jsonl").write_text("".join(json.dumps(update) + "\n" for update in updates))
    result = compare([str(sweep)], last_k=LAST_K, out=tmp_path / "out")
    assert [arm.seeds for arm in result.arms] == [[1, 2, 3], [1, 3]]
    assert [note for note in result.notes if note.startswith("left out sweep")] == [
        f"left out sweep job 4 (clip=clip_higher seed=2) in {sweep / '4'}: failed: RuntimeError: at step 3"
    ]
