"""Hydra plumbing shared by the entry point, tests and benchmarks (no torch, no TRL)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache

from omegaconf import DictConfig, OmegaConf, read_write

from align_kit import CONF_DIR

CONFIG_NAME = "train"
JOB_NAME = "train"  # hydra.job.name of `align-kit train` (Hydra names a job after the entry's file, train.py)
# Groups in the defaults list that are not one component node each.
NOT_COMPONENT_GROUPS = ("reward", "trainer", "monitor", "recipe", "sweep")
RUN_KEYS = ("seed", "train", "paths")  # top-level keys of the run itself, not of a node


@cache  # conf/train.yaml is the package's own: read once per process
def component_groups() -> tuple[str, ...]:
    """The groups of conf/train.yaml's defaults list that hold one component node, in its order (the
    order GRPOConfig fields merge and trainer hooks run). A group added there (with its node's YAML)
    is a component everywhere: plan, schema, run names."""
    defaults = OmegaConf.load(CONF_DIR / f"{CONFIG_NAME}.yaml").defaults
    groups = [next(iter(entry)) for entry in defaults if isinstance(entry, DictConfig)]
    return tuple(group for group in groups if group not in NOT_COMPONENT_GROUPS)


def added_groups(config: Mapping) -> tuple[str, ...]:
    """Component groups a config adds beside conf/train.yaml's, by a defaults line of its own (`+probe=length` on
    the command line, `- /probe: length` in a recipe): top-level nodes with a `_target_`, in the config's order.
    Their hooks run after the shipped groups'; the schema admits only your own classes there."""
    taken = {*component_groups(), *NOT_COMPONENT_GROUPS, *RUN_KEYS, "hydra"}
    return tuple(
        key for key, node in config.items() if key not in taken and isinstance(node, Mapping) and "_target_" in node
    )


_registered = False


def register_open_trainer_node() -> None:
    """Let `trainer.<any GRPOConfig field>=...` work without `+`.

    Hydra sets struct mode on the composed root before applying overrides; a child whose own
    flag is False stays open. Every other group stays strict, and `trainer` keys are checked
    against GRPOConfig's real fields by `align_kit.experiment.plan`."""
    global _registered
    if _registered:
        return
    from hydra.core.config_store import ConfigStore

    node = OmegaConf.create({"trainer": {}})
    OmegaConf.set_struct(node.trainer, False)
    ConfigStore.instance().store(name="_open_trainer", node=node)
    _registered = True


def search_path(config_dir: str | None = None):
    """The config search path of align_kit's app, as Hydra's entry point builds it: Hydra's own configs,
    conf/, then a `--config-dir` folder (searched after conf/, so it adds configs and replaces none)."""
    from hydra.core.config_search_path import SearchPathQuery

    from align_kit.experiment.hydra_private import config_search_path

    path = config_search_path(str(CONF_DIR))
    if config_dir is not None:
        path.prepend("command-line", f"file://{os.path.abspath(config_dir)}", anchor=SearchPathQuery(provider="schema"))
    return path


def compose(
    overrides: list[str] | None = None, job_num: int | None = None, config_dir: str | None = None
) -> DictConfig:
    """The config `align-kit train [--config-dir config_dir] <overrides>` would run with, HydraConfig set as in
    a job (`job_num`: the job's index in a multirun, which names its folder; `hydra.runtime.output_dir` is
    that folder, as Hydra sets it when the job starts)."""
    return job_config(compose_with_hydra(overrides or [], config_dir), job_num)


def compose_with_hydra(overrides: list[str], config_dir: str | None = None) -> DictConfig:
    """Hydra's own composition of `overrides`: the whole tree, its `hydra` node included, nothing resolved yet."""
    from hydra import compose as hydra_compose
    from hydra import version
    from hydra.core.global_hydra import GlobalHydra

    from align_kit.experiment.hydra_private import initialize_app

    register_open_trainer_node()
    GlobalHydra.instance().clear()
    version.setbase("1.3")
    initialize_app(JOB_NAME, search_path(config_dir))
    try:
        return hydra_compose(config_name=CONFIG_NAME, overrides=overrides, return_hydra_config=True)
    except KeyError as error:
        raise unset_env_copy(error) from None
    finally:
        GlobalHydra.instance().clear()


def unset_env_copy(error: KeyError) -> Exception:
    """Hydra copies each name of `hydra.job.env_copy` from os.environ while composing, and a name not set there ends
    in its KeyError: that one becomes a ConfigError line; any other KeyError is returned as it is."""
    import traceback

    from align_kit.core.errors import ConfigError

    frames = traceback.extract_tb(error.__traceback__)
    name = error.args[0] if error.args else None
    if not any(frame.name == "_load_configuration_impl" for frame in frames) or name in os.environ:
        return error
    return ConfigError(
        f"hydra.job.env_copy names {name}, which is not set in the environment align-kit starts from; set it there "
        "or remove it from hydra.job.env_copy"
    )


def job_config(with_hydra: DictConfig, job_num: int | None = None) -> DictConfig:
    """The job's config from its composed tree (`with_hydra`): the job started (start_job), the `hydra` node left
    out."""
    start_job(with_hydra, job_num)
    return without_hydra(with_hydra)


def start_job(with_hydra: DictConfig, job_num: int | None = None, own: bool = False) -> None:
    """Set `hydra.job.num` and `hydra.runtime.output_dir` as Hydra sets them when the job starts, and make the tree
    HydraConfig's (`own`: a tree composed for this job alone, held as it is instead of copied)."""
    from hydra.core.hydra_config import HydraConfig

    from align_kit.experiment.hydra_private import hold_hydra_config

    with read_write(with_hydra.hydra):
        if job_num is not None:
            with_hydra.hydra.job.num = job_num
        hydra = with_hydra.hydra
        folder = hydra.run.dir if job_num is None else f"{hydra.sweep.dir}/{hydra.sweep.subdir}"
        hydra.runtime.output_dir = os.path.abspath(str(folder))
    if own:
        hold_hydra_config(with_hydra)
    else:
        HydraConfig.instance().set_config(with_hydra)


def without_hydra(with_hydra: DictConfig) -> DictConfig:
    """A copy of the composed tree without its `hydra` node, struct as Hydra makes the root."""
    cfg = OmegaConf.masked_copy(with_hydra, [k for k in with_hydra if k != "hydra"])
    OmegaConf.set_struct(cfg, True)
    return cfg


def override_parser(config_dir: str | None = None):
    """Hydra's override parser with a config loader, so `glob(...)` sweeps can list a group's nodes as
    Hydra's own sweeper does."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from align_kit.experiment.hydra_private import config_loader

    return OverridesParser.create(config_loader=config_loader(search_path(config_dir)))
