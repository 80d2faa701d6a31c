"""--follow on a growing file: a thread appends rows while the doctor watches; it stops after --idle."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from align_kit.doctor.follow import follow
from align_kit.doctor.history import DoctorInputError
from align_kit.doctor.readers import read_runs


def _append(path: Path, rows: list[dict], pause: float) -> None:
    for row in rows:
        with open(path, "a") as out:
            out.write(json.dumps(row) + "\n")
        time.sleep(pause)


def test_alerts_print_as_they_fire_and_it_stops_when_idle(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "loss": 0.1, "grad_norm": 0.5}) + "\n")
    later = [{"step": step, "loss": 0.1, "grad_norm": 0.5} for step in (2, 3)] + [
        {"step": 4, "loss": float("nan"), "grad_norm": 0.5}
    ]
    writer = threading.Thread(target=_append, args=(path, later, 0.15))
    lines: list[str] = []
    writer.start()
    started = time.monotonic()
    diagnosis = follow(str(path), read_runs, idle=0.6, interval=0.05, out=lines.append)
    writer.join()
    assert lines[0].startswith(f"following {path}: checking every 0.05 s; stops after 0.6 s without growth")
    fired = [line for line in lines if line.startswith("step ")]
    assert fired == [fired[0]] and fired[0].startswith("step 4: failing non_finite: loss is nan")
    assert lines[-1] == f"stopped: {path} has not grown for 0.6 s"
    assert [step for step, _ in diagnosis.history.rows] == [1, 2, 3, 4]
    assert diagnosis.verdict == "failing" and [a.step for a in diagnosis.alerts] == [4]  # fed once, not per re-read
    assert time.monotonic() - started >= 0.6 + 3 * 0.15 - 0.2


def test_trainer_state_rewritten_whole_feeds_only_the_new_steps(tmp_path):
    path = tmp_path / "trainer_state.json"
    reads = []

    def read(name: str):
        reads.append(name)
        rows = [{"step": 10 * k, "loss": 0.1, "grad_norm": 0.5} for k in range(1, min(len(reads), 3) + 1)]
        text = json.dumps({"global_step": rows[-1]["step"], "log_history": rows})
        if path.read_text() != text:  # rewritten whole at each save, as the Trainer does
            path.write_text(text)
        return read_runs(name)

    path.write_text(json.dumps({"global_step": 10, "log_history": [{"step": 10, "loss": 0.1}]}))
    clock = iter(range(1000)).__next__  # one second per look; the file stops changing after the 3rd read
    diagnosis = follow(str(path), read, idle=3, interval=0, out=lambda _line: None, clock=clock, sleep=lambda _s: None)
    assert [step for step, _ in diagnosis.history.rows] == [10, 20, 30]
    judged = {item.rule: item for item in diagnosis.coverage}
    assert judged["non_finite"].judged


def test_ctrl_c_stops_with_the_verdict_so_far(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "loss": float("nan")}) + "\n")
    lines: list[str] = []

    def interrupt(_seconds):
        raise KeyboardInterrupt

    diagnosis = follow(str(path), read_runs, idle=60, interval=1, out=lines.append, sleep=interrupt)
    assert lines[-1] == "stopped on Ctrl-C" and diagnosis.verdict == "failing"


def test_a_file_that_never_appears_is_a_bad_input(tmp_path):
    with pytest.raises(DoctorInputError, match="no such file or folder"):
        follow(str(tmp_path / "none.jsonl"), read_runs, idle=0.1, interval=0.02, out=lambda _line: None)
