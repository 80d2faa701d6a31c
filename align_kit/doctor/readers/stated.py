"""The setup a console log states in passing: the launch command echoed before the run (verl's Hydra overrides
`data.max_response_length=1024 actor_rollout_ref.actor.clip_ratio_high=0.28`, TRL's or ms-swift's
`--max_completion_length 1024`), a printed config (`'max_response_length': 1024`, `GRPOConfig(..., beta=0.0, ...)`).
The first statement of each setting wins (a config is printed once, at the start).

Every pattern starts with literal text, so the regex engine finds candidates with its fast literal search (a pattern
starting with a lookbehind or an alternation is tried at every character: 60x slower on a 100k-line log); the
word boundary before `name=` is checked on the match instead."""

from __future__ import annotations

import re
from typing import Any

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![\w.])"
_WORD = r"['\"]?([a-z_]+)['\"]?"
_BOUNDARY = re.compile(r"[\w.-]")


def _compiled(prefixes: list[str], value: str) -> list[tuple[re.Pattern, bool]]:
    """(pattern, whether the character before must not be part of a name) per literal prefix."""
    return [
        (re.compile(re.escape(prefix) + (r"\s*" if prefix.endswith(":") else "") + value), bare)
        for prefix, bare in prefixes
    ]


VERL = {
    "max_completion_length": _compiled(
        [("data.max_response_length=", False), ("'max_response_length':", False)], _NUMBER
    ),
    "epsilon": _compiled([("actor_rollout_ref.actor.clip_ratio_low=", False), ("'clip_ratio_low':", False)], _NUMBER),
    "epsilon_high": _compiled(
        [("actor_rollout_ref.actor.clip_ratio_high=", False), ("'clip_ratio_high':", False)], _NUMBER
    ),
    "num_generations": _compiled([("actor_rollout_ref.rollout.n=", False)], _NUMBER),
    "learning_rate": _compiled([("actor_rollout_ref.actor.optim.lr=", False)], _NUMBER),
    "beta": _compiled([("actor_rollout_ref.actor.kl_loss_coef=", False), ("'kl_loss_coef':", False)], _NUMBER),
}
_VERL_USE_KL = _compiled(
    [("actor_rollout_ref.actor.use_kl_loss=", False), ("'use_kl_loss':", False)], r"(True|False|true|false)"
)


def _flags(name: str, value: str) -> list[tuple[re.Pattern, bool]]:
    # `--name value` / `--name=value` on a command line, `name=value` in a printed GRPOConfig(...).
    return [
        (re.compile(re.escape(f"--{name}") + r"[\s=]+" + value), False),
        (re.compile(re.escape(f"{name}=") + value), True),
    ]


TRL = {
    name: _flags(name, _NUMBER)
    for name in ("max_completion_length", "epsilon_high", "epsilon", "beta", "num_generations", "learning_rate")
}
TRL_TEXT = {name: _flags(name, _WORD) for name in ("loss_type", "importance_sampling_level")}


def _first(text: str, patterns: list[tuple[re.Pattern, bool]]) -> re.Match | None:
    best = None
    for pattern, bare in patterns:
        for match in pattern.finditer(text):
            if bare and match.start() > 0 and _BOUNDARY.match(text, match.start() - 1):
                continue  # `my_beta=` or `.beta=`: another setting's name
            if best is None or match.start() < best.start():
                best = match
            break
    return best


def _as_number(text: str, key: str) -> float | int:
    number = float(text)
    return int(number) if key in ("max_completion_length", "num_generations") else number


def stated_context(text: str, framework: str) -> tuple[dict[str, Any], list[str]]:
    """(context, notes) of what the text states, for a verl log or a TRL one."""
    context: dict[str, Any] = {}
    found: list[str] = []
    numbers, words = (VERL, {}) if framework == "verl" else (TRL, TRL_TEXT)
    for key, patterns in numbers.items():
        if (match := _first(text, patterns)) is not None:
            context[key] = _as_number(match.group(1), key)
            found.append(match.group(0).strip())
    for key, patterns in words.items():
        if (match := _first(text, patterns)) is not None:
            context[key] = match.group(1)
            found.append(match.group(0).strip())
    if framework == "verl" and (use_kl := _first(text, _VERL_USE_KL)) is not None:
        if use_kl.group(1).lower() == "false":
            context["beta"] = 0.0  # no KL loss, whatever kl_loss_coef says
        found.append(use_kl.group(0))
    notes = [f"setup stated in the log: {', '.join(found)}"] if found else []
    return context, notes
