"""`align-kit doctor --follow PATH`: watch a running job's log (metrics.jsonl, trainer_state.json, a console log)
and print each alert as it fires.

Every `interval` seconds the file is read again with the same readers as a whole-file diagnosis, and only the rows
after the last one seen go to the monitor (trainer_state.json is rewritten whole at each save: the last step seen
says where the new rows start). It stops when the file has not grown for `idle` seconds, or on Ctrl-C; then the
monitor finishes and the diagnosis is that of the rows seen.

A new run may truncate the file and write its own rows from the start (a relaunch into the same output folder).
Read on as if it were the old run, its rows would only count where their steps pass the old run's last step, so
the old run would keep being judged. A file that shrank, holds fewer rows than were read, or whose first row
changed has been rewritten: the run followed so far is finished and reported on its own, and the new one is
followed from its first row. When a reader splits the file into several runs (a restart), the last is followed.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from align_kit.doctor.diagnose import Diagnosis, Replay
from align_kit.doctor.history import DoctorInputError, RunHistory, UnreadInput

Row = tuple[int, dict[str, float]]


def signature(path: Path) -> tuple[int, int]:
    """(total size, newest mtime) of the file, or of the files in the folder (two levels); (0, 0) when absent."""
    if path.is_file():
        stat = path.stat()
        return stat.st_size, stat.st_mtime_ns
    size = newest = 0
    if path.is_dir():
        for root, folders, files in os.walk(path):
            if len(Path(root).relative_to(path).parts) >= 2:
                folders[:] = []
            for name in files:
                try:
                    stat = (Path(root) / name).stat()
                except OSError:
                    continue
                size, newest = size + stat.st_size, max(newest, stat.st_mtime_ns)
    return size, newest


def _new_rows(history: RunHistory, seen: int, last_step: int | None) -> list[Row]:
    if last_step is None:
        return list(history.rows)
    return [
        (step, row)
        for index, (step, row) in enumerate(history.rows)
        if step > last_step or (step == last_step and index >= seen)
    ]


def _same_row(a: Row, b: Row) -> bool:
    """Equal steps and values, a NaN equal to a NaN (a logged NaN is the same row when read again)."""
    return (
        a[0] == b[0]
        and a[1].keys() == b[1].keys()
        and all(x == b[1][key] or (math.isnan(x) and math.isnan(b[1][key])) for key, x in a[1].items())
    )


def rewritten(history: RunHistory, seen: int, first: Row | None, size: int | None, size_before: int | None) -> str:
    """Why the file no longer continues the run read so far ("" when it does): it shrank, it holds fewer rows than
    were read, or its first row changed. A resumed run appending redone steps keeps its first row: not a rewrite."""
    if size is not None and size_before is not None and size < size_before:
        return f"it shrank from {size_before} to {size} bytes"
    if len(history.rows) < seen:
        return f"it holds {len(history.rows)} rows, fewer than the {seen} read before"
    if first is not None and history.rows and not _same_row(history.rows[0], first):
        return f"its first row changed (step {first[0]} -> step {history.rows[0][0]})"
    return ""


def _file_size(path: Path) -> int | None:
    try:
        return path.stat().st_size if path.is_file() else None
    except OSError:
        return None


def follow(
    path: str,
    read: Callable[[str], list[RunHistory]],
    idle: float = 60.0,
    interval: float = 2.0,
    replay_options: Mapping[str, Any] | None = None,
    out: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    check: Callable[[RunHistory], None] | None = None,
) -> list[Diagnosis]:
    """Follow `path` (read with `read`, e.g. read_runs with the key map bound) until it stops growing. The
    diagnoses of the runs followed: one, or, when a new run rewrote the file, the earlier runs' first. `check`
    refuses a history (DoctorInputError), e.g. one whose rewards contradict the stated scale."""
    target = Path(path)
    out(f"following {path}: checking every {interval:g} s; stops after {idle:g} s without growth, or on Ctrl-C")
    finished: list[Diagnosis] = []
    replay: Replay | None = None
    history: RunHistory | None = None
    seen, last_step, first, size_read, problem = 0, None, None, None, ""
    several_said = False
    last_signature, last_change = signature(target), clock()
    try:
        while True:
            size = _file_size(target)
            try:
                runs = read(path)
            except UnreadInput as error:
                if error.lasting:  # a pipe, a device, no permission: no later read can do better
                    raise
                runs, problem = [], str(error)
            except DoctorInputError as error:  # not written yet, or a line half written: read it again later
                runs, problem = [], str(error)
            if len(runs) > 1 and not several_said:
                out(f"{path} holds {len(runs)} runs (a restart in the same file): following the last one")
                several_said = True
            if runs:
                current = runs[-1]
                why = rewritten(current, seen, first, size, size_read) if replay is not None else ""
                if why and replay is not None and history is not None:
                    old = _finish(replay, history, f"{history.name or target.name} (before the rewrite)")
                    finished.append(old)
                    span = f"steps {history.rows[0][0]}-{history.rows[-1][0]}" if history.rows else "no rows"
                    out(
                        f"{path} was rewritten by a new run ({why}): the run followed so far ({span}) ends "
                        f"{old.verdict}; following the new run from its first row"
                    )
                    replay, seen, last_step, first = None, 0, None, None
                history = current
                if check is not None:
                    check(history)
                if replay is None:
                    replay = Replay(history, **dict(replay_options or {}))
                rows = _new_rows(history, seen, last_step)
                for alert in replay.feed(rows):
                    kind = "note" if alert.action == "log" else alert.severity
                    out(f"step {alert.step}: {kind} {alert.rule}: {alert.message}")
                if history.rows:
                    seen, last_step, first = len(history.rows), history.rows[-1][0], history.rows[0]
                size_read = size
            current_signature = signature(target)
            if current_signature != last_signature:
                last_signature, last_change = current_signature, clock()
            elif clock() - last_change >= idle:
                out(f"stopped: {path} has not grown for {idle:g} s")
                break
            sleep(interval)
    except KeyboardInterrupt:
        out("stopped on Ctrl-C")
    if replay is None or history is None:
        raise DoctorInputError(problem or f"{path}: nothing to read; expected a growing run log")
    return [*finished, _finish(replay, history)]


def _finish(replay: Replay, history: RunHistory, name: str | None = None) -> Diagnosis:
    replay.history = history if name is None else dataclasses.replace(history, name=name)
    return replay.finish()
