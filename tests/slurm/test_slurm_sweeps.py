"""`align-kit sweep ... hydra/launcher=slurm` on a real single-node SLURM (tests/slurm/cluster.sh), jobs on the CPU.

A small sweep (three seeds, six steps each, a checkpoint every two) runs once on the local launcher (the reference
and the baseline of the timing) and then through SLURM: the array, the SLURM ids in the manifest, `--status` with
the scheduler's view, a second sweep into the folder refused, every job compared. A second SLURM sweep is
pre-empted the way a cluster does it: job 0 gets submitit's signal (SIGUSR2, `scancel --signal`) during its second
generation's steps, saves a checkpoint at that generation's end, requeues and resumes to the same metrics as the
uninterrupted run; job 1 is cancelled while queued, shows as interrupted with SLURM's reason, and `--resume` submits
it alone, where the signal comes during its last generation's steps: it finishes, says so, and is not requeued. Each
signalled job holds at a known step until its signal is handled (HOLD), so neither order depends on the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.behaviour.test_sweep_resume import job_metrics
from tests.conftest import FAST_POLICY, ROOT, cli_env

pytestmark = pytest.mark.slurm

SITE = """partition: debug
gpus_per_node: null
cpus_per_task: 1
mem_gb: null
timeout_min: 60
array_parallelism: 1
"""
SWEEP = """# @package _global_
hydra:
  sweeper:
    params:
      seed: 1,2,3
"""


@pytest.fixture(scope="module")
def setup(slurm_env, cache_dir, tmp_path_factory):
    """(environment, config folder with the site settings and the small sweep, training overrides). The folder is
    passed as `hydra.searchpath`, an override the manifest keeps, so `--resume` finds it again (a `--config-dir` is
    not recorded). The seeds are named on the command line too, where `align-kit sweep` counts the jobs."""
    folder = tmp_path_factory.mktemp("slurm_config")
    (folder / "hydra" / "launcher" / "site").mkdir(parents=True)
    (folder / "hydra" / "launcher" / "site" / "slurm_local.yaml").write_text(SITE)
    (folder / "sweep").mkdir()
    (folder / "sweep" / "slurm_small.yaml").write_text(SWEEP)
    env = dict(cli_env(cache_dir), SLURM_CONF=slurm_env["SLURM_CONF"])
    training = [
        f"paths.cache_dir={cache_dir}",
        *FAST_POLICY,
        "logger=none",
        "trainer.max_steps=6",
        "trainer.save_steps=2",
        "trainer.disable_tqdm=true",
    ]
    return env, folder, training


def align_kit(env: dict, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "align_kit.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)


def start(env: dict, *args: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "align_kit.cli", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wait_for(what, seconds: float, process: subprocess.Popen | None = None):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = what()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the sweep ended first ({process.returncode}): {process.stderr.read()[-3000:]}")
        time.sleep(0.5)
    raise AssertionError(f"not within {seconds} s: {what.__doc__}")


def manifest(sweep: Path) -> dict:
    from align_kit.runs.sweep_manifest import read

    return read(sweep) or {"jobs": []}


def slurm(env: dict, *args: str) -> str:
    return subprocess.run(list(args), capture_output=True, text=True, env=env, check=True).stdout


def steps_logged(folder: Path) -> int:
    path = folder / "metrics.jsonl"
    return len(job_metrics(folder)) if path.is_file() else 0


@pytest.fixture(scope="module")
def local_sweep(setup, tmp_path_factory):
    """The small sweep on the local launcher (one job at a time, as the SLURM array runs it): (folder, seconds)."""
    env, config, training = setup
    sweep = tmp_path_factory.mktemp("local") / "sweep"
    warm = align_kit(env, "train", *training, "trainer.max_steps=1", f"hydra.run.dir={sweep.parent / 'warm'}")
    assert warm.returncode == 0, warm.stderr[-3000:]  # the warm start, cached for every later job
    started = time.time()
    done = align_kit(
        env, "sweep", "slurm_small", f"hydra.searchpath=[file://{config}]", *training, "seed=1,2,3",
        "hydra/launcher=basic",
        f"hydra.sweep.dir={sweep}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return sweep, time.time() - started


def test_a_sweep_runs_as_a_slurm_array_with_the_schedulers_view(setup, local_sweep, tmp_path):
    env, config, training = setup
    sweep = tmp_path / "sweep"
    launch = ["sweep", "slurm_small", f"hydra.searchpath=[file://{config}]", *training, "seed=1,2,3"]
    launch.append("hydra/launcher=slurm")
    started = time.time()
    running = start(env, *launch, f"hydra.sweep.dir={sweep}")

    def queued():
        """job 0 running on SLURM, jobs 1 and 2 queued behind it (array_parallelism=1)"""
        status = align_kit(env, "sweep", "--status", str(sweep))
        sacct = "SLURM's view (sacct):" in status.stdout  # accounting has them (squeue answers until it does)
        return status.stdout if sacct and "RUNNING" in status.stdout and status.stdout.count("PENDING") == 2 else None

    shown = wait_for(queued, 300, running)
    ids = [job.get("slurm_job") for job in manifest(sweep)["jobs"]]
    array = ids[0].split("_")[0]
    assert ids == [f"{array}_0", f"{array}_1", f"{array}_2"]
    assert "SLURM's view (sacct):" in shown
    assert [line.split() for line in shown.splitlines() if line.startswith(("0 ", "1 ", "2 "))][-3:] == [
        ["0", f"{array}_0", "RUNNING"],
        ["1", f"{array}_1", "PENDING"],
        ["2", f"{array}_2", "PENDING"],
    ]

    # A second sweep into the same folder is refused while the first runs, and submits nothing.
    second = align_kit(env, *launch, f"hydra.sweep.dir={sweep}")
    assert second.returncode == 2 and f"is being run by process {running.pid}" in second.stderr, second.stderr[-2000:]
    # Nothing submitted: no array newer than the first one, queued (squeue) or already run (sacct). Not "the array
    # still queued": on a loaded machine its three short jobs can end while the refused command starts up.
    seen = slurm(env, "squeue", "-h", "-o", "%F").split() + slurm(env, "sacct", "-n", "-X", "-o", "JobID%40").split()
    assert [job for job in seen if int(job.split("_")[0]) > int(array)] == [], seen

    stdout, stderr = running.communicate(timeout=900)
    slurm_seconds = time.time() - started
    assert running.returncode == 0, stderr[-3000:]
    assert [(job["status"], job["outcome"]) for job in manifest(sweep)["jobs"]] == [("done", "ok")] * 3

    def completed():
        """SLURM's view: every job COMPLETED (the launch ends when the results are written, the jobs just after)"""
        status = align_kit(env, "sweep", "--status", str(sweep)).stdout
        return status if status.count("COMPLETED") == 3 else None

    wait_for(completed, 120)

    local, local_seconds = local_sweep
    for job in ("0", "1", "2"):  # the same jobs, the same numbers, on either launcher
        assert job_metrics(sweep / job) == job_metrics(local / job), job
    compared = align_kit(env, "compare", str(sweep))
    assert compared.returncode == 0, compared.stderr[-2000:]

    # Timing (docs/sweeps.md): submit-to-start of each task from SLURM's own records, and the whole sweep against
    # the local launcher's.
    records = slurm(env, "sacct", "-X", "-n", "-P", "-o", "JobID,Submit,Eligible,Start,End", "-j", array)
    ratio, per_job = slurm_seconds / local_seconds, (slurm_seconds - local_seconds) / 3
    print(f"\nslurm timing: sweep {slurm_seconds:.1f} s on SLURM, {local_seconds:.1f} s local, ratio {ratio:.2f}, "
          f"{per_job:.1f} s more per job\n{records}")  # fmt: skip


