"""What a config may set in Hydra's own tree (`hydra.*`), and the Hydra callbacks align_kit always installs.

Hydra builds its launcher, sweeper and callbacks from `hydra.*` and configures Python logging from
`hydra.hydra_logging` and `hydra.job_logging` (a handler's `class`, a `()` factory, `ext://` names are all
imported and called), so a config that may build only components could otherwise run any function from
there. The pre-flight checks the composed tree before Hydra acts on it:
- `hydra.launcher` and `hydra.sweeper` name Hydra's own plugins that align_kit ships configs for;
- `hydra.callbacks` may hold only classes of the user's packages (`train.allowed_targets`): align_kit's own
  callbacks are not read from the config at all, `install_callbacks` makes Hydra's app build them first;
- logging uses a small set of handler classes, no factories, and a log file only inside the run folder;
- `hydra.job.name` and `hydra.output_subdir` keep the job's files in the run folder, `hydra.job.chdir` is
  off (paths in the config are read from the folder the command starts in), `hydra.searchpath` lists
  folders only, `hydra.job.env_set` sets only the variables align_kit.runs.job_environment lists;
- the launcher's values reach SLURM's batch script only as align_kit.runs.sbatch_values allows;
- a node inside the launcher, sweeper or a callback follows align_kit.experiment.schema's `_target_` rule.
The rest of `hydra.*` is data Hydra reads (folders, overrides, help texts), never built.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from align_kit.core.errors import ConfigError
from align_kit.experiment.hydra_private import BASIC_LAUNCHER, BASIC_SWEEPER, Callbacks, install_app_callbacks
from align_kit.experiment.schema import buildable_class, check_targets, check_written_targets, resolved, show
from align_kit.runs.job_environment import check_job_environment
from align_kit.runs.sbatch_values import check_launcher_values, has_control_character

# The plugins behind hydra/launcher=basic|joblib|submitit_local|slurm and Hydra's basic sweeper.
HYDRA_PLUGINS = {
    "launcher": (
        BASIC_LAUNCHER,
        "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
        "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
        "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
        "hydra_plugins.align_kit_slurm.slurm_launcher.SlurmLauncher",  # hydra/launcher=slurm: the one above, resumable
    ),
    "sweeper": (BASIC_SWEEPER,),
}
# Logging: what Hydra's own logging configs use (the job's console and log file, Hydra's console).
HANDLER_CLASSES = ("logging.StreamHandler", "logging.FileHandler", "logging.NullHandler")
FORMATTER_CLASSES = ("logging.Formatter",)
STREAMS = ("ext://sys.stdout", "ext://sys.stderr")
# A file name the file system takes with ".log" appended (255 bytes on the common ones).
JOB_NAME_BYTES = 200
OWN_CALLBACKS = "align_kit's own Hydra callbacks (the run-folder guard, the sweep summary)"


def check_hydra_overrides(overrides: list[str]) -> None:
    """What the command line may not ask of Hydra's tree, refused before anything composes: removing
    callbacks, and search-path entries that are not folders (Hydra would import a `pkg://` package)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for override in OverridesParser.create().parse_overrides(overrides):
        key = override.key_or_group
        if key.startswith(("hydra.callbacks", "hydra/callbacks")) and override.is_delete():
            raise ConfigError(f"{override.input_line}: {OWN_CALLBACKS} always run; a config cannot remove them")
        if key == "hydra.searchpath":
            entries = override.value()
            if not isinstance(entries, list):
                raise ConfigError(
                    f"{override.input_line}: expected a list of folders, e.g. hydra.searchpath=[file://DIR]"
                )
            for entry in entries:
                check_search_folder(f"hydra.searchpath entry {entry}", entry)


def check_search_folder(what: str, entry: Any) -> None:
    """A config search-path entry is an existing folder (`file://DIR` or DIR)."""
    text = str(entry)
    scheme, _, folder = text.partition("://") if "://" in text else ("file", "", text)
    if scheme != "file":
        raise ConfigError(
            f"{what}: expected a folder (file://DIR); Hydra would import a {scheme}:// package to search it"
        )
    if not Path(folder).expanduser().is_dir():
        raise ConfigError(f"{what}: {folder} is not a folder")


