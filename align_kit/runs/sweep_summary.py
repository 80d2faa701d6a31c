"""Sweeps never hide failures: every job's outcome in one table, read from the sweep's manifest.

A job that fails at run time (a config error found inside the job, a halt by the health monitor, an exception)
does not stop the sweep: the task function returns its outcome and the next job runs. When the sweep ends,
`SweepSummary` (a Hydra callback) prints the table of every job (from `<sweep folder>/sweep_manifest.json`, the one
record of the sweep's outcomes, which `align-kit sweep --status` and `align-kit compare` read too) and exits
with status 1 when any job failed, so neither a shell nor CI can mistake the sweep for a success; `status_table`
is the same table for `align-kit sweep --status`. A sweep of more than `FULL_TABLE_JOBS` jobs gets the counts by
status and the rows of the jobs that failed or were interrupted instead: a row per job would bury them
(`align-kit sweep --status <folder> --all` still prints every row). Each job records its outcome in the sweep's manifest
(`align_kit.runs.sweep_manifest`) from its own process, so the table covers jobs that other launchers ran in other
processes, and jobs finished in an earlier launch of a resumed sweep.
"""

from __future__ import annotations

import shlex
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from align_kit.core.disk_space import DISK_FULL_EXIT_CODE, DiskFull, writing
from align_kit.core.errors import ConfigError
from align_kit.core.run_files import ERROR_LOG
from align_kit.runs.sweep_manifest import (
    MANIFEST_FILE,
    TORN,
    end_job,
    fold,
    resume_command,
    shown_status,
    start_sweep,
    torn_note,
)

OK = "ok"
FAILED_EXIT_CODE = 1
FULL_TABLE_JOBS = 20  # a sweep of up to this many jobs gets a row per job
LISTED_NOT_OK = 50  # a bigger one: the rows of at most this many jobs not ok, then how many more


@dataclass
class JobOutcome:
    job: int
    overrides: list[str]
    status: str  # ok | config error | training halted | failed
    error: str | None  # the last line of the error
    folder: str


def last_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def failed_job(run_dir: str, error: BaseException) -> dict[str, str]:
    """What the task function returns for an unexpected exception: the traceback goes to the job's error.log."""
    path = Path(run_dir) / ERROR_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(traceback.format_exception(error)))
    line = f"{type(error).__name__}: {last_line(error)}"
    print(f"align-kit: job failed: {line} (traceback in {path})", file=sys.stderr)
    return {"status": "failed", "error": line}


def _outcome(config: DictConfig, job_return: JobReturn) -> JobOutcome:
    if job_return.status == JobStatus.COMPLETED:
        value = job_return.return_value if isinstance(job_return.return_value, dict) else {}
        status, error = value.get("status", OK), value.get("error")
    else:  # raised past the task function: Hydra kept the exception
        raised = job_return._return_value
        status, error = "failed", f"{type(raised).__name__}: {last_line(raised)}"
    return JobOutcome(
        job=int(config.hydra.job.num),
        overrides=list(job_return.overrides or []),
        status=status,
        error=error,
        folder=str(config.hydra.runtime.output_dir),
    )


def common_overrides(outcomes: list[JobOutcome]) -> list[str]:
    """The overrides every job shares (the sweep's fixed settings); the table shows each job's others."""
    if len(outcomes) < 2:
        return []
    shared = set.intersection(*(set(o.overrides) for o in outcomes))
    return [override for override in outcomes[0].overrides if override in shared]


