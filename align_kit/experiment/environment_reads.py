"""Interpolations that read the environment, refused in the files users share.

`${oc.env:VAR}` in a recipe, a sweep file or a `--config-dir` file resolves to the user's variable, and align_kit
saves the resolved config (the run's `config.yaml`, the W&B run's config that `wandb sync` uploads, each checkpoint's
training arguments): a shared file could copy a token into all of them. `${oc.decode:...}` and `${oc.create:...}`
evaluate text as config when it is resolved, so they could build an `oc.env` no one can read in the file; they are
refused alongside. These interpolations are accepted where the user wrote them: on the command line, and in align_kit's
own conf/train.yaml (`paths.cache_dir` reads ALIGN_KIT_CACHE and HOME).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from omegaconf import OmegaConf

from align_kit import CONF_DIR
from align_kit.core.errors import ConfigError

ENV_READS = re.compile(r"\$\{\s*(oc\.env|oc\.decode|oc\.create)\s*:")
# Where Hydra records the command line's own overrides (their text, and the folder name it makes of them).
COMMAND_LINE_RECORDS = ("hydra.overrides.", "hydra.job.override_dirname")
WHY = {
    "oc.env": "it reads an environment variable, and a token read so would be saved in config.yaml, W&B's run files "
    "and each checkpoint",
    "oc.decode": "it evaluates text as config when resolved (it could read the environment unseen)",
    "oc.create": "it evaluates text as config when resolved (it could read the environment unseen)",
}


def environment_reads(raw: Any, key: str = "") -> dict[str, str]:
    """The keys of the unresolved tree `raw` whose value interpolates one of ENV_READS, with that value."""
    found: dict[str, str] = {}
    if isinstance(raw, Mapping):
        for name, item in raw.items():
            found |= environment_reads(item, f"{key}.{name}" if key else str(name))
    elif isinstance(raw, list):
        for index, item in enumerate(raw):
            found |= environment_reads(item, f"{key}[{index}]")
    elif isinstance(raw, str) and ENV_READS.search(raw):
        found[key] = raw
    return found


@cache  # the package's own file: read once per process
def shipped_reads() -> dict[str, str]:
    """What conf/train.yaml itself reads from the environment, by key."""
    body = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "train.yaml"), resolve=False)
    return environment_reads({key: value for key, value in body.items() if key != "defaults"})


def check_environment_reads(raw: Mapping, command_line: list[str]) -> None:
    """Each value of the unresolved composed tree `raw` (its `hydra` node included) that reads the environment is
    conf/train.yaml's own or set by an override of `command_line` that writes the interpolation (Hydra records those
    lines in COMMAND_LINE_RECORDS); one ConfigError line naming the first other."""
    typed = [line.split("=", 1)[0].lstrip("+~") for line in command_line if ENV_READS.search(line.partition("=")[2])]
    shipped = shipped_reads()
    for key, value in environment_reads(raw).items():
        if (
            key.startswith(COMMAND_LINE_RECORDS)
            or shipped.get(key) == value
            or any(key == name or key.startswith((f"{name}.", f"{name}[")) for name in typed)
        ):
            continue
        resolver = ENV_READS.search(value).group(1)
        raise ConfigError(
            f"{key}={value} comes from a config file; a shared file may not use ${{{resolver}:...}}: {WHY[resolver]}. "
            f"Write the value out, or give it on the command line ({key}=...)"
        )
