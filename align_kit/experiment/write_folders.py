"""Where a shared file may point a run's writes: inside the folder align-kit was started in, and nowhere else.

`hydra.run.dir`, `hydra.sweep.dir` and `paths.output_root` decide where a run (or a sweep) creates its folder and
writes its checkpoints, logs and configs; from a recipe, a sweep file or a `--config-dir` file they could point those
writes anywhere the user may write (`~/.ssh`, another project, a shared mount). Their value is the user's where the
command line gives it (or conf/train.yaml's own, which lies in the working folder); from a file, the folder it
resolves to, symlinks followed, must lie inside the working folder or inside an output root the command line typed.
`paths.cache_dir` is stricter: align_kit loads what the cache holds (warm-started models, converted GGUF files) as its
own, so a file could hand over a cache of its own even inside the working folder; it is the command line's or
conf/train.yaml's (ALIGN_KIT_CACHE) only, as the switches of align_kit.experiment.opt_ins are. The folders inside the
run or sweep folder (`hydra.sweep.subdir`, `hydra.output_subdir`, submitit's folder, log files) are checked where
Hydra's tree is (align_kit.runs.hydra_tree, align_kit.runs.sbatch_values).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache

from omegaconf import OmegaConf

from align_kit import CONF_DIR
from align_kit.core.errors import ConfigError
from align_kit.experiment.opt_ins import command_line_values, given_value

# Keys that choose where a run writes, and the one under which a typed value holds the others.
WRITE_FOLDERS = ("paths.output_root", "hydra.run.dir", "hydra.sweep.dir")
OUTPUT_ROOT = "paths.output_root"
CACHE_FOLDER = "paths.cache_dir"


@cache  # the package's own file: read once per process
def shipped_folders() -> dict[str, str]:
    """conf/train.yaml's own (unresolved) value of each key of WRITE_FOLDERS and CACHE_FOLDER."""
    body = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "train.yaml"), resolve=False)
    return {key: _at(body, key) for key in (*WRITE_FOLDERS, CACHE_FOLDER)}


def check_write_folders(raw: Mapping, folders: Mapping[str, str], command_line: list[str], working: str) -> None:
    """`raw`: the unresolved composed tree (its `hydra` node included); `folders`: what each key of WRITE_FOLDERS and
    CACHE_FOLDER resolves to; `command_line`: the command's overrides; `working`: the folder it started in. One
    ConfigError line naming the first key a file points outside, or the cache folder a file names."""
    named = command_line_values(command_line)
    shipped = shipped_folders()

    def users(key: str) -> bool:
        value = _at(raw, key)
        return value == shipped[key] or (value is not None and given_value(named, key) == value)

    if not users(CACHE_FOLDER):
        raise ConfigError(
            f"{CACHE_FOLDER}={_at(raw, CACHE_FOLDER)} comes from a config file; align_kit loads what the cache holds "
            "(warm-started models, converted GGUF files) as its own, so only you name it: on the command line "
            f"({CACHE_FOLDER}=<folder>) or with ALIGN_KIT_CACHE in the environment"
        )
    roots = [os.path.realpath(working)]
    if given_value(named, OUTPUT_ROOT) is not None and users(OUTPUT_ROOT):
        roots.append(os.path.realpath(folders[OUTPUT_ROOT]))
    for key in WRITE_FOLDERS:
        if users(key):
            continue
        target = os.path.realpath(os.path.join(working, folders[key]))
        if not any(target == root or target.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
            raise ConfigError(
                f"{key}={_at(raw, key)} comes from a config file and puts the run's files at {target}, outside the "
                f"folder you started in ({roots[0]}); a shared file may only write inside it: give a folder elsewhere "
                f"on the command line ({key}=<folder>)"
            )


def _at(data, key: str):
    for part in key.split("."):
        data = data.get(part) if isinstance(data, Mapping) else None
    return data
