"""`align-kit compare`: arms, statistics, figures, report and errors, from run folders written here, from a fake
`wandb.Api` and from offline W&B runs read back.

The sweep: two arms (clip=symmetric with eps_high 0.2, clip=clip_higher with eps_high 0.28) x seeds 1, 2, 3, five
steps each, compared with --last-k 2. Every expected number below is worked out by hand from these formulas.

reward at steps t = 1..5:
  symmetric:   0.1 t + c_s, c = -0.1, 0, +0.1 for seeds 1, 2, 3
  clip_higher: 0.2 t + d_s, d = -0.2, 0, +0.2
  final (mean of t = 4, 5): symmetric 0.45 + c = 0.35, 0.45, 0.55 -> mean 0.45, sample std sqrt((0.01+0+0.01)/2) = 0.1
                            clip_higher 0.9 + d = 0.7, 0.9, 1.1   -> mean 0.9,  std 0.2
  AUC/span of a line over [1, 5] is its value at t = 3: symmetric 0.3 + c -> mean 0.3, std 0.1;
                                                         clip_higher 0.6 + d -> mean 0.6, std 0.2
  difference: final 0.9 - 0.45 = 0.45, AUC 0.6 - 0.3 = 0.3, both with SE sqrt(0.1^2/3 + 0.2^2/3) = sqrt(0.05/3)

entropy is logged at steps 1, 3, 5 only (rows 2 and 4 lack it), plus e_s = 0, 0.1, 0.2 for seeds 1, 2, 3:
  symmetric (1.0, 0.2, 0.0) + e;  clip_higher (1.0, 0.8, 0.6) + e
  trapezoid over steps 1, 3, 5 = (v1 + v2) + (v2 + v3) = v1 + 2 v2 + v3; span 4
  AUC/span: symmetric (1.0 + 0.4 + 0.0)/4 + e = 0.35 + e -> mean 0.45, std 0.1
            clip_higher (1.0 + 1.6 + 0.6)/4 + e = 0.8 + e -> mean 0.9, std 0.1
  final (steps 3, 5): symmetric 0.1 + e -> mean 0.2, std 0.1; clip_higher 0.7 + e -> mean 0.8, std 0.1
  difference: final 0.6, AUC 0.45, both with SE sqrt(0.01/3 + 0.01/3) = sqrt(0.02/3)

kl is logged by the clip_higher runs only, so it is not a common metric and is left out.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from align_kit import cli
from align_kit.compare import CompareError
from align_kit.compare.arms import group_into_arms
from align_kit.compare.command import compare
from align_kit.compare.plots import seed_band, smooth
from align_kit.compare.run_record import Run
from align_kit.compare.runs import find_run_folders
from align_kit.compare.statistics import summarise_metric
from align_kit.compare.wandb_source import load_wandb_group
from align_kit.tracking.metrics_file import Series

SEEDS = (1, 2, 3)
ARMS = {"symmetric": 0.2, "clip_higher": 0.28}  # node -> clip.eps_high
LAST_K = 2
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

REWARD_SLOPE = {"symmetric": 0.1, "clip_higher": 0.2}
REWARD_OFFSET = {"symmetric": {1: -0.1, 2: 0.0, 3: 0.1}, "clip_higher": {1: -0.2, 2: 0.0, 3: 0.2}}
ENTROPY = {"symmetric": {1: 1.0, 3: 0.2, 5: 0.0}, "clip_higher": {1: 1.0, 3: 0.8, 5: 0.6}}
ENTROPY_OFFSET = {1: 0.0, 2: 0.1, 3: 0.2}

# (mean, std) over seeds, from the module docstring.
EXPECTED = {
    ("reward", "symmetric"): {"final": (0.45, 0.1), "auc": (0.3, 0.1)},
    ("reward", "clip_higher"): {"final": (0.9, 0.2), "auc": (0.6, 0.2)},
    ("entropy", "symmetric"): {"final": (0.2, 0.1), "auc": (0.45, 0.1)},
    ("entropy", "clip_higher"): {"final": (0.8, 0.1), "auc": (0.9, 0.1)},
}
# clip_higher - symmetric: (delta final, delta AUC, standard error of both).
EXPECTED_DIFFERENCE = {
    "reward": (0.45, 0.3, math.sqrt(0.05 / 3)),
    "entropy": (0.6, 0.45, math.sqrt(0.02 / 3)),
}


def logged_rows(node: str, seed: int) -> list[dict]:
    """What one run logs per step, keyed as in metrics.jsonl."""
    rows = []
    for step in range(1, 6):
        row = {"step": step, "reward": REWARD_SLOPE[node] * step + REWARD_OFFSET[node][seed], "epoch": step / 5}
        if step in ENTROPY[node]:
            row["entropy"] = ENTROPY[node][step] + ENTROPY_OFFSET[seed]
        if node == "clip_higher":
            row["kl"] = 0.01 * step
        rows.append(row)
    return rows


def run_config(node: str, seed: int) -> dict:
    return {
        "seed": seed,
        "paths": {"output_root": f"/tmp/outputs-{seed}"},  # differs per run, but is not an arm key
        "clip": {"_target_": "align_kit.components.clip.TokenClip", "eps_low": 0.2, "eps_high": ARMS[node]},
        "trainer": {"learning_rate": 1e-3, "num_iterations": 2},
    }


def choices(node: str, seed: int) -> dict:
    # The logger differs between seeds: it says where a run was logged, not what it trained.
    return {"clip": node, "advantage": "grpo", "logger": "none" if seed == 1 else "wandb_offline"}


def jobs():
    """(job number, node, seed) in the order of `align-kit train -m clip=symmetric,clip_higher seed=1,2,3`."""
    return [(number, node, seed) for number, (node, seed) in enumerate((n, s) for n in ARMS for s in SEEDS)]


def write_run_folder(folder: Path, node: str, seed: int, with_summary: bool = True) -> None:
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(json.dumps(run_config(node, seed)))  # JSON is valid YAML
    if with_summary:
        (folder / "summary.json").write_text(json.dumps({"choices": choices(node, seed), "seed": seed}))
    # HF's end-of-training summary row closes metrics.jsonl; it is not a training step.
    summary_row = {"step": 5, "train_runtime": 1.5, "train_loss": 0.25, "epoch": 1.0}
    lines = [json.dumps(row) for row in [*logged_rows(node, seed), summary_row]]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture
def sweep(tmp_path) -> Path:
    root = tmp_path / "sweep"
    for number, node, seed in jobs():
        write_run_folder(root / str(number), node, seed)
    (root / "multirun.yaml").write_text("hydra: {}\n")
    return root


def assert_expected_statistics(result) -> None:
    assert [arm.name for arm in result.arms] == ["clip=symmetric", "clip=clip_higher"]
    assert [arm.seeds for arm in result.arms] == [list(SEEDS), list(SEEDS)]
    assert list(result.tables) == ["reward", "entropy"]  # kl is not logged by every run
    for metric, summaries in result.tables.items():
        for summary, node in zip(summaries, ARMS, strict=True):
            expected = EXPECTED[(metric, node)]
            assert (summary.final.mean, summary.final.std) == pytest.approx(expected["final"])
            assert (summary.auc.mean, summary.auc.std) == pytest.approx(expected["auc"])
            assert summary.final.n == summary.auc.n == 3
        baseline, other = summaries
        assert baseline.final_vs_baseline is None and baseline.auc_vs_baseline is None
        delta_final, delta_auc, stderr = EXPECTED_DIFFERENCE[metric]
        assert (other.final_vs_baseline.delta, other.final_vs_baseline.stderr) == pytest.approx((delta_final, stderr))
        assert (other.auc_vs_baseline.delta, other.auc_vs_baseline.stderr) == pytest.approx((delta_auc, stderr))


def assert_valid_png(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    pixels = matplotlib.image.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100


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


def test_arms_are_named_by_config_keys_without_node_choices(tmp_path):
    for number, node, seed in jobs():
        write_run_folder(tmp_path / str(number), node, seed, with_summary=False)
    result = compare([str(tmp_path)], last_k=LAST_K, out=tmp_path / "out")
    assert [arm.name for arm in result.arms] == ["clip.eps_high=0.2", "clip.eps_high=0.28"]


def make_run(label: str, config: dict, node_choices: dict) -> Run:
    return Run(label, config, node_choices, seed=1, series={"reward": Series(np.array([1.0]), np.array([0.0]))})


def test_a_key_the_node_choice_does_not_determine_joins_the_arm_name():
    runs = [
        make_run("a", {"clip.eps_high": 0.2}, {"clip": "symmetric"}),
        make_run("b", {"clip.eps_high": 0.28}, {"clip": "clip_higher"}),
        make_run("c", {"clip.eps_high": 0.32}, {"clip": "clip_higher"}),
        make_run("d", {"clip.eps_high": 0.28, "trainer.output_dir": "/x"}, {"clip": "clip_higher", "sweep": "s"}),
    ]
    arms = group_into_arms(runs)
    assert [arm.name for arm in arms] == [
        "clip=symmetric, clip.eps_high=0.2",
        "clip=clip_higher, clip.eps_high=0.28",
        "clip=clip_higher, clip.eps_high=0.32",
    ]
    assert [[run.label for run in arm.runs] for arm in arms] == [["a"], ["b", "d"], ["c"]]


def test_runs_that_differ_only_by_seed_form_one_arm():
    arms = group_into_arms([make_run("a", {"seed": 1}, {}), make_run("b", {"seed": 2}, {})])
    assert [(arm.name, len(arm.runs)) for arm in arms] == [("all runs", 2)]


def test_seeds_above_the_baseline_are_counted_per_seed():
    def run(node, seed, level):
        return Run(f"{node}-{seed}", {"clip.eps_high": ARMS[node]}, {"clip": node}, seed=seed,
                   series={"entropy": Series(np.array([1.0, 3.0]), np.array([level, level]))})  # fmt: skip

    # Baseline levels 0.5, 0.2, 0.9 for seeds 1-3; the other arm 0.6 (above), 0.1 (below), 1.0 (above), and a
    # seed 4 the baseline lacks, which is not counted.
    runs = [run("symmetric", 1, 0.5), run("symmetric", 2, 0.2), run("symmetric", 3, 0.9)]
    runs += [run("clip_higher", 1, 0.6), run("clip_higher", 2, 0.1), run("clip_higher", 3, 1.0)]
    runs += [run("clip_higher", 4, 5.0)]
    baseline, other = summarise_metric(group_into_arms(runs), "entropy")
    assert baseline.auc_above_baseline is None
    assert other.auc_above_baseline == (2, 3)


def test_a_key_that_follows_the_seed_is_aggregated_with_it():
    def run(label, seed, coin_seed):
        config = {"seed": seed, "reward.coin_flip.seed": coin_seed}
        return Run(label, config, {}, seed=seed, series={"reward": Series(np.array([1.0]), np.array([0.0]))})

    follows = group_into_arms([run("a", 1, 1), run("b", 2, 2), run("c", 3, 3)])
    assert [(arm.name, len(arm.runs)) for arm in follows] == [("all runs", 3)]
    # Pinned in one run: no longer the seed's shadow, so it names arms.
    pinned = group_into_arms([run("a", 1, 1), run("b", 2, 7)])
    assert [arm.name for arm in pinned] == ["reward.coin_flip.seed=1", "reward.coin_flip.seed=7"]


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


def test_moving_average_and_ema_smoothing():
    values = np.array([1.0, 2.0, 3.0, 4.0])
    # Window 2, trailing, shorter at the start: 1, (1+2)/2, (2+3)/2, (3+4)/2.
    assert smooth(values, 2) == pytest.approx([1.0, 1.5, 2.5, 3.5])
    # EMA 0.5: 1, 0.5*1 + 0.5*2 = 1.5, 0.5*1.5 + 0.5*3 = 2.25, 0.5*2.25 + 0.5*4 = 3.125.
    assert smooth(values, 0.5) == pytest.approx([1.0, 1.5, 2.25, 3.125])
    assert smooth(values, 0) is values


def test_seed_band_interpolates_onto_the_common_steps():
    # a: 0 at step 0, 2 at step 2 (1 at step 1 by interpolation); b: 2 everywhere.
    steps, mean, std = seed_band(
        [Series(np.array([0.0, 2.0]), np.array([0.0, 2.0])), Series(np.array([0.0, 1.0, 2.0]), np.array([2.0] * 3))], 0
    )
    assert steps == pytest.approx([0, 1, 2])
    assert mean == pytest.approx([1.0, 1.5, 2.0])
    # Sample std of two values x, y is |x - y| / sqrt(2).
    assert std == pytest.approx([2 / math.sqrt(2), 1 / math.sqrt(2), 0.0])


def test_job_folders_sort_by_number(tmp_path):
    for name in ("10", "2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text("")
    assert [folder.name for folder in find_run_folders(tmp_path)] == ["2", "10"]


# --- W&B -----------------------------------------------------------------------------------------------------------


def wandb_config(node: str, seed: int) -> dict:
    # As align_kit.train.run_identity: the resolved config plus choice/<group> keys.
    return {**run_config(node, seed), **{f"choice/{group}": value for group, value in choices(node, seed).items()}}


def wandb_rows(node: str, seed: int) -> list[dict]:
    """What HF's W&B callback logs: `train/<metric>` against `train/global_step`."""
    return [
        {f"train/{key}": value for key, value in row.items() if key != "step"} | {"train/global_step": row["step"]}
        for row in logged_rows(node, seed)
    ]


