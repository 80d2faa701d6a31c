"""A run folder is locked while its run lives: a second start, an overwrite or a resume of a live run is refused
naming the holder, two starts into one new folder leave one run's files, and the lock dies with its process.

The runs are real `align-kit train` processes with `align_kit.train.run` replaced by a stub (loaded through
sitecustomize) that writes a run's files, seed in every row, and waits for a go-ahead file before it finishes, so a
run is held alive for exactly as long as a test needs; no model loads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from align_kit.runs.run_folder import claim_run_folder, folder_kind
from align_kit.runs.run_lock import LOCK_FILE, acquire, held
from tests.conftest import ROOT, stubbed_cli_env
from tests.run_folders import hydra_config, snapshot, write_run

# The stub run: config.yaml as the real run writes it, two metric rows, a whole checkpoint-2, then (once GO_FILE
# exists) three more rows and the summary. STUB_BARRIER makes the first two processes that reach the folder's
# lock wait for each other there, so two starts race for it at once, after both checked the folder as new.
SITECUSTOMIZE = """
import json, os, time
from pathlib import Path
if os.environ.get("STUB_LOG"):
    import align_kit.runs.run_folder as run_folder
    import align_kit.train as train
    from omegaconf import OmegaConf

    def wait_for(condition, seconds=300):
        deadline = time.time() + seconds
        while not condition() and time.time() < deadline:
            time.sleep(0.05)

    if os.environ.get("STUB_BARRIER"):
        barrier, real_acquire, first = Path(os.environ["STUB_BARRIER"]), run_folder.acquire, []

        def acquire_together(*args, **kwargs):
            if not first:
                first.append(True)
                (barrier / str(os.getpid())).touch()
                wait_for(lambda: len(list(barrier.iterdir())) >= 2)
            return real_acquire(*args, **kwargs)

        run_folder.acquire = acquire_together

    def row(folder, cfg, step):
        with open(folder / "metrics.jsonl", "a") as handle:
            handle.write(json.dumps({"step": step, "seed": cfg.seed, "pid": os.getpid()}) + "\\n")

    def stub_run(cfg, choices, run_dir, group=None, name="default"):
        folder = Path(run_dir)
        (folder / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        row(folder, cfg, 1)
        row(folder, cfg, 2)
        write_checkpoint(folder / "checkpoint-2")
        wait_for(lambda: Path(os.environ["GO_FILE"]).exists())
        for step in (3, 4, 5):
            row(folder, cfg, step)
        (folder / "summary.json").write_text(json.dumps({"seed": cfg.seed, "pid": os.getpid()}))
        return {}

    def write_checkpoint(checkpoint):
        import struct, zipfile
        checkpoint.mkdir()
        (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
        header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
        (checkpoint / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(4))
        for name in ("optimizer.pt", "scheduler.pt"):
            with zipfile.ZipFile(checkpoint / name, "w") as archive:
                archive.writestr("data.pkl", b"state")

    train.run = stub_run
"""

RUN = ["logger=none", "trainer.max_steps=5", "trainer.save_steps=2"]


@pytest.fixture
def stub_env(cache_dir, tmp_path):
    env, _ = stubbed_cli_env(cache_dir, tmp_path, SITECUSTOMIZE)
    return dict(env, GO_FILE=str(tmp_path / "go"))


def start(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "align_kit.cli", "train", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(process: subprocess.Popen) -> tuple[int, list[str]]:
    _, stderr = process.communicate(timeout=600)
    return process.returncode, [line for line in stderr.splitlines() if line.strip()]


def rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def wait_until(condition, seconds: float = 300) -> None:  # a guard against a hang: loaded machines start late
    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_live_run_refuses_overwrite_and_resume_and_keeps_its_files(stub_env, tmp_path):
    run = tmp_path / "run"
    a = start(stub_env, *RUN, "seed=1", f"hydra.run.dir={run}")
    wait_until(lambda: (run / "metrics.jsonl").is_file() and len(rows(run)) == 2 or a.poll() is not None)
    assert a.poll() is None, a.communicate()[1][-2000:]

    attempts = {
        "train.overwrite=true": start(stub_env, *RUN, "seed=9", "train.overwrite=true", f"hydra.run.dir={run}"),
        "train.resume=true": start(stub_env, *RUN, "seed=1", "train.resume=true", f"hydra.run.dir={run}"),
    }
    for action, attempt in attempts.items():
        status, stderr = finish(attempt)
        assert status == 2 and len(stderr) == 1, stderr
        assert stderr[0].startswith(f"align-kit: config error: hydra.run.dir={run} is in use by a live run (process ")
        assert f"process {a.pid} on " in stderr[0] and f"{action} is refused while it lives" in stderr[0]

    (tmp_path / "go").touch()
    assert finish(a)[0] == 0
    # Every file is A's: its five rows in order, its summary, its config; nothing was moved aside.
    assert [(r["step"], r["seed"], r["pid"]) for r in rows(run)] == [(s, 1, a.pid) for s in range(1, 6)]
    assert json.loads((run / "summary.json").read_text()) == {"seed": 1, "pid": a.pid}
    assert OmegaConf.load(run / "config.yaml").seed == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("run")) == ["run"]


@pytest.mark.slow
def test_two_starts_into_one_new_folder_leave_one_runs_files(stub_env, tmp_path):
    run, barrier = tmp_path / "run", tmp_path / "barrier"
    barrier.mkdir()
    env = dict(stub_env, STUB_BARRIER=str(barrier))
    (tmp_path / "go").touch()
    first, second = (start(env, *RUN, f"seed={seed}", f"hydra.run.dir={run}") for seed in (1, 2))
    outcomes = {process.pid: finish(process) for process in (first, second)}
    assert sorted(status for status, _ in outcomes.values()) == [0, 2], outcomes
    (winner,) = [pid for pid, (status, _) in outcomes.items() if status == 0]
    (loser_lines,) = [lines for status, lines in outcomes.values() if status == 2]
    assert len(loser_lines) == 1 and f"is in use by a live run (process {winner} on " in loser_lines[0]
    seed = 1 if winner == first.pid else 2
    # One run's folder: Hydra's record, config, every row and the summary all of the winner.
    assert OmegaConf.load(run / ".hydra" / "overrides.yaml").count(f"seed={seed}") == 1
    assert OmegaConf.load(run / "config.yaml").seed == seed
    assert {(r["seed"], r["pid"]) for r in rows(run)} == {(seed, winner)} and len(rows(run)) == 5
    assert json.loads((run / "summary.json").read_text()) == {"seed": seed, "pid": winner}


@pytest.mark.slow
def test_a_shared_sweep_folder_is_refused_before_any_job(stub_env, tmp_path):
    sweep = tmp_path / "sweep"
    status, stderr = finish(start(stub_env, "-m", "seed=1,2", "hydra.sweep.subdir=same", f"hydra.sweep.dir={sweep}"))
    assert status == 2 and len(stderr) == 1, stderr
    assert stderr[0] == (
        "align-kit: config error: sweep jobs 0 and 1 of 2 would share one folder: hydra.sweep.subdir=same for "
        "both; make the job folder depend on the job, e.g. hydra.sweep.subdir=${hydra.job.num} (the default) or "
        "${hydra.job.override_dirname}"
    )
    assert not sweep.exists() and (tmp_path / "calls.jsonl").read_text() == ""


@pytest.mark.slow
def test_a_folder_that_never_got_past_step_0_is_reused(stub_env, tmp_path):
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- seed=3\n")
    (run / "config.yaml").write_text("seed: 3\n")
    (run / "metrics.jsonl").write_text("")
    (tmp_path / "go").touch()
    status, stderr = finish(start(stub_env, *RUN, "seed=4", f"hydra.run.dir={run}"))
    assert status == 0, stderr[-20:]
    assert OmegaConf.load(run / "config.yaml").seed == 4 and {r["seed"] for r in rows(run)} == {4}


HOLD = """
import sys, time
from pathlib import Path
from align_kit.runs.run_lock import acquire
acquire(Path(sys.argv[1]), "hydra.run.dir=" + sys.argv[1])
print("locked", flush=True)
time.sleep(60)
"""


def test_the_lock_is_taken_in_run_itself_and_dies_with_its_process(tmp_path, cache_dir):
    """`align_kit.train.run` checks the lock with no Hydra callback at all, and a SIGKILL frees it."""
    from align_kit.train import component_choices, run

    folder = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        cfg = compose([f"paths.cache_dir={cache_dir}", "logger=none"])
        with pytest.raises(ConfigError, match=f"is in use by a live run \\(process {holder.pid} on "):
            run(cfg, component_choices(), str(folder))
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    lock = acquire(folder, "x")  # the OS dropped the killed holder's lock
    assert held(folder)
    lock.release()
    assert not held(folder) and os.listdir(folder) == [LOCK_FILE] and folder_kind(folder) == "new"


def test_overwrite_of_a_symlinked_run_moves_the_target_aside_and_keeps_the_link(tmp_path):
    target = write_run(tmp_path / "disk" / "run")
    before = snapshot(target)
    link = tmp_path / "run"
    link.symlink_to(target)
    lock = claim_run_folder(link, "hydra.run.dir", resume=False, overwrite=True)
    try:
        (backup,) = (tmp_path / "disk").glob("run.replaced-*")
        assert {k: v for k, v in snapshot(backup).items() if k != LOCK_FILE} == before
        assert link.is_symlink() and link.resolve() == target and os.listdir(target) == [LOCK_FILE]
    finally:
        lock.release()


def test_a_dangling_symlink_is_refused_in_process(tmp_path):
    link = tmp_path / "run"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(ConfigError, match="is a symlink to .*gone, which does not exist"):
        claim_run_folder(link, "hydra.run.dir", resume=False, overwrite=False)
    assert link.is_symlink() and not (tmp_path / "gone").exists()


def test_overwrite_of_a_live_sweep_is_refused_and_moves_nothing(tmp_path, capsys):
    from align_kit.core.processes import start_time_of
    from align_kit.runs.run_folder import RunFolderGuard

    sweep = tmp_path / "sweep"
    (sweep / "0").mkdir(parents=True)
    launcher = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        wait_until(lambda: start_time_of(launcher.pid) is not None)
        manifest = {"task_overrides": [], "jobs": [], "launcher_pid": launcher.pid}
        (sweep / "sweep_manifest.json").write_text(
            json.dumps({**manifest, "launcher_started": start_time_of(launcher.pid)})
        )
        with pytest.raises(SystemExit) as exit_info:
            RunFolderGuard().on_multirun_start(config=hydra_config("train.overwrite=true", f"hydra.sweep.dir={sweep}"))
        assert exit_info.value.code == 2
        assert capsys.readouterr().err.strip() == (
            f"align-kit: config error: train.overwrite=true would move hydra.sweep.dir={sweep} aside, but its sweep "
            f"is being run by process {launcher.pid}; wait for it to end (or stop it) first, or choose a new folder: "
            "hydra.sweep.dir=<new folder>"
        )
        assert [p.name for p in tmp_path.iterdir()] == ["sweep"] and sorted(os.listdir(sweep)) == [
            "0",
            "sweep_manifest.json",
        ]
    finally:
        launcher.kill()
        launcher.wait()


def test_a_name_too_long_for_the_file_system_is_refused_in_process(tmp_path):
    with pytest.raises(ConfigError, match=r"hydra.run.dir=.* cannot be used \(File name too long\); choose another"):
        claim_run_folder(tmp_path / ("x" * 300), "hydra.run.dir", resume=False, overwrite=False)
    assert list(tmp_path.iterdir()) == []
