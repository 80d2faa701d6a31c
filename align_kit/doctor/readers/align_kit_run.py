"""An align_kit run folder (`metrics.jsonl`, the resolved `config.yaml`, `summary.json`, Hydra's `.hydra/`), and a
sweep folder: one history per job folder, named by the job's overrides from the sweep's manifest."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from align_kit.core.run_files import CONFIG_FILE, HYDRA_RECORD, METRICS_FILE, SUMMARY_FILE, find_folders
from align_kit.doctor.history import RunHistory
from align_kit.doctor.readers.common import (
    as_step,
    history_from_rows,
    input_error,
    is_summary,
    raise_unreadable,
    read_bytes_bounded,
)
from align_kit.doctor.readers.context import from_align_kit_config

MANIFEST_FILE = "sweep_manifest.json"  # align_kit.runs.sweep_manifest's file: the sweep's jobs and their outcomes


def is_run_folder(folder: Path) -> bool:
    return (folder / METRICS_FILE).is_file()


def _present(path: Path) -> bool:
    """Whether a file the run folder may hold is there: anything of that name, a pipe or a folder included (the
    read then refuses it in one line, rather than passing over it as absent)."""
    return path.exists() or path.is_symlink()


def _text(path: Path) -> str:
    return read_bytes_bounded(path, "a file of align_kit's run folder").decode("utf-8", errors="replace")


def _yaml(path: Path, notes: list[str]) -> dict:
    try:
        loaded = yaml.safe_load(_text(path))
    except yaml.YAMLError:
        notes.append(f"{path} is not valid YAML; the run's setup is unknown")
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _summary(folder: Path, notes: list[str]) -> dict:
    path = folder / SUMMARY_FILE
    if not _present(path):
        return {}
    try:
        summary = json.loads(_text(path))
    except json.JSONDecodeError:
        notes.append(f"{path} is not valid JSON; node choices taken from .hydra/ instead")
        return {}
    return summary if isinstance(summary, dict) else {}


def _hydra_choices(folder: Path, notes: list[str]) -> dict[str, str]:
    """The node choices Hydra recorded (its own groups, the trainer's fields and the monitor's aside)."""
    path = folder / HYDRA_RECORD / "hydra.yaml"
    if not _present(path):
        return {}
    runtime = ((_yaml(path, notes).get("hydra") or {}).get("runtime") or {}).get("choices") or {}
    return {
        group: str(node)
        for group, node in runtime.items()
        if node not in (None, "null", "None") and "/" not in group and group not in ("trainer", "monitor")
    }


def read_run_folder(folder: Path, key_map: Mapping[str, str] | None = None, name: str = "") -> RunHistory:
    # The file's one reader; imported here, as its module imports transformers (seconds) for its callback.
    from align_kit.tracking.metrics_file import read_metrics_file

    notes: list[str] = []
    path = folder / METRICS_FILE
    pairs, skipped = read_metrics_file(path)
    if skipped:
        notes.append(f"skipped {skipped} malformed line(s) of {METRICS_FILE}")
    if skipped and not pairs:
        raise input_error(
            path, f"none of its {skipped} line(s) is a JSON row with a step; expected one JSON object per logged step"
        )
    # The row's own step, not the reader's float of it: a float keeps whole numbers exact only to 2**53.
    raw = [(as_step(row["step"]), row) for _, row in pairs if not is_summary(row)]
    config_path = next(
        (candidate for candidate in (folder / CONFIG_FILE, folder / HYDRA_RECORD / CONFIG_FILE) if _present(candidate)),
        None,
    )
    config = _yaml(config_path, notes) if config_path else {}
    if config_path is None:
        notes.append(f"no {CONFIG_FILE} or {HYDRA_RECORD}/{CONFIG_FILE}: the run's setup is unknown")
    summary = _summary(folder, notes)
    context: dict[str, Any] = from_align_kit_config(config, summary)
    choices = summary.get("choices")
    choices = (
        {group: str(node) for group, node in choices.items() if str(node) != "None"}
        if isinstance(choices, dict)
        else _hydra_choices(folder, notes)
    )
    if choices:
        context["choices"] = choices
    return history_from_rows(
        path,
        "align_kit",
        [(step, row) for step, row in raw if step is not None],
        key_map=key_map,
        notes=notes,
        context=context,
        name=name or folder.name,
        null_is_nan=True,  # metrics.jsonl writes NaN and inf as null
        framework="align_kit",
    )


def find_run_folders(root: Path) -> list[Path]:
    """The run folders below `root` (not inside one another), job 2 before job 10."""
    return find_folders(root, is_run_folder, onerror=raise_unreadable)


def _jobs(sweep: Path, notes: list[str]) -> dict[str, dict]:
    """Job folder name -> its manifest entry (job number, overrides, status), when the sweep has a manifest. Only
    sweep_manifest.json is read: a launch still running has later updates in its job log. A manifest that is not a
    regular file or cannot be read is refused (a pipe would block the read for ever); one that is not valid JSON is
    noted and the jobs are named by their folders."""
    path = sweep / MANIFEST_FILE
    if not _present(path):
        return {}
    text = _text(path)
    try:
        manifest = json.loads(text)
    except ValueError as error:
        notes.append(f"{path} is not valid JSON ({error}): jobs named by their folders, their status unknown")
        return {}
    jobs = manifest.get("jobs") if isinstance(manifest, dict) else None
    return {
        Path(job["folder"]).name: job
        for job in jobs or []
        if isinstance(job, dict) and isinstance(job.get("folder"), str)
    }


def read_sweep(root: Path, folders: list[Path], key_map: Mapping[str, str] | None = None) -> list[RunHistory]:
    """One history per job folder of a sweep."""
    histories = []
    manifests: dict[Path, tuple[dict[str, dict], list[str]]] = {}
    for folder in folders:
        if folder.parent not in manifests:
            notes: list[str] = []
            manifests[folder.parent] = _jobs(folder.parent, notes), notes
        jobs, manifest_notes = manifests[folder.parent]
        job = jobs.get(folder.name, {})
        overrides = " ".join(map(str, job.get("overrides") or []))
        name = f"job {job['job']} ({overrides})" if "job" in job else str(folder.relative_to(root))
        history = read_run_folder(folder, key_map, name=name)
        history.notes += manifest_notes
        if job.get("status") not in (None, "done"):
            history.notes.append(f"the sweep's manifest says this job is {job['status']}")
        histories.append(history)
    return histories