class FakeWandbRun:
    def __init__(self, node: str, seed: int, group: str):
        self.name = f"clip={node},seed={seed}"
        self.group = group
        self.tags = [f"clip={node}", f"seed={seed}"]
        self.config = wandb_config(node, seed)
        self._rows = [row | {"_step": index, "_runtime": 0.1} for index, row in enumerate(wandb_rows(node, seed))]

    def scan_history(self):
        return iter(self._rows)


class FakeApi:
    """Stands in for `wandb.Api()`: `.runs(path, filters=...)` over a project holding two groups."""

    def __init__(self):
        self.calls = []

    def runs(self, path, filters=None):
        self.calls.append((path, filters))
        everything = [FakeWandbRun(node, seed, "clip-sweep") for _, node, seed in jobs()]
        everything.append(FakeWandbRun("symmetric", 1, "another-group"))
        return [run for run in everything if run.group == filters["group"]]


def test_wandb_group_through_a_fake_api(monkeypatch, tmp_path):
    import wandb

    api = FakeApi()
    monkeypatch.setattr(wandb, "Api", lambda: api)
    result = compare(["wandb:team/align_kit/clip-sweep"], last_k=LAST_K, out=tmp_path / "out")

    assert api.calls == [("team/align_kit", {"group": "clip-sweep"})]
    assert_expected_statistics(result)
    assert result.arms[0].runs[0].label == "team/align_kit/clip=symmetric,seed=1"


