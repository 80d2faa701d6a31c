"""A sweep folder's manifest: what the sweep is and where each of its jobs stands, in two files.

`sweep_manifest.json` records the sweep's overrides (the task overrides and the Hydra ones, such as the launcher),
every job's overrides as Hydra's basic sweeper numbers them, and each job's status: pending, running (with the
process id and its start time, so a reused PID is not taken for the job's), done or failed (with its outcome and
last error line). It is written whole only at the start and at the end of each launch. In between, a job records
each change of its status by appending one line to `sweep_manifest.jobs.jsonl` (`{"job": 3, "status": "done",
...}`) under a file lock, so jobs in other processes (the joblib and submitit launchers) are recorded as well and an
update costs the same whatever the sweep's size: rewriting the whole manifest per update made a sweep's writes grow
with the square of its jobs. `read` folds the log into the manifest, line by line, the last line for a job
winning; at the end of a launch (and at the start of the next) the log is folded into `sweep_manifest.json` and
removed, so a finished sweep is one file again. A manifest written before the log existed is read as it is.

A process killed while appending can leave its line cut short. The next update starts on a line of its own, so the
cut line never spoils the others; `read` skips it and lists it under `torn_updates` (the log's line numbers), and
`--status` names it: that one update is lost, every other one is kept. Readers take the lock shared, so they never
mistake a line being written for a cut one.

The manifest is the one record of the sweep's outcomes: the table at the end of a sweep, `align-kit sweep
--status` and `align-kit compare` all read it (through `read`, which sees the log too). The launcher is recorded
the same way (PID and start time).

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
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from align_kit.core.errors import ConfigError
from align_kit.core.processes import process_start_time, start_time_of
from align_kit.core.run_files import ERROR_LOG, HYDRA_RECORD, SUMMARY_FILE, TRAINER_STATE, latest_checkpoint
from align_kit.runs.manifest_trust import record_launch
from align_kit.runs.run_lock import LOCK_FILE as RUN_LOCK_FILE

MANIFEST_FILE = "sweep_manifest.json"
JOB_LOG = "sweep_manifest.jobs.jsonl"
TORN = "torn_updates"  # in what `read` returns: the job log's lines that a killed process cut short
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
    """The sweep's lock, held by a writer of either file."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    with open(sweep_dir / LOCK_FILE, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _shared_lock(sweep_dir: Path):
    """The sweep's lock, shared by readers, so no writer appends while they read. No lock file: no writer yet."""
    try:
        handle = os.open(sweep_dir / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        yield
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_SH)
        yield
    finally:
        os.close(handle)  # closing releases the lock


FIX = "restore it, or start the sweep in a new folder"


def read(sweep_dir: Path) -> dict | None:
    """The sweep's manifest with the job log folded in (None where there is none); ConfigError, naming the file,
    where either is not one. Never call it under `locked` (the shared lock would wait for the exclusive one)."""
    with _shared_lock(Path(sweep_dir)):
        return _read(Path(sweep_dir))


def _read(sweep_dir: Path) -> dict | None:
    path, log = sweep_dir / MANIFEST_FILE, sweep_dir / JOB_LOG
    if not path.is_file():
        if log.is_file():
            raise ConfigError(f"{log} holds job updates, but {path} is missing; {FIX}")
        return None
    manifest = _read_manifest(path)
    try:
        data = log.read_bytes()
    except FileNotFoundError:
        return manifest
    except OSError as error:
        raise ConfigError(f"{log} cannot be read ({error.strerror}); {FIX}") from None
    torn = _fold_lines(log, data, manifest["jobs"], first_line=1)
    return {**manifest, TORN: torn} if torn else manifest


def _read_manifest(path: Path) -> dict:
    """`sweep_manifest.json` alone, checked."""
    try:
        manifest = json.loads(path.read_bytes())
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path} is not UTF-8 (byte {error.start}); {FIX}") from None
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path} is not valid JSON ({error.msg} at line {error.lineno}); {FIX}") from None
    except OSError as error:
        raise ConfigError(f"{path} cannot be read ({error.strerror}); {FIX}") from None
    problem = _manifest_problem(manifest)
    if problem:
        raise ConfigError(f"{path} is not a sweep manifest: {problem}; {FIX}")
    return manifest


