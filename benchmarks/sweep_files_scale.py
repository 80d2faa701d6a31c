"""The sweep files at 10 / 100 / 1,000 jobs: the cost of recording a sweep's jobs and of `--status` on it.

For each size it writes a sweep's manifest and then, job by job as a sweep does, `begin_job` (which reads the
manifest and records the job running) and `end_job` (done); then the fold at the end of the launch, and
`align-kit sweep --status`'s work (`read` and `status_table`, the fastest of 3), in this process: the command
itself adds Python's start-up and imports (about a second), the same at any size. The reference arm records each
update as the code before the job log did: read the whole manifest and write it back under the lock, which makes a
sweep's writes grow with the square of its jobs. Printed: seconds per arm and size, the slope (seconds per job,
from the two largest sizes), the ratio of the largest size's time to the one before (10 for a linear cost, 100
for a quadratic one), and the load average before and after, without which no timing here means anything.

  python benchmarks/sweep_files_scale.py            # 10, 100, 1000 jobs
  python benchmarks/sweep_files_scale.py --quick    # 10, 100 jobs: checks the script runs
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from align_kit.runs import sweep_manifest as manifest_files
from align_kit.runs.sweep_summary import status_table


def grid(jobs: int) -> list[list[str]]:
    """`jobs` jobs of a grid over learning rate and seed, each with the overrides a real sweep's job carries."""
    return [[f"clip.eps_high=0.{20 + job % 10}", f"seed={job // 10}", "sweep=clip_higher"] for job in range(jobs)]


def rewrite_update(sweep_dir: Path, job: int, **fields) -> None:
    """The reference: the whole manifest read and written again for one job's update (the code before the log)."""
    with manifest_files.locked(sweep_dir):
        manifest = json.loads((sweep_dir / manifest_files.MANIFEST_FILE).read_bytes())
        manifest["jobs"][job].update(fields, updated=time.strftime("%Y-%m-%d %H:%M:%S"))
        manifest_files.write(sweep_dir, manifest)


def record_jobs(sweep_dir: Path, jobs: int, fold: bool = True) -> float:
    """Seconds to write the manifest, record every job running, then done, as a sweep's jobs do, and (as the end of
    a launch does) fold the job log into the manifest."""
    started = time.perf_counter()
    manifest_files.write(sweep_dir, manifest_files.new_manifest(["sweep=clip_higher"], [], grid(jobs)))
    for job in range(jobs):
        folder = str(sweep_dir / str(job))
        manifest_files.begin_job(folder, job, str(sweep_dir))
        manifest_files.end_job(str(sweep_dir), job, "ok", None, folder)
    if fold:
        manifest_files.fold(sweep_dir)
    return time.perf_counter() - started


def record_jobs_by_rewriting(sweep_dir: Path, jobs: int) -> float:
    started = time.perf_counter()
    manifest_files.write(sweep_dir, manifest_files.new_manifest(["sweep=clip_higher"], [], grid(jobs)))
    for job in range(jobs):
        folder = str(sweep_dir / str(job))
        manifest_files.read(sweep_dir)  # begin_job reads the manifest first, in both arms
        rewrite_update(sweep_dir, job, status="running", pid=os.getpid(), folder=folder)
        rewrite_update(sweep_dir, job, status="done", outcome="ok", error=None, folder=folder)
    return time.perf_counter() - started


def status_seconds(sweep_dir: Path, repeats: int = 3) -> float:
    """The fastest of `repeats` (milliseconds, so a single timing is mostly the machine's noise)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        status_table(sweep_dir, manifest_files.read(sweep_dir))
        times.append(time.perf_counter() - started)
    return min(times)


def check_recorded(sweep_dir: Path, jobs: int) -> None:
    recorded = manifest_files.read(sweep_dir)["jobs"]
    if [(job["status"], job["outcome"]) for job in recorded] != [("done", "ok")] * jobs:
        raise SystemExit(f"{sweep_dir}: not every job was recorded done")


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10 and 100 jobs only")
    args = parser.parse_args()
    sizes = [10, 100] if args.quick else [10, 100, 1000]
    print(f"load average before: {load()} ({os.cpu_count()} cores)")
    arms = {"job log (now)": record_jobs, "rewrite per update (before)": record_jobs_by_rewriting}
    statuses = ["--status, log not folded (killed)", "--status, log folded (ended)"]
    seconds: dict[str, list[float]] = {name: [] for name in [*arms, *statuses]}
    with tempfile.TemporaryDirectory() as scratch:
        for jobs in sizes:
            for number, (name, record) in enumerate(arms.items()):
                sweep_dir = Path(scratch) / f"{jobs}-{number}"
                sweep_dir.mkdir()
                seconds[name].append(record(sweep_dir, jobs))
                check_recorded(sweep_dir, jobs)
            killed = Path(scratch) / f"{jobs}-killed"  # a launch killed before its end: every update in the log
            killed.mkdir()
            record_jobs(killed, jobs, fold=False)
            seconds[statuses[0]].append(status_seconds(killed))
            seconds[statuses[1]].append(status_seconds(Path(scratch) / f"{jobs}-0"))
    print(f"{'seconds at jobs':36}" + "".join(f"{jobs:>10}" for jobs in sizes) + "  s/job (slope)  ratio")
    for name, times in seconds.items():
        slope = (times[-1] - times[-2]) / (sizes[-1] - sizes[-2])
        ratio = times[-1] / times[-2]
        cells = "".join(f"{t:10.4f}" for t in times)
        print(f"{name:36}{cells}  {slope:13.6f}  {ratio:5.1f} ({sizes[-1]} vs {sizes[-2]} jobs; linear = 10)")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
