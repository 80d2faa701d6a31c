"""What SLURM says about a sweep's jobs, for `align-kit sweep --status` beside the manifest's own view.

The manifest records each job's SLURM id (`slurm_job`, written by hydra/launcher=slurm when sbatch answers). sacct
(accounting, slurmdbd) knows every job, finished ones included; where it does not answer, squeue knows the jobs
still queued or running (and, for a few minutes after they end, the ones that ended), and answers for a job that
sacct does not know yet. sacct's output is read with
submitit's own parser, which expands a pending array's `123_[0-3]` into its tasks.
"""

from __future__ import annotations

import shutil
import subprocess

QUERY_TIMEOUT_S = 20


def _run(command: list[str]) -> str | None:
    if shutil.which(command[0]) is None:
        return None
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def scheduler_states(job_ids: list[str]) -> tuple[str, dict[str, str]] | None:
    """(the command that answered, {SLURM job id: state}) for `job_ids` (`123_4` or `123`); None where neither
    sacct nor squeue answers (no SLURM here, or its controller is down)."""
    from submitit.slurm.slurm import SlurmInfoWatcher

    found = _run(["sacct", "-X", "-P", "-o", "JobID,State", *_selection(job_ids)])
    known = {}
    if found is not None and len(found.splitlines()) > 1:
        info = SlurmInfoWatcher().read_info(found)
        known = {job: info[job]["State"] for job in job_ids if job in info}
        if len(known) == len(job_ids):
            return "sacct", known
    # Accounting off, or behind: slurmctld hands a new job to slurmdbd a moment after it accepts it.
    queued = _squeue([job for job in job_ids if job not in known])
    if queued is None:
        return ("sacct", known) if found is not None else None
    return ("sacct, squeue" if known else "squeue"), {**known, **queued}


def _selection(job_ids: list[str]) -> list[str]:
    return ["-j", ",".join(sorted({job.split("_")[0] for job in job_ids}))]


def _squeue(job_ids: list[str]) -> dict[str, str] | None:
    found = _run(["squeue", "-h", "-r", "-o", "%i|%T|%r", *_selection(job_ids)])
    if found is None:
        return None
    states = {}
    for line in found.splitlines():
        job, state, reason = (line.split("|") + ["", ""])[:3]
        states[job.strip()] = state + (f" ({reason})" if reason and reason != "None" else "")
    return {job: states[job] for job in job_ids if job in states}


def scheduler_lines(manifest: dict, every_job: bool, full_table_jobs: int) -> list[str]:
    """The `--status` lines of SLURM's view (none where no job has a SLURM id): a row per job for up to
    `full_table_jobs` jobs or with `every_job`, else the counts by SLURM state."""
    ids = {entry["job"]: entry["slurm_job"] for entry in manifest["jobs"] if isinstance(entry.get("slurm_job"), str)}
    if not ids:
        return []
    answer = scheduler_states(sorted(set(ids.values())))
    if answer is None:
        return ["SLURM's view: neither sacct nor squeue answered (is this a machine of the cluster?)"]
    source, states = answer
    shown = {job: states.get(slurm_id, f"unknown to {source}") for job, slurm_id in ids.items()}
    if len(ids) > full_table_jobs and not every_job:
        counts: dict[str, int] = {}
        for state in shown.values():
            counts[state] = counts.get(state, 0) + 1
        return [f"SLURM's view ({source}): " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))]
    rows = [("job", "SLURM id", "SLURM state")]
    rows += [(str(job), slurm_id, shown[job]) for job, slurm_id in ids.items()]
    widths = [max(len(row[column]) for row in rows) for column in range(2)]
    lines = [f"SLURM's view ({source}):"]
    lines += ["  ".join([row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2]]) for row in rows]
    return lines
