"""Resumable sweeps: the manifest, `--status`, `--resume`, and a changed sweep refused.

The fast tests run the real multirun path with `align_kit.train.run` replaced by a stub (no model loads) that logs
each call; the slow test kills a real sweep with SIGKILL and checks the resumed one against an uninterrupted one."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_env

ROOT = Path(__file__).resolve().parent.parent
TIMING = re.compile(r"runtime|per_sec|step_time")  # wall-clock measurements differ between any two runs

# seed 1 finishes; seed 2 fails; seed 3 saves a checkpoint and then the whole process is killed (SIGKILL: no
# callback, no cleanup), so seed 4 never starts. With ALIGN_KIT_STUB_CALM set, every call finishes.
STUB_SWEEP = """
import json, os, signal, sys
from pathlib import Path
from align_kit import cli, train

def stub_run(cfg, choices, run_dir, group=None, name="default"):
    folder = Path(run_dir)
    with open(os.environ["STUB_LOG"], "a") as log:
        log.write(json.dumps({"seed": cfg.seed, "resume": bool(cfg.train.resume)}) + "\\n")
    (folder / "metrics.jsonl").write_text("{}\\n")
    if not os.environ.get("ALIGN_KIT_STUB_CALM"):
        if cfg.seed == 2:
            raise RuntimeError("loss exploded")
        if cfg.seed == 3:  # killed while writing checkpoint-3 (HF writes trainer_state.json last)
            (folder / "checkpoint-2").mkdir()
            (folder / "checkpoint-2" / "trainer_state.json").write_text("{}")
            (folder / "checkpoint-3").mkdir()
            os.kill(os.getpid(), signal.SIGKILL)
    (folder / "summary.json").write_text(json.dumps({"seed": cfg.seed}))
    return {}

train.run = stub_run
cli.main(sys.argv[1:])
"""


def stub(args: list[str], cache_dir: str, log: Path, calm: bool = False) -> subprocess.CompletedProcess:
    env = dict(cli_env(cache_dir), PYTHONPATH=str(ROOT), STUB_LOG=str(log))
    if calm:
        env["ALIGN_KIT_STUB_CALM"] = "1"
    return subprocess.run([sys.executable, "-c", STUB_SWEEP, *args], capture_output=True, text=True, env=env)


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_killed_sweep_resumes_job_by_job(cache_dir, tmp_path):
    sweep, log = tmp_path / "sweep", tmp_path / "calls.jsonl"
    launch = [
        "sweep",
        "clip_higher",
        "clip.eps_high=0.28",
        "seed=1,2,3,4",
        f"hydra.sweep.dir={sweep}",
        "hydra/launcher=basic",
    ]
    killed = stub(launch, cache_dir, log)
    assert killed.returncode == -signal.SIGKILL
    assert calls(log) == [{"seed": s, "resume": False} for s in (1, 2, 3)]
    first_summary = (sweep / "0" / "summary.json").stat()

    status = stub(["sweep", "--status", str(sweep)], cache_dir, log)
    assert status.returncode == 0, status.stderr[-2000:]
    lines = status.stdout.splitlines()
    assert lines[0] == f"sweep {sweep}: 4 jobs, 1 done, 1 failed, 1 interrupted, 1 pending"
    rows = [line.split() for line in lines[3:7]]
    assert [row[:3] for row in rows] == [
        ["0", "seed=1", "done"],
        ["1", "seed=2", "failed"],
        ["2", "seed=3", "interrupted"],
        ["3", "seed=4", "pending"],
    ]
    assert "RuntimeError: loss exploded" in lines[4]

    # A changed definition is refused, naming the difference, and leaves the folder as it was.
    changed = stub([*launch[:3], "seed=1,2,3,4,5", launch[4]], cache_dir, log)
    assert changed.returncode == 2
    assert "job 4: (none) -> clip.eps_high=0.28 seed=5 sweep=clip_higher" in changed.stderr
    assert len(calls(log)) == 3

    resumed = stub(["sweep", "--resume", str(sweep)], cache_dir, log, calm=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # seed 1 not rerun; seed 2 (failed) from scratch; seed 3 from its last whole checkpoint; seed 4 for the first time.
    assert calls(log)[3:] == [{"seed": 2, "resume": False}, {"seed": 3, "resume": True}, {"seed": 4, "resume": False}]
    assert (sweep / "0" / "summary.json").stat().st_mtime_ns == first_summary.st_mtime_ns
    moved = sorted((sweep / ".attempts").iterdir())
    assert [path.name.split("-")[0] for path in moved] == ["1", "2"] and (moved[0] / "error.log").is_file()
    # The half-written checkpoint-3 was moved aside, not deleted; the job resumed from checkpoint-2.
    assert [p.name for p in moved[1].iterdir()] == ["checkpoint-3"] and (sweep / "2" / "checkpoint-2").is_dir()
    assert "checkpoint-3 was left half-written" in resumed.stderr
    summary = json.loads((sweep / "sweep_summary.json").read_text())
    assert (summary["jobs"], summary["failed"]) == (4, 0)
    assert [o["status"] for o in summary["outcomes"]] == ["ok"] * 4
    manifest = json.loads((sweep / "sweep_manifest.json").read_text())
    assert manifest["launches"] == 2 and [job["status"] for job in manifest["jobs"]] == ["done"] * 4

    # The same command again: nothing left to do, nothing rerun.
    again = stub(launch, cache_dir, log, calm=True)
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(calls(log)) == 6


def test_status_of_a_folder_without_a_manifest_names_the_fix(cache_dir, tmp_path):
    result = stub(["sweep", "--status", str(tmp_path)], cache_dir, tmp_path / "log")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"align-kit sweep --status: {tmp_path} holds no sweep_manifest.json; pass a folder that `align-kit sweep` "
        "created (outputs/sweeps/<time>)"
    )


def job_metrics(folder: Path) -> dict[int, dict]:
    """The last logged row per step (a resumed run may log the steps after its checkpoint again)."""
    rows = {}
    for line in (folder / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "step" in row and "reward" in row:
            rows[row["step"]] = {k: v for k, v in row.items() if not TIMING.search(k)}
    return rows


KILL_IN_JOB_1 = """
import os, signal, sys
from transformers import TrainerCallback
from align_kit import cli, trainer

