"""Run folders are never clobbered, and a resume continues the run it names.

What a folder holds decides what may happen to it:
- new: missing, empty, or holding only the record of a launch that never trained (`.hydra/`, `*.log`, and beside
  `.hydra/` a config.yaml and an empty metrics.jsonl, as a run that failed before its first step leaves them):
  a run starts there.
- run: it holds a run (a metrics row, summary.json, a checkpoint-N/, or config.yaml next to `.hydra/` and more):
  `train.resume=true` continues it; `train.overwrite=true` moves the whole folder aside to
  `<folder>.replaced-<time>` (nothing is deleted) and the run starts in a fresh folder; otherwise it is refused.
- other: anything else that is not empty (a project folder): always refused; align_kit never moves it.

`RunFolderGuard` (a Hydra callback) applies these rules before Hydra writes `.hydra/` into the folder, so a refusal
leaves the folder as it was, and locks the folder (align_kit.runs.run_lock) for as long as the run lives, so no second
start, overwrite or resume can touch it meanwhile. `claimed_run_folder` does both again inside
`align_kit.train.run` (a no-op where the callback already holds the lock), so in-process use is checked and locked too.

On resume the composed config must equal the run's `config.yaml` except for RESUME_MAY_CHANGE, and the checkpoint
the trainer will load (the highest checkpoint-N, as HF's `get_last_checkpoint` picks it) must be complete.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import sys
import time
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from align_kit.core.errors import ConfigError
from align_kit.core.processes import (
    is_main_process,
    process_start_time,
    require_named_run_folder,
    wait_for_main_process,
    world_size,
)
from align_kit.core.run_files import (
    CHECKPOINT,
    CONFIG_FILE,
    HYDRA_RECORD,
    METRICS_FILE,
    SUMMARY_FILE,
    TRAINER_STATE,
    latest_checkpoint,
    require_checkpoint,
    unused_name,
)
from align_kit.runs.config_changes import RESUME_MAY_CHANGE_TEXT, config_differences, flatten  # noqa: F401
from align_kit.runs.run_lock import LOCK_FILE, RunLock, acquire, held, release
from align_kit.runs.sweep_manifest import MANIFEST_FILE, live_launcher

RUN_FILES = ("metrics.jsonl", "summary.json")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "adapter_model.safetensors")
OPTIMIZER_FILES = ("optimizer.pt", "scheduler.pt")

# One way to resume a sweep, the manifest's: job by job, each from its own folder's state.
SWEEP_RESUME_REFUSED = (
    "train.resume=true resumes one run, not a sweep; resume a sweep with `align-kit sweep --resume <sweep folder>` "
    "(or the same sweep command with hydra.sweep.dir=<sweep folder>): finished jobs are skipped, stopped ones resume"
)
MULTI_PROCESS_SWEEP_REFUSED = (
    "a sweep runs its jobs one process each; launch a multi-process job on its own (torchrun --nproc_per_node N "
    "-m align_kit.train ... hydra.run.dir=<folder>), one job at a time"
)


def folder_kind(folder: Path) -> str:
    """'new', 'run', 'other' or 'file' (see the module docstring)."""
    if not folder.exists():
        return "new"
    if not folder.is_dir():
        return "file"
    entries = set(os.listdir(folder)) - {LOCK_FILE}
    launch_record = {name for name in entries if name == HYDRA_RECORD or name.endswith(".log")}
    if entries == launch_record:
        return "new"
    if SUMMARY_FILE in entries or latest_checkpoint(folder) or _has_rows(folder / METRICS_FILE):
        return "run"
    if HYDRA_RECORD in entries and entries - launch_record <= {CONFIG_FILE, METRICS_FILE}:
        return "new"  # a launch that stopped before its first step: nothing of a run to lose
    if entries & set(RUN_FILES) or {HYDRA_RECORD, CONFIG_FILE} <= entries:
        return "run"
    return "other"


def _has_rows(metrics: Path) -> bool:
    if not metrics.is_file():
        return False
    with metrics.open("rb") as handle:
        return bool(handle.read(65536).strip())


def _named(folder: Path) -> str:
    return str(folder) if folder.is_absolute() else f"{folder} (= {folder.resolve()})"


def _shown(entries: list[str], limit: int = 3) -> str:
    return ", ".join(sorted(entries)[:limit]) + (", ..." if len(entries) > limit else "")


def _usable(folder: Path, key: str, resume: bool, overwrite: bool) -> str:
    """The folder's kind, or ConfigError where no run may start, resume or overwrite there."""
    if resume and overwrite:
        raise ConfigError(
            "train.resume=true and train.overwrite=true contradict each other; resume the run, or move it aside"
        )
    try:
        folder.lstat()
    except FileNotFoundError:
        pass  # a new folder
    except OSError as error:  # a name too long for the file system, a file where a folder should be, ...
        raise ConfigError(f"{key}={folder} cannot be used ({error.strerror}); choose another folder") from None
    if folder.is_symlink() and not folder.exists():
        raise ConfigError(
            f"{key}={folder} is a symlink to {os.readlink(folder)}, which does not exist; create that folder, "
            f"or name another: {key}=<new folder>"
        )
    kind = folder_kind(folder)
    name = _named(folder)
    if kind == "file":
        raise ConfigError(f"{key}={name} is a file, not a folder; choose a new folder: {key}=<new folder>")
    if kind == "other":
        raise ConfigError(
            f"{key}={name} is not empty and holds no align_kit run ({_shown(os.listdir(folder))}); "
            f"align_kit starts runs only in a new or empty folder: {key}=<new folder>"
        )
    if kind == "run" and not resume and not overwrite:
        raise ConfigError(
            f"{key}={name} already holds a run ({_shown(os.listdir(folder))}); resume it with train.resume=true, "
            f"move it aside with train.overwrite=true, or choose a new folder: {key}=<new folder>"
        )
    return kind