def _fold_lines(log: Path, data: bytes, jobs: list[dict], first_line: int) -> list[int]:
    """Apply the log's lines in `data` (the first numbered `first_line`) to `jobs` in order; the numbers of the
    lines cut short, which are skipped."""
    torn = []
    for number, line in enumerate(data.split(b"\n"), start=first_line):
        if not line.strip():
            continue
        try:
            update = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            torn.append(number)  # a JSON object cut short never parses: only a killed writer leaves one
            continue
        problem = _update_problem(update, jobs)
        if problem:
            raise ConfigError(f"{log} line {number} is not a job update: {problem}; {FIX}")
        jobs[update["job"]].update(update)
    return torn


@dataclass
class _Fold:
    """This process's fold of one sweep's files, kept so that a job's start reads only the log's lines appended
    since the last (a launcher running every job in its own process, or in reused workers, reads a 1,000-job
    sweep's files in linear, not quadratic, time)."""

    manifest: tuple  # sweep_manifest.json's identity (`_identity`): rewritten, the fold starts again
    jobs: list[dict]
    log: int | None = None  # the log's inode, once it is read
    offset: int = 0  # the log's bytes folded: whole lines
    lines: int = 0


_folds: dict[Path, _Fold] = {}


def _identity(path: Path) -> tuple | None:
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


def job_entry(sweep_dir: Path, job: int) -> dict | None:
    """Job `job`'s entry as `read` gives it (a copy); None where the sweep has no manifest or no such job."""
    sweep_dir = Path(sweep_dir)
    with _shared_lock(sweep_dir):
        try:
            jobs = _folded_jobs(sweep_dir)
        except ConfigError:
            _folds.pop(sweep_dir, None)  # half folded
            raise
    return dict(jobs[job]) if jobs is not None and 0 <= job < len(jobs) else None


def _folded_jobs(sweep_dir: Path) -> list[dict] | None:
    path, log = sweep_dir / MANIFEST_FILE, sweep_dir / JOB_LOG
    identity, fold = _identity(path), _folds.get(sweep_dir)
    if identity is None:
        _folds.pop(sweep_dir, None)
        manifest = _read(sweep_dir)  # None, or the error of a log without its manifest
        return manifest["jobs"] if manifest else None
    try:
        handle = open(log, "rb")
    except FileNotFoundError:
        handle = None
    with handle or contextlib.nullcontext():
        found = os.fstat(handle.fileno()) if handle else None
        inode, size = (found.st_ino, found.st_size) if found else (None, 0)
        if fold is None or fold.manifest != identity or fold.offset and (fold.log != inode or size < fold.offset):
            fold = _folds[sweep_dir] = _Fold(identity, _read_manifest(path)["jobs"])  # rewritten or replaced
        if handle is None:
            return fold.jobs
        fold.log = inode
        handle.seek(fold.offset)
        data = handle.read()
    whole = data[: data.rfind(b"\n") + 1]
    if len(whole) < len(data):  # a last line without its end (cut short, or its newline lost): read it all
        return _read(sweep_dir)["jobs"]
    _fold_lines(log, whole, fold.jobs, fold.lines + 1)
    fold.offset += len(whole)
    fold.lines += whole.count(b"\n")
    return fold.jobs


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
    if not isinstance(manifest.get("config_dir"), str | None):
        return "config_dir is not a folder name"
    if not isinstance(manifest.get("config_base", {}), dict):
        return "config_base is not an object"
    if not isinstance(manifest.get("launches", 1), int) or isinstance(manifest.get("launches"), bool):
        return "launches is not a whole number"
    for number, entry in enumerate(manifest["jobs"]):
        if not isinstance(entry, dict):
            return f"jobs[{number}] is not an object"
        if entry.get("job") != number or isinstance(entry.get("job"), bool):
            return f"jobs[{number}] has job={entry.get('job')!r}, not {number}"
        if not _strings(entry.get("overrides")):
            return f"jobs[{number}].overrides is not a list of overrides"
        problem = _status_problem(f"jobs[{number}]", entry)
        if problem:
            return problem
    return None