def format_table(outcomes: list[JobOutcome], every_job: bool = False, counts: bool = True) -> str:
    """A row per job (job, its own overrides, status, last error line) for a small sweep or with `every_job`; for a
    bigger one the counts by status (unless `counts`: said already) and the rows of the jobs that failed or were
    interrupted, at most LISTED_NOT_OK of them."""
    common = common_overrides(outcomes)
    lines = [f"every job: {' '.join(common)}"] if common else []
    shown, more = outcomes, 0
    if len(outcomes) > FULL_TABLE_JOBS and not every_job:
        shown = [o for o in outcomes if o.status not in (OK, "pending", "running")]
        lines += [f"{len(outcomes)} jobs: {status_counts(outcomes)}"] if counts else []
        if not shown:
            return "\n".join(lines)
        more = len(shown) - LISTED_NOT_OK
        lines.append(f"the {len(shown)} failed or interrupted" + (f", the first {LISTED_NOT_OK}:" if more > 0 else ":"))
        shown = shown[:LISTED_NOT_OK]
    rows = [("job", "overrides", "status", "last error line")]
    rows += [(str(o.job), " ".join(x for x in o.overrides if x not in common), o.status, o.error or "") for o in shown]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    lines += [
        ("  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)) + "  " + row[3]).rstrip()
        for row in rows
    ]
    if more > 0:
        lines.append(f"... and {more} more failed or interrupted")
    return "\n".join(lines)


def status_counts(outcomes: list[JobOutcome]) -> str:
    """`3 failed, 2 ok`: how many jobs have each status, by status name."""
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def manifest_outcomes(manifest: dict) -> list[JobOutcome]:
    """Every job of the sweep, from its manifest (jobs in other processes and earlier launches included)."""
    return [
        JobOutcome(
            job=entry["job"],
            overrides=list(entry["overrides"]),
            status=shown_status(entry),  # pending / running / interrupted: not ok
            error=entry.get("error"),
            folder=entry.get("folder") or "",
        )
        for entry in manifest["jobs"]
    ]


def status_table(sweep_dir: Path, manifest: dict, every_job: bool = False) -> str:
    """`align-kit sweep --status`: the counts by status, the table, and the command that resumes the sweep."""
    rows = manifest_outcomes(manifest)
    launch = shlex.join(["align-kit", "train", *resume_command(sweep_dir, manifest)])
    lines = [f"sweep {sweep_dir}: {len(rows)} jobs, {status_counts(rows)}", format_table(rows, every_job, counts=False)]
    if len(rows) > FULL_TABLE_JOBS and not every_job:
        lines.append(f"a row per job: align-kit sweep --status {sweep_dir} --all")
    from align_kit.runs.slurm_states import scheduler_lines

    lines += scheduler_lines(manifest, every_job, FULL_TABLE_JOBS)  # hydra/launcher=slurm: what the scheduler says
    if manifest.get(TORN):
        lines.append(f"note: {torn_note(sweep_dir, manifest)}")
    lines.append(f"resume: align-kit sweep --resume {sweep_dir}   (= {launch})")
    return "\n".join(lines)


class SweepSummary(Callback):
    """Also keeps the sweep's manifest (align_kit.runs.sweep_manifest): written or checked at the start, each job's
    outcome recorded by the job's own process, the table read back from it at the end."""

    def __init__(self) -> None:
        self.outcomes: list[JobOutcome] = []

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.outcomes = []
        sweep_dir = Path(str(config.hydra.sweep.dir))
        try:
            with writing(
                sweep_dir, MANIFEST_FILE, then="run the sweep again (align-kit sweep --resume <sweep folder>)"
            ):
                start_sweep(config)
        except ConfigError as error:
            print(f"align-kit: config error: {error}", file=sys.stderr)
            sys.exit(2)
        except DiskFull as full:  # the same line as a run's (align_kit.train)
            print(f"align-kit: disk full: {full.strerror}", file=sys.stderr)
            sys.exit(DISK_FULL_EXIT_CODE)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if config.hydra.mode == RunMode.MULTIRUN:
            outcome = _outcome(config, job_return)
            self.outcomes.append(outcome)
            end_job(str(config.hydra.sweep.dir), outcome.job, outcome.status, outcome.error, outcome.folder)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        manifest = fold(sweep_dir)  # the launch's job log into sweep_manifest.json: one file again
        if manifest is not None:
            self.outcomes = manifest_outcomes(manifest)
        failed = [o for o in self.outcomes if o.status != OK]
        print(f"\nalign-kit: sweep finished: {len(self.outcomes) - len(failed)} of {len(self.outcomes)} jobs ok")
        print(format_table(self.outcomes))
        where = f"{sweep_dir / MANIFEST_FILE} (align-kit sweep --status {sweep_dir})"
        print(f"align-kit: every job's status in {where}")
        if failed:
            numbers = ", ".join(str(o.job) for o in failed[:FULL_TABLE_JOBS])
            numbers += f", ... ({len(failed)} in all)" if len(failed) > FULL_TABLE_JOBS else ""
            print(
                f"align-kit: sweep failed: {len(failed)} of {len(self.outcomes)} jobs failed (jobs {numbers}); "
                f"see {where}",
                file=sys.stderr,
            )
            sys.exit(FAILED_EXIT_CODE)
