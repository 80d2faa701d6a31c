"""--follow on a growing file: rows are appended while the doctor watches (on a fake clock); it stops after --idle.
A file that a new run truncates and rewrites is followed anew from the new run's first row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from align_kit.doctor.follow import follow
from align_kit.doctor.history import DoctorInputError
from align_kit.doctor.readers import read_runs


def test_alerts_print_as_they_fire_and_it_stops_when_idle(tmp_path):
    # A fake clock, one second per pause; the run writes its next row during each of the first three pauses.
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "loss": 0.1, "grad_norm": 0.5}) + "\n")
    later = [{"step": step, "loss": 0.1, "grad_norm": 0.5} for step in (2, 3)] + [
        {"step": 4, "loss": float("nan"), "grad_norm": 0.5}
    ]
    now, lines, printed_at = [0.0], [], []

    def pause(seconds: float) -> None:
        now[0] += 1.0
        if later:
            with open(path, "a") as out:
                out.write(json.dumps(later.pop(0)) + "\n")

    def out(line: str) -> None:
        lines.append(line)
        printed_at.append(now[0])

    [diagnosis] = follow(str(path), read_runs, idle=3, interval=1, out=out, clock=lambda: now[0], sleep=pause)
    assert lines[0].startswith(f"following {path}: checking every 1 s; stops after 3 s without growth")
    fired = [i for i, line in enumerate(lines) if line.startswith("step ")]
    assert len(fired) == 1 and lines[fired[0]].startswith("step 4: failing non_finite: loss is nan")
    assert printed_at[fired[0]] == 3.0  # when step 4 was written, not at the end
    assert lines[-1] == f"stopped: {path} has not grown for 3 s"
    assert now[0] == 3.0 + 3  # the last growth, then 3 s without any
    assert [step for step, _ in diagnosis.history.rows] == [1, 2, 3, 4]
    assert diagnosis.verdict == "failing" and [a.step for a in diagnosis.alerts] == [4]  # fed once, not per re-read


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
    [diagnosis] = follow(
        str(path), read, idle=3, interval=0, out=lambda _line: None, clock=clock, sleep=lambda _s: None
    )
    assert [step for step, _ in diagnosis.history.rows] == [10, 20, 30]
    judged = {item.rule: item for item in diagnosis.coverage}
    assert judged["non_finite"].judged


def test_ctrl_c_stops_with_the_verdict_so_far(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "loss": float("nan")}) + "\n")
    lines: list[str] = []

    def interrupt(_seconds):
        raise KeyboardInterrupt

    [diagnosis] = follow(str(path), read_runs, idle=60, interval=1, out=lines.append, sleep=interrupt)
    assert lines[-1] == "stopped on Ctrl-C" and diagnosis.verdict == "failing"


def test_a_file_that_never_appears_is_a_bad_input(tmp_path):
    with pytest.raises(DoctorInputError, match="no such file or folder"):
        follow(str(tmp_path / "none.jsonl"), read_runs, idle=0.1, interval=0.02, out=lambda _line: None)


def _rows(grad_norms: list[float]) -> str:
    return "".join(
        json.dumps({"step": step, "loss": 0.1, "grad_norm": value, "reward": 0.5}) + "\n"
        for step, value in enumerate(grad_norms, 1)
    )


def _follow_with_rewrite(path: Path, before: str, after: str, at_look: int) -> tuple[list, list[str]]:
    """Follow `path` holding `before`; at the `at_look`-th pause a new run replaces it with `after`. A fake clock:
    one second per pause, idle after 3 s without change."""
    path.write_text(before)
    now, looks, lines = [0.0], [0], []

    def pause(seconds: float) -> None:
        now[0] += 1.0
        looks[0] += 1
        if looks[0] == at_look:
            path.write_text(after)

    diagnoses = follow(str(path), read_runs, idle=3, interval=1, out=lines.append, clock=lambda: now[0], sleep=pause)
    return diagnoses, lines


def test_a_file_rewritten_by_a_new_run_is_followed_from_its_first_row(tmp_path):
    # Five healthy steps, then a new run truncates the file and writes three steps whose grad norm is NaN. Read on as
    # the old run, steps 1-3 are not past the last step seen (5): nothing would be fed and the verdict stay healthy,
    # where the file read whole (the new run) is failing.
    path = tmp_path / "train.jsonl"
    diagnoses, lines = _follow_with_rewrite(path, _rows([0.5] * 5), _rows([float("nan")] * 3), at_look=2)
    # The old run's five equal rewards are flat on their own noise and never rose: a plateau, a warning.
    assert [d.verdict for d in diagnoses] == ["warning", "failing"]
    assert [[step for step, _ in d.history.rows] for d in diagnoses] == [[1, 2, 3, 4, 5], [1, 2, 3]]
    [said] = [line for line in lines if "rewritten by a new run" in line]
    # Each line is 58 bytes ('{"step": 1, "loss": 0.1, "grad_norm": 0.5, "reward": 0.5}' and a newline; NaN is
    # also 3 characters): 5 x 58 = 290 shrank to 3 x 58 = 174.
    assert "(it shrank from 290 to 174 bytes)" in said
    assert "the run followed so far (steps 1-5) ends warning" in said
    assert [line for line in lines if line.startswith("step ")][0].startswith("step 1: failing non_finite")
    assert diagnoses[0].history.name == "train (before the rewrite)"


def test_a_rewrite_that_grew_past_the_old_size_is_told_by_its_first_row(tmp_path):
    # The new run wrote more bytes than the old one held before the doctor looked again: the size did not shrink,
    # but its first row (grad norm 0.9, not 0.5) is not the run read so far.
    path = tmp_path / "train.jsonl"
    old = _rows([0.5] * 2)
    new = "".join(json.dumps({"step": s, "loss": 0.1, "grad_norm": 0.9, "reward": 0.5}) + "\n" for s in range(1, 8))
    diagnoses, lines = _follow_with_rewrite(path, old, new, at_look=1)
    assert [len(d.history.rows) for d in diagnoses] == [2, 7]
    assert any("(its first row changed (step 1 -> step 1))" in line for line in lines)


def test_a_resume_appending_redone_steps_is_not_a_rewrite(tmp_path):
    # A resumed run appends steps 3-6 after steps 1-4: the file grows and its first row stays: one run, its steps
    # 3 and 4 read from their later copies.
    path = tmp_path / "train.jsonl"
    redone = "".join(json.dumps({"step": s, "loss": 0.2, "grad_norm": 0.5, "reward": 0.5}) + "\n" for s in range(3, 7))
    diagnoses, lines = _follow_with_rewrite(path, _rows([0.5] * 4), _rows([0.5] * 4) + redone, at_look=2)
    assert len(diagnoses) == 1 and not any("rewritten" in line for line in lines)
    assert [step for step, _ in diagnoses[0].history.rows] == [1, 2, 3, 4, 5, 6]


def test_several_runs_in_the_file_follow_the_last(tmp_path):
    # A reader that splits a restart into two runs: the last one (the run now writing) is followed, said once.
    path = tmp_path / "train.jsonl"
    path.write_text(_rows([0.5] * 3))
    older, newer = read_runs(str(path))[0], read_runs(str(path))[0]
    newer.rows = [(step, {**row, "grad_norm": float("nan")}) for step, row in newer.rows]
    lines: list[str] = []
    clock = iter(range(1000)).__next__
    [diagnosis] = follow(
        str(path), lambda _: [older, newer], idle=2, interval=0, out=lines.append, clock=clock, sleep=lambda _s: None
    )
    assert diagnosis.verdict == "failing"  # the NaN grad norms of the second run, not the first's healthy rows
    assert [line for line in lines if "holds 2 runs" in line] == [
        f"{path} holds 2 runs (a restart in the same file): following the last one"
    ]
