"""Which reader a path needs, told from its content, never its name. A folder by the files it holds; a file by
evidence: every reader that can parse it runs (JSON lines, TRL's printed dicts, verl's step lines, tables, a
notebook's HTML tables), and the one whose rows carry the most recognised metric names wins (`evidence.best`), so
a printed config or a dataset row beside the metric lines never decides. A file holding several runs (a restart, an
SFT phase then RL) gives one history per run (`runs_in_file`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import align_kit.doctor.readers.align_kit_run as align_kit_run
import align_kit.doctor.readers.jsonl as jsonl
import align_kit.doctor.readers.notebooks as notebooks
import align_kit.doctor.readers.runs_in_file as runs_in_file
import align_kit.doctor.readers.tables as tables
import align_kit.doctor.readers.tensorboard_events as tensorboard_events
import align_kit.doctor.readers.text_logs as text_logs
import align_kit.doctor.readers.trl_state as trl_state
import align_kit.doctor.readers.wandb_runs as wandb_runs
from align_kit.core.run_files import METRICS_FILE
from align_kit.doctor.history import DoctorInputError, RunHistory, UnreadInput, part_name
from align_kit.doctor.readers.code_budget import code_budget
from align_kit.doctor.readers.common import (
    UNKNOWN_FORMAT,
    check_folder_cap,
    history_from_rows,
    input_error,
    read_bounded,
)
from align_kit.doctor.readers.evidence import Found, best, count, is_config
from align_kit.doctor.readers.repeated_keys import RepeatedKeys
from align_kit.doctor.readers.stated import stated_context

KeyMap = Mapping[str, str] | None
# The files a folder of logs may hold, read when the folder is none of the known layouts.
LOG_SUFFIXES = (".jsonl", ".json", ".log", ".out", ".txt", ".csv", ".tsv", ".md", ".ipynb")
MAX_FOLDER_FILE_BYTES = 256 * 2**20  # a dataset dump beside the logs: refused, named (see _log_files)


def read_folder(folder: Path, key_map: KeyMap) -> list[RunHistory]:
    if align_kit_run.is_run_folder(folder):
        return [align_kit_run.read_run_folder(folder, key_map)]
    state, notes = trl_state.state_file(folder)
    if state is not None:
        data = trl_state.load_json(state)
        if not trl_state.is_state(data):
            raise input_error(state, "no log_history list; expected HF's trainer_state.json")
        history = trl_state.read_state(state, data, key_map, notes)
        return [_fuller_events(folder, history, key_map)]
    runs = wandb_runs.offline_runs(folder)
    if runs:
        return [wandb_runs.read_offline(run, key_map) for run in runs]
    jobs = align_kit_run.find_run_folders(folder)
    if jobs:
        return align_kit_run.read_sweep(folder, jobs, key_map)
    events = tensorboard_events.event_folders(folder)
    if events:
        return [
            tensorboard_events.read_events(run, key_map, name=str(run.relative_to(folder)) if run != folder else "")
            for run in events
        ]
    return _log_files(folder, key_map)


def _fuller_events(folder: Path, history: RunHistory, key_map: KeyMap) -> RunHistory:
    """The run's TensorBoard events instead of its trainer_state.json when the output folder holds one run's events
    that reach further (a checkpoint's state stops at its save; the events go on to the last logged step)."""
    events = tensorboard_events.event_folders(folder)
    if len(events) != 1:
        return history
    try:
        logged = tensorboard_events.read_events(events[0], key_map)
    except DoctorInputError as error:
        history.notes.append(f"the run's TensorBoard events were not read instead ({error})")
        return history
    if not logged.rows or logged.rows[-1][0] <= history.rows[-1][0]:
        return history
    logged.notes.append(
        f"read the TensorBoard events (to step {logged.rows[-1][0]}) rather than {history.source} "
        f"(to step {history.rows[-1][0]})"
    )
    logged.name = history.name
    return logged


def _log_files(folder: Path, key_map: KeyMap) -> list[RunHistory]:
    """A folder of log files (verl's FileLogger JSONL, LLaMA-Factory's trainer_log.jsonl, console logs): every one
    that reads. A file that holds no run is left out and named in each history's notes (in the error when none
    reads); one the doctor cannot read at all (no permission, a pipe or a device, past a cap) ends the reading with
    its one line, since it may hold a run: never a folder judged on the files that happened to read."""
    files = sorted(path for path in folder.iterdir() if path.suffix in LOG_SUFFIXES)
    check_folder_cap(folder, len(files), "log files")
    histories: list[RunHistory] = []
    left_out: list[str] = []
    for path in files:
        if path.is_dir():
            left_out.append(f"{path.name} (a folder)")
            continue
        size = path.stat().st_size if path.is_file() else 0
        if size > MAX_FOLDER_FILE_BYTES:
            raise UnreadInput(
                f"{path}: over {MAX_FOLDER_FILE_BYTES >> 20} MiB, the most the doctor reads of a file in a folder; "
                f"expected the folder's run logs (name the file to read it alone, or move it out of {folder})"
            )
        try:
            histories += read_file(path, key_map, None)
        except UnreadInput:
            raise
        except DoctorInputError as error:
            left_out.append(f"{path.name} ({str(error).removeprefix(f'{path}: ').split(';')[0].split(' (')[0]})")
    if histories:
        if left_out:
            shown = "; ".join(left_out[:10]) + (f"; ... and {len(left_out) - 10} more" if len(left_out) > 10 else "")
            note = f"left out {len(left_out)} of the {len(files)} log file(s) in {folder.name}, holding no run: {shown}"
            for history in histories:
                history.notes.append(note)
        return histories
    tried = f" (tried {len(left_out)} file(s): {left_out[0]}{', ...' if len(left_out) > 1 else ''})" if left_out else ""
    raise input_error(folder, UNKNOWN_FORMAT.replace("; expected", f"{tried}; expected", 1))


def read_file(path: Path, key_map: KeyMap, logging_steps: int | None) -> list[RunHistory]:
    if path.name.endswith(".wandb"):
        return [wandb_runs.read_offline(path.parent, key_map)]
    if path.name == METRICS_FILE and align_kit_run.is_run_folder(path.parent):
        # A run folder's own metrics.jsonl: read with the folder, for what its config states.
        return [align_kit_run.read_run_folder(path.parent, key_map)]
    if tensorboard_events.EVENT_MARK in path.name:
        return [tensorboard_events.read_events(path, key_map)]
    text = read_bounded(path)
    head = text.lstrip()[:1]
    if head in ("{", "["):
        repeats = RepeatedKeys()
        try:
            document = repeats.loads(text)
        except ValueError as error:
            return _not_one_document(path, text, error, key_map, logging_steps)
        histories = _document(path, document, key_map, logging_steps)
        if note := repeats.note():
            for history in histories:
                history.notes.append(note)
        return histories
    if path.suffix == ".ipynb":
        raise input_error(path, "not JSON; expected a Jupyter notebook (.ipynb) as Jupyter saves it")
    return read_text(path, text, key_map, logging_steps)


def _document(path: Path, document: Any, key_map: KeyMap, logging_steps: int | None) -> list[RunHistory]:
    if trl_state.is_state(document):
        return [trl_state.read_state(path, document, key_map)]
    if isinstance(document, dict) and isinstance(document.get("cells"), list):
        text, html = notebooks.notebook_contents(document, key_map)
        code = notebooks.code_sources(document)
        return read_text(path, text, key_map, logging_steps, notebook=True, html_tables=html, code_cells=code)
    if isinstance(document, dict) and (columns := jsonl.columnar_rows(document)) is not None:
        raw, notes = columns
        return [history_from_rows(path, "json_columns", raw, key_map=key_map, notes=notes, name=path.stem)]
    objects = document if isinstance(document, list) else [document]
    found = _json_objects(objects, key_map, [])
    if not found.rows:
        raise input_error(path, f"{UNKNOWN_FORMAT.split(';')[0]} ({found.describe()}); expected a JSON list of rows")
    return _histories(path, found, key_map, logging_steps)


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
    found = read_text(path, text, key_map, logging_steps, json_lines=True, missing_ok=True)
    if found:
        return found
    raise input_error(path, f"corrupt JSON ({message} at {where}); expected a JSON or JSON-lines file")


def _json_objects(objects: list[Any], key_map: KeyMap, notes: list[str]) -> Found:
    columns = frozenset((key_map or {}).values())
    runs, verl, more = jsonl.object_rows(objects)
    kept: dict[str, list] = {}
    configs = 0
    for run, raw in runs.items():
        kept[run] = []
        for step, row in raw:
            if not verl and is_config(row) and not (columns & row.keys()):
                configs += 1
            else:
                kept[run].append((step, row))
    kept = {run: raw for run, raw in kept.items() if raw}
    keys = {key for raw in kept.values() for _, row in raw[:50] for key in row}
    family = "verl_jsonl" if verl else "llamafactory_jsonl" if {"current_steps", "total_steps"} <= keys else "jsonl"
    framework = {"verl_jsonl": "verl", "llamafactory_jsonl": "llamafactory"}.get(family)
    found = Found(family, kept or {"": []}, configs=configs, notes=notes + more, framework=framework)
    found.absent = "no JSON object rows"
    return count(found, (row for raw in kept.values() for _, row in raw), columns)


def read_text(
    path: Path,
    text: str,
    key_map: KeyMap,
    logging_steps: int | None,
    notebook: bool = False,
    missing_ok: bool = False,
    json_lines: bool = False,
    html_tables: list[tables.Table] | None = None,
    code_cells: list[str] | None = None,
) -> list[RunHistory]:
    """Every text reader's rows offered as evidence; the winner's history (or histories)."""
    columns = frozenset((key_map or {}).values())
    candidates: list[Found] = []
    objects: list[Any] = []
    if json_lines:
        repeats = RepeatedKeys()
        objects, skipped, first_bad = jsonl.parse_lines(text, repeats)
        notes = [note] if (note := repeats.note()) else []
        if skipped and objects:
            line, reason = first_bad
            notes.append(f"skipped {skipped} line(s) that are not JSON (first: line {line}, {reason})")
        candidates.append(_json_objects(objects, key_map, notes))
    lines = text_logs.LogLines(columns).scan(text)
    shared = []
    if lines.summaries:
        shared.append(f"left out {lines.summaries} end-of-training summary line(s) (train_runtime, train_loss)")
    if lines.joined:
        shared.append(f"joined {lines.joined} log dict(s) wrapped over several lines")
    if lines.unparsed and not objects:  # JSON lines, when some parse, count their own cut lines
        shared.append(f"left out {lines.unparsed} printed dict(s) that do not parse (cut or damaged lines)")
    verl = Found("verl_console", {"": lines.verl}, absent="no `step:N - key:value` lines", framework="verl")
    trl = Found("trl_log_lines", {"": lines.trl}, configs=lines.configs, absent="no printed log dicts")
    if lines.configs:
        shared.append(f"left out {lines.configs} printed config or data dict(s): settings, not metrics")
    pairs = Found("step_pairs", {"": lines.pairs.rows}, absent="no step-tagged `key: value` lines", framework="printed")
    # Lines of `key: value` pairs with no step (a summary, a pasted excerpt): their order is all the steps they have.
    records = [(index, row) for index, row in enumerate(lines.pairs.records, start=1)]
    stepless = Found(
        "key_value_lines",
        {"": records},
        absent="no lines of `key: value` metric pairs",
        framework="printed",
        notes=["the lines carry no step: steps are their order (1, 2, 3, ...)"] if records else [],
    )
    candidates += [
        count(verl, (row for _, row in lines.verl), columns),
        count(trl, (row for _, row in lines.trl), columns),
        count(pairs, (row for _, row in lines.pairs.rows), columns),
        count(stepless, (row for _, row in records), columns),
    ]
    if html_tables is None and "<table" in text:
        html_tables = notebooks.html_tables(text, key_map)  # a notebook exported to markdown or HTML keeps its table
    found_tables = list(html_tables or []) + list(tables.find_tables(text, key_map))
    rendered: list[Found] = []  # the HTML tables: each a training's progress table, as a notebook saved it
    for table in found_tables:
        runs, table_notes = tables.table_rows(table)
        family = "wandb_csv" if table.is_wandb_export else "trl_table" if table.is_progress_table else "table"
        found = count(Found(family, runs, notes=table_notes), (row for raw in runs.values() for _, row in raw), columns)
        candidates.append(found)
        if table.delimiter == "html" and found.metric_rows:
            rendered.append(found)
    if not found_tables:
        candidates.append(Found("table", absent="no table with a step or metric column"))
    winner = best(candidates)
    if winner is None:
        if missing_ok and not any(found.configs for found in candidates):
            return []
        tried = "; ".join(found.describe() for found in candidates)
        unnamed = list(lines.pairs.unnamed)[:6]
        if unnamed:  # lines of pairs were there, in names no built-in map knows: say how to name them
            tried += (
                f"; `key: value` lines in names no map knows ({', '.join(unnamed)}): give each its concept with "
                f"--map, e.g. --map reward={unnamed[0]}"
            )
        raise input_error(path, UNKNOWN_FORMAT.replace("; expected", f" ({tried}); expected", 1))
    # Each rendered progress table is one training's (a saved notebook keeps a table's last redraw only): when one
    # wins, every one with metric rows is a run, e.g. an SFT warm-up's table and then GRPO's.
    chosen = _one_per_run(rendered) if winner in rendered else [winner]
    lead = (["read from a notebook's cell outputs"] if notebook else []) + shared
    others = [
        f"{found.family} ({found.metric_rows})" for found in candidates if found not in chosen and found.metric_rows
    ]
    tail = []
    if others:
        tail.append(
            f"read as {winner.family} ({winner.metric_rows} rows with metric names); left out: {', '.join(others)}"
        )
    histories: list[RunHistory] = []
    for found in chosen:
        found.notes = lead + found.notes + tail
        histories += _histories(path, found, key_map, logging_steps)
    if len(chosen) > 1 and len(histories) > 1:
        for number, history in enumerate(histories, start=1):
            sft = set(history.mapping.values()) <= runs_in_file.SFT_CONCEPTS
            first, last = history.rows[0][0], history.rows[-1][0]
            history.name = part_name(path.stem, number, len(histories), first, last, "sft" if sft else None)
            history.notes.insert(0, f"run {number} of {len(histories)} in this file: its own progress table")
    in_code = code_budget(code_cells) if code_cells else None
    for history in histories:
        context, stated_notes = stated_context(text, history.framework)
        if "max_completion_length" not in context and in_code is not None:
            # What the cells printed states nothing of the budget; the code that built the trainer does.
            context["max_completion_length"], statement = in_code
            stated_notes.append(f"length budget stated in the notebook's code: {statement}")
        history.context.update(context)
        history.notes += stated_notes
    return histories


def _one_per_run(displays: list[Found]) -> list[Found]:
    """The rendered progress tables with each later display that repeats the one before it (the same run shown again,
    see `runs_in_file.repeats`) joined to it: one Found per run."""
    kept: list[Found] = []
    shown = 1
    for found in displays:
        previous = kept[-1] if kept else None
        if (
            previous is not None
            and list(previous.runs) == list(found.runs) == [""]
            and runs_in_file.repeats(previous.runs[""], found.runs[""])
        ):
            shown += 1
            rows = runs_in_file.joined(previous.runs[""], found.runs[""])
            first, last = rows[0][0], rows[-1][0]
            previous.runs[""] = rows
            previous.notes = [note for note in previous.notes if "progress table displayed" not in note]
            previous.notes.insert(
                0,
                f"the progress table displayed {shown} times, each later display repeating the rows before it with "
                f"the same values: read as one run (steps {first}-{last})",
            )
            continue
        shown = 1
        kept.append(found)
    return kept


def _histories(path: Path, found: Found, key_map: KeyMap, logging_steps: int | None) -> list[RunHistory]:
    """The winner's runs, each split where the file starts a new one."""
    histories: list[RunHistory] = []
    for run, items in found.runs.items():
        name = run or path.stem
        parts, redone = runs_in_file.split(items)
        built: list[tuple[runs_in_file.Part, RunHistory]] = []
        for part in parts:
            part_items = items[part.start : part.end]
            notes = list(found.notes)
            if found.family == "trl_log_lines":
                raw, step_notes = text_logs.trl_rows(part_items, logging_steps)
                notes += step_notes
            else:
                raw = part_items
            if redone and len(parts) == 1:
                notes.append(
                    f"the steps go back {redone} time(s) to a step after the run's first (a resume from a "
                    "checkpoint): the later values of a step logged twice win"
                )
            try:
                history = history_from_rows(
                    path, found.family, raw, key_map=key_map, notes=notes, framework=found.framework, name=name
                )
            except DoctorInputError:
                if len(parts) == 1:
                    raise
                continue  # a part with no metric of its own (eval rows alone): the others are the runs
            built.append((part, history))
        for number, (part, history) in enumerate(built, start=1):
            if len(built) > 1:
                first, last = history.rows[0][0], history.rows[-1][0]
                history.name = part_name(name, number, len(built), first, last, part.phase)
                began = f"; it begins where {part.why}" if part.why else ""
                history.notes.insert(0, f"run {number} of {len(built)} in this file{began}")
            histories.append(history)
    return histories
