"""A sweep folder's manifest, `sweep_manifest.json`: what the sweep is and where each of its jobs stands.

It records the sweep's overrides (the task overrides and the Hydra ones, such as the launcher), every job's overrides
as Hydra's basic sweeper numbers them, and each job's status: pending, running (with the process id and its start
time, so a reused PID is not taken for the job's), done or failed (with its outcome and last error line). It is the
one record of the sweep's outcomes: the table at the end of a sweep, `align-kit sweep --status` and
`align-kit compare` all read it. Jobs update their own entry under a file lock, so jobs in other processes (the
joblib and submitit launchers) are recorded as well. The launcher is recorded the same way (PID and start time).

Hydra does not resume a multirun; this makes it resumable. Launching a sweep into a folder that holds a manifest
(the same command with `hydra.sweep.dir=<folder>`, or `align-kit sweep --resume <folder>`) checks that the sweep
still has the same jobs (any difference is refused and listed: job numbers name folders, so even a new value would
renumber the jobs after it), then each job decides from its folder (`begin_job`): a finished job (summary.json,
not failed) is skipped; a job stopped after a checkpoint resumes from it (`train.resume`); a failed job, or one
stopped before its first checkpoint, starts again, its earlier files moved to `<sweep folder>/.attempts/`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from align_kit.core.errors import ConfigError
from align_kit.core.processes import process_start_time, start_time_of
from align_kit.core.run_files import ERROR_LOG, HYDRA_RECORD, SUMMARY_FILE, TRAINER_STATE, latest_checkpoint
from align_kit.runs.run_lock import LOCK_FILE as RUN_LOCK_FILE

MANIFEST_FILE = "sweep_manifest.json"
LOCK_FILE = ".sweep_manifest.lock"
ATTEMPTS = ".attempts"
PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
SKIP, RESUME, FRESH = "skip", "resume", "fresh"


def job_overrides(
    task_overrides: list[str], sweeper_params: dict[str, Any] | None, config_dir: str | None = None
) -> list[list[str]]:
    """Each job's overrides, numbered as Hydra's basic sweeper numbers them (its own splitting code); `config_dir`,
    the command's `--config-dir`, is where `glob(...)` finds a group's nodes beside the packaged ones."""
    from align_kit.experiment.compose import override_parser
    from align_kit.experiment.hydra_private import basic_sweep

    params = [f"{key}={value}" for key, value in (sweeper_params or {}).items()]
    return basic_sweep(override_parser(config_dir).parse_overrides([*params, *task_overrides]))


def command_line_config_dir(config: DictConfig) -> str | None:
    """The `--config-dir` folder of the running Hydra app (Hydra records it as the command line's config source)."""
    for source in config.hydra.runtime.config_sources:
        if source.provider == "command-line" and source.schema == "file":
            return str(source.path)
    return None


def pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: beyond any PID
        return False
    except PermissionError:
        return True
    return True


# A process's start time as /proc gives it is exact to a clock tick; two readings of it never differ by a second.
SAME_START_S = 1.0


def process_alive(pid: Any, started: Any, written: float | None = None) -> bool:
    """Whether the process recorded as `pid`, started at `started` (the epoch time), still runs: a live process
    that has the PID now but another start time is not it (the OS reused the PID). A record without a start time
    (written before they were recorded) can only be of a process that started before the record was last
    `written`: a process that started later is not it; where /proc cannot tell, the PID alone decides."""
    if not pid_alive(pid):
        return False
    now_started = start_time_of(pid)
    if now_started is None:
        return True
    if isinstance(started, int | float) and not isinstance(started, bool):
        return abs(now_started - started) < SAME_START_S
    return written is None or now_started <= written + SAME_START_S


@contextlib.contextmanager
def locked(sweep_dir: Path):
    sweep_dir.mkdir(parents=True, exist_ok=True)
    with open(sweep_dir / LOCK_FILE, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read(sweep_dir: Path) -> dict | None:
    """The sweep's manifest (None where there is none); ConfigError, naming the file, where it is not one."""
    path = Path(sweep_dir) / MANIFEST_FILE
    if not path.is_file():
        return None
    fix = "restore it, or start the sweep in a new folder"
    try:
        manifest = json.loads(path.read_bytes())
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path} is not UTF-8 (byte {error.start}); {fix}") from None
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path} is not valid JSON ({error.msg} at line {error.lineno}); {fix}") from None
    except OSError as error:
        raise ConfigError(f"{path} cannot be read ({error.strerror}); {fix}") from None
    problem = _manifest_problem(manifest)
    if problem:
        raise ConfigError(f"{path} is not a sweep manifest: {problem}; {fix}")
    return manifest


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _manifest_problem(manifest: Any) -> str | None:
    """What every reader relies on (--status, --resume, the table, compare): its types, checked once here."""
    if not isinstance(manifest, dict):
        return f"it holds a JSON {type(manifest).__name__}, not an object"
    if not isinstance(manifest.get("jobs"), list):
        return "it holds no job list (jobs)"
    if not _strings(manifest.get("task_overrides")):
        return "task_overrides is not a list of overrides"
    if not _strings(manifest.get("hydra_overrides", [])):
        return "hydra_overrides is not a list of overrides"
    if not isinstance(manifest.get("launches", 1), int) or isinstance(manifest.get("launches"), bool):
        return "launches is not a whole number"
    for number, entry in enumerate(manifest["jobs"]):
        if not isinstance(entry, dict):
            return f"jobs[{number}] is not an object"
        if entry.get("job") != number or isinstance(entry.get("job"), bool):
            return f"jobs[{number}] has job={entry.get('job')!r}, not {number}"
        if not _strings(entry.get("overrides")):
            return f"jobs[{number}].overrides is not a list of overrides"
        if entry.get("status") not in (PENDING, RUNNING, DONE, FAILED):
            return f"jobs[{number}].status={entry.get('status')!r} is none of {PENDING}, {RUNNING}, {DONE}, {FAILED}"
        for key in ("outcome", "error", "folder"):
            if not isinstance(entry.get(key), str | None):
                return f"jobs[{number}].{key} is not text"
    return None


