"""End-to-end training on the embedded default through the real entry path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from align_kit.tracking.metrics_file import read_metrics
from align_kit.tracking.wandb_offline import find_offline_runs, read_config, read_history, read_run_info
from tests.behaviour.logged_steps import step_rows, without_timing
from tests.conftest import cli_env


def test_default_run_writes_the_run_folder_and_an_offline_wandb_run(train_once, tmp_path):
    summary = train_once(tmp_path, "trainer.save_strategy=steps", "trainer.save_steps=2")
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [row["step"] for row in step_rows(rows)] == [1, 2, 3, 4]
    assert {"reward", "entropy", "clip_ratio/high_mean", "rewards/correctness/mean", "grad_norm"} <= set(rows[0])
    assert summary["steps"] == 4 and json.loads((tmp_path / "summary.json").read_text())["steps"] == 4
    assert (tmp_path / "config.yaml").read_text().count("clip_higher") == 0
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]

    (offline_run,) = find_offline_runs(tmp_path)
    history = [row for row in read_history(offline_run) if "train/reward" in row]
    logged = [row for row in step_rows(rows) if "reward" in row]
    assert [h["train/global_step"] for h in history] == [row["step"] for row in logged]
    assert [h["train/reward"] for h in history] == pytest.approx([row["reward"] for row in logged])
    info = read_run_info(offline_run)
    assert info["project"] == "align_kit" and info["name"] == "default"
    assert {"clip=symmetric", "advantage=grpo", "reward=correctness+format", "seed=0"} <= set(info["tags"])
    config = read_config(offline_run)
    assert config["choice/clip"] == "symmetric" and config["trainer"]["max_steps"] == 4


@pytest.mark.slow
def test_tiny_moe_trains_with_logger_none(train_once, tmp_path):
    summary = train_once(tmp_path, "model=tiny_moe", "logger=none", "trainer.max_steps=2")
    assert summary["steps"] == 2
    assert not (tmp_path / "wandb").exists()
    assert len(step_rows(read_metrics(tmp_path / "metrics.jsonl"))) == 2


def test_logger_none_never_imports_wandb_in_align_kit(cache_dir):
    # TRL imports wandb itself when it is installed; what align_kit controls is its own path.
    code = (
        "import sys\n"
        "from align_kit.experiment.compose import compose\n"
        "from align_kit.experiment.plan import build_plan\n"
        "from align_kit.train import component_choices, run_identity\n"
        "cfg = compose(['logger=none'])\n"
        "plan = build_plan(cfg, component_choices(), '/tmp/x')\n"
        "with plan.logger.session('/tmp/x', run_identity(cfg, {}, None, 'n')):\n"
        "    pass\n"
        "print('report_to', plan.grpo_kwargs['report_to'], 'wandb' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(cache_dir))
    assert result.stdout.strip() == "report_to [] False", result.stderr


@pytest.mark.slow
def test_same_seed_gives_identical_metrics(train_once, tmp_path):
    first = train_once(tmp_path / "a", "logger=none", "seed=3")
    second = train_once(tmp_path / "b", "logger=none", "seed=3")
    other = train_once(tmp_path / "c", "logger=none", "seed=4")
    assert first["steps"] == second["steps"] == other["steps"] == 4
    a, b, c = (without_timing(read_metrics(tmp_path / name / "metrics.jsonl")) for name in "abc")
    assert a == b
    assert a != c  # the comparison can fail: another seed samples other completions


def test_cfg_job_prints_the_config_without_heavy_imports(cache_dir):
    code = (
        "import sys; from align_kit.cli import main\n"
        "main(['train', '--cfg', 'job', 'clip=clip_higher', 'trainer.max_steps=7'])\n"
        "print('heavy:', sorted(m for m in ('torch', 'trl', 'transformers', 'wandb') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(cache_dir))
    assert result.returncode == 0, result.stderr
    assert "eps_high: 0.28" in result.stdout and "max_steps: 7" in result.stdout
    assert "heavy: []" in result.stdout


@pytest.mark.slow  # 10-45 s of real processes: in the slow tier, which CI runs too
def test_multirun_gives_each_job_its_own_folder_and_wandb_run(cache_dir, overrides_for, tmp_path):
    args = [
        "-m",
        "clip=symmetric,clip_higher",
        "seed=5",
        "trainer.max_steps=1",
        "trainer.steps_per_generation=1",
        "trainer.per_device_train_batch_size=16",
        f"hydra.sweep.dir={tmp_path}",
        *[o for o in overrides_for() if not o.startswith("trainer.max_steps")],
    ]
    result = subprocess.run(
        [sys.executable, "-m", "align_kit.train", *args],
        capture_output=True,
        text=True,
        env=cli_env(cache_dir),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = sorted(p for p in tmp_path.iterdir() if (p / "metrics.jsonl").exists())
    assert len(jobs) == 2
    infos = [read_run_info(find_offline_runs(job)[0]) for job in jobs]
    assert infos[0]["group"] == infos[1]["group"] == f"multirun-{tmp_path.name}"
    # Name = the arm (the overrides without the seed); the seed is a tag.
    assert [info["name"].split(",")[0] for info in infos] == ["clip=symmetric", "clip=clip_higher"]
    assert all("seed=" not in info["name"] and "seed=5" in info["tags"] for info in infos)
    assert "clip=clip_higher" in infos[1]["tags"]
