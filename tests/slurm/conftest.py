"""The slurm tier's cluster: tests/slurm/cluster.sh brings up a single-node SLURM once per session and ends it after.

Skipped, with the reason, only where the cluster cannot be built (not root, or no apt-get to install it with); in
CI (CI=true) that is a failure instead, since CI runs this tier for real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "cluster.sh"
INSTALLED = ("slurmctld", "slurmd", "slurmdbd", "sbatch", "munged", "mariadbd")


def _cannot_build() -> str | None:
    if os.geteuid() != 0:
        return "the slurm tier starts SLURM's daemons: run it as root"
    if not all(shutil.which(name) for name in INSTALLED) and shutil.which("apt-get") is None:
        return (
            "SLURM is not installed and there is no apt-get to install it (Debian's slurm-wlm, slurmdbd, munge, "
            "mariadb-server)"
        )
    return None


@pytest.fixture(scope="session")
def slurm_env() -> dict:
    """os.environ with SLURM_CONF naming the running cluster's slurm.conf."""
    reason = _cannot_build()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the slurm tier, but {reason}")
        pytest.skip(reason)
    up = subprocess.run(["bash", str(SCRIPT), "up"], capture_output=True, text=True, timeout=900)
    if up.returncode != 0:
        pytest.fail(f"tests/slurm/cluster.sh up failed:\n{up.stderr[-3000:]}")
    conf = subprocess.run(["bash", str(SCRIPT), "env"], capture_output=True, text=True, check=True).stdout
    env = dict(os.environ, SLURM_CONF=conf.strip().split("=", 1)[1])
    yield env
    subprocess.run(["bash", str(SCRIPT), "down"], capture_output=True, text=True, timeout=120)
