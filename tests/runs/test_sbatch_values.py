"""align_kit.runs.sbatch_values: what a config's launcher settings may put into SLURM's batch script."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from align_kit.runs.sbatch_values import check_control_characters, check_launcher_values, check_submitit_folder


@pytest.mark.parametrize("text", ["gpu\nhostname", "gpu\rhostname", "gpu\x00", "gpu\x7f", "gpu\x85", "a\tb"])
def test_a_control_character_in_a_value_is_refused_naming_its_key(text):
    with pytest.raises(ConfigError) as refused:
        check_control_characters("hydra.launcher", {"partition": "ok", "qos": text})
    assert str(refused.value).startswith(f"hydra.launcher.qos={text!r}: a control character")


def test_a_control_character_in_a_key_or_a_list_entry_is_refused():
    with pytest.raises(ConfigError, match=r"^hydra.launcher.additional_parameters has a key 'a\\nb'"):
        check_control_characters("hydra.launcher", {"additional_parameters": {"a\nb": "x"}})
    with pytest.raises(ConfigError, match=r"^hydra.launcher.setup\[1\]='echo\\nx'"):
        check_control_characters("hydra.launcher", {"setup": ["ok", "echo\nx"]})


def test_printable_values_pass_whatever_their_script():
    check_control_characters("hydra.launcher", {"comment": "essai numéro 2 — 日本", "nodes": 1, "x": None, "l": [1]})


@pytest.mark.parametrize(
    "folder", ["sweep/.submitit/%j", "sweep/a/../.submitit", "sweep/./x"], ids=["default", "dotdot inside", "dot"]
)
def test_submitit_folder_inside_the_sweep_passes(folder, tmp_path):
    check_submitit_folder(str(tmp_path / folder), str(tmp_path / "sweep"))


@pytest.mark.parametrize(
    "folder",
    ["sweep", "elsewhere/%j", "sweep/../elsewhere", "sweep_other/x", "", "  "],
    ids=["the sweep itself", "outside", "dotdot out", "name prefix", "empty", "blank"],
)
def test_submitit_folder_elsewhere_is_refused(folder, tmp_path):
    value = str(tmp_path / folder) if folder.strip() else folder
    with pytest.raises(ConfigError, match=r"^hydra.launcher.submitit_folder=.*expected a folder inside the sweep"):
        check_submitit_folder(value, str(tmp_path / "sweep"))


def test_a_relative_submitit_folder_is_read_from_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check_submitit_folder("outputs/s/.submitit/%j", str(tmp_path / "outputs" / "s"))
    with pytest.raises(ConfigError):
        check_submitit_folder("outputs/other/%j", str(tmp_path / "outputs" / "s"))


def _checked(overrides: list[str], config_dir: Path | None = None) -> None:
    """check_launcher_values on the composed tree, as the pre-flight calls it."""
    compose(["hydra/launcher=slurm", *overrides], config_dir=str(config_dir) if config_dir else None)
    hydra = HydraConfig.get()
    check_launcher_values(hydra, OmegaConf.to_container(hydra.launcher, resolve=True))


def _folder(root: Path, site: str | None, recipe: str | None) -> Path:
    if site is not None:
        (root / "hydra" / "launcher" / "site").mkdir(parents=True)
        (root / "hydra" / "launcher" / "site" / "slurm_local.yaml").write_text(site)
    if recipe is not None:
        (root / "recipe").mkdir(parents=True)
        (root / "recipe" / "x.yaml").write_text(f"# @package _global_\nhydra:\n  launcher:\n{recipe}")
    return root


def test_sbatch_options_come_entry_by_entry_from_the_site_file_or_the_command_line(tmp_path):
    site = _folder(tmp_path / "site", "additional_parameters: {mail-type: END}\n", None)
    _checked([], site)
    _checked(["+hydra.launcher.additional_parameters.mail-user=me@example.org"], site)
    _checked(["+hydra.launcher.additional_parameters={export: NONE}"])
    shared = _folder(tmp_path / "shared", None, "    additional_parameters: {export: 'ALL,X=1'}\n")
    with pytest.raises(ConfigError, match=r"^hydra.launcher.additional_parameters.export=ALL,X=1: extra #SBATCH"):
        _checked(["recipe=x", "+hydra.launcher.additional_parameters.mail-type=END"], shared)
    # a mapping typed whole is merged with the file's: the file's entry is still the file's
    with pytest.raises(ConfigError, match=r"^hydra.launcher.additional_parameters.export=ALL,X=1: extra #SBATCH"):
        _checked(["recipe=x", "++hydra.launcher.additional_parameters={mail-type: END}"], shared)
    # the same entry typed on the command line replaces the file's: the user's own
    _checked(["recipe=x", "hydra.launcher.additional_parameters.export=NONE"], shared)


def test_a_recipe_cannot_pass_as_the_site_file_with_another_value(tmp_path):
    both = _folder(
        tmp_path / "both", "additional_parameters: {mail-type: END}\n", "    additional_parameters: {mail-type: ALL}\n"
    )
    with pytest.raises(ConfigError, match=r"^hydra.launcher.additional_parameters.mail-type=ALL"):
        _checked(["recipe=x"], both)


def test_a_handed_over_sweeps_site_file_is_not_the_users(tmp_path):
    """A sweep folder handed over with its manifest can bring its --config-dir, site file included: while the
    resume's handed-over lines are set aside (align_kit.experiment.typed_overrides), no site file counts as the
    user's, so its shell lines are refused until typed on the resume line."""
    from align_kit.experiment.typed_overrides import handed_over

    site = _folder(tmp_path / "site", "setup: [touch /tmp/made_by_a_handed_over_site]\n", None)
    _checked([], site)  # the user's own --config-dir
    with handed_over({"seed"}), pytest.raises(ConfigError, match=r'^hydra\.launcher\.setup=\["touch /tmp/made_by_a'):
        _checked([], site)
    with handed_over({"seed"}):
        _checked(["hydra.launcher.setup=[touch /tmp/made_by_a_handed_over_site]"], site)  # typed again: the user's
