"""W&B runs: an offline run folder (`offline-run-*/` or `run-*/` holding `run-*.wandb`, read back with
`align_kit.tracking.wandb_offline`), or `wandb:ENTITY/PROJECT/RUN_ID` through the public API (`api.run(path)`,
`.scan_history()`, `.config`, `.name`). HF's callback logs `train/<metric>` against `train/global_step`; verl and
OpenRLHF log their own keys, against W&B's `_step` or their own step key."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from align_kit.doctor.history import DoctorInputError, RunHistory
from align_kit.doctor.keymaps import detect_framework
from align_kit.doctor.readers.common import (
    RawRows,
    as_step,
    history_from_rows,
    input_error,
    is_summary,
    open_regular,
)
from align_kit.doctor.readers.context import from_trl_config, from_verl_config
from align_kit.tracking.wandb_offline import read_config, read_history, read_run_info

STEP_KEYS = ("train/global_step", "global_step", "training/global_step", "_step")
WANDB_PREFIX = "wandb:"


def is_offline_run(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("run-*.wandb"))


def offline_runs(folder: Path) -> list[Path]:
    """The offline runs in a folder: itself, its run folders, or those of its `wandb/` folder, oldest first."""
    if is_offline_run(folder):
        return [folder]
    for base in (folder, folder / "wandb"):
        found = sorted(
            path for pattern in ("offline-run-*", "run-*") for path in base.glob(pattern) if is_offline_run(path)
        )
        if found:
            return found
    return []


def _rows(history: Iterable[Mapping[str, Any]]) -> RawRows:
    raw: RawRows = []
    for row in history:
        if is_summary(row) or any(key.startswith("train/train_runtime") for key in row):
            continue
        step = next((as_step(row[key]) for key in STEP_KEYS if key in row), None)
        if step is not None:
            raw.append((step, {key: value for key, value in row.items() if not key.startswith("_")}))
    return raw


def _context(config: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    if detect_framework(keys) == "verl":
        return from_verl_config(config)
    return from_trl_config(config)


def _history(source: str, raw: RawRows, config: Mapping[str, Any], name: str, key_map, notes) -> RunHistory:
    keys = {key for _, row in raw[:50] for key in row}
    return history_from_rows(
        source, "wandb", raw, key_map=key_map, notes=notes, context=_context(config, keys), name=name
    )


def read_offline(folder: Path, key_map: Mapping[str, str] | None = None) -> RunHistory:
    for run_file in folder.glob("run-*.wandb"):  # the reader opens it: a pipe there would block it for ever
        open_regular(run_file, "an offline W&B run file").close()
    stop: dict = {}
    try:
        history = read_history(folder, stop)
        config = read_config(folder)
        info = read_run_info(folder)
    except (ValueError, OSError) as error:
        raise input_error(folder, f"cannot read the offline W&B run ({error}); expected a run-*.wandb file") from None
    name = info.get("name") or folder.name
    notes = []
    if stop:  # W&B's framing cannot be followed past a failing chunk
        notes.append(
            f"the run file ends in a cut or damaged chunk at byte {stop['at']}: the {stop['unread']} byte(s) after "
            "it were not read (a run killed while writing, or a damaged file)"
        )
    return _history(str(folder), _rows(history), config, name, key_map, notes)


def read_api(spec: str, api: Any = None, key_map: Mapping[str, str] | None = None) -> RunHistory:
    path = spec.removeprefix(WANDB_PREFIX).replace("/runs/", "/")
    if len([part for part in path.split("/") if part]) != 3:
        raise DoctorInputError(f"{spec}: names no run; expected wandb:ENTITY/PROJECT/RUN_ID")
    try:
        if api is None:
            import wandb

            api = wandb.Api()
        run = api.run(path)
        raw = _rows(run.scan_history())
        config = dict(run.config or {})
        name = str(getattr(run, "name", "") or path)
    except Exception as error:  # the API raises its own types for login, network and missing runs
        raise DoctorInputError(
            f"{spec}: cannot read the W&B run ({type(error).__name__}: {error}); "
            "run `wandb login` (or set WANDB_API_KEY) and check the path"
        ) from None
    return _history(spec, raw, config, name, key_map, [])
