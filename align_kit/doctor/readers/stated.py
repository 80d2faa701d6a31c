"""The setup a console log states in passing: the launch command echoed before the run (verl's Hydra overrides
`data.max_response_length=1024 actor_rollout_ref.actor.clip_ratio_high=0.28`, TRL's or ms-swift's
`--max_completion_length 1024`), a printed config (`'max_response_length': 1024`, `GRPOConfig(..., beta=0.0, ...)`).
The first statement of each setting wins (a config is printed once, at the start). Each pattern is one compiled
regex anchored on the setting's name, searched once over the text."""

from __future__ import annotations

import re
from typing import Any

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"


def _patterns(names: dict[str, str], number: bool = True) -> list[tuple[str, re.Pattern]]:
    value = _NUMBER if number else r"['\"]?([a-z_]+)['\"]?"
    return [(key, re.compile(pattern.format(value=value))) for key, pattern in names.items()]


VERL = _patterns(
    {
        "max_completion_length": r"(?:\bdata\.max_response_length=|'max_response_length':\s*){value}",
        "epsilon": r"(?:actor_rollout_ref\.actor\.clip_ratio_low=|'clip_ratio_low':\s*){value}",
        "epsilon_high": r"(?:actor_rollout_ref\.actor\.clip_ratio_high=|'clip_ratio_high':\s*){value}",
        "num_generations": r"actor_rollout_ref\.rollout\.n={value}",
        "learning_rate": r"actor_rollout_ref\.actor\.optim\.lr={value}",
        "beta": r"(?:actor_rollout_ref\.actor\.kl_loss_coef=|'kl_loss_coef':\s*){value}",
    }
)
_VERL_USE_KL = re.compile(r"(?:actor_rollout_ref\.actor\.use_kl_loss=|'use_kl_loss':\s*)(True|False|true|false)")

_TRL_FIELDS = ("max_completion_length", "epsilon_high", "epsilon", "beta", "num_generations", "learning_rate")
# `--name value` / `--name=value` on a command line, `name=value` in a printed GRPOConfig(...).
TRL = _patterns({name: rf"(?:--{name}[\s=]+|(?<![\w.-]){name}=){{value}}(?![\w.])" for name in _TRL_FIELDS})
TRL_TEXT = _patterns(
    {name: rf"(?:--{name}[\s=]+|(?<![\w.-]){name}=){{value}}" for name in ("loss_type", "importance_sampling_level")},
    number=False,
)


def _as_number(text: str, key: str) -> float | int:
    number = float(text)
    return int(number) if key in ("max_completion_length", "num_generations") else number


def stated_context(text: str, framework: str) -> tuple[dict[str, Any], list[str]]:
    """(context, notes) of what the text states, for a verl log or a TRL one."""
    context: dict[str, Any] = {}
    found: list[str] = []
    if framework == "verl":
        for key, pattern in VERL:
            if (match := pattern.search(text)) is not None:
                context[key] = _as_number(match.group(1), key)
                found.append(match.group(0).strip())
        if (use_kl := _VERL_USE_KL.search(text)) is not None and use_kl.group(1).lower() == "false":
            context["beta"] = 0.0  # no KL loss whatever kl_loss_coef says
            found.append(use_kl.group(0))
    else:
        for key, pattern in TRL:
            if (match := pattern.search(text)) is not None:
                context[key] = _as_number(match.group(1), key)
                found.append(match.group(0).strip())
        for key, pattern in TRL_TEXT:
            if (match := pattern.search(text)) is not None:
                context[key] = match.group(1)
                found.append(match.group(0).strip())
    notes = [f"setup stated in the log: {', '.join(found)}"] if found else []
    return context, notes