def check_run_folder(folder: Path, key: str, resume: bool, overwrite: bool) -> Path | None:
    """Refuse a folder a run may not start in (ConfigError); with `overwrite`, move an old run aside and return
    where it went."""
    kind = _usable(folder, key, resume, overwrite)
    if kind == "new" or resume:
        return None
    return move_aside(folder, key)


def claim_run_folder(folder: Path, key: str, resume: bool, overwrite: bool) -> RunLock | None:
    """`check_run_folder` under the folder's lock (align_kit.runs.run_lock): a live run there is refused, naming it,
    and the lock is held until the caller releases it or the process ends. None where a resume names a missing
    folder (check_resume refuses it)."""
    _usable(folder, key, resume, overwrite)  # a project folder is refused before a lock file is written into it
    if resume and not folder.is_dir():
        return None
    action = "train.resume=true" if resume else "train.overwrite=true" if overwrite else "a second run there"
    lock = acquire(folder, f"{key}={_named(folder)}", action)
    try:
        if check_run_folder(folder, key, resume, overwrite) is not None:  # checked again, now that it is locked
            lock.release()  # the old run moved aside with its lock file: lock the fresh folder
            lock = acquire(folder, f"{key}={_named(folder)}")
    except BaseException:
        lock.release()
        raise
    return lock


@contextlib.contextmanager
def claimed_run_folder(folder: Path, key: str, resume: bool, overwrite: bool) -> Iterator[None]:
    """The folder claimed (checked and locked) for the block; as it was where this process holds its lock."""
    if held(folder):
        yield
        return
    lock = claim_run_folder(folder, key, resume, overwrite)
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


def move_aside(folder: Path, key: str) -> Path:
    resolved = folder.resolve()
    if Path.cwd().resolve().is_relative_to(resolved):
        raise ConfigError(
            f"train.overwrite=true would move {key}={folder}, which holds the current folder; run from outside it"
        )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = unused_name(resolved.with_name(f"{resolved.name}.replaced-{stamp}"))
    resolved.rename(backup)
    if folder.is_symlink():
        # The link says where this run's files live (another disk, a scratch space): the old run moves aside
        # there, and the link keeps pointing at the same, now empty, folder.
        resolved.mkdir()
    print(f"align-kit: train.overwrite=true: moved the old run in {folder} to {backup}", file=sys.stderr)
    return backup


# --- resume -----------------------------------------------------------------------------------------------------


def check_resume(folder: Path, composed: dict) -> Path:
    """Refuse a resume that would not continue the run in `folder` as it was configured; returns the checkpoint."""
    checkpoint = require_checkpoint(folder)
    saved_path = folder / CONFIG_FILE
    if not saved_path.is_file():
        raise ConfigError(
            f"train.resume=true but {folder} has no {CONFIG_FILE} to check this config against; "
            f"restore it from {folder}/{HYDRA_RECORD}/config.yaml"
        )
    saved = _saved_config(saved_path, folder)
    differing = config_differences(saved, composed)
    if differing:
        raise ConfigError(
            f"train.resume=true but this config differs from {saved_path} at {', '.join(differing)}; "
            f"resume with the run's own overrides ({folder}/{HYDRA_RECORD}/overrides.yaml); only "
            f"{RESUME_MAY_CHANGE_TEXT} may change on resume"
        )
    save_only_model = bool((composed.get("trainer") or {}).get("save_only_model", False))
    check_checkpoint(checkpoint, save_only_model)
    return checkpoint


