"""SLURM's view in `--status` (align_kit.runs.slurm_states), read from stand-ins for sacct and squeue; a job the
scheduler ended shows as interrupted; the requeue signal is submitit's only inside a submitit SLURM job."""

from __future__ import annotations

import signal

import pytest

from align_kit.runs.slurm_states import scheduler_lines
from align_kit.runs.stop_signals import requeue_signal
from align_kit.runs.sweep_manifest import shown_status

# What sacct -X -P -o JobID,State prints for an array of 3 with task 0 done and the others queued (a pending
# array's tasks come as one line), and squeue -h -r -o '%i|%T|%r' for the same jobs.
SACCT = "JobID|State\n7_0|COMPLETED\n7_[1-2]|PENDING\n"
SQUEUE = "7_1|RUNNING|None\n7_2|PENDING|JobArrayTaskLimit\n"


def stand_in(folder, name: str, output: str | None) -> None:
    script = folder / name
    failing = "echo 'Slurm accounting storage is disabled' >&2\nexit 1\n"
    body = f"printf '%s' '{output}'\n" if output is not None else failing  # builtins: PATH holds the stand-ins alone
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)


@pytest.fixture
def scheduler(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path}")
    return tmp_path


def manifest(jobs: int) -> dict:
    return {"jobs": [{"job": n, "slurm_job": f"7_{n}"} for n in range(jobs)]}


def test_sacct_answers_for_every_job_its_pending_array_expanded(scheduler):
    stand_in(scheduler, "sacct", SACCT)
    lines = scheduler_lines(manifest(3), every_job=False, full_table_jobs=20)
    assert lines[0] == "SLURM's view (sacct):"
    assert [line.split() for line in lines[2:]] == [["0", "7_0", "COMPLETED"], ["1", "7_1", "PENDING"],
                                                    ["2", "7_2", "PENDING"]]  # fmt: skip


def test_without_accounting_squeue_answers_for_the_jobs_it_still_holds(scheduler):
    stand_in(scheduler, "sacct", None)
    stand_in(scheduler, "squeue", SQUEUE)
    lines = scheduler_lines(manifest(3), every_job=False, full_table_jobs=20)
    assert lines[0] == "SLURM's view (squeue):"
    assert [line.split(maxsplit=2) for line in lines[2:]] == [
        ["0", "7_0", "unknown to squeue"],
        ["1", "7_1", "RUNNING"],
        ["2", "7_2", "PENDING (JobArrayTaskLimit)"],
    ]


def test_jobs_accounting_does_not_know_yet_come_from_squeue(scheduler):
    stand_in(scheduler, "sacct", "JobID|State\n7_0|COMPLETED\n")
    stand_in(scheduler, "squeue", SQUEUE)
    lines = scheduler_lines(manifest(3), every_job=False, full_table_jobs=20)
    assert lines[0] == "SLURM's view (sacct, squeue):"
    assert [line.split()[2] for line in lines[2:]] == ["COMPLETED", "RUNNING", "PENDING"]


def test_a_big_sweep_gets_counts_and_no_scheduler_a_line_saying_so(scheduler):
    stand_in(scheduler, "sacct", SACCT)
    assert scheduler_lines(manifest(3), every_job=False, full_table_jobs=2) == [
        "SLURM's view (sacct): 1 COMPLETED, 2 PENDING"
    ]
    assert len(scheduler_lines(manifest(3), every_job=True, full_table_jobs=2)) == 5  # title, header, 3 rows
    (scheduler / "sacct").unlink()
    assert scheduler_lines(manifest(3), every_job=False, full_table_jobs=20) == [
        "SLURM's view: neither sacct nor squeue answered (is this a machine of the cluster?)"
    ]
    assert scheduler_lines({"jobs": [{"job": 0}]}, every_job=False, full_table_jobs=20) == []  # not a SLURM sweep


def test_a_job_the_scheduler_ended_shows_as_interrupted():
    assert shown_status({"status": "pending", "slurm_state": "CANCELLED by 0"}) == "interrupted"
    assert shown_status({"status": "running", "pid": -1, "slurm_state": "TIMEOUT"}) == "interrupted"
    assert shown_status({"status": "pending", "slurm_state": None}) == "pending"
    assert shown_status({"status": "done", "outcome": "ok", "slurm_state": "COMPLETED"}) == "ok"


def test_the_requeue_signal_is_submitits_inside_a_submitit_slurm_job(monkeypatch):
    monkeypatch.delenv("SUBMITIT_FOLDER", raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    assert requeue_signal() is None  # a SLURM job, but not submitit's: SIGUSR2 is not asked for
    monkeypatch.setenv("SUBMITIT_FOLDER", "/tmp/x")
    monkeypatch.delenv("SUBMITIT_PREEMPT_SIGNAL", raising=False)
    assert requeue_signal() == signal.SIGUSR2
    monkeypatch.setenv("SUBMITIT_PREEMPT_SIGNAL", "USR1")
    assert requeue_signal() == signal.SIGUSR1
