"""Slow tier: every sweep file runs through the real multirun path, one step per job."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from align_kit import PROJECT_ROOT
from tests.conftest import cli_env

SWEEPS = sorted((PROJECT_ROOT / "sweeps").glob("*.yaml"))


def expected_jobs(sweep_file) -> int:
    params = OmegaConf.load(sweep_file).hydra.sweeper.params
    return math.prod(len(str(values).split(",")) for values in params.values())


@pytest.mark.slow
@pytest.mark.parametrize("sweep_file", SWEEPS, ids=[p.stem for p in SWEEPS])
def test_sweep_runs_every_job(sweep_file, overrides_for, cache_dir, tmp_path):
    # Through `align-kit sweep <name>`, which is `align-kit train -m sweep=<name>`.
    args = ["sweep", sweep_file.stem, f"hydra.sweep.dir={tmp_path}", *overrides_for(), "trainer.max_steps=1"]
    result = subprocess.run(
        [sys.executable, "-m", "align_kit.cli", *args], capture_output=True, text=True, env=cli_env(cache_dir)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    finished = [job for job in tmp_path.iterdir() if (job / "summary.json").exists()]
    assert len(finished) == expected_jobs(sweep_file)


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
