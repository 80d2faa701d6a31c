"""align_kit.runs.manifest_trust: a manifest is this account's own only where its launch is recorded in this
account's cache; a manifest's jobs and folders are held to its sweep's."""

from __future__ import annotations

import json

import pytest

from align_kit.core.errors import ConfigError
from align_kit.experiment.typed_overrides import handed_over, typed
from align_kit.runs.manifest_trust import check_job_folders, check_jobs_made, launched_here, record_launch

MANIFEST = {"task_overrides": ["sweep=overlong", "seed=1,2"], "hydra_overrides": [], "config_dir": None, "jobs": []}


def test_a_launch_recorded_in_this_accounts_cache_is_its_own_and_any_change_is_not(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGN_KIT_CACHE", str(tmp_path / "mine"))
    assert not launched_here(MANIFEST)
    record_launch(MANIFEST)
    assert launched_here(json.loads(json.dumps(MANIFEST)))  # as read back from the file
    for changed in (
        {**MANIFEST, "task_overrides": [*MANIFEST["task_overrides"], "trainer.push_to_hub=true"]},
        {**MANIFEST, "hydra_overrides": ["hydra.launcher.setup=[touch x]"]},
        {**MANIFEST, "config_dir": "/somewhere/else"},
    ):
        assert not launched_here(changed)
    monkeypatch.setenv("ALIGN_KIT_CACHE", str(tmp_path / "another_account"))
    assert not launched_here(MANIFEST)


def test_job_folders_must_lie_inside_the_sweep_folder(tmp_path):
    sweep = tmp_path / "sweep"
    (sweep / "0").mkdir(parents=True)
    (tmp_path / "away").mkdir()
    (sweep / "1").symlink_to(tmp_path / "away")
    jobs = [{"folder": str(sweep / "0")}, {"folder": None}, {"folder": "0"}]
    check_job_folders(sweep, {"jobs": jobs})
    for folder, shown in (("/etc", "/etc"), (str(sweep / "1"), str(sweep / "1")), ("../away", "../away")):
        with pytest.raises(ConfigError) as refused:
            check_job_folders(sweep, {"jobs": [{"folder": None}, {"folder": folder}]})
        assert str(refused.value) == (
            f"{sweep}/sweep_manifest.json: jobs[1].folder={shown} is not inside the sweep folder ({sweep.resolve()}); "
            "a manifest names only its own jobs' folders: restore it, or start the sweep in a new folder"
        )


def test_jobs_must_be_those_the_sweep_makes_in_order(tmp_path):
    made = [("seed=1",), ("seed=2",)]
    check_jobs_made(tmp_path, {"jobs": [{"overrides": ["seed=1"]}, {"overrides": ["seed=2"]}]}, made)
    cases = [
        ([["seed=2"], ["seed=1"]], "lists job 0 as seed=2, but its sweep makes seed=1"),
        ([["seed=1"]], "lists job 1 as (none), but its sweep makes seed=2"),
        ([["seed=1"], ["seed=2"], ["seed=3", "trainer.push_to_hub=true"]], "lists job 2 as seed=3 trainer.push_to_hub"),
    ]
    for jobs, fragment in cases:
        with pytest.raises(
            ConfigError,
            match="^" + str(tmp_path / "sweep_manifest.json") + " " + fragment.replace("(", r"\(").replace(")", r"\)"),
        ):
            check_jobs_made(tmp_path, {"jobs": [{"overrides": job} for job in jobs]}, made)


def test_handed_over_keys_are_not_typed_in_any_spelling_and_only_inside_the_block():
    lines = ["seed=1", "trainer.push_to_hub=True", "+trainer.hub_model_id=x", "hydra.sweep.dir=/s"]
    with handed_over({"trainer.push_to_hub", "trainer.hub_model_id", "seed"}):
        assert typed(lines) == ["hydra.sweep.dir=/s"]
    assert typed(lines) == lines


def test_a_cache_that_cannot_be_written_leaves_no_record_and_no_error(tmp_path, monkeypatch):
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv("ALIGN_KIT_CACHE", str(tmp_path / "a_file"))  # no folder can be made under a file
    record_launch(MANIFEST)
    assert not launched_here(MANIFEST)
