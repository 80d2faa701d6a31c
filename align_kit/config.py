"""Hydra plumbing shared by the entry point, tests and benchmarks (no torch, no TRL)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf, read_write

from align_kit import CONF_DIR

CONFIG_NAME = "train"
# Groups in the defaults list that are not one component node each.
NOT_COMPONENT_GROUPS = ("reward", "trainer", "monitor", "recipe", "sweep")


def component_groups() -> tuple[str, ...]:
    """The groups of conf/train.yaml's defaults list that hold one component node, in its order (the
    order GRPOConfig fields merge and trainer hooks run). A group added there (with its node's YAML)
    is a component everywhere: plan, schema, run names."""
    defaults = OmegaConf.load(CONF_DIR / f"{CONFIG_NAME}.yaml").defaults
    groups = [next(iter(entry)) for entry in defaults if isinstance(entry, DictConfig)]
    return tuple(group for group in groups if group not in NOT_COMPONENT_GROUPS)


_registered = False


def register_open_trainer_node() -> None:
    """Let `trainer.<any GRPOConfig field>=...` work without `+`.

    Hydra sets struct mode on the composed root before applying overrides; a child whose own
    flag is False stays open. Every other group stays strict, and `trainer` keys are checked
    against GRPOConfig's real fields by `align_kit.plan`."""
    global _registered
    if _registered:
        return
    from hydra.core.config_store import ConfigStore

    node = OmegaConf.create({"trainer": {}})
    OmegaConf.set_struct(node.trainer, False)
    ConfigStore.instance().store(name="_open_trainer", node=node)
    _registered = True


def compose(overrides: list[str] | None = None, job_num: int | None = None) -> DictConfig:
    """The config `align-kit train` would run with these overrides, HydraConfig set as in a job
    (`job_num`: the job's index in a multirun, which names its folder)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    register_open_trainer_node()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = hydra_compose(config_name=CONFIG_NAME, overrides=overrides or [], return_hydra_config=True)
    if job_num is not None:
        with read_write(cfg.hydra.job):
            cfg.hydra.job.num = job_num
    HydraConfig.instance().set_config(cfg)
    with_hydra = cfg
    cfg = OmegaConf.masked_copy(with_hydra, [k for k in with_hydra if k != "hydra"])
    OmegaConf.set_struct(cfg, True)
    return cfg


def override_parser():
    """Hydra's override parser with a config loader, so `glob(...)` sweeps can list a group's nodes as
    Hydra's own sweeper does."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.core.override_parser.overrides_parser import OverridesParser

    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(str(CONF_DIR)))
    return OverridesParser.create(config_loader=loader)
