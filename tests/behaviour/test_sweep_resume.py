"""Resumable sweeps: the manifest, `--status`, `--resume`, and a changed sweep refused.

The fast tests run the real multirun path with `align_kit.train.run` replaced by a stub (no model loads) that logs
each call; the slow test kills a real sweep with SIGKILL and checks the resumed one against an uninterrupted one."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import cli_env, stubbed_cli_env

TIMING = re.compile(r"runtime|per_sec|step_time")  # wall-clock measurements differ between any two runs

# Loaded by every Python process of the sweep (the launcher's and each job's, whatever the launcher), so the jobs
# run this stub instead of training. Seed 1 finishes; seed 2 fails; seed 3 saves checkpoint-2, starts checkpoint-3
# and then SIGKILLs the whole process group (launcher and every job: no callback, no cleanup), as a pre-empted
# machine would. Under a parallel launcher it first waits until seed 4 has started, so seed 4 dies mid-run; one
# at a time, seed 4 never starts. With ALIGN_KIT_STUB_CALM set, every call finishes.
SITECUSTOMIZE = """
import json, os, signal, time
if os.environ.get("STUB_LOG"):
    from pathlib import Path
    import align_kit.train as train

    def stub_run(cfg, choices, run_dir, group=None, name="default"):
        folder = Path(run_dir)
        log = Path(os.environ["STUB_LOG"])
        with open(log, "a") as handle:
            handle.write(json.dumps({"seed": cfg.seed, "resume": bool(cfg.train.resume)}) + "\\n")
        (folder / "metrics.jsonl").write_text("{}\\n")
        if not os.environ.get("ALIGN_KIT_STUB_CALM"):
            if cfg.seed == 2:
                raise RuntimeError("loss exploded")
            if cfg.seed == 3:  # killed while writing checkpoint-3 (HF writes trainer_state.json last)
                (folder / "checkpoint-2").mkdir()
                (folder / "checkpoint-2" / "trainer_state.json").write_text("{}")
                (folder / "checkpoint-3").mkdir()
                deadline = time.time() + 300  # a hang guard: seed 4 starts at once unless the machine is loaded
                while os.environ.get("STUB_WAIT_FOR_SEED_4") and time.time() < deadline:
                    if any(json.loads(line)["seed"] == 4 for line in log.read_text().splitlines()):
                        break
                    time.sleep(0.05)
                os.killpg(os.getpgrp(), signal.SIGKILL)
            if cfg.seed == 4:
                time.sleep(60)  # still running when seed 3 kills the group
        (folder / "summary.json").write_text(json.dumps({"seed": cfg.seed}))
        return {}

    train.run = stub_run