def test_wandb_group_errors_name_the_fix():
    with pytest.raises(CompareError, match="wandb:ENTITY/PROJECT/GROUP"):
        load_wandb_group("team/align_kit", api=FakeApi())
    with pytest.raises(CompareError, match="no runs in group 'missing'"):
        load_wandb_group("team/align_kit/missing", api=FakeApi())


def test_offline_wandb_runs_read_back_give_the_same_comparison(monkeypatch, tmp_path):
    import wandb

    for variable in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(variable, str(tmp_path / "wandb-home"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    sweep = tmp_path / "sweep"
    for number, node, seed in jobs():
        folder = sweep / str(number)  # a run folder with only its offline W&B run, no metrics.jsonl
        folder.mkdir(parents=True)
        run = wandb.init(
            mode="offline",
            dir=str(folder),
            project="align_kit",
            group="clip-sweep",
            name=f"clip={node},seed={seed}",
            config=wandb_config(node, seed),
        )
        for row in wandb_rows(node, seed):
            run.log(row)
        run.finish()
    # finish() can return before W&B's service process has written the last records to disk (seen on a loaded
    # machine: the last run read back short); teardown waits for the service to flush and exit.
    wandb.teardown()

    result = compare([str(sweep)], last_k=LAST_K, out=tmp_path / "out")

    assert_expected_statistics(result)


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


# --- verdicts on a predicted direction ------------------------------------------------------------------------------


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


def test_a_single_seed_at_the_float_maximum_is_its_value_not_na():
    series = Series(np.array([1.0, 2.0, 3.0]), np.array([1e308, 1e308, 1e308]))
    run = Run("a", {}, {}, 1, {"big": series})
    (summary,) = summarise_metric(group_into_arms([run]), "big")
    assert (summary.final.mean, summary.auc.mean) == (1e308, 1e308)
