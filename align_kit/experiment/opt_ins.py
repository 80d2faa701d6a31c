"""Settings only the command line may turn on: what a run builds from, and switches that run a file's code or upload
with the user's token.

A recipe, a `--config-dir` file or a sweep file is shared, and what it switches on runs as the user: the packages a run
builds from (`train.allowed_targets`, checked in align_kit.experiment.schema), a model folder's own Python
(`trust_remote_code`, wherever it sits: `model.*`, `trainer.*`, `trainer.model_init_kwargs.*`), and uploads to the
Hugging Face Hub with the user's token (TRL's `push_to_hub`, which pushes to `hub_model_id`, and
`log_completions_hub_repo`). Each switch is honoured only where the command line gives it, with the value it has; so
is the address of a vLLM server on another machine (ENDPOINTS), which receives the run's prompts and weights.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from align_kit.core.errors import ConfigError
from align_kit.experiment.schema import show

# name: (what it does, what a sweep file may not do, the value to give on the command line, a caution after the fix)
SWITCHES = {
    "trust_remote_code": (
        "lets the model's folder run its own Python",
        "let a model's folder run its own Python",
        "true",
        " (only for a model you trust)",
    ),
    "push_to_hub": (
        "uploads the trained model to the Hugging Face Hub (trainer.hub_model_id) with your token",
        "upload the trained model to the Hugging Face Hub",
        "true",
        "",
    ),
    "log_completions_hub_repo": (
        "uploads the run's prompts and completions to that Hugging Face Hub repository with your token",
        "upload the run's completions to the Hugging Face Hub",
        "<repository>",
        "",
    ),
}


# A switch's destination: where it uploads, named on the command line with it (a recipe could name a public repository
# of the user's own).
DESTINATIONS = {"push_to_hub": "hub_model_id"}


# Addresses a run sends its prompts and its policy's weights to (the vLLM server of rollout.mode=server, and TRL's
# fields behind it): from a file, only this machine's; another host only where the command line names it.
ENDPOINTS = ("server_base_url", "vllm_server_base_url", "vllm_server_host")
LOOPBACK_NAMES = ("localhost", "0.0.0.0", "::1")


def on_this_machine(address: Any) -> bool:
    """`address` (a URL, or a host name) names this machine: localhost, 0.0.0.0 or a loopback address."""
    import ipaddress
    from urllib.parse import urlsplit

    text = str(address)
    try:
        host = urlsplit(text).hostname if "://" in text else text
    except ValueError:
        return False
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def command_line_only(key: str) -> bool:
    """`key` (dotted, `+`/`~` stripped) may be set only on the command line: the packages a run builds from, or a
    switch of SWITCHES."""
    return key == "train.allowed_targets" or key.rpartition(".")[2] in SWITCHES


def sweep_param_refusal(key: str) -> str:
    """The refusal of a sweep file's `hydra.sweeper.params.<key>` that sets a command-line-only key."""
    name = str(key).lstrip("+~")
    if name == "train.allowed_targets":
        return (
            f"hydra.sweeper.params.{key}: a sweep file may not name the packages a run builds from; name them "
            "on the command line: train.allowed_targets=[my_package]"
        )
    _, may_not, value, caution = SWITCHES[name.rpartition(".")[2]]
    return (
        f"hydra.sweeper.params.{key}: a sweep file may not {may_not}; only you may allow it: add {name}={value} to "
        f"the command line{caution}"
    )


def switches_on(value: Any, key: str = "", names: Iterable[str] = SWITCHES) -> list[str]:
    """The keys of the resolved tree where a key of `names` (SWITCHES) is on (any value but false/null)."""
    found = []
    if isinstance(value, Mapping):
        for name, item in value.items():
            path = f"{key}.{name}" if key else str(name)
            if name in names and item not in (False, None):
                found.append(path)
            found += switches_on(item, path, names)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += switches_on(item, f"{key}[{index}]", names)
    return found


def check_opt_ins(data: Mapping, task_overrides: list[str]) -> None:
    """Each switch of SWITCHES is on only where the command line says so, with the value it has (`true` for a
    boolean); from a recipe, a --config-dir file or a sweep file it is refused with the override that allows it."""
    named = command_line_values(task_overrides)
    config = {name: item for name, item in data.items() if name != "hydra"}
    for key in switches_on(config, names=ENDPOINTS):
        value = _at(data, key)
        if not on_this_machine(value) and given_value(named, key) != value:
            raise ConfigError(
                f"{key}={show(value)} comes from a config file; the run would send its prompts and the policy's "
                f"weights to that server: another machine's address is yours to name, on the command line "
                f"({key}=<your server>)"
            )
    for key in switches_on(config):
        value, given = _at(data, key), given_value(named, key)
        if given is True or (isinstance(value, str) and given == value):
            _check_destination(data, named, key)
            continue
        does, _, wanted, caution = SWITCHES[key.rpartition(".")[2]]
        raise ConfigError(
            f"{key}={show(value)} comes from a config file; it {does}, which only you may allow: add "
            f"{key}={wanted} to the command line{caution}"
        )


def _check_destination(data: Mapping, named: Mapping, key: str) -> None:
    """The destination of the switch at `key` (DESTINATIONS), when set, is the command line's too."""
    prefix, _, name = key.rpartition(".")
    if name not in DESTINATIONS:
        return
    where = f"{prefix}.{DESTINATIONS[name]}" if prefix else DESTINATIONS[name]
    value = _at(data, where)
    if value is not None and given_value(named, where) != value:
        raise ConfigError(
            f"{where}={show(value)} comes from a config file; with {key}=true it names where your model is uploaded: "
            f"give it on the command line ({where}=<your repository>)"
        )


def command_line_values(overrides: Iterable[str]) -> dict[str, Any]:
    """The values `overrides` (command-line lines) set, by key; removals and sweeps left out."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return {
        override.key_or_group: override.value()
        for override in OverridesParser.create().parse_overrides(list(overrides))
        if not override.is_delete() and not override.is_sweep_override()
    }


def given_value(named: Mapping, key: str) -> Any:
    """The value the command line (`named`: command_line_values) gives `key`: its own override, or the part of an
    override of a key above it (`trainer.model_init_kwargs={trust_remote_code: true}`)."""
    parts = key.split(".")
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in named:
            return _at(named[prefix], ".".join(parts[cut:])) if cut < len(parts) else named[prefix]
    return None


def _at(data: Any, key: str) -> Any:
    for part in key.split(".") if key else ():
        data = data.get(part) if isinstance(data, Mapping) else None
    return data
