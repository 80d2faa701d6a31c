"""A sweep never hides a failed job: the others finish, the table and the sweep's manifest name it, the exit status
is 1. The jobs go through the real multirun path with `align_kit.train.run` replaced by a stub that fails by seed
(a traceback-worthy exception, a config error found inside the job, a monitor halt), so no model loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from align_kit.runs.sweep_manifest import read
from tests.conftest import ROOT, cli_env

STUB_SWEEP = """
import sys
from types import SimpleNamespace
from align_kit import cli, train
from align_kit.core.errors import ConfigError, TrainingHalted, TrainingInterrupted

def stub_run(cfg, choices, run_dir, group=None, name="default"):
    if cfg.seed == 2:
        raise RuntimeError("loss exploded\\nat step 3")
    if cfg.seed == 3:
        raise ConfigError("task.path=x.jsonl: row 4 has an empty prompt; fix the file")
    if cfg.seed == 4:
        raise TrainingHalted(SimpleNamespace(step=6, rule="non_finite", message="loss is nan", advice="lower lr"))
    if cfg.seed == 6:
        raise TrainingInterrupted("SIGTERM", 143, 4, run_dir + "/checkpoint-4")
    return {}

train.run = stub_run
cli.main(sys.argv[1:])
"""


def stub_sweep(cache_dir: str, sweep_dir: Path, seeds: str) -> subprocess.CompletedProcess:
    # The basic launcher runs the jobs in this process, where the stub replaced `run`.
    args = [
        "sweep",
        "clip_higher",
        "clip.eps_high=0.28",
        f"seed={seeds}",
        f"hydra.sweep.dir={sweep_dir}",
        "hydra/launcher=basic",
    ]
    return subprocess.run(
        [sys.executable, "-c", STUB_SWEEP, *args],
        capture_output=True,
        text=True,
        env=dict(cli_env(cache_dir), PYTHONPATH=str(ROOT)),
    )


def outcome(job: int, seed: int, outcome: str, error: str | None, sweep_dir: Path) -> dict:
    overrides = ["clip.eps_high=0.28", f"seed={seed}", "sweep=clip_higher"]  # in the order Hydra lists them
    status = "done" if outcome == "ok" else "failed"
    folder = str(sweep_dir / str(job))
    return {"job": job, "overrides": overrides, "status": status, "outcome": outcome, "error": error, "folder": folder}


def recorded(sweep_dir: Path) -> list[dict]:
    """Each job's entry in the sweep's manifest, reduced to the fields a reader of outcomes needs."""
    jobs = json.loads((sweep_dir / "sweep_manifest.json").read_text())["jobs"]
    fields = ("job", "overrides", "status", "outcome", "error", "folder")
    return [{key: job[key] for key in fields} for job in jobs]


@pytest.mark.slow  # 10-45 s of real processes: in the slow tier, which CI runs too
def test_failed_jobs_do_not_stop_the_sweep_and_are_reported(cache_dir, tmp_path):
    result = stub_sweep(cache_dir, tmp_path, "1,2,3,4,5")
    assert result.returncode == 1, result.stderr[-2000:]

    halt = "halted at step 6 by non_finite: loss is nan; advice: lower lr"
    empty_prompt = "task.path=x.jsonl: row 4 has an empty prompt; fix the file"
    expected = [
        outcome(0, 1, "ok", None, tmp_path),
        outcome(1, 2, "failed", "RuntimeError: at step 3", tmp_path),
        outcome(2, 3, "config error", empty_prompt, tmp_path),
        outcome(3, 4, "training halted", halt, tmp_path),
        outcome(4, 5, "ok", None, tmp_path),  # ran after the failures
    ]
    assert recorded(tmp_path) == expected

    # The overrides all jobs share are said once; each row shows the job's own.
    table = [
        "every job: clip.eps_high=0.28 sweep=clip_higher",
        "job  overrides  status           last error line",
        "0    seed=1     ok",
        "1    seed=2     failed           RuntimeError: at step 3",
        f"2    seed=3     config error     {empty_prompt}",
        f"3    seed=4     training halted  {halt}",
        "4    seed=5     ok",
    ]
    printed = result.stdout.splitlines()
    start = printed.index(table[0])
    assert printed[start : start + len(table)] == table
    assert printed[start - 1] == "align-kit: sweep finished: 2 of 5 jobs ok"
    assert result.stderr.strip().splitlines()[-1] == (
        f"align-kit: sweep failed: 3 of 5 jobs failed (jobs 1, 2, 3); see {tmp_path}/sweep_manifest.json "
        f"(align-kit sweep --status {tmp_path})"
    )
    assert "Traceback" not in result.stderr
    # The unexpected exception's traceback is kept in its job's folder.
    assert "RuntimeError: loss exploded" in (tmp_path / "1" / "error.log").read_text()


@pytest.mark.slow
def test_a_sweep_without_failures_exits_zero_with_its_summary(cache_dir, tmp_path):
    result = stub_sweep(cache_dir, tmp_path, "1,5")
    assert result.returncode == 0, result.stderr[-2000:]
    assert recorded(tmp_path) == [outcome(0, 1, "ok", None, tmp_path), outcome(1, 5, "ok", None, tmp_path)]


@pytest.mark.slow
def test_an_interrupted_job_ends_the_sweep_with_the_sweep_resume_command(cache_dir, tmp_path):
    result = stub_sweep(cache_dir, tmp_path, "1,6,5")
    assert result.returncode == 143, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"align-kit: interrupted by SIGTERM at step 4; saved {tmp_path}/1/checkpoint-4; "
        f"resume the sweep with: align-kit sweep --resume {tmp_path}"
    )
    # Job 1 stopped there (a signal stops the whole sweep): job 2 never ran, and the manifest says so.
    assert [(job["status"], job["outcome"]) for job in recorded_raw(tmp_path)] == [
        ("done", "ok"),
        ("running", None),
        ("pending", None),
    ]


def recorded_raw(sweep_dir: Path) -> list[dict]:
    """The jobs as `read` folds them: a launch that did not reach its end leaves its updates in the job log."""
    return read(sweep_dir)["jobs"]