def write(sweep_dir: Path, manifest: dict) -> None:
    path = Path(sweep_dir) / MANIFEST_FILE
    temporary = path.with_name(f".{MANIFEST_FILE}.{os.getpid()}")
    temporary.write_text(json.dumps(manifest, indent=2))
    temporary.replace(path)


def update_job(sweep_dir: Path, job: int, **fields: Any) -> None:
    with locked(sweep_dir):
        manifest = read(sweep_dir)
        if manifest is None or not 0 <= job < len(manifest["jobs"]):
            return  # a job launched outside a manifest (e.g. Hydra's API directly): nothing to record
        manifest["jobs"][job].update(fields, updated=time.strftime("%Y-%m-%d %H:%M:%S"))
        write(sweep_dir, manifest)


def _kept_hydra_overrides(overrides: list[str]) -> list[str]:
    return [o for o in overrides if not o.startswith(("hydra.sweep.dir=", "hydra.mode="))]


def differences(saved: dict, jobs: list[list[str]]) -> list[str]:
    old = [list(job["overrides"]) for job in saved["jobs"]]
    found = []
    for number in range(max(len(old), len(jobs))):
        before = " ".join(old[number]) if number < len(old) else None
        after = " ".join(jobs[number]) if number < len(jobs) else None
        if before != after:
            found.append(f"job {number}: {before or '(none)'} -> {after or '(none)'}")
    return found


def _live_launcher(sweep_dir: Path, manifest: dict) -> int | None:
    """The PID of the process running the sweep now (not this one), or None where that process is gone."""
    launcher, started = manifest.get("launcher_pid"), manifest.get("launcher_started")
    written = (sweep_dir / MANIFEST_FILE).stat().st_mtime
    return launcher if launcher != os.getpid() and process_alive(launcher, started, written) else None


def live_launcher(sweep_dir: Path) -> int | None:
    """`_live_launcher` of the sweep in `sweep_dir`; None where it holds no readable manifest."""
    try:
        manifest = read(sweep_dir)
    except ConfigError:
        return None
    return _live_launcher(sweep_dir, manifest) if manifest is not None else None


def _launcher() -> dict:
    """Who runs the sweep now, by process identity: its PID and its start time (a PID alone may be reused)."""
    return {"launcher_pid": os.getpid(), "launcher_started": process_start_time()}


def start_sweep(config: DictConfig) -> dict:
    """At the start of a multirun: write the manifest of a new sweep, or check a resumed one against it."""
    sweep_dir = Path(str(config.hydra.sweep.dir))
    task = list(config.hydra.overrides.task)
    hydra_overrides = _kept_hydra_overrides(list(config.hydra.overrides.hydra))
    params = config.hydra.sweeper.get("params")
    params = OmegaConf.to_container(params, resolve=True) if isinstance(params, DictConfig) else {}
    jobs = job_overrides(task, params, command_line_config_dir(config))
    with locked(sweep_dir):
        saved = read(sweep_dir)
        if saved is not None:
            launcher = _live_launcher(sweep_dir, saved)
            if launcher is not None:
                raise ConfigError(
                    f"hydra.sweep.dir={sweep_dir} is being run by process {launcher}; wait for it, or stop it first"
                )
            changed = differences(saved, jobs)
            if changed:
                shown = "; ".join(changed[:5]) + (f"; ... ({len(changed)} jobs differ)" if len(changed) > 5 else "")
                raise ConfigError(
                    f"hydra.sweep.dir={sweep_dir} holds a sweep with other jobs ({shown}); a sweep resumes only "
                    f"with its own definition (align-kit sweep --resume {sweep_dir}), so start changed sweeps in a "
                    "new folder: hydra.sweep.dir=<new folder>"
                )
            manifest = {**saved, "hydra_overrides": hydra_overrides, **_launcher()}
            manifest["launches"] = int(saved.get("launches", 1)) + 1
        else:
            manifest = {
                "task_overrides": task,
                "hydra_overrides": hydra_overrides,
                **_launcher(),
                "launches": 1,
                "jobs": [
                    {"job": n, "overrides": o, "status": PENDING, "outcome": None, "error": None, "folder": None}
                    for n, o in enumerate(jobs)
                ],
            }
        write(sweep_dir, manifest)
    return manifest