# Loaded by every Python process of a launch made with `held_env` (its SLURM jobs too: sbatch passes the environment
# on). Training holds at the end of optimizer step HOLD_AT_STEP, once (HOLD_MARKER records it; the test waits for
# it), until the stop callback has handled a signal: the test's signal then reaches the job at that step, never
# after the job ended nor at a step the machine's load picked. A hold that no signal ends fails the job after 600 s.
HOLD = """
import os
if os.environ.get("HOLD_AT_STEP"):
    import time
    from pathlib import Path
    from align_kit.runs.stop_signals import StopOnSignal

    step, marker = int(os.environ["HOLD_AT_STEP"]), Path(os.environ["HOLD_MARKER"])
    on_step_end = StopOnSignal.on_step_end

    def held(self, args, state, control, **kwargs):
        if state.global_step == step and not marker.exists():
            marker.touch()
            deadline = time.monotonic() + 600
            while self.received is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"held at step {step} for 600 s and no signal came")
                time.sleep(0.05)
        return on_step_end(self, args, state, control, **kwargs)

    StopOnSignal.on_step_end = held
"""


def held_env(env: dict, folder: Path, step: int) -> tuple[dict, Path]:
    """`env` whose training holds at the end of `step` until signalled; the marker file appears when it holds."""
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(HOLD)
    marker = folder / "held"
    return dict(env, PYTHONPATH=f"{folder}{os.pathsep}{ROOT}", HOLD_AT_STEP=str(step), HOLD_MARKER=str(marker)), marker


