"""Logger nodes. W&B is initialised before the trainer is built, so TRL's and HF's W&B callback
reuse this run (with our project, group, name, tags and config), and finished in `finally`, so
multirun jobs never share a run. `logger=none` never imports wandb."""

from __future__ import annotations

import contextlib
import netrc
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from align_kit.core.contracts import LoggerNode
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob


@dataclass
class RunIdentity:
    name: str
    group: str | None
    tags: list[str]
    config: dict[str, Any]


def wandb_group(choices: dict[str, str], multirun: bool, sweep_dir: str | None) -> str | None:
    """A sweep's runs share `<sweep>-<launch folder>`; a single run is grouped by its recipe (or not at all)."""
    if multirun:
        return f"{choices.get('sweep', 'multirun')}-{Path(str(sweep_dir)).name}"
    return choices.get("recipe")


def _has_wandb_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


@dataclass
class WandbLogger(LoggerNode):
    mode: Literal["offline", "online"] = knob(
        "offline",
        help="`offline` writes the W&B run inside the run folder (`wandb sync` uploads it later, no account needed); "
        "`online` logs live and needs WANDB_API_KEY or `wandb login`.",
    )
    project: str = knob("align_kit", help="The W&B project the runs go to.")
    entity: str | None = knob(None, help="The W&B team or user that owns the project; null: your default entity.")

    def validate(self) -> None:
        if self.mode == "online" and not _has_wandb_credentials():
            raise ConfigError(
                "logger=wandb (online) needs an API key: set WANDB_API_KEY or run `wandb login`, "
                "or use logger=wandb_offline and `wandb sync` the run folder later"
            )

    def report_to(self) -> list[str]:
        return ["wandb"]

    @contextlib.contextmanager
    def session(self, run_dir: str | Path, identity: RunIdentity):
        os.environ["WANDB_DIR"] = str(run_dir)  # the offline run lives inside the run folder
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        run = wandb.init(
            project=self.project,
            entity=self.entity,
            mode=self.mode,
            dir=str(run_dir),
            name=identity.name,
            group=identity.group,
            tags=identity.tags,
            config=identity.config,
            reinit="finish_previous",
        )
        exit_code = 1
        try:
            yield run
            exit_code = 0
        finally:
            wandb.finish(exit_code=exit_code)


@dataclass
class NoLogger(LoggerNode):
    """logger=none: TRL reports nowhere and no tracking run opens (the base's behaviour)."""