def _status_problem(name: str, entry: dict) -> str | None:
    if entry.get("status") not in (PENDING, RUNNING, DONE, FAILED):
        return f"{name}.status={entry.get('status')!r} is none of {PENDING}, {RUNNING}, {DONE}, {FAILED}"
    for key in ("outcome", "error", "folder"):
        if not isinstance(entry.get(key), str | None):
            return f"{name}.{key} is not text"
    return None


def _update_problem(update: Any, jobs: list[dict]) -> str | None:
    if not isinstance(update, dict):
        return f"it holds a JSON {type(update).__name__}, not an object"
    job = update.get("job")
    if not isinstance(job, int) or isinstance(job, bool) or not 0 <= job < len(jobs):
        return f"job={job!r} is none of the sweep's {len(jobs)} jobs"
    if "overrides" in update:
        return "it changes the job's overrides, which only the manifest holds"
    return _status_problem(f"job {job}", {**jobs[job], **update})


def write(sweep_dir: Path, manifest: dict) -> None:
    """The whole manifest, replacing the file at once (a reader sees the old one or the new one)."""
    _folds.pop(Path(sweep_dir), None)
    path = Path(sweep_dir) / MANIFEST_FILE
    temporary = path.with_name(f".{MANIFEST_FILE}.{os.getpid()}")
    kept = {key: value for key, value in manifest.items() if key != TORN}
    try:
        temporary.write_text(json.dumps(kept, indent=2))
        temporary.replace(path)
    except OSError:
        temporary.unlink(missing_ok=True)  # a full disk leaves no half-written copy behind
        raise


def _write_folded(sweep_dir: Path, manifest: dict) -> None:
    """Under `locked`: write `manifest` (the log already folded into it) and remove the log. A kill between the
    two leaves the log to be folded again on top, which changes nothing: each line sets fields to values."""
    write(sweep_dir, manifest)
    log = sweep_dir / JOB_LOG
    if manifest.get(TORN):
        print(f"align-kit: {torn_note(sweep_dir, manifest)}; the others are kept in {MANIFEST_FILE}", file=sys.stderr)
    log.unlink(missing_ok=True)


def fold(sweep_dir: Path) -> dict | None:
    """At the end of a launch: the job log folded into `sweep_manifest.json`, which is returned."""
    with locked(sweep_dir):
        manifest = _read(sweep_dir)
        if manifest is not None and (sweep_dir / JOB_LOG).is_file():
            _write_folded(sweep_dir, manifest)
    return manifest


def torn_note(sweep_dir: Path, manifest: dict) -> str:
    """The job log's lines that `read` skipped, named (a manifest read without any: no note is due)."""
    torn = manifest[TORN]
    lines = f"line {torn[0]} was" if len(torn) == 1 else f"lines {', '.join(map(str, torn))} were"
    update = "that update is" if len(torn) == 1 else "those updates are"
    return (
        f"{Path(sweep_dir) / JOB_LOG} {lines} cut short (a process was killed while writing): {update} lost, "
        "every other one is kept"
    )


def update_job(sweep_dir: Path, job: int, **fields: Any) -> None:
    """Append the job's new fields to the log: the same cost at any number of jobs."""
    sweep_dir = Path(sweep_dir)
    if job_entry(sweep_dir, job) is None:
        return  # a job launched outside a manifest (e.g. Hydra's API directly): nothing to record
    line = json.dumps({"job": job, **fields, "updated": time.strftime("%Y-%m-%d %H:%M:%S")}).encode() + b"\n"
    with locked(sweep_dir), open(sweep_dir / JOB_LOG, "a+b") as log:
        if log.seek(0, os.SEEK_END) > 0:
            log.seek(-1, os.SEEK_END)
            if log.read(1) != b"\n":  # a killed writer's cut line: end it, so it never swallows this one
                line = b"\n" + line
        log.write(line)


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


