"""What `hydra/launcher=slurm` needs before the sweep folder is made: SLURM's commands on the PATH and resource
counts a scheduler can grant.

submitit refuses to build its executor without `srun` on the PATH and submits with `sbatch`; both missing ended in
submitit's traceback after the manifest was written. Its config types the counts as integers but takes any sign:
a negative time, memory or GPU count went to sbatch. (A submission sbatch itself refuses, a controller that does not
answer or a partition it does not know, is caught when it happens: hydra_plugins/align_kit_slurm/slurm_launcher.py.)
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping

from align_kit.core.errors import ConfigError

SLURM_LAUNCHERS = ("hydra_plugins.align_kit_slurm.slurm_launcher.SlurmLauncher",)
COMMANDS = ("sbatch", "srun")  # sbatch submits the array; submitit will not start without srun
# The counts of hydra.launcher and the least each may be (null: SLURM's default). A memory of 0 is SLURM's "all the
# node's memory", a GPU count of 0 a CPU job, and no requeue or no early signal are choices.
AT_LEAST = {
    "timeout_min": 1,
    "nodes": 1,
    "tasks_per_node": 1,
    "cpus_per_task": 1,
    "cpus_per_gpu": 1,
    "array_parallelism": 1,
    "gpus_per_node": 0,
    "gpus_per_task": 0,
    "mem_gb": 0,
    "signal_delay_s": 0,
    "max_num_timeout": 0,
}


def check_slurm_launcher(launcher: Mapping) -> None:
    """`launcher` is the composed hydra.launcher; nothing is checked unless it is the SLURM launcher."""
    if launcher.get("_target_") not in SLURM_LAUNCHERS:
        return
    for key, least in AT_LEAST.items():
        value = launcher.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise ConfigError(
                f"hydra.launcher.{key}={value}: expected a whole number >= {least}"
                + (" (or null for SLURM's default)" if key not in ("timeout_min", "nodes", "tasks_per_node") else "")
            )
    timeout_s, delay = launcher.get("timeout_min", 0) * 60, launcher.get("signal_delay_s", 0)
    if delay >= timeout_s:
        raise ConfigError(
            f"hydra.launcher.signal_delay_s={delay} is not shorter than hydra.launcher.timeout_min="
            f"{launcher.get('timeout_min')} ({timeout_s} s): the checkpoint signal would come before the job starts; "
            "lower the delay or raise the time limit"
        )
    missing = [command for command in COMMANDS if shutil.which(command) is None]
    if missing:
        raise ConfigError(
            f"hydra/launcher=slurm needs SLURM's {' and '.join(COMMANDS)} on the PATH; not found: "
            f"{', '.join(missing)}; "
            "run the sweep on a SLURM login node, or without hydra/launcher=slurm"
        )
