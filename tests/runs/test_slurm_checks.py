"""hydra/launcher=slurm without a working scheduler: SLURM's commands missing or a resource count no scheduler grants
is one line before anything is written; an sbatch that refuses the array (no controller, a value it does not take)
is one line naming its reason, with every job recorded as failed (not left pending) for `sweep --resume`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from align_kit import cli
from align_kit.runs.slurm_checks import check_slurm_launcher
from tests.conftest import ROOT, cli_env

SLURM = {"_target_": "hydra_plugins.align_kit_slurm.slurm_launcher.SlurmLauncher", "timeout_min": 240}


@pytest.mark.parametrize(
    ("key", "value", "least"),
    [
        ("timeout_min", -5, 1),
        ("timeout_min", 0, 1),
        ("mem_gb", -1, 0),
        ("gpus_per_node", -1, 0),
        ("gpus_per_task", -2, 0),
        ("cpus_per_task", 0, 1),
        ("cpus_per_gpu", -1, 1),
        ("nodes", 0, 1),
        ("tasks_per_node", -1, 1),
        ("array_parallelism", 0, 1),
        ("signal_delay_s", -1, 0),
        ("max_num_timeout", -1, 0),
    ],
)
def test_a_count_no_scheduler_grants_is_refused(key, value, least):
    with pytest.raises(Exception, match=rf"^hydra\.launcher\.{key}={value}: expected a whole number >= {least}"):
        check_slurm_launcher({**SLURM, key: value})


def test_counts_slurm_takes_pass_and_other_launchers_are_not_checked(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    check_slurm_launcher({**SLURM, "mem_gb": 0, "gpus_per_node": 0, "cpus_per_task": None, "max_num_timeout": 0})
    check_slurm_launcher({"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher", "mem_gb": -1})


def test_missing_slurm_commands_are_named_before_the_sweep_folder_is_made(tmp_path, monkeypatch, capsys, cache_dir):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ALIGN_KIT_CACHE", cache_dir)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # neither sbatch nor srun
    monkeypatch.setattr("align_kit.train.main", lambda: pytest.fail("the sweep would launch"))
    with pytest.raises(SystemExit) as refused:
        cli.main(["train", "-m", "seed=1,2", "hydra/launcher=slurm"])
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "align-kit: config error: sweep job 0 of 2 (seed=1): hydra/launcher=slurm needs SLURM's sbatch and srun on "
        "the PATH; not found: sbatch, srun; run the sweep on a SLURM login node, or without hydra/launcher=slurm"
    ]
    assert list(tmp_path.iterdir()) == []


REFUSALS = {
    "no_controller": "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
    "bad_partition": "sbatch: error: Batch job submission failed: Invalid partition name specified",
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_an_sbatch_that_refuses_the_array_is_one_line_and_the_jobs_are_recorded_failed(case, tmp_path, cache_dir):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "sbatch").write_text(f"#!/bin/sh\necho '{REFUSALS[case]}' >&2\nexit 1\n")
    (stubs / "srun").write_text("#!/bin/sh\nexit 0\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    sweep = tmp_path / "sweep"
    env = dict(cli_env(cache_dir), PYTHONPATH=str(ROOT))
    env["PATH"] = f"{stubs}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}/usr/bin:/bin"
    result = subprocess.run(
        [sys.executable, "-m", "align_kit.cli", "train", "-m", "seed=1,2", "hydra/launcher=slurm"]
        + ["logger=none", "trainer.max_steps=1", f"hydra.sweep.dir={sweep}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"align-kit: sbatch did not submit the sweep's 2 jobs ({REFUSALS[case]}); fix that, then: "
        f"align-kit sweep --resume {sweep}"
    )
    manifest = json.loads((sweep / "sweep_manifest.json").read_text())
    assert [(job["status"], job["error"]) for job in manifest["jobs"]] == [
        ("failed", f"not submitted: {REFUSALS[case]}")
    ] * 2
