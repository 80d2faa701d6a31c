"""The end-of-sweep table: a row per job for a small sweep; for a big one, the counts and the jobs that failed."""

from __future__ import annotations

from align_kit.runs import sweep_manifest as manifest_files
from align_kit.runs.sweep_summary import JobOutcome, format_table, status_table


def outcome(job: int, status: str = "ok", error: str | None = None) -> JobOutcome:
    return JobOutcome(job, ["sweep=clip_higher", f"seed={job}"], status, error, f"/s/{job}")


def test_a_small_sweep_keeps_a_row_per_job():
    table = format_table([outcome(0), outcome(1, "failed", "RuntimeError: boom"), outcome(2, "pending")])
    assert table.splitlines() == [
        "every job: sweep=clip_higher",
        "job  overrides  status   last error line",
        "0    seed=0     ok",
        "1    seed=1     failed   RuntimeError: boom",
        "2    seed=2     pending",
    ]


def test_a_big_sweep_shows_its_counts_and_only_the_jobs_that_failed_or_stopped():
    outcomes = [outcome(n) for n in range(1000)]
    outcomes[7] = outcome(7, "failed", "RuntimeError: boom")
    outcomes[512] = outcome(512, "training halted", "halted at step 6 by non_finite")
    outcomes[900] = outcome(900, "interrupted")
    outcomes[990:] = [outcome(n, "pending") for n in range(990, 1000)]
    assert format_table(outcomes).splitlines() == [
        "every job: sweep=clip_higher",
        "1000 jobs: 1 failed, 1 interrupted, 987 ok, 10 pending, 1 training halted",
        "the 3 failed or interrupted:",
        "job  overrides  status           last error line",
        "7    seed=7     failed           RuntimeError: boom",
        "512  seed=512   training halted  halted at step 6 by non_finite",
        "900  seed=900   interrupted",
    ]
    assert len(format_table(outcomes, every_job=True).splitlines()) == 1 + 1 + 1000  # common, header, rows


def test_a_big_sweep_that_mostly_failed_lists_the_first_fifty():
    lines = format_table([outcome(n, "failed", f"E{n}") for n in range(300)]).splitlines()
    assert lines[1:3] == ["300 jobs: 300 failed", "the 300 failed or interrupted, the first 50:"]
    assert [line.split()[0] for line in lines[4:-1]] == [str(n) for n in range(50)]
    assert lines[-1] == "... and 250 more failed or interrupted"


def test_status_of_a_thousand_jobs_is_a_screen_with_the_way_to_every_row(tmp_path):
    jobs = [[f"seed={n}"] for n in range(1000)]
    manifest_files.write(tmp_path, manifest_files.new_manifest(["seed=range(1000)"], [], jobs))
    for job in range(1000):
        manifest_files.update_job(tmp_path, job, status="done", outcome="ok")
    manifest_files.update_job(tmp_path, 3, status="failed", outcome="failed", error="E")
    lines = status_table(tmp_path, manifest_files.read(tmp_path)).splitlines()
    assert lines[:4] == [
        f"sweep {tmp_path}: 1000 jobs, 1 failed, 999 ok",
        "the 1 failed or interrupted:",
        "job  overrides  status  last error line",
        "3    seed=3     failed  E",
    ]
    assert lines[4] == f"a row per job: align-kit sweep --status {tmp_path} --all"
    assert lines[5].startswith(f"resume: align-kit sweep --resume {tmp_path}") and len(lines) == 6
    every = status_table(tmp_path, manifest_files.read(tmp_path), every_job=True).splitlines()
    assert len(every) == 1 + 1 + 1000 + 1  # counts, header, rows, resume