def _saved_config(path: Path, folder: Path) -> dict:
    """The run's config.yaml as a dict, or one line naming what is wrong with it and where a copy is."""
    fix = f"restore it from {folder}/{HYDRA_RECORD}/config.yaml (the config Hydra recorded for the run)"
    try:
        saved = OmegaConf.to_container(OmegaConf.create(path.read_text(encoding="utf-8")), resolve=True)
    except UnicodeDecodeError as error:
        raise ConfigError(f"train.resume=true but {path} is not UTF-8 (byte {error.start}); {fix}") from None
    except (OSError, yaml.YAMLError, OmegaConfBaseException) as error:
        raise ConfigError(f"train.resume=true but {path} is not a readable config ({_problem(error)}); {fix}") from None
    if not isinstance(saved, dict):
        raise ConfigError(f"train.resume=true but {path} holds no config (a {type(saved).__name__}); {fix}")
    return saved


def _problem(error: BaseException) -> str:
    mark = getattr(error, "problem_mark", None)
    if isinstance(error, yaml.MarkedYAMLError) and mark is not None:
        return f"{error.problem} at line {mark.line + 1}"
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def check_checkpoint(checkpoint: Path, save_only_model: bool = False) -> None:
    """The files HF's resume reads, present and structurally whole (cheap: headers only, no tensors loaded)."""
    problem = _checkpoint_problem(checkpoint, save_only_model)
    if problem:
        earlier = [p for p in checkpoint.parent.glob("checkpoint-*") if p != checkpoint and CHECKPOINT.match(p.name)]
        fix = (
            f"delete {checkpoint} to resume from the checkpoint before it"
            if earlier
            else "it is the run's only checkpoint: start a new run folder"
        )
        raise ConfigError(f"train.resume=true but the checkpoint to resume, {checkpoint}, {problem}; {fix}")


