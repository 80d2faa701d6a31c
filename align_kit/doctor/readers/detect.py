"""Which reader a path needs, told from its content, never its name: a folder by the files it holds, a file by
what it parses as (a JSON document, JSON lines, log lines, a table)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import align_kit.doctor.readers.align_kit_run as align_kit_run
import align_kit.doctor.readers.jsonl as jsonl
import align_kit.doctor.readers.tables as tables
import align_kit.doctor.readers.text_logs as text_logs
import align_kit.doctor.readers.trl_state as trl_state
import align_kit.doctor.readers.wandb_runs as wandb_runs
from align_kit.core.run_files import METRICS_FILE
from align_kit.doctor.history import RunHistory
from align_kit.doctor.readers.common import UNKNOWN_FORMAT, history_from_rows, input_error, read_bounded
from align_kit.doctor.readers.stated import stated_context

KeyMap = Mapping[str, str] | None


def read_folder(folder: Path, key_map: KeyMap) -> list[RunHistory]:
    if align_kit_run.is_run_folder(folder):
        return [align_kit_run.read_run_folder(folder, key_map)]
    state, notes = trl_state.state_file(folder)
    if state is not None:
        data = trl_state.load_json(state)
        if not trl_state.is_state(data):
            raise input_error(state, "no log_history list; expected HF's trainer_state.json")
        return [trl_state.read_state(state, data, key_map, notes)]
    runs = wandb_runs.offline_runs(folder)
    if runs:
        return [wandb_runs.read_offline(run, key_map) for run in runs]
    jobs = align_kit_run.find_run_folders(folder)
    if jobs:
        return align_kit_run.read_sweep(folder, jobs, key_map)
    raise input_error(folder, UNKNOWN_FORMAT)


def read_file(path: Path, key_map: KeyMap, logging_steps: int | None) -> list[RunHistory]:
    if path.name.endswith(".wandb"):
        return [wandb_runs.read_offline(path.parent, key_map)]
    if path.name == METRICS_FILE and align_kit_run.is_run_folder(path.parent):
        # A run folder's own metrics.jsonl: read with the folder, for what its config states.
        return [align_kit_run.read_run_folder(path.parent, key_map)]
    text = read_bounded(path)
    head = text.lstrip()[:1]
    if head in ("{", "["):
        try:
            document = json.loads(text)
        except ValueError as error:
            return _not_one_document(path, text, error, key_map, logging_steps)
        return _document(path, document, key_map, logging_steps)
    if path.suffix == ".ipynb":
        raise input_error(path, "not JSON; expected a Jupyter notebook (.ipynb) as Jupyter saves it")
    return read_text(path, text, key_map, logging_steps)


def _document(path: Path, document: Any, key_map: KeyMap, logging_steps: int | None) -> list[RunHistory]:
    if trl_state.is_state(document):
        return [trl_state.read_state(path, document, key_map)]
    if isinstance(document, dict) and isinstance(document.get("cells"), list):
        return read_text(path, text_logs.notebook_text(document), key_map, logging_steps, notebook=True)
    objects = document if isinstance(document, list) else [document]
    return [_from_objects(path, objects, key_map, [])]


def _not_one_document(
    path: Path, text: str, error: ValueError, key_map: KeyMap, logging_steps: int | None
) -> list[RunHistory]:
    """A file that opens like JSON but is not one document: JSON lines, printed log dicts, or a corrupt file."""
    where = f"line {error.lineno}, column {error.colno}" if isinstance(error, json.JSONDecodeError) else "?"
    message = error.msg if isinstance(error, json.JSONDecodeError) else str(error)
    if path.suffix == ".ipynb" or '"nbformat"' in text[:4096] or '"cells"' in text[:4096]:
        raise input_error(path, f"not JSON ({message} at {where}); expected a Jupyter notebook as Jupyter saves it")
    if '"log_history"' in text[:100_000]:
        raise input_error(path, f"corrupt JSON ({message} at {where}); expected HF's trainer_state.json whole")
    objects, skipped, first_bad = jsonl.parse_lines(text)
    if objects and any(isinstance(item, dict) for item in objects):
        notes = []
        if skipped:
            line, reason = first_bad
            notes.append(f"skipped {skipped} line(s) that are not JSON (first: line {line}, {reason})")
        return [_from_objects(path, objects, key_map, notes)]
    found = read_text(path, text, key_map, logging_steps, missing_ok=True)
    if found:
        return found
    raise input_error(path, f"corrupt JSON ({message} at {where}); expected a JSON or JSON-lines file")


def _from_objects(path: Path, objects: list[Any], key_map: KeyMap, notes: list[str]) -> RunHistory:
    raw, verl, more = jsonl.object_rows(objects)
    return history_from_rows(
        path,
        "verl_jsonl" if verl else "jsonl",
        raw,
        key_map=key_map,
        notes=notes + more,
        framework="verl" if verl and not key_map else None,
        name=path.stem,
    )


def read_text(
    path: Path,
    text: str,
    key_map: KeyMap,
    logging_steps: int | None,
    notebook: bool = False,
    missing_ok: bool = False,
) -> list[RunHistory]:
    """Log lines first (TRL dicts, verl step lines: whichever gives more rows), then a table."""
    found = text_logs.LogLines().scan(text)
    notes = ["read from a notebook's cell outputs"] if notebook else []
    if found.trl or found.verl:
        use_verl = len(found.verl) >= len(found.trl)
        other = len(found.trl) if use_verl else len(found.verl)
        if other:
            kind = "TRL log dict" if use_verl else "verl step"
            notes.append(f"left out {other} {kind} line(s): the file's other format has more rows")
        if found.summaries:
            notes.append(f"left out {found.summaries} end-of-training summary line(s) (train_runtime, train_loss)")
        if use_verl:
            history = history_from_rows(path, "verl_console", found.verl, key_map=key_map, notes=notes, name=path.stem)
        else:
            raw, step_notes = text_logs.trl_rows(found.trl, logging_steps)
            history = history_from_rows(
                path, "trl_log_lines", raw, key_map=key_map, notes=notes + step_notes, name=path.stem
            )
        context, stated_notes = stated_context(text, history.framework)
        history.context.update(context)
        history.notes += stated_notes
        return [history]
    table = tables.find_table(text, key_map)
    if table is not None:
        runs, table_notes = tables.table_rows(table)
        format = "wandb_csv" if table.is_wandb_export else "trl_table" if table.is_progress_table else "table"
        return [
            history_from_rows(
                path,
                format,
                raw,
                key_map=key_map,
                notes=notes + table_notes,
                name=run or path.stem,
            )
            for run, raw in runs.items()
        ]
    if missing_ok:
        return []
    raise input_error(path, UNKNOWN_FORMAT)
