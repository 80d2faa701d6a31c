"""align_kit.experiment.write_folders: where a shared file may point a run's writes (its folder, the sweep's, the
output root) and that the cache folder, which is read back, is the user's own. The folders below are written by hand
for a working folder /work/here; nothing is created."""

from __future__ import annotations

import pytest

from align_kit.core.errors import ConfigError
from align_kit.experiment.write_folders import check_write_folders

HERE = "/work/here"
SHIPPED = {  # conf/train.yaml's own values, unresolved
    "paths": {"output_root": "outputs", "cache_dir": "${oc.env:ALIGN_KIT_CACHE,${oc.env:HOME}/.cache/align_kit}"},
    "hydra": {
        "run": {"dir": "${paths.output_root}/runs/${now:%Y-%m-%d_%H-%M-%S}"},
        "sweep": {"dir": "${paths.output_root}/sweeps/${now:%Y-%m-%d_%H-%M-%S}"},
    },
}
RESOLVED = {  # what those resolve to, started in HERE
    "paths.output_root": f"{HERE}/outputs",
    "paths.cache_dir": "/home/me/.cache/align_kit",
    "hydra.run.dir": f"{HERE}/outputs/runs/2026-12-07_20-00-00",
    "hydra.sweep.dir": f"{HERE}/outputs/sweeps/2026-12-07_20-00-00",
}


def _with(key: str, value: str, base: dict | None = None) -> dict:
    """SHIPPED (or `base`) with `key` (dotted) set to `value`."""
    import copy

    tree = copy.deepcopy(base or SHIPPED)
    *parents, name = key.split(".")
    node = tree
    for part in parents:
        node = node.setdefault(part, {})
    node[name] = value
    return tree


def test_the_shipped_folders_pass():
    check_write_folders(SHIPPED, RESOLVED, [], HERE)


@pytest.mark.parametrize(
    ("key", "value", "folder"),
    [
        ("paths.output_root", "/home/me/.ssh", "/home/me/.ssh"),
        ("hydra.run.dir", "/home/me/.ssh", "/home/me/.ssh"),
        ("hydra.sweep.dir", "../../home/me/.ssh", "/home/me/.ssh"),
        ("hydra.run.dir", "outputs/../../elsewhere", "/work/elsewhere"),
        ("hydra.sweep.dir", "${paths.cache_dir}/sweeps", "/home/me/.cache/align_kit/sweeps"),
    ],
)
def test_a_file_pointing_writes_outside_the_working_folder_is_refused(key, value, folder):
    with pytest.raises(ConfigError) as refused:
        check_write_folders(_with(key, value), {**RESOLVED, key: folder}, [], HERE)
    assert str(refused.value) == (
        f"{key}={value} comes from a config file and puts the run's files at {folder}, outside the folder you started "
        f"in ({HERE}); a shared file may only write inside it: give a folder elsewhere on the command line "
        f"({key}=<folder>)"
    )


def test_a_file_may_choose_a_folder_inside_the_working_folder_or_the_typed_output_root():
    check_write_folders(
        _with("paths.output_root", "outputs/dapo"), {**RESOLVED, "paths.output_root": f"{HERE}/outputs/dapo"}, [], HERE
    )
    check_write_folders(_with("hydra.run.dir", "runs/x"), {**RESOLVED, "hydra.run.dir": f"{HERE}/runs/x"}, [], HERE)
    # under an output root the user typed, a recipe's own run folder is the user's too
    typed = _with("paths.output_root", "/scratch/me")
    tree = _with("hydra.run.dir", "${paths.output_root}/dapo", typed)
    folders = {**RESOLVED, "paths.output_root": "/scratch/me", "hydra.run.dir": "/scratch/me/dapo"}
    check_write_folders(tree, folders, ["paths.output_root=/scratch/me"], HERE)
    # beside the typed root is outside it
    beside = _with("hydra.run.dir", "${paths.output_root}/../other", typed)
    with pytest.raises(ConfigError, match=r"^hydra\.run\.dir=\$\{paths\.output_root\}/\.\./other comes from a config"):
        check_write_folders(
            beside, {**folders, "hydra.run.dir": "/scratch/other"}, ["paths.output_root=/scratch/me"], HERE
        )


def test_a_folder_typed_on_the_command_line_is_the_users_wherever_it_is():
    check_write_folders(
        _with("hydra.run.dir", "/data/runs/1"),
        {**RESOLVED, "hydra.run.dir": "/data/runs/1"},
        ["hydra.run.dir=/data/runs/1"],
        HERE,
    )
    check_write_folders(
        _with("paths.cache_dir", "/data/cache"),
        {**RESOLVED, "paths.cache_dir": "/data/cache"},
        ["paths.cache_dir=/data/cache"],
        HERE,
    )


def test_the_cache_folder_comes_only_from_the_command_line_or_the_shipped_config():
    # the cache is read back (warm-started models, converted GGUF files): even inside the working folder, a shared
    # file could hand over a cache of its own
    with pytest.raises(ConfigError) as refused:
        check_write_folders(
            _with("paths.cache_dir", "cache"), {**RESOLVED, "paths.cache_dir": f"{HERE}/cache"}, [], HERE
        )
    assert str(refused.value) == (
        "paths.cache_dir=cache comes from a config file; align_kit loads what the cache holds (warm-started models, "
        "converted GGUF files) as its own, so only you name it: on the command line (paths.cache_dir=<folder>) or "
        "with ALIGN_KIT_CACHE in the environment"
    )


def test_a_symlink_inside_the_working_folder_that_leads_out_is_outside(tmp_path):
    here, away = tmp_path.resolve() / "here", tmp_path.resolve() / "away"
    here.mkdir()
    away.mkdir()
    (here / "link").symlink_to(away)
    folders = {**RESOLVED, "paths.output_root": str(here / "link" / "runs")}
    with pytest.raises(ConfigError, match=f"puts the run's files at {away}/runs, outside the folder you started in"):
        check_write_folders(_with("paths.output_root", "link/runs"), folders, [], str(here))