def _move_attempt(folder: Path, sweep_dir: Path, job: int) -> Path | None:
    """Move a job's earlier run files (not Hydra's record of this launch) to <sweep>/.attempts/<job>-<time>/."""
    kept = [
        p
        for p in folder.iterdir()
        if p.name in (HYDRA_RECORD, RUN_LOCK_FILE) or p.name.endswith(".log") and p.name != ERROR_LOG
    ]
    leftovers = [p for p in folder.iterdir() if p not in kept]
    if not leftovers:
        return None
    target = _attempt_folder(sweep_dir, job)
    for path in leftovers:
        path.rename(target / path.name)
    return target


def _attempt_folder(sweep_dir: Path, job: int) -> Path:
    """A new, empty <sweep>/.attempts/<job>-<time>[-n]/."""
    target = sweep_dir / ATTEMPTS / f"{job}-{time.strftime('%Y%m%d-%H%M%S')}"
    number = 1
    while target.exists():
        number += 1
        target = target.with_name(f"{job}-{time.strftime('%Y%m%d-%H%M%S')}-{number}")
    target.mkdir(parents=True)
    return target


def _resumable_checkpoint(folder: Path, sweep_dir: Path, job: int) -> Path | None:
    """The job's latest checkpoint, after moving aside (never deleting) any a kill left half-written: HF writes
    trainer_state.json last, and would refuse to resume from a checkpoint without it."""
    while (checkpoint := latest_checkpoint(folder)) is not None and not (checkpoint / TRAINER_STATE).is_file():
        target = _attempt_folder(sweep_dir, job)
        checkpoint.rename(target / checkpoint.name)
        print(f"align-kit: job {job}: {checkpoint.name} was left half-written; moved to {target}", file=sys.stderr)
    return checkpoint


def begin_job(run_dir: str, job: int, sweep_dir: str) -> str:
    """In a sweep job, before it trains: SKIP (finished earlier), RESUME (from its checkpoint) or FRESH."""
    folder, sweep = Path(run_dir), Path(sweep_dir)
    manifest = read(sweep)
    entry = manifest["jobs"][job] if manifest and 0 <= job < len(manifest["jobs"]) else {}
    previous = entry.get("status", PENDING)
    if previous != FAILED and (folder / SUMMARY_FILE).is_file():
        action = SKIP
    elif previous != FAILED and folder.is_dir() and _resumable_checkpoint(folder, sweep, job) is not None:
        action = RESUME
    else:
        action = FRESH
        if folder.is_dir():
            moved = _move_attempt(folder, sweep, job)
            if moved is not None:
                print(f"align-kit: job {job}: earlier files moved to {moved}; it starts again", file=sys.stderr)
    if action == SKIP:
        print(f"align-kit: job {job}: finished in an earlier launch; skipped", file=sys.stderr)
    elif action == RESUME:
        print(f"align-kit: job {job}: resumes from {latest_checkpoint(folder).name}", file=sys.stderr)
    if manifest is not None:
        # An earlier launch's outcome no longer holds: until this launch ends, the job is running (or interrupted).
        update_job(sweep, job, status=RUNNING, pid=os.getpid(), pid_started=process_start_time(), folder=str(folder),
                   action=action, outcome=None, error=None)  # fmt: skip
    return action


def end_job(sweep_dir: str, job: int, outcome: str, error: str | None, folder: str) -> None:
    update_job(Path(sweep_dir), job, status=DONE if outcome == "ok" else FAILED, outcome=outcome, error=error,
               folder=folder)  # fmt: skip


def shown_status(entry: dict) -> str:
    """A job's status in every table (--status, the end of a sweep, compare's notes): its outcome when it ended
    (ok, failed, config error, training halted), else pending, running, or interrupted (its process is gone)."""
    status = entry.get("status")
    if status in (DONE, FAILED):
        return str(entry.get("outcome") or ("ok" if status == DONE else FAILED))
    if status == RUNNING and not process_alive(entry.get("pid"), entry.get("pid_started")):
        return "interrupted"
    return str(status)


def resume_command(sweep_dir: Path, manifest: dict) -> list[str]:
    """`align-kit train -m` arguments that relaunch the sweep in its folder."""
    return ["-m", *manifest["task_overrides"], *manifest.get("hydra_overrides", []), f"hydra.sweep.dir={sweep_dir}"]
