"""No run folder is clobbered and a resume continues the run it names: refusals through the real entry point
(no model loads, so each answers in about a second) and the resume checks on hand-made checkpoints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from align_kit.runs.run_folder import check_resume, check_run_folder, config_differences, folder_kind
from align_kit.runs.run_lock import held
from tests.conftest import ROOT, cli_env
from tests.run_folders import RUN, hydra_config, snapshot, write_checkpoint, write_run


def train_cli(cache_dir: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "align_kit.cli", "train", *args],
        capture_output=True,
        text=True,
        env=dict(cli_env(cache_dir), PYTHONPATH=str(ROOT)),
        cwd=cwd,
    )


def composed(*overrides: str) -> dict:
    return OmegaConf.to_container(compose(list(overrides)), resolve=True)


# --- which folders a run may start in ---------------------------------------------------------------------------


def test_folder_kinds(tmp_path):
    assert folder_kind(tmp_path / "missing") == "new"
    assert folder_kind(tmp_path) == "new"  # empty
    (tmp_path / ".hydra").mkdir()
    (tmp_path / "train.log").write_text("")
    assert folder_kind(tmp_path) == "new"  # only Hydra's record of a launch that never trained
    (tmp_path / "config.yaml").write_text("a: 1")
    (tmp_path / "metrics.jsonl").write_text("")
    (tmp_path / ".align_kit.lock").write_text("")
    assert folder_kind(tmp_path) == "new"  # a launch that stopped before its first step: no row, no checkpoint
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    assert folder_kind(tmp_path) == "run"  # a metric row
    (tmp_path / "metrics.jsonl").unlink()
    (tmp_path / "wandb").mkdir()
    assert folder_kind(tmp_path) == "run"  # config.yaml next to .hydra/ and more than a launch record
    project = tmp_path / "project"
    project.mkdir()
    (project / "config.yaml").write_text("a: 1")
    assert folder_kind(project) == "other"  # a config.yaml alone is a project's
    write_checkpoint(project / "x", 3)
    assert folder_kind(project / "x") == "run"
    (tmp_path / "file").write_text("")
    assert folder_kind(tmp_path / "file") == "file"


@pytest.mark.slow
def test_project_folder_is_refused_and_left_untouched(cache_dir, tmp_path):
    (tmp_path / "README.md").write_text("# my project\n")
    (tmp_path / "config.yaml").write_text("mine: true\n")
    before = snapshot(tmp_path)
    result = train_cli(cache_dir, "hydra.run.dir=.", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"align-kit: config error: hydra.run.dir=. (= {tmp_path}) is not empty and holds no align_kit run "
        "(README.md, config.yaml); align_kit starts runs only in a new or empty folder: hydra.run.dir=<new folder>"
    )
    assert snapshot(tmp_path) == before and sorted(os.listdir(tmp_path)) == ["README.md", "config.yaml"]


@pytest.mark.slow
def test_empty_run_folder_is_refused(cache_dir, tmp_path):
    result = train_cli(cache_dir, "hydra.run.dir=", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "align-kit: config error: hydra.run.dir is empty; name the folder, e.g. hydra.run.dir=outputs/my_run "
        "(or leave it unset for a timestamped one)"
    )
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_existing_run_is_refused_and_every_file_of_it_untouched(cache_dir, tmp_path):
    run = write_run(tmp_path / "run")
    before = snapshot(run)
    result = train_cli(cache_dir, f"hydra.run.dir={run}", *RUN)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"align-kit: config error: hydra.run.dir={run} already holds a run (.hydra, checkpoint-4, checkpoint-8, ...); "
        "resume it with train.resume=true, move it aside with train.overwrite=true, or choose a new folder: "
        "hydra.run.dir=<new folder>"
    )
    assert snapshot(run) == before  # .hydra/, metrics.jsonl and both checkpoints, byte for byte and mtime


def test_overwrite_moves_the_old_run_aside_whole(tmp_path):
    run = write_run(tmp_path / "run")
    before = snapshot(run)
    backup = check_run_folder(run, "hydra.run.dir", resume=False, overwrite=True)
    assert not run.exists()
    assert backup.parent == tmp_path and backup.name.startswith("run.replaced-")
    assert snapshot(backup) == before  # moved, not copied: same bytes, same mtimes
    assert check_run_folder(run, "hydra.run.dir", resume=False, overwrite=True) is None  # now new: nothing to move


def test_overwrite_never_moves_a_project_folder(tmp_path):
    (tmp_path / "README.md").write_text("mine")
    with pytest.raises(ConfigError, match="holds no align_kit run"):
        check_run_folder(tmp_path, "hydra.run.dir", resume=False, overwrite=True)
    assert (tmp_path / "README.md").read_text() == "mine"


def test_resume_and_overwrite_together_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="contradict each other"):
        check_run_folder(write_run(tmp_path / "run"), "hydra.run.dir", resume=True, overwrite=True)


@pytest.mark.slow
def test_nonempty_sweep_folder_is_refused(cache_dir, tmp_path):
    (tmp_path / "0").mkdir()
    result = train_cli(cache_dir, "-m", "seed=1,2", f"hydra.sweep.dir={tmp_path}")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"align-kit: config error: hydra.sweep.dir={tmp_path} is not empty; choose a new folder "
        "(hydra.sweep.dir=<new folder>), resume its jobs with `align-kit sweep --resume <sweep folder>`, or move it "
        "aside with train.overwrite=true"
    )
    assert os.listdir(tmp_path) == ["0"]


# --- resume integrity -------------------------------------------------------------------------------------------


def test_resume_with_other_settings_lists_every_differing_key_and_changes_nothing(cache_dir, tmp_path):
    run = write_run(tmp_path / "run")
    before = snapshot(run)
    changed = [o for o in RUN if o != "seed=5"] + ["seed=7", "trainer.learning_rate=1e-3", "clip=clip_higher"]
    result = train_cli(cache_dir, f"hydra.run.dir={run}", *changed, "train.resume=true")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"align-kit: config error: train.resume=true but this config differs from {run}/config.yaml at "
        "clip.eps_high (0.2 -> 0.28), seed (5 -> 7), trainer.learning_rate (2e-05 -> 0.001); resume with the "
        f"run's own overrides ({run}/.hydra/overrides.yaml); only trainer.max_steps (raised), "
        "trainer.disable_tqdm, logger.*, paths.* may change on resume"
    )
    assert snapshot(run) == before


def test_allowed_changes_pass_and_the_latest_checkpoint_is_the_one_checked(tmp_path):
    run = write_run(tmp_path / "run")
    allowed = composed(
        *RUN, "trainer.max_steps=20", "logger=wandb_offline", "trainer.disable_tqdm=true", "train.resume=true"
    )
    assert check_resume(run, allowed) == run / "checkpoint-8"


def test_shortening_max_steps_is_a_difference():
    assert config_differences({"trainer": {"max_steps": 8}}, {"trainer": {"max_steps": 4}}) == [
        "trainer.max_steps (8 -> 4)"
    ]
    assert config_differences({"trainer": {"max_steps": 8}}, {"trainer": {"max_steps": 9}}) == []
    # The switches that started the run (train.overwrite moved an older one aside) may differ.
    assert config_differences({"train": {"overwrite": True}}, {"train": {"overwrite": False, "resume": True}}) == []
    # A type change is a difference even where values compare equal; an added key shows as unset before.
    assert config_differences({"seed": 1}, {"seed": True, "kl": {"beta": 0.1}}) == [
        "kl.beta (unset -> 0.1)",
        "seed (1 -> True)",
    ]


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda c: (c / "trainer_state.json").unlink(), "has no trainer_state.json"),
        (lambda c: (c / "trainer_state.json").write_text("{trunc"), "has an unreadable trainer_state.json (not JSON)"),
        (
            lambda c: (c / "model.safetensors").unlink(),
            "holds no model weights (model.safetensors or pytorch_model.bin)",
        ),
        (
            lambda c: (c / "model.safetensors").write_bytes((c / "model.safetensors").read_bytes()[:-3]),
            "has an unreadable model.safetensors (truncated or corrupt)",
        ),
        (lambda c: (c / "optimizer.pt").unlink(), "has no optimizer.pt (optimizer state)"),
        (lambda c: (c / "scheduler.pt").write_bytes(b"PK"), "has an unreadable scheduler.pt (truncated or corrupt)"),
    ],
    ids=["no-state", "bad-state", "no-weights", "truncated-weights", "no-optimizer", "bad-scheduler"],
)
def test_a_broken_latest_checkpoint_is_named_with_the_fix(tmp_path, damage, problem):
    run = write_run(tmp_path / "run")
    damage(run / "checkpoint-8")
    with pytest.raises(ConfigError) as caught:
        check_resume(run, composed(*RUN, "train.resume=true"))
    assert str(caught.value) == (
        f"train.resume=true but the checkpoint to resume, {run}/checkpoint-8, {problem}; "
        f"delete {run}/checkpoint-8 to resume from the checkpoint before it"
    )


def test_a_broken_only_checkpoint_says_to_start_over(cache_dir, tmp_path):
    run = write_run(tmp_path / "run", steps=(4,))
    (run / "checkpoint-4" / "trainer_state.json").unlink()
    before = snapshot(run)
    result = train_cli(cache_dir, f"hydra.run.dir={run}", *RUN, "train.resume=true")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"align-kit: config error: train.resume=true but the checkpoint to resume, {run}/checkpoint-4, has no "
        "trainer_state.json; it is the run's only checkpoint: start a new run folder"
    )
    assert snapshot(run) == before


def test_the_guard_moves_an_old_run_aside_before_hydra_writes(tmp_path, capsys):
    from align_kit.runs.run_folder import RunFolderGuard

    run = write_run(tmp_path / "run")
    before = snapshot(run)
    config = hydra_config(*RUN, f"hydra.run.dir={run}", "train.overwrite=true")
    RunFolderGuard().on_run_start(config=config)
    (backup,) = tmp_path.glob("run.replaced-*")
    # The old run moved whole (with the lock file its check took); the fresh folder holds only the new run's lock.
    assert {k: v for k, v in snapshot(backup).items() if k != ".align_kit.lock"} == before
    assert os.listdir(run) == [".align_kit.lock"] and held(run)
    RunFolderGuard().on_run_end(config=config)
    assert not held(run)
    assert capsys.readouterr().err.strip() == (
        f"align-kit: train.overwrite=true: moved the old run in {run} to {backup}"
    )