def _checkpoint_problem(checkpoint: Path, save_only_model: bool) -> str | None:
    state_path = checkpoint / TRAINER_STATE
    if not state_path.is_file():
        return f"has no {TRAINER_STATE}"
    try:
        state = json.loads(state_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return f"has an unreadable {TRAINER_STATE} (not JSON)"
    if not isinstance(state, dict) or not isinstance(state.get("global_step"), int):
        return f"has a {TRAINER_STATE} without a global_step"
    weights = next((checkpoint / name for name in WEIGHT_FILES if (checkpoint / name).is_file()), None)
    if weights is None:
        return f"holds no model weights ({' or '.join(WEIGHT_FILES[::2])})"
    if not _readable_weights(weights):
        return f"has an unreadable {weights.name} (truncated or corrupt)"
    if not save_only_model:
        for name in OPTIMIZER_FILES:
            if not (checkpoint / name).is_file():
                return f"has no {name} (optimizer state)"
            if not zipfile.is_zipfile(checkpoint / name):
                return f"has an unreadable {name} (truncated or corrupt)"
    return _other_file_problem(checkpoint, skipped=() if not save_only_model else OPTIMIZER_FILES)


def _other_file_problem(checkpoint: Path, skipped: tuple[str, ...]) -> str | None:
    """Every other file a resume reads: torch files (rng_state*.pth, scaler.pt, ...) are torch.save archives,
    JSON files (config.json, the hooks' state) parse; checked by structure, so no tensor or model loads."""
    for path in sorted(checkpoint.iterdir()):
        if not path.is_file() or path.name in skipped:
            continue
        if path.suffix in (".pt", ".pth", ".bin") and not _torch_archive(path):
            return f"has an unreadable {path.name} (truncated or corrupt: not a torch.save file)"
        if path.name.startswith("rng_state") and path.suffix == ".pth":
            problem = _data_problem(path)
            if problem:
                return f"has an unreadable {path.name} (truncated or corrupt: {problem})"
        if path.suffix == ".json":
            try:
                json.loads(path.read_bytes())
            except (ValueError, OSError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                return f"has an unreadable {path.name} (not JSON)"
    return None


def _data_problem(path: Path) -> str | None:
    """Why torch cannot load `path` as plain data, as HF's resume loads the RNG states (weights_only, numpy's
    types allowed), or None. Small files only: this loads them whole. torch's own message advises weights_only=False,
    which would run whatever the file names: only its reason is kept."""
    import torch
    from transformers.trainer_pt_utils import safe_globals

    try:
        with safe_globals(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's notes on pickle protocols: the outcome says enough
            torch.load(path, weights_only=True, map_location="cpu")
    except Exception as error:  # torch raises many kinds for a damaged file (RuntimeError, UnpicklingError, ...)
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = next((line for line in lines if line.startswith("WeightsUnpickler error")), None)
        reason = reason or next((line for line in lines if "weights_only" not in line), type(error).__name__)
        return reason.rstrip(".")[:200]
    return None


def _torch_archive(path: Path) -> bool:
    """torch.save writes a zip archive (a pickle, protocol 2 or later, before torch 1.6)."""
    if zipfile.is_zipfile(path):
        return True
    with path.open("rb") as handle:
        return handle.read(1) == b"\x80"


def _readable_weights(path: Path) -> bool:
    if path.name.endswith(".index.json"):
        try:
            shards = set(json.loads(path.read_text())["weight_map"].values())
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
            return False
        return all(_readable_weights(path.parent / shard) for shard in shards)
    if path.suffix == ".bin":
        return zipfile.is_zipfile(path)
    return _readable_safetensors(path)


def _readable_safetensors(path: Path) -> bool:
    """A safetensors file is an 8-byte header length, a JSON header, then the tensor bytes it indexes."""
    try:
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        end = max((entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"), default=0)
        return path.stat().st_size >= 8 + length + end
    except (struct.error, ValueError, KeyError, TypeError, OSError, MemoryError):
        return False


# --- the Hydra callback -----------------------------------------------------------------------------------------


def _task_config(config: DictConfig) -> dict:
    task = OmegaConf.masked_copy(config, [key for key in config if key != "hydra"])
    return OmegaConf.to_container(task, resolve=True)


def _guard(config: DictConfig, key: str) -> None:
    location = OmegaConf.select(config, key)
    if location is None or not str(location).strip():
        raise ConfigError(
            f"{key} is empty; name the folder, e.g. {key}=outputs/my_run (or leave it unset for a timestamped one)"
        )
    folder = Path(str(location))
    train = config.get("train") or {}
    resume, overwrite = bool(train.get("resume", False)), bool(train.get("overwrite", False))
    if key == "hydra.sweep.dir":
        if resume:
            raise ConfigError(SWEEP_RESUME_REFUSED)
        # Each job checks its own folder; the sweep folder must be new or empty, or hold a sweep's manifest.
        if folder.exists() and (not folder.is_dir() or os.listdir(folder)):
            if (folder / MANIFEST_FILE).is_file() and not overwrite:
                return  # a sweep launched before: align_kit.runs.sweep_manifest resumes it, job by job
            if not (overwrite and folder.is_dir()):
                raise ConfigError(
                    f"{key}={folder} is not empty; choose a new folder ({key}=<new folder>), resume its jobs "
                    "with `align-kit sweep --resume <sweep folder>`, or move it aside with train.overwrite=true"
                )
            _refuse_live_sweep(folder, key)
            move_aside(folder, key)
        return
    if resume and not overwrite:  # read-only first: a refused resume leaves the run's folder as it was
        check_resume(folder, _task_config(config))
    claim_run_folder(folder, key, resume, overwrite)  # held until the run ends (on_run_end) or the process does


def _refuse_live_sweep(folder: Path, key: str) -> None:
    launcher = live_launcher(folder)
    if launcher is not None:
        raise ConfigError(
            f"train.overwrite=true would move {key}={folder} aside, but its sweep is being run by process "
            f"{launcher}; wait for it to end (or stop it) first, or choose a new folder: {key}=<new folder>"
        )


def _refused(error: ConfigError) -> None:
    print(f"align-kit: config error: {error}", file=sys.stderr)
    sys.exit(2)


class RunFolderGuard(Callback):
    """Checks and locks the run folder (checks the sweep folder) before Hydra creates it or writes `.hydra/` into
    it. In a multi-process run rank 0 checks and locks, and the other ranks wait until it has opened the folder
    (they share it)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            require_named_run_folder(list(OmegaConf.select(config, "hydra.overrides.hydra") or []))
            if is_main_process():
                release(Path(str(config.hydra.run.dir)))  # a lock an earlier in-process run left: claimed afresh
                _guard(config, "hydra.run.dir")
            else:
                wait_for_main_process(Path(str(config.hydra.run.dir)), process_start_time())
        except ConfigError as error:
            _refused(error)

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        release(Path(str(config.hydra.run.dir)))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            if world_size() > 1:
                raise ConfigError(MULTI_PROCESS_SWEEP_REFUSED)
            _guard(config, "hydra.sweep.dir")
        except ConfigError as error:
            _refused(error)