def check_hydra_tree(hydra: DictConfig, allowed: list[str]) -> None:
    """The composed `hydra` node (its `runtime.output_dir` is the job's folder) may only make Hydra build its
    own plugins and the user's callbacks, and log as align_kit does; one ConfigError line naming the key. The
    rest of the tree is data Hydra reads (folders, overrides, help texts), never built."""
    acted_on = ("launcher", "sweeper", "callbacks", "hydra_logging", "job_logging")
    raw = OmegaConf.to_container(hydra, resolve=False)
    check_written_targets("hydra", {key: raw.get(key) for key in acted_on}, ("_target_", "class", "()"))
    tree = {key: resolved(hydra[key]) if hydra.get(key) is not None else None for key in acted_on}
    job = hydra.job
    if job.chdir is True:
        raise ConfigError(
            "hydra.job.chdir=true: align_kit does not change folder; paths in the config are resolved against the "
            "folder the command starts in (set hydra.run.dir for where the run goes)"
        )
    check_job_files(job.name, hydra.output_subdir)
    check_job_environment(job.env_copy or [], "hydra.job.env_copy")
    check_job_environment(job.env_set or {})
    for group, plugins in HYDRA_PLUGINS.items():
        node = tree[group] or {}
        if node.get("_target_") not in plugins:
            raise ConfigError(
                f"hydra.{group}._target_={show(node.get('_target_'))}: expected one of Hydra's own {group}s "
                f"align_kit ships configs for: {', '.join(plugins)}"
            )
        check_targets(f"hydra.{group}", {key: value for key, value in node.items() if key != "_target_"}, allowed)
    check_launcher_values(hydra, tree["launcher"] or {})
    check_callbacks(tree["callbacks"] or {}, allowed)
    check_logging("hydra.hydra_logging", tree["hydra_logging"], None)
    check_logging("hydra.job_logging", tree["job_logging"], Path(hydra.runtime.output_dir))


def check_job_files(name: Any, subdir: Any) -> None:
    """`hydra.job.name` names the job's log file and `hydra.output_subdir` its saved configs, both inside the
    run folder."""
    if (
        not isinstance(name, str)
        or not name.strip()
        or "/" in name
        or "\\" in name
        or has_control_character(name)
        or ".." in name
        or len(name.encode()) > JOB_NAME_BYTES
    ):
        raise ConfigError(
            f"hydra.job.name={show(name)}: expected a plain file name (no '/', '..' or control character, at most "
            f"{JOB_NAME_BYTES} bytes): it names the job's log file in the run folder"
        )
    if subdir is not None and (
        not isinstance(subdir, str) or not subdir.strip() or os.path.isabs(subdir) or ".." in Path(subdir).parts
    ):
        raise ConfigError(
            f"hydra.output_subdir={show(subdir)}: expected a folder inside the run folder (like .hydra), or null"
        )


def check_callbacks(callbacks: Mapping, allowed: list[str]) -> None:
    """A config's `hydra.callbacks`: Hydra callback classes of the user's packages only."""
    from hydra.experimental.callback import Callback

    for name, node in callbacks.items():
        key = f"hydra.callbacks.{name}"
        if not isinstance(node, Mapping) or "_target_" not in node:
            raise ConfigError(f"{key}={show(node)}: expected a node with the _target_ of a Hydra callback class")
        cls = buildable_class(f"{key}._target_", node["_target_"], allowed)
        if not issubclass(cls, Callback):
            raise ConfigError(
                f"{key}._target_={node['_target_']} is not a Hydra callback; {OWN_CALLBACKS} are installed by "
                "align_kit, and a config may add only hydra.experimental.callback.Callback classes of your packages"
            )
        check_targets(key, {k: v for k, v in node.items() if k != "_target_"}, allowed)


