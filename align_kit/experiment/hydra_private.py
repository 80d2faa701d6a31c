"""The only module that touches Hydra's private API (`hydra._internal`): every other module goes through it.

Checked on hydra-core 1.3.8. Hydra has no public way to do what these do, and a Hydra upgrade may move or change any
of them, so each private name is used here once, behind a function named for what align_kit needs:
- `hydra._internal.utils.create_config_search_path`: the config search path Hydra's entry point builds for an
  app (`config_search_path`);
- `hydra._internal.hydra.Hydra.create_main_hydra2`: Hydra initialised with that path, as its entry point does
  (`initialize_app`);
- `hydra._internal.config_loader_impl.ConfigLoaderImpl`: a config loader over that path, so an override parser
  can list a group's nodes for `glob(...)` (`config_loader`); its repository of a job's configs, with the job's
  `hydra.searchpath` applied (`job_repository`), its application of config-value overrides to a composed config
  (`apply_value_overrides`), and `get_overrides_dirname` beside it (`override_dirname`): what a shared composition
  redoes per job;
- `hydra._internal.defaults_list.Overrides`: Hydra's split of a job's overrides into those that choose the defaults
  list and those applied to the composed config (`value_overrides`);
- `hydra._internal.core_plugins.basic_sweeper.BasicSweeper.split_arguments`: the jobs of a multirun, numbered as
  the basic sweeper numbers them (`basic_sweep`);
- how `hydra.core.hydra_config.HydraConfig.set_config` holds the job's tree (a root holding the `hydra` node, read-only,
  whose parent is the whole tree), to hold a job's own tree without copying its `hydra` node (`hold_hydra_config`);
- `hydra._internal.utils.get_args_parser`: Hydra's command-line parser (`command_line_parser`);
- `hydra._internal.callbacks.Callbacks`, and the name `Callbacks` in `hydra._internal.hydra` that `Hydra.run` and
  `Hydra.multirun` build a job's callbacks with (`Callbacks`, `install_app_callbacks`);
- the `_target_` names of Hydra's basic launcher and basic sweeper, as Hydra's own configs write them
  (`BASIC_LAUNCHER`, `BASIC_SWEEPER`).
"""

from __future__ import annotations

from typing import Any

import hydra._internal.hydra as hydra_app
from hydra._internal.callbacks import Callbacks
from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra._internal.defaults_list import Overrides
from hydra._internal.utils import create_config_search_path, get_args_parser

BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def config_search_path(conf_dir: str) -> Any:
    """The search path of an app whose primary configs are in `conf_dir`: Hydra's own configs, the search-path
    plugins' entries, then `conf_dir`."""
    return create_config_search_path(conf_dir)


def initialize_app(task_name: str, search_path: Any) -> None:
    """Initialise Hydra (its GlobalHydra) as its entry point does for the job `task_name`, so `hydra.compose`
    composes what that job would run."""
    hydra_app.Hydra.create_main_hydra2(task_name=task_name, config_search_path=search_path)


def config_loader(search_path: Any) -> Any:
    return ConfigLoaderImpl(config_search_path=search_path)


def job_repository(search_path: Any, config_name: str, overrides: list[str]) -> Any:
    """The config repository Hydra composes `config_name` with `overrides` from (the search path with their
    `hydra.searchpath`, as Hydra's loader extends it)."""
    return ConfigLoaderImpl(config_search_path=search_path)._parse_overrides_and_create_caching_repo(
        config_name, overrides
    )[1]


def value_overrides(repository: Any, overrides: list) -> list:
    """The parsed `overrides` Hydra applies to the composed config (`key=value`, `+key`, `~key` of a key that is no
    config group in `repository`), in their order: every other one chooses the defaults list."""
    return Overrides(repository, overrides).config_overrides


def apply_value_overrides(overrides: list, cfg: Any) -> None:
    """Apply config-value overrides (from `value_overrides`) to a composed config, as Hydra's loader does."""
    ConfigLoaderImpl._apply_overrides_to_config(overrides, cfg)


def override_dirname(overrides: list, settings: Any) -> str:
    """`hydra.job.override_dirname` of a job's task overrides (parsed), with `hydra.job.config.override_dirname`'s
    `settings`."""
    return get_overrides_dirname(
        overrides=overrides, kv_sep=settings.kv_sep, item_sep=settings.item_sep, exclude_keys=settings.exclude_keys
    )


def hold_hydra_config(with_hydra: Any) -> None:
    """`HydraConfig.instance().set_config(with_hydra)` without its copy of the `hydra` node (a third of a shared
    composition's cost per job): for a tree composed for this job alone, which nothing else reads or changes."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig, OmegaConf, flag_override

    OmegaConf.set_readonly(with_hydra.hydra, True)
    held = DictConfig({})
    with flag_override(held, "no_deepcopy_set_nodes", True):
        held["hydra"] = with_hydra._get_node("hydra")
    held.hydra._set_parent(with_hydra)  # its interpolations read the job's config, as set_config's copy does
    HydraConfig.instance().cfg = held


def basic_sweep(overrides: list) -> list[list[str]]:
    """Each job's overrides, in the order Hydra's basic sweeper launches and numbers them (`hydra.job.num`), from
    `overrides` as Hydra's OverridesParser parsed them (the basic sweeper parses its `hydra.sweeper.params` as
    `key=value` first, then the command line's): the cross product, in one batch."""
    return [job for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]


def command_line_parser() -> Any:
    """Hydra's argparse parser of an app's command line (its flags, and the overrides)."""
    return get_args_parser()


def install_app_callbacks(callbacks: type[Callbacks]) -> None:
    """Make `Hydra.run` and `Hydra.multirun` build a job's callbacks with `callbacks` (a `Callbacks` subclass),
    instead of from `hydra.callbacks` alone: they construct the name `Callbacks` of `hydra._internal.hydra`."""
    hydra_app.Callbacks = callbacks
