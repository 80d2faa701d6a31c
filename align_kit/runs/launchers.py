"""How a sweep's jobs run: how many at once, with how many threads each, and nothing shared between them.

`align-kit sweep NAME` picks Hydra's joblib launcher (one process per job) when more than one core is free, runs
min(free cores, jobs) at once and gives each job free cores // that many threads (ALIGN_KIT_JOB_THREADS, read by
`isolated_job` in the job's own process), so the machine is never oversubscribed. A launcher named on the command
line (`hydra/launcher=basic|joblib|submitit_local|slurm`) is kept as given.

`isolated_job` wraps every job, in whatever process it runs: the thread count is set on entry and restored on exit,
and on exit a W&B run left open is finished and accelerate's process-wide state is cleared, so a second job in the
same process (Hydra's basic launcher runs them all in one) starts as if it were the first.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Iterator

THREADS_ENV = "ALIGN_KIT_JOB_THREADS"
PARALLEL_LAUNCHER = "joblib"


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def free_cores() -> int:
    """Cores not busy now: all of them less the 1-minute load average (rounded), at least one."""
    total = cores()
    return max(1, min(total, round(total - os.getloadavg()[0])))


def given(args: list[str], key: str) -> str | None:
    """The value of `key=` among Hydra overrides, if given."""
    values = [arg.split("=", 1)[1] for arg in args if arg.split("=", 1)[0].lstrip("+") == key]
    return values[-1] if values else None


def plan(args: list[str], jobs: int) -> tuple[list[str], int, str]:
    """(overrides to add, threads per job, the line to print) for a sweep of `jobs` jobs launched with `args`."""
    total, free = cores(), free_cores()
    launcher = given(args, "hydra/launcher")
    if launcher is None:
        at_once = min(free, jobs)
        if at_once <= 1:
            threads = free
            return (
                [],
                threads,
                (
                    f"align-kit: {jobs} jobs, one at a time ({free} of {total} cores free; {threads} thread(s); "
                    f"run several at once with hydra/launcher={PARALLEL_LAUNCHER} hydra.launcher.n_jobs=N)"
                ),
            )
        threads = max(1, free // at_once)
        added = [f"hydra/launcher={PARALLEL_LAUNCHER}", f"hydra.launcher.n_jobs={at_once}"]
        return (
            added,
            threads,
            (
                f"align-kit: {jobs} jobs, {at_once} at once (hydra/launcher={PARALLEL_LAUNCHER}, {threads} thread(s) "
                f"each; {free} of {total} cores free)"
            ),
        )
    if launcher == "joblib":
        n_jobs = int(given(args, "hydra.launcher.n_jobs") or -1)
        at_once = min(jobs, total if n_jobs < 1 else n_jobs)
    elif launcher == "submitit_local":  # it starts a whole batch at once: the batch size is the parallelism
        batch = given(args, "hydra.sweeper.max_batch_size")
        at_once = min(jobs, int(batch) if batch else free)
        added = [] if batch else [f"hydra.sweeper.max_batch_size={at_once}"]
        threads = max(1, free // at_once)
        return (
            added,
            threads,
            (f"align-kit: {jobs} jobs, {at_once} at once (hydra/launcher=submitit_local, {threads} thread(s) each)"),
        )
    elif launcher == "basic":
        at_once = 1
    else:  # a cluster launcher: each job gets its own machine's cores
        return [], 0, f"align-kit: {jobs} jobs through hydra/launcher={launcher}"
    threads = max(1, free // max(1, at_once))
    return (
        [],
        threads,
        (f"align-kit: {jobs} jobs, {at_once} at once (hydra/launcher={launcher}, {threads} thread(s) each)"),
    )


@contextlib.contextmanager
def isolated_job() -> Iterator[None]:
    """One job's process-wide state: its own thread count, no W&B run or accelerate state left behind. Imports
    torch only to set a thread count, so a config error still answers before torch loads."""
    wanted = os.environ.get(THREADS_ENV, "")
    before = None
    if wanted.isdigit() and int(wanted) > 0:
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(int(wanted))
    try:
        yield
    finally:
        if before is not None:
            sys.modules["torch"].set_num_threads(before)
        release_shared_state()


def release_shared_state() -> None:
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish()  # an exception inside the logger's session can leave the run open
    state = sys.modules.get("accelerate.state")
    if state is not None:  # singletons: the next job's Accelerator would inherit this job's settings
        state.AcceleratorState._reset_state(reset_partial_state=True)
        state.GradientState._reset_state()
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