def test_a_preempted_job_requeues_and_resumes_identically_and_a_cancelled_one_resumes_alone(
    setup, local_sweep, tmp_path
):
    env, config, training = setup
    sweep = tmp_path / "sweep"
    launch = ["sweep", "slurm_small", f"hydra.searchpath=[file://{config}]", *training, "seed=1,2"]
    launch.append("hydra/launcher=slurm")
    # trainer.steps_per_generation=2: generations begin at steps 1, 3 and 5, so a stop waits for step 2, 4 or 6.
    held, marker = held_env(env, tmp_path / "hold_at_3", 3)
    running = start(held, *launch, f"hydra.sweep.dir={sweep}")

    def submitted():
        """both jobs' SLURM ids in the manifest"""
        ids = [job.get("slurm_job") for job in manifest(sweep)["jobs"]]
        return ids if len(ids) == 2 and all(ids) else None

    ids = wait_for(submitted, 120, running)

    def holding():
        """job 0 holding at the end of step 3 (job 1 queued behind it: array_parallelism=1)"""
        return marker.exists()

    wait_for(holding, 600, running)

    # Job 1 cancelled while queued; job 0 sent the signal SLURM sends before a time limit (sbatch --signal) during
    # the second generation's steps: it stops at that generation's end, step 4, and requeues.
    slurm(env, "scancel", ids[1])
    slurm(env, "scancel", "--signal=USR2", ids[0])
    stdout, stderr = running.communicate(timeout=900)
    assert running.returncode == 1, stderr[-3000:]
    jobs = manifest(sweep)["jobs"]
    assert (jobs[0]["status"], jobs[0]["outcome"]) == ("done", "ok")
    assert jobs[1]["status"] == "pending" and jobs[1]["slurm_state"].startswith("CANCELLED"), jobs[1]
    log = next((sweep / ".submitit" / ids[0]).glob("*_log.err")).read_text()
    assert "interrupted by SIGUSR2 at step 4; saved" in log and "requeueing the SLURM job" in log, log[-3000:]
    assert "job 0: resumes from checkpoint-4" in log, log[-3000:]
    history = slurm(env, "sacct", "-D", "-X", "-n", "-P", "-o", "JobID,State", "-j", ids[0]).split()
    assert f"{ids[0]}|REQUEUED" in history and f"{ids[0]}|COMPLETED" in history, history
    assert job_metrics(sweep / "0") == job_metrics(local_sweep[0] / "0")  # as if never interrupted

    status = align_kit(env, "sweep", "--status", str(sweep)).stdout
    row = next(line for line in status.splitlines() if line.startswith("1 ") and "seed=2" in line)
    assert "interrupted" in row and "ended by SLURM: CANCELLED" in row, status
    assert any(line.split()[:3] == ["1", ids[1], "CANCELLED"] for line in status.splitlines()), status

    # The resumed sweep runs job 1 alone; it is sent the signal during the last generation's steps (at step 5):
    # no boundary is left before the run's end, so it finishes, says so, and is not requeued.
    held, marker = held_env(env, tmp_path / "hold_at_5", 5)
    resuming = start(held, "sweep", "--resume", str(sweep))

    def resubmitted():
        """job 1's new SLURM id in the manifest"""
        again = manifest(sweep)["jobs"][1].get("slurm_job")
        return again if again and again != ids[1] else None

    def holding_again():
        """job 1 holding at the end of step 5"""
        return marker.exists()

    again = wait_for(resubmitted, 120, resuming)
    wait_for(holding_again, 600, resuming)
    slurm(env, "scancel", "--signal=USR2", again)
    stdout, stderr = resuming.communicate(timeout=900)
    assert resuming.returncode == 0, stderr[-3000:]
    assert "1 of 2 jobs finished in an earlier launch; the array holds the other 1" in stderr
    jobs = manifest(sweep)["jobs"]
    assert [(job["status"], job["outcome"]) for job in jobs] == [("done", "ok")] * 2
    assert jobs[1]["slurm_job"] == again and jobs[0]["slurm_job"] == ids[0]  # job 1 alone, in a job of its own
    log = next((sweep / ".submitit" / again).glob("*_log.err")).read_text()
    assert (
        "align-kit: SIGUSR2 received during the last generation's steps; the run finished them (step 6 of 6) "
        "instead of stopping: nothing to resume"
    ) in log, log[-3000:]
    assert "requeueing" not in log, log[-3000:]

    def completed():
        """SLURM's records of job 1's new job: COMPLETED, never requeued"""
        states = slurm(env, "sacct", "-D", "-X", "-n", "-P", "-o", "JobID,State", "-j", again).split()
        return states if f"{again}|COMPLETED" in states else None

    assert f"{again}|REQUEUED" not in wait_for(completed, 120)
    assert job_metrics(sweep / "1") == job_metrics(local_sweep[0] / "1")
    assert json.loads((sweep / "1" / "summary.json").read_text())["steps"] == 6
