"""`hydra/launcher=slurm`: hydra-submitit-launcher's SlurmLauncher with what a resumable sweep needs from a scheduler.

It lives in the `hydra_plugins` namespace because Hydra instantiates launchers from there alone; Hydra imports it
while it looks for plugins, so it imports nothing heavy at the top.

- The array holds only the jobs left to do: a relaunch (`align-kit sweep --resume`) leaves out the jobs the manifest
  records as done, and every job submitted keeps its own number (its folder, its manifest entry).
- Each job's SLURM id (`<array id>_<task>`) goes into the manifest (`slurm_job`) as soon as sbatch answers, so
  `align-kit sweep --status` can ask the scheduler about a job that has not started yet.
- A job the scheduler ends before it returns (scancel, its time limit, a lost node) does not crash the launch:
  its scheduler state as sacct reports it (`CANCELLED by 0`, `TIMEOUT`) goes into the manifest (`slurm_state`), and
  the sweep's table shows the job as interrupted with that reason; a resume picks it up from its checkpoint.

Following a job needs sacct (submitit's watcher polls it; slurmdbd behind it): without accounting a job that dies
before writing its result is never seen to end, and the launch would wait for it forever (docs/sweeps.md).
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Sequence
from pathlib import Path

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_submitit_launcher import submitit_launcher
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from omegaconf import OmegaConf

from align_kit.runs.sweep_manifest import DONE, FAILED, fold, read, update_job

# The launcher's own settings, given to submitit's executor when it is made (not with each job's parameters).
EXECUTOR_KEYS = ("submitit_folder", "max_num_timeout")


def finished_jobs(sweep_dir: Path) -> set[int]:
    """The jobs the sweep's manifest records as done (finished with outcome ok in an earlier launch)."""
    manifest = read(sweep_dir)
    if manifest is None:
        return set()
    return {entry["job"] for entry in manifest["jobs"] if entry.get("status") == DONE}


class SlurmLauncher(submitit_launcher.SlurmLauncher):
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        numbered = list(enumerate(job_overrides, start=initial_job_idx))
        done = finished_jobs(sweep_dir)
        todo = [(number, overrides) for number, overrides in numbered if number not in done]
        returns = {
            number: JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED, _return_value={"status": "ok"})
            for number, overrides in numbered
            if number in done
        }
        if len(todo) < len(numbered):
            print(
                f"align-kit: {len(numbered) - len(todo)} of {len(numbered)} jobs finished in an earlier launch; "
                f"the array holds the other {len(todo)}",
                file=sys.stderr,
            )
        if todo:
            jobs = self._submit_or_stop(sweep_dir, todo)
            for (number, _), job in zip(todo, jobs, strict=True):
                update_job(sweep_dir, number, slurm_job=job.job_id, slurm_state=None)
            array = jobs[0].job_id.split("_")[0]
            print(f"align-kit: submitted SLURM job {array} ({len(jobs)} sweep jobs)", file=sys.stderr)
            for (number, overrides), job in zip(todo, jobs, strict=True):
                returns[number] = self._wait(sweep_dir, number, list(overrides), job)
        return [returns[number] for number, _ in numbered]

    def _submit_or_stop(self, sweep_dir: Path, todo: list[tuple[int, Sequence[str]]]) -> list:
        """The submitted jobs; or, where sbatch is refused (no controller answers, a value it does not accept, a
        command missing), each job recorded as failed with sbatch's reason and the launch ended with that one line
        (exit 2): `align-kit sweep --resume` submits them again once it is fixed. submitit prints sbatch's own
        message before raising; it is kept back here, as the line carries it."""
        from submitit.core.utils import FailedJobError, FailedSubmissionError

        captured = io.StringIO()
        try:
            with contextlib.redirect_stderr(captured):
                return self._submit(sweep_dir, todo)
        except (FailedJobError, FailedSubmissionError, OSError, RuntimeError) as error:
            said = [line.strip() for line in f"{error}\n{captured.getvalue()}".splitlines() if line.strip()]
            reason = said[0] if said else type(error).__name__
            for number, _ in todo:
                update_job(sweep_dir, number, status=FAILED, error=f"not submitted: {reason}")
            fold(sweep_dir)  # the manifest one file again, as at the end of any launch
            print(
                f"align-kit: sbatch did not submit the sweep's {len(todo)} jobs ({reason}); fix that, then: "
                f"align-kit sweep --resume {sweep_dir}",
                file=sys.stderr,
            )
            sys.exit(2)

    def _submit(self, sweep_dir: Path, todo: list[tuple[int, Sequence[str]]]) -> list:
        """One job array of `todo`, each task under its job's own number, as the upstream launcher builds it."""
        import submitit

        executor = submitit.AutoExecutor(
            cluster=self._EXECUTOR,
            folder=self.params["submitit_folder"],
            **{f"{self._EXECUTOR}_max_num_timeout": self.params["max_num_timeout"]},
        )
        shared = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(
            **{
                key if key in shared else f"{self._EXECUTOR}_{key}": value
                for key, value in self.params.items()
                if key not in EXECUTOR_KEYS
            }
        )
        sweep_dir.mkdir(parents=True, exist_ok=True)
        state = Singleton.get_state()
        arguments = [(list(o), "hydra.sweep.dir", number, f"job_id_for_{number}", state) for number, o in todo]
        return executor.map_array(self, *zip(*arguments, strict=True))

    def _wait(self, sweep_dir: Path, number: int, overrides: list[str], job) -> JobReturn:
        """The job's own return, or, where the scheduler ended it before it returned, that fact as its outcome."""
        from submitit.core.utils import FailedJobError, UncompletedJobError

        try:
            return job.results()[0]
        except (UncompletedJobError, FailedJobError):
            state = job.get_info(mode="force").get("State") or "UNKNOWN"
            error = f"ended by SLURM: {state} (job {job.job_id}; log {job.paths.stderr})"
            update_job(sweep_dir, number, slurm_state=state, error=error)
            print(f"align-kit: job {number}: {error}", file=sys.stderr)
            return JobReturn(
                overrides=overrides, status=JobStatus.COMPLETED, _return_value={"status": "interrupted", "error": error}
            )
