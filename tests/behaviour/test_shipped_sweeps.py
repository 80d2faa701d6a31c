"""Slow tier: every sweep file runs through the real multirun path, one step per job."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from align_kit import PROJECT_ROOT
from tests.behaviour.config_nodes import on_the_real_model
from tests.conftest import cli_env

SWEEPS = sorted((PROJECT_ROOT / "sweeps").glob("*.yaml"))


TINY_SWEEPS = [p for p in SWEEPS if not on_the_real_model(p)]
REAL_MODEL_SWEEPS = [p for p in SWEEPS if on_the_real_model(p)]


def expected_jobs(sweep_file, fixed: tuple[str, ...] = ()) -> int:
    params = OmegaConf.load(sweep_file).hydra.sweeper.params
    return math.prod(len(str(values).split(",")) for key, values in params.items() if key not in fixed)


def run_sweep(sweep_file, tmp_path, env, *overrides: str) -> None:
    # Through `align-kit sweep <name>`, which is `align-kit train -m sweep=<name>`.
    args = ["sweep", sweep_file.stem, f"hydra.sweep.dir={tmp_path}", *overrides, "trainer.max_steps=1"]
    result = subprocess.run([sys.executable, "-m", "align_kit.cli", *args], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]


def finished_jobs(sweep_dir) -> int:
    return len([job for job in sweep_dir.iterdir() if (job / "summary.json").exists()])


@pytest.mark.slow
@pytest.mark.parametrize("sweep_file", TINY_SWEEPS, ids=[p.stem for p in TINY_SWEEPS])
def test_sweep_runs_every_job(sweep_file, overrides_for, cache_dir, tmp_path):
    run_sweep(sweep_file, tmp_path, cli_env(cache_dir), *overrides_for())
    assert finished_jobs(tmp_path) == expected_jobs(sweep_file)


@pytest.mark.real_model
@pytest.mark.parametrize("sweep_file", REAL_MODEL_SWEEPS, ids=[p.stem for p in REAL_MODEL_SWEEPS])
def test_real_model_sweep_runs_each_arm_once(sweep_file, tmp_path):
    # One seed, one step, four completions of 8 tokens: every arm composes, loads the real model and trains. The
    # user's cache holds the converted GGUF, as in the rest of the real-model tier.
    small = ["seed=1", "trainer.per_device_train_batch_size=4", "trainer.max_completion_length=8", "logger=none"]
    cache = os.environ.get("ALIGN_KIT_CACHE", str(Path.home() / ".cache" / "align_kit"))
    run_sweep(sweep_file, tmp_path, dict(cli_env(cache), OMP_NUM_THREADS="2"), *small)
    assert finished_jobs(tmp_path) == expected_jobs(sweep_file, fixed=("seed",))


def test_sweep_command_names_the_sweeps_when_the_name_is_unknown(cache_dir):
    result = subprocess.run(
        [sys.executable, "-m", "align_kit.cli", "sweep", "clip_highr"],
        capture_output=True,
        text=True,
        env=cli_env(cache_dir),
    )
    assert result.returncode == 2
    names = ", ".join(path.stem for path in SWEEPS)
    assert result.stderr.strip() == f"align-kit sweep: no sweep 'clip_highr'; names: {names}"
