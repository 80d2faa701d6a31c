"""Launchers: how many jobs run at once and with how many threads; joblib and submitit_local run each job in its own
process (a failing job among three still fails alone); nothing is shared between jobs in one process.

The launcher tests stub `align_kit.train.run` in every process through a sitecustomize.py on PYTHONPATH (the
launchers start fresh interpreters, so a stub set in the launching process would not reach the jobs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from align_kit.runs import launchers
from tests.conftest import cli_env, stubbed_cli_env

SITECUSTOMIZE = """
import json, os, sys
if os.environ.get("STUB_LOG"):
    import align_kit.train as train

    def stub_run(cfg, choices, run_dir, group=None, name="default"):
        import torch
        from pathlib import Path
        with open(os.environ["STUB_LOG"], "a") as log:
            log.write(json.dumps({"seed": cfg.seed, "pid": os.getpid(), "threads": torch.get_num_threads(),
                                  "env_threads": os.environ.get("ALIGN_KIT_JOB_THREADS")}) + "\\n")
        if cfg.seed == 2:
            raise RuntimeError("loss exploded")
        Path(run_dir, "summary.json").write_text("{}")
        return {}

    train.run = stub_run
"""


@pytest.fixture
def stub_env(cache_dir, tmp_path):
    return stubbed_cli_env(cache_dir, tmp_path, SITECUSTOMIZE)


@pytest.mark.parametrize(
    ("launcher", "extra"),
    [("joblib", ["hydra.launcher.n_jobs=2"]), ("submitit_local", ["hydra.sweeper.max_batch_size=2"])],
)
@pytest.mark.slow  # 10-45 s of real processes: in the slow tier, which CI runs too
def test_each_local_launcher_runs_jobs_in_their_own_processes(launcher, extra, stub_env, tmp_path):
    env, log = stub_env
    sweep = tmp_path / "sweep"
    args = ["sweep", "clip_higher", "clip.eps_high=0.28", "seed=1,2,3", f"hydra.sweep.dir={sweep}"]
    result = subprocess.run(
        [sys.executable, "-m", "align_kit.cli", *args, f"hydra/launcher={launcher}", *extra],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 1, result.stderr[-3000:]  # the failing job fails the sweep, alone
    calls = sorted((json.loads(line) for line in log.read_text().splitlines()), key=lambda call: call["seed"])
    assert [call["seed"] for call in calls] == [1, 2, 3]
    assert len({call["pid"] for call in calls} | {os.getpid()}) >= 3  # not this process, and not one process
    # Each job runs with the thread count the launch line announced.
    announced = next(line for line in result.stderr.splitlines() if line.startswith("align-kit: 3 jobs"))
    assert f"2 at once (hydra/launcher={launcher}, " in announced
    for call in calls:
        assert call["threads"] == int(call["env_threads"]) and f"{call['threads']} thread(s) each" in announced
    manifest = json.loads((sweep / "sweep_manifest.json").read_text())
    assert [(job["job"], job["status"], job["outcome"], job["error"]) for job in manifest["jobs"]] == [
        (0, "done", "ok", None),
        (1, "failed", "failed", "RuntimeError: loss exploded"),
        (2, "done", "ok", None),
    ]


@pytest.mark.parametrize(
    ("free", "jobs", "args", "added", "threads"),
    [
        (1, 15, [], [], 1),  # one core free: one at a time, on the basic launcher
        (2, 15, [], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], 1),
        (8, 3, [], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=3"], 2),  # 8 // 3
        (8, 2, [], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], 4),
        (8, 4, ["hydra/launcher=basic"], [], 8),  # a launcher named on the command line is kept
        (8, 4, ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], [], 4),
        (4, 6, ["hydra/launcher=submitit_local"], ["hydra.sweeper.max_batch_size=4"], 1),
        (4, 6, ["hydra/launcher=slurm"], [], 0),  # a cluster's jobs get their own machines
    ],
)
def test_launch_plan_never_oversubscribes(monkeypatch, free, jobs, args, added, threads):
    monkeypatch.setattr(launchers, "cores", lambda: 8)
    monkeypatch.setattr(launchers, "free_cores", lambda: free)
    got_added, got_threads, line = launchers.plan(args, jobs)
    assert (got_added, got_threads) == (added, threads)
    assert line.startswith(f"align-kit: {jobs} jobs")


def test_isolated_job_leaves_no_threads_wandb_run_or_accelerate_state(monkeypatch, tmp_path):
    import torch
    import wandb
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, PartialState

    before = torch.get_num_threads()
    wanted = 2 if before != 2 else 3
    monkeypatch.setenv(launchers.THREADS_ENV, str(wanted))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    with launchers.isolated_job():
        assert torch.get_num_threads() == wanted
        Accelerator(cpu=True)
        # mode given here: W&B reads WANDB_MODE once per process, and an earlier test may have set W&B up already
        wandb.init(project="isolation", config={"seed": 1}, mode="offline")
        assert AcceleratorState._shared_state != {} and wandb.run is not None
    assert torch.get_num_threads() == before
    assert wandb.run is None
    assert AcceleratorState._shared_state == {} and PartialState._shared_state == {}


def job_rows(folder: Path) -> list[dict]:
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [
        {k: v for k, v in row.items() if not re.search(r"runtime|per_sec|step_time", k)}
        for row in rows
        if "reward" in row
    ]


@pytest.mark.slow
def test_a_job_after_another_in_one_process_trains_as_if_alone(overrides_for, cache_dir, tmp_path):
    """Hydra's basic launcher runs both jobs in one process: the second must log what it logs alone."""
    common = [*overrides_for("logger=wandb_offline"), "trainer.max_steps=3"]
    env = cli_env(cache_dir)
    cli = [sys.executable, "-m", "align_kit.cli", "train"]
    pair = subprocess.run(
        [*cli, "-m", "hydra/launcher=basic", *common, "seed=1,2", f"hydra.sweep.dir={tmp_path / 'pair'}"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert pair.returncode == 0, pair.stderr[-3000:]
    alone = subprocess.run(
        [*cli, *common, "seed=2", f"hydra.run.dir={tmp_path / 'alone'}"], capture_output=True, text=True, env=env
    )
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert job_rows(tmp_path / "pair" / "1") == job_rows(tmp_path / "alone")
    for job, seed in (("0", 1), ("1", 2)):  # one W&B run per job, holding its own job's config
        runs = list((tmp_path / "pair" / job / "wandb").glob("offline-run-*"))
        assert len(runs) == 1, runs
        from align_kit.tracking.wandb_offline import read_config

        assert read_config(runs[0])["seed"] == seed


def test_slurm_launcher_config_composes_with_the_documented_defaults():
    from align_kit.experiment.compose import compose

    compose(["hydra/launcher=slurm"])
    from hydra.core.hydra_config import HydraConfig

    launcher = HydraConfig.get().launcher
    assert launcher._target_ == "hydra_plugins.align_kit_slurm.slurm_launcher.SlurmLauncher"
    assert (launcher.gpus_per_node, launcher.array_parallelism, launcher.timeout_min) == (1, 8, 240)
    assert (launcher.signal_delay_s, launcher.max_num_timeout) == (120, 3)
    assert launcher.partition is None  # the site's, from hydra/launcher/site/slurm_local.yaml