def check_logging(key: str, conf: Any, run_dir: Path | None) -> None:
    """A logging dictConfig: handlers of HANDLER_CLASSES (a file only in the job's log, inside `run_dir`),
    plain formatters and filters, no `()` factories, `.` attributes or `ext://` names but the two streams."""
    if conf is None:
        return
    if not isinstance(conf, Mapping):
        raise ConfigError(f"{key}={show(conf)}: expected a logging configuration (a mapping)")
    check_external_names(key, conf)
    for section in ("formatters", "filters", "handlers"):
        entries = conf.get(section) or {}
        if not isinstance(entries, Mapping):
            raise ConfigError(f"{key}.{section}={show(entries)}: expected a mapping of names to settings")
        for name, node in entries.items():
            path = f"{key}.{section}.{name}"
            if not isinstance(node, Mapping):
                raise ConfigError(f"{path}={show(node)}: expected a mapping of settings")
            for special in ("()", "."):
                if special in node:
                    raise ConfigError(
                        f"{path}.{special}={show(node[special])}: logging factories and attribute settings are "
                        f"not accepted; use a handler class of {', '.join(HANDLER_CLASSES)}"
                    )
            if section == "formatters" and node.get("class", FORMATTER_CLASSES[0]) not in FORMATTER_CLASSES:
                raise ConfigError(f"{path}.class={show(node['class'])}: expected {', '.join(FORMATTER_CLASSES)}")
            if section == "handlers":
                check_handler(path, node, run_dir)


def check_handler(path: str, node: Mapping, run_dir: Path | None) -> None:
    cls = node.get("class")
    if cls not in HANDLER_CLASSES:
        raise ConfigError(f"{path}.class={show(cls)}: expected one of {', '.join(HANDLER_CLASSES)}")
    if "stream" in node and node["stream"] not in STREAMS:
        raise ConfigError(f"{path}.stream={show(node['stream'])}: expected one of {', '.join(STREAMS)}")
    if cls != "logging.FileHandler":
        return
    if run_dir is None:
        raise ConfigError(
            f"{path}.class=logging.FileHandler: Hydra's own log is set up before the run folder exists; "
            "log to a file in hydra.job_logging only"
        )
    filename = node.get("filename")
    inside = isinstance(filename, str) and bool(filename.strip())
    if inside:
        # os.path.realpath, not Path.resolve: a symlink loop in the run folder is check_writable's to name
        target, folder = (Path(os.path.realpath(Path(p).expanduser())) for p in (filename, run_dir))
        inside = target != folder and folder in target.parents
    if not inside:
        raise ConfigError(f"{path}.filename={show(filename)}: expected a file inside the run folder ({run_dir})")


def check_external_names(key: str, value: Any) -> None:
    """dictConfig imports whatever an `ext://` value names; only the standard streams are accepted."""
    if isinstance(value, Mapping):
        for name, item in value.items():
            check_external_names(f"{key}.{name}", item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_external_names(f"{key}[{index}]", item)
    elif isinstance(value, str) and value.startswith("ext://") and value not in STREAMS:
        raise ConfigError(f"{key}={value}: expected one of {', '.join(STREAMS)}; logging would import {value[6:]}")


# ------------------------------------------------------------------------------------------------ callbacks


class AppCallbacks(Callbacks):
    """The callbacks of align_kit's Hydra app: align_kit's own first, always, whatever `hydra.callbacks` says;
    then the config's own, checked again here (a job started without the pre-flight builds nothing else)."""

    def __init__(self, config: DictConfig | None = None) -> None:
        from hydra.utils import instantiate

        from align_kit.runs.run_folder import RunFolderGuard
        from align_kit.runs.sweep_summary import SweepSummary

        super().__init__(None)
        self.callbacks = [RunFolderGuard(), SweepSummary()]
        extra = OmegaConf.select(config, "hydra.callbacks") if config is not None else None
        if not extra:
            return
        try:
            allowed = list(OmegaConf.select(config, "train.allowed_targets") or [])
            check_written_targets("hydra.callbacks", OmegaConf.to_container(extra, resolve=False))
            check_callbacks(resolved(extra), allowed)
        except ConfigError as error:
            print(f"align-kit: config error: {error}", file=sys.stderr)
            sys.exit(2)
        self.callbacks += [instantiate(node) for node in extra.values()]


def install_callbacks() -> None:
    """Make Hydra's app build `AppCallbacks`: Hydra reads `hydra.callbacks` in one place, the `Callbacks` that
    `Hydra.run` and `Hydra.multirun` construct from the composed config."""
    install_app_callbacks(AppCallbacks)