"""


def stub(args: list[str], env: dict, calm: bool = False) -> subprocess.CompletedProcess:
    """`align-kit ARGS` in a session of its own (its process group is its pid), with the stub in every process."""
    env = dict(env, ALIGN_KIT_STUB_CALM="1") if calm else env
    command = [sys.executable, "-m", "align_kit.cli", *args]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    stdout, stderr = process.communicate(timeout=600)
    if process.returncode == -signal.SIGKILL:  # killed by the stub: no job of the sweep may outlive it
        deadline = time.time() + 60
        with contextlib.suppress(ProcessLookupError):
            while time.time() < deadline:
                os.killpg(process.pid, 0)
                time.sleep(0.05)
            os.killpg(process.pid, signal.SIGKILL)
            raise AssertionError(f"processes of the killed sweep outlived it: {stderr[-2000:]}")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


@pytest.fixture
def stub_env(cache_dir, tmp_path):
    return stubbed_cli_env(cache_dir, tmp_path, SITECUSTOMIZE)


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.parametrize(
    ("first", "then", "seed_4_after_kill"),
    [
        # Killed one at a time; resumed with a parallel launcher named on the resume command (a launcher change).
        (["hydra/launcher=basic"], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], "pending"),
        # Killed with two jobs running at once; `--resume` alone replays the first launch's launcher.
        (["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], [], "interrupted"),
    ],
    ids=["basic-then-joblib", "joblib"],
)
@pytest.mark.slow  # 10-45 s of real processes: in the slow tier, which CI runs too
def test_a_killed_sweep_resumes_job_by_job(first, then, seed_4_after_kill, stub_env, tmp_path):
    env, log = stub_env
    if "hydra/launcher=joblib" in first:
        env = dict(env, STUB_WAIT_FOR_SEED_4="1")
    sweep = tmp_path / "sweep"
    launch = ["sweep", "clip_higher", "clip.eps_high=0.28", "seed=1,2,3,4", f"hydra.sweep.dir={sweep}", *first]
    killed = stub(launch, env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    started = sorted(call["seed"] for call in calls(log))
    assert started == ([1, 2, 3] if seed_4_after_kill == "pending" else [1, 2, 3, 4])
    first_summary = (sweep / "0" / "summary.json").stat()

    status = stub(["sweep", "--status", str(sweep)], env)
    assert status.returncode == 0, status.stderr[-2000:]
    lines = status.stdout.splitlines()
    counts = {"ok": 1, "failed": 1, "interrupted": 1 + (seed_4_after_kill == "interrupted")}
    counts["pending"] = int(seed_4_after_kill == "pending")
    shown = ", ".join(f"{n} {name}" for name, n in sorted(counts.items()) if n)
    assert lines[0] == f"sweep {sweep}: 4 jobs, {shown}"
    rows = [line.split() for line in lines[3:7]]
    assert [row[:3] for row in rows] == [
        ["0", "seed=1", "ok"],
        ["1", "seed=2", "failed"],
        ["2", "seed=3", "interrupted"],
        ["3", "seed=4", seed_4_after_kill],
    ]
    assert "RuntimeError: loss exploded" in lines[4]

    # A changed definition is refused, naming the difference, and leaves the folder as it was.
    changed = stub([*launch[:3], "seed=1,2,3,4,5", *launch[4:]], env)
    assert changed.returncode == 2
    assert "job 4: (none) -> clip.eps_high=0.28 seed=5 sweep=clip_higher" in changed.stderr
    assert len(calls(log)) == len(started)

    resumed = stub(["sweep", "--resume", str(sweep), *then], env, calm=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "2 at once (hydra/launcher=joblib" in resumed.stderr
    # seed 1 not rerun; seed 2 (failed) from scratch; seed 3 from its last whole checkpoint; seed 4 from scratch.
    again = sorted(calls(log)[len(started) :], key=lambda call: call["seed"])
    assert again == [{"seed": 2, "resume": False}, {"seed": 3, "resume": True}, {"seed": 4, "resume": False}]
    assert (sweep / "0" / "summary.json").stat().st_mtime_ns == first_summary.st_mtime_ns
    moved = {path.name.split("-")[0]: path for path in (sweep / ".attempts").iterdir()}
    assert sorted(moved) == (["1", "2"] if seed_4_after_kill == "pending" else ["1", "2", "3"])
    assert (moved["1"] / "error.log").is_file()
    # The half-written checkpoint-3 was moved aside, not deleted; the job resumed from checkpoint-2.
    assert [p.name for p in moved["2"].iterdir()] == ["checkpoint-3"] and (sweep / "2" / "checkpoint-2").is_dir()
    assert "checkpoint-3 was left half-written" in resumed.stderr
    manifest = json.loads((sweep / "sweep_manifest.json").read_text())
    assert manifest["launches"] == 2
    assert [(job["status"], job["outcome"]) for job in manifest["jobs"]] == [("done", "ok")] * 4
    assert "hydra/launcher=joblib" in manifest["hydra_overrides"]  # the launcher of the latest launch

    # The same command again: nothing left to do, nothing rerun.
    again = stub(launch, env, calm=True)
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(calls(log)) == len(started) + 3


def test_status_of_a_folder_without_a_manifest_names_the_fix(stub_env, tmp_path):
    result = stub(["sweep", "--status", str(tmp_path)], stub_env[0])
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
from align_kit import cli
from align_kit.experiment import build_trainer as builder

class KillAtStepThreeOfSeedTwo(TrainerCallback):
    def __init__(self, seed):
        self.seed = seed

    def on_step_begin(self, args, state, control, **kwargs):
        if self.seed == 2 and state.global_step == 3:
            os.kill(os.getpid(), signal.SIGKILL)

build = builder.build_trainer
builder.build_trainer = lambda plan, model, tokenizer, extra_callbacks=(), train_dataset=None: build(
    plan, model, tokenizer, (*extra_callbacks, KillAtStepThreeOfSeedTwo(plan.grpo_kwargs["seed"])), train_dataset
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


@pytest.mark.slow
def test_a_resume_with_a_bad_value_is_refused_before_any_job_runs(stub_env, tmp_path):
    env, log = stub_env
    sweep = tmp_path / "sweep"
    done = stub(["sweep", "clip_higher", "seed=1", f"hydra.sweep.dir={sweep}", "hydra/launcher=basic"], env, calm=True)
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = (sweep / "sweep_manifest.json").read_text()
    refused = stub(["sweep", "--resume", str(sweep), "hydra/launcher=nosuch"], env, calm=True)
    assert refused.returncode == 2
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .startswith("align-kit: config error: In 'hydra/config': Could not find 'hydra/launcher/nosuch'")
    )
    assert "Traceback" not in refused.stderr and (sweep / "sweep_manifest.json").read_text() == manifest
    assert len(calls(log)) == 3  # the first launch's jobs only (clip_higher's three eps_high values, seed 1)


def test_a_launcher_pid_is_told_apart_by_its_start_time():
    from align_kit.core.processes import process_start_time
    from align_kit.runs.sweep_manifest import process_alive

    me, started = os.getpid(), process_start_time()
    assert process_alive(me, started)
    assert not process_alive(me, started - 3600)  # this PID, but a process that started an hour earlier: not it
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        written_before = time.time() - 60
        # A manifest without a start time (from before they were recorded): a process that started after the
        # manifest was last written cannot have written it; one that started before may have.
        assert not process_alive(sleeper.pid, None, written_before)
        assert process_alive(me, None, time.time())
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not process_alive(sleeper.pid, None) and not process_alive(2**40, None)


@pytest.mark.slow  # 10-45 s of real processes: in the slow tier, which CI runs too
def test_a_manifest_whose_launcher_pid_now_names_another_process_resumes(stub_env, tmp_path):
    from align_kit.core.processes import process_start_time

    env, log = stub_env
    sweep = tmp_path / "sweep"
    done = stub(["sweep", "clip_higher", "seed=1", f"hydra.sweep.dir={sweep}", "hydra/launcher=basic"], env, calm=True)
    assert done.returncode == 0, done.stderr[-2000:]
    path = sweep / "sweep_manifest.json"
    manifest = json.loads(path.read_text())
    assert isinstance(manifest["launcher_started"], float)
    manifest["jobs"][2].update(status="failed", outcome="failed")  # something left to do

    # The recorded PID is alive (this test's process) and started when recorded: the sweep is being run.
    path.write_text(json.dumps({**manifest, "launcher_pid": os.getpid(), "launcher_started": process_start_time()}))
    refused = stub(["sweep", "--resume", str(sweep)], env, calm=True)
    assert refused.returncode == 2
    assert f"hydra.sweep.dir={sweep} is being run by process {os.getpid()}; wait for it" in refused.stderr

    # The same PID with another start time: the OS reused it, the launcher is gone, the sweep resumes.
    path.write_text(json.dumps({**manifest, "launcher_pid": os.getpid(), "launcher_started": 1.0}))
    resumed = stub(["sweep", "--resume", str(sweep)], env, calm=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert [call["seed"] for call in calls(log)] == [1, 1, 1, 1]  # three first, then the failed job again
