"""`align-kit doctor --follow PATH`: watch a running job's log (metrics.jsonl, trainer_state.json, a console log)
and print each alert as it fires.

Every `interval` seconds the file is read again with the same readers as a whole-file diagnosis, and only the rows
after the last one seen go to the monitor (trainer_state.json is rewritten whole at each save: the last step seen
says where the new rows start). It stops when the file has not grown for `idle` seconds, or on Ctrl-C; then the
monitor finishes and the diagnosis is that of the rows seen.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from align_kit.doctor.diagnose import Diagnosis, Replay
from align_kit.doctor.history import DoctorInputError, RunHistory


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


def _new_rows(history: RunHistory, seen: int, last_step: int | None) -> list[tuple[int, dict[str, float]]]:
    if last_step is None:
        return list(history.rows)
    return [
        (step, row)
        for index, (step, row) in enumerate(history.rows)
        if step > last_step or (step == last_step and index >= seen)
    ]


def follow(
    path: str,
    read: Callable[[str], list[RunHistory]],
    idle: float = 60.0,
    interval: float = 2.0,
    replay_options: Mapping[str, Any] | None = None,
    out: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Diagnosis:
    """Follow `path` (read with `read`, e.g. read_runs with the key map bound) until it stops growing."""
    target = Path(path)
    out(f"following {path}: checking every {interval:g} s; stops after {idle:g} s without growth, or on Ctrl-C")
    replay: Replay | None = None
    history: RunHistory | None = None
    seen, last_step, problem = 0, None, ""
    last_signature, last_change = signature(target), clock()
    try:
        while True:
            try:
                runs = read(path)
            except DoctorInputError as error:  # not written yet, or a line half written: read it again later
                runs, problem = [], str(error)
            if len(runs) > 1:
                raise DoctorInputError(f"{path}: holds {len(runs)} runs; expected one run to follow")
            if runs:
                history = runs[0]
                if replay is None:
                    replay = Replay(history, **dict(replay_options or {}))
                rows = _new_rows(history, seen, last_step)
                for alert in replay.feed(rows):
                    kind = "note" if alert.action == "log" else alert.severity
                    out(f"step {alert.step}: {kind} {alert.rule}: {alert.message}")
                if history.rows:
                    seen, last_step = len(history.rows), history.rows[-1][0]
            current = signature(target)
            if current != last_signature:
                last_signature, last_change = current, clock()
            elif clock() - last_change >= idle:
                out(f"stopped: {path} has not grown for {idle:g} s")
                break
            sleep(interval)
    except KeyboardInterrupt:
        out("stopped on Ctrl-C")
    if replay is None or history is None:
        raise DoctorInputError(problem or f"{path}: nothing to read; expected a growing run log")
    replay.history = history
    return replay.finish()