class KillAtStepThreeOfSeedTwo(TrainerCallback):
    def __init__(self, seed):
        self.seed = seed

    def on_step_begin(self, args, state, control, **kwargs):
        if self.seed == 2 and state.global_step == 3:
            os.kill(os.getpid(), signal.SIGKILL)

build = trainer.AlignTrainer.from_plan.__func__
trainer.AlignTrainer.from_plan = classmethod(
    lambda cls, plan, model, tokenizer, extra_callbacks=(), train_dataset=None: build(
        cls, plan, model, tokenizer, (*extra_callbacks, KillAtStepThreeOfSeedTwo(plan.grpo_kwargs["seed"])),
        train_dataset,
    )
)
cli.main(sys.argv[1:])
"""


@pytest.mark.slow
def test_sigkill_mid_sweep_then_resume_equals_an_uninterrupted_sweep(overrides_for, cache_dir, tmp_path):
    common = [
        *overrides_for("logger=none", fast_training=False),
        "trainer.max_steps=4",
        "trainer.save_steps=2",
        "trainer.disable_tqdm=true",
        "seed=1,2,3",
    ]
    env = cli_env(cache_dir)
    cli = [sys.executable, "-m", "align_kit.cli", "train", "-m", "hydra/launcher=basic", *common]
    whole = subprocess.run([*cli, f"hydra.sweep.dir={tmp_path / 'whole'}"], capture_output=True, text=True, env=env)
    assert whole.returncode == 0, whole.stderr[-3000:]

    # The launch is killed (SIGKILL: no callback, no cleanup) in job 1 (seed 2) once step 3 has begun, so job 0 is
    # done and job 1 holds a whole checkpoint-2; a callback does it at that step, so no timing decides it.
    sweep = tmp_path / "killed"
    killed = subprocess.run(
        [sys.executable, "-c", KILL_IN_JOB_1, *cli[3:], f"hydra.sweep.dir={sweep}"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    done_before = (sweep / "0" / "summary.json").stat().st_mtime_ns
    assert not (sweep / "1" / "summary.json").exists()

    resumed = subprocess.run(
        [sys.executable, "-m", "align_kit.cli", "sweep", "--resume", str(sweep)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "job 0: finished in an earlier launch; skipped" in resumed.stderr
    assert "job 1: resumes from checkpoint-" in resumed.stderr
    assert (sweep / "0" / "summary.json").stat().st_mtime_ns == done_before
    jobs = sorted(p.name for p in sweep.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert jobs == sorted(p.name for p in (tmp_path / "whole").iterdir() if p.is_dir()) == ["0", "1", "2"]
    for job in jobs:
        assert job_metrics(sweep / job) == job_metrics(tmp_path / "whole" / job), job