def new_manifest(
    task: list[str], hydra_overrides: list[str], jobs: list[list[str]], config_dir: str | None = None
) -> dict:
    """The manifest of a sweep's first launch: every job pending (`config_dir`: the command's --config-dir, which
    a resume composes from again)."""
    return {
        "task_overrides": task,
        "hydra_overrides": hydra_overrides,
        "config_dir": config_dir,
        **_launcher(),
        "launches": 1,
        "jobs": [
            {"job": n, "overrides": o, "status": PENDING, "outcome": None, "error": None, "folder": None}
            for n, o in enumerate(jobs)
        ],
    }


# Each sweep job's resolved config as this process's pre-flight (align_kit.runs.preflight) composed it, by the
# job's task overrides: the manifest records them at the sweep's start, so a resume can tell what changed since.
composed_jobs: dict[tuple[str, ...], dict] = {}


def task_key(overrides: list[str]) -> tuple[str, ...]:
    """A job's overrides without Hydra's own (`hydra.*`, `hydra/...`): its task overrides, as Hydra splits them."""
    return tuple(o for o in overrides if o.lstrip("+~").split("=", 1)[0].split(".")[0].split("/")[0] != "hydra")


# `align-kit sweep --resume FOLDER --replan`: jobs whose config changed since the sweep's first launch run again
# under the new config, instead of the resume being refused.
REPLAN_FLAG = "--replan"
replan = False


def job_configs(jobs: list[list[str]]) -> list[dict] | None:
    """Each job's resolved config, flattened (`key.sub: value`), as this process's pre-flight composed it (None where
    it did not compose them all: a launch that skipped the pre-flight records none)."""
    from align_kit.runs.config_changes import flatten

    found = [composed_jobs.get(task_key(job)) for job in jobs]
    return None if any(config is None for config in found) else [flatten(config) for config in found]


def config_hash(flat: dict) -> str:
    return hashlib.sha256(json.dumps(flat, sort_keys=True, default=str).encode()).hexdigest()


def record_configs(manifest: dict, configs: list[dict], jobs: list[int] | None = None) -> None:
    """Record each job's config (`jobs`: only these) in `manifest`: its hash, and what differs from the sweep's
    `config_base` (job 0's config at the first launch), so the keys a later change touches can be named."""
    base = manifest.setdefault("config_base", configs[0])
    for number in range(len(configs)) if jobs is None else jobs:
        flat = configs[number]
        manifest["jobs"][number]["config_hash"] = config_hash(flat)
        manifest["jobs"][number]["config"] = {
            "set": {key: value for key, value in flat.items() if key not in base or base[key] != value},
            "unset": sorted(base.keys() - flat.keys()),
        }


def recorded_config(manifest: dict, number: int) -> dict | None:
    """Job `number`'s flattened config as the manifest recorded it (None where it recorded none)."""
    entry, base = manifest["jobs"][number], manifest.get("config_base")
    record = entry.get("config")
    if not isinstance(base, dict) or not isinstance(record, dict):
        return None
    unset, changed = record.get("unset"), record.get("set")
    if not _strings(unset) or not isinstance(changed, dict):
        return None
    return {**{key: value for key, value in base.items() if key not in set(unset)}, **changed}


def changed_configs(manifest: dict, configs: list[dict]) -> dict[int, list[str]]:
    """The jobs whose config differs from the manifest's record, each with `key (before -> after)` (the keys a run's
    own resume may change too are left out: align_kit.runs.config_changes.RESUME_MAY_CHANGE)."""
    from align_kit.runs.config_changes import config_differences

    changed = {}
    for number, flat in enumerate(configs):
        before = recorded_config(manifest, number)
        if before is not None and manifest["jobs"][number].get("config_hash") != config_hash(flat):
            differing = config_differences(before, flat)
            if differing:
                changed[number] = differing
    return changed


