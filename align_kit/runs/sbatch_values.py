"""What a config's launcher settings may put into the batch script submitit writes for SLURM.

submitit writes each setting as an `#SBATCH --key=value` line, the `setup`/`teardown` lists as shell lines around the
job and `srun_args` onto the srun line, none of them quoted; the script runs as the user on the cluster. So:
- no string of `hydra.launcher` (a key or a value, at any depth) holds a control character: a newline in a partition
  or in a key of `additional_parameters` would end its `#SBATCH` line and run the rest as shell on the node;
- the settings that are shell or free-form sbatch/srun options (SHELL_KEYS) come only from the site file (SITE_FILE
  in a config folder, as conf/hydra/launcher/slurm.yaml reads it) or the command line, where the user sees them;
  from a recipe, a sweep file or another preset, refused;
- `submitit_folder`, where submitit pickles each job and the job unpickles it from, lies inside the sweep folder.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from align_kit.core.errors import ConfigError
from align_kit.experiment.opt_ins import command_line_values, given_value
from align_kit.experiment.schema import show
from align_kit.experiment.typed_overrides import handing_over, typed

SITE_FILE = "hydra/launcher/site/slurm_local.yaml"
# Launcher settings that reach the script as shell or as options that run programs, set the job's environment or
# move its files: what each one is, for the refusal (`teardown` and `srun_args` are submitit's, which newer
# hydra-submitit-launcher configs pass through).
SHELL_KEYS = {
    "setup": "shell lines run before each job",
    "teardown": "shell lines run after each job",
    "srun_args": "srun's arguments (they can run a prolog or set the job's environment)",
    "additional_parameters": "extra #SBATCH options (they can set the job's environment, files and folder)",
}
# Settings whose entries are checked one by one (a recipe may not add an entry beside the command line's).
BY_ENTRY = ("additional_parameters",)


def check_launcher_values(hydra: DictConfig, launcher: Mapping) -> None:
    """The resolved `hydra.launcher` (`launcher`) of the composed `hydra` node; one ConfigError line naming the key."""
    check_control_characters("hydra.launcher", launcher)
    command_line = command_line_values(typed(hydra.overrides.hydra))  # a handed-over manifest's lines: a file's
    site = [] if handing_over() else _site_settings(hydra)  # a handed-over manifest named the config folder
    for key, what in SHELL_KEYS.items():
        value = launcher.get(key)
        if not value:
            continue
        entries = value.items() if key in BY_ENTRY and isinstance(value, Mapping) else [(None, value)]
        for entry, item in entries:
            path = f"hydra.launcher.{key}" + (f".{entry}" if entry is not None else "")
            # typed: the value the command line gives it (a mapping typed whole is merged with the files', so each
            # entry is looked up in what was typed)
            if given_value(command_line, path) == item or _in_site(site, key, entry, item):
                continue
            example = f"+hydra.launcher.{key}.NAME=VALUE" if key in BY_ENTRY else f"hydra.launcher.{key}=[...]"
            raise ConfigError(
                f"{path}={show(item)}: {what} come only from {SITE_FILE} or the command line ({example}), not from a "
                "recipe, sweep or other preset"
            )
    check_submitit_folder(launcher.get("submitit_folder"), str(hydra.sweep.dir))


def check_control_characters(key: str, value: Any) -> None:
    """No key or string value in `value` holds a control character (a newline, a carriage return, NUL, ...)."""
    if isinstance(value, Mapping):
        for name, item in value.items():
            if has_control_character(str(name)):
                raise ConfigError(
                    f"{key} has a key {str(name)!r} with a control character; it would end its line of the batch "
                    "script and run the rest as shell: write it on one line"
                )
            check_control_characters(f"{key}.{name}", item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_control_characters(f"{key}[{index}]", item)
    elif isinstance(value, str) and has_control_character(value):
        raise ConfigError(
            f"{key}={value!r}: a control character (a newline, a carriage return, ...) would end its line of the "
            "batch script and run the rest as shell: write the value on one line"
        )


def has_control_character(text: str) -> bool:
    """Whether `text` holds a character of Unicode's control category (C0, DEL, C1: newline, tab, NUL, ...)."""
    return any(unicodedata.category(char) == "Cc" for char in text)


def check_submitit_folder(folder: Any, sweep_dir: str) -> None:
    """submitit's folder (its pickled jobs and logs) lies inside the sweep folder."""
    if folder is None:
        return
    sweep = os.path.normpath(os.path.abspath(sweep_dir))
    inside = isinstance(folder, str) and folder.strip() != ""
    if inside:
        target = os.path.normpath(os.path.abspath(folder))
        inside = target != sweep and Path(sweep) in Path(target).parents
    if not inside:
        raise ConfigError(
            f"hydra.launcher.submitit_folder={show(folder)}: submitit keeps the jobs' pickles there and each job "
            f"loads its own from it; expected a folder inside the sweep folder ({sweep}), e.g. the default "
            "${hydra.sweep.dir}/.submitit/%j"
        )


def _site_settings(hydra: DictConfig) -> list[DictConfig]:
    """The site files among the composition's config folders."""
    found = []
    for source in hydra.runtime.config_sources:
        site = Path(str(source.path)) / SITE_FILE
        if source.schema == "file" and site.is_file():
            found.append(OmegaConf.load(site))
    return found


def _in_site(sites: list[DictConfig], key: str, entry: str | None, value: Any) -> bool:
    """`value` is what a site file says for `key` (its `entry`, for a setting checked by entry)."""
    for site in sites:
        written = site.get(key)
        if entry is not None:
            written = written.get(entry) if isinstance(written, Mapping) else None
        if written is not None and OmegaConf.to_container(OmegaConf.create({"v": written}))["v"] == value:
            return True
    return False