def check_replan(sweep_dir: Path, manifest: dict, configs: list[dict] | None) -> dict[int, list[str]]:
    """A relaunch's check that each job composes as it did (`configs`: as it composes now): a change is refused,
    with the keys that changed, unless `replan`; returns the changed jobs."""
    if configs is None or len(configs) != len(manifest["jobs"]):
        return {}
    changed = changed_configs(manifest, configs)
    if changed and not replan:
        first = min(changed)
        keys = sorted({key.split(" (")[0] for differing in changed.values() for key in differing})
        shown = ", ".join(changed[first][:4]) + (", ..." if len(changed[first]) > 4 else "")
        source = f" (its config files: --config-dir {manifest['config_dir']})" if manifest.get("config_dir") else ""
        raise ConfigError(
            f"hydra.sweep.dir={sweep_dir}: {len(changed)} of its {len(configs)} jobs would now compose differently "
            f"from the sweep's first launch{source}, at {', '.join(keys[:6])}{', ...' if len(keys) > 6 else ''} "
            f"(job {first}: {shown}); a resume runs what the sweep started: restore those files, or run the changed "
            f"jobs again under the new config: align-kit sweep --resume {sweep_dir} {REPLAN_FLAG}"
        )
    return changed


def _replanned(sweep_dir: Path, manifest: dict, configs: list[dict] | None) -> dict:
    """`check_replan`, then (with `replan`) the changed jobs recorded anew, to start again."""
    changed = check_replan(sweep_dir, manifest, configs)
    if not changed:
        return manifest
    record_configs(manifest, configs, sorted(changed))
    for number in changed:
        manifest["jobs"][number].update(status=PENDING, outcome=None, error=None, restart=True)
    print(
        f"align-kit: {REPLAN_FLAG}: {len(changed)} jobs changed ({', '.join(map(str, sorted(changed)[:20]))}"
        f"{', ...' if len(changed) > 20 else ''}); they start again under the new config",
        file=sys.stderr,
    )
    return manifest


def start_sweep(config: DictConfig) -> dict:
    """At the start of a multirun: write the manifest of a new sweep, or check a resumed one against it."""
    sweep_dir = Path(str(config.hydra.sweep.dir))
    task = list(config.hydra.overrides.task)
    hydra_overrides = _kept_hydra_overrides(list(config.hydra.overrides.hydra))
    params = config.hydra.sweeper.get("params")
    params = OmegaConf.to_container(params, resolve=True) if isinstance(params, DictConfig) else {}
    config_dir = command_line_config_dir(config)
    jobs = job_overrides(task, params, config_dir)
    configs = job_configs(jobs)
    with locked(sweep_dir):
        saved = _read(sweep_dir)
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
            manifest = _replanned(sweep_dir, {**saved, "hydra_overrides": hydra_overrides, **_launcher()}, configs)
            manifest["launches"] = int(saved.get("launches", 1)) + 1
            if "config_base" not in manifest and configs is not None:  # a manifest from before configs were kept
                record_configs(manifest, configs)
        else:
            manifest = new_manifest(task, hydra_overrides, jobs, config_dir and str(Path(config_dir).resolve()))
            if configs is not None:
                record_configs(manifest, configs)
        _write_folded(sweep_dir, manifest)  # the earlier launches' job log, folded in
    record_launch(manifest)  # this account's own: a resume from it is the user's command line
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
    entry = job_entry(sweep, job) or {}
    previous = FAILED if entry.get("restart") else entry.get("status", PENDING)  # replanned: starts again
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
    # An earlier launch's outcome no longer holds: until this launch ends, the job is running (or interrupted).
    update_job(sweep, job, status=RUNNING, pid=os.getpid(), pid_started=process_start_time(), folder=str(folder),
               action=action, outcome=None, error=None, restart=False)  # fmt: skip
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
    if status in (PENDING, RUNNING) and entry.get("slurm_state"):  # the scheduler ended it (hydra/launcher=slurm)
        return "interrupted"
    if status == RUNNING and not process_alive(entry.get("pid"), entry.get("pid_started")):
        return "interrupted"
    return str(status)


def resume_command(sweep_dir: Path, manifest: dict) -> list[str]:
    """`align-kit train -m` arguments that relaunch the sweep in its folder (from the --config-dir it started with)."""
    config_dir = manifest.get("config_dir")
    source = ["--config-dir", config_dir] if isinstance(config_dir, str) else []
    return [
        "-m",
        *source,
        *manifest["task_overrides"],
        *manifest.get("hydra_overrides", []),
        f"hydra.sweep.dir={sweep_dir}",
    ]
