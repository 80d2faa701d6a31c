"""The setup a console log states in passing: the launch command echoed before the run (verl's Hydra overrides
`data.max_response_length=1024 actor_rollout_ref.actor.clip_ratio_high=0.28`, TRL's or ms-swift's
`--max_completion_length 1024`), a printed config (`'max_response_length': 1024`, `GRPOConfig(..., beta=0.0, ...)`,
a model's config JSON). Besides the setup the rules always read: the sampler's top_p / top_k / min_p, whether an
importance-sampling correction is on (`is_correction`), and an MoE router's auxiliary loss (`router_aux_loss_coef`).
The first statement of each setting wins (a config is printed once, at the start).

Every pattern starts with literal text, so the regex engine finds candidates with its fast literal search (a pattern
starting with a lookbehind or an alternation is tried at every character: 60x slower on a 100k-line log); the
word boundary before `name=` is checked on the match instead."""

from __future__ import annotations

import re
from typing import Any

from align_kit.doctor.budget import stated_budget

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
    return int(number) if key in ("max_completion_length", "num_generations", "top_k") else number


# The sampler's filters, the IS correction and an MoE router's auxiliary loss (the rules on a biased IS ratio and
# on the router's loss during RL read them). TRL: GRPOConfig's top_p / top_k / min_p and
# vllm_importance_sampling_correction, on the command line, in GRPOConfig(...) or a printed to_dict(); vLLM's
# SamplingParams(...) repr says the same. verl: actor_rollout_ref.rollout.top_p / top_k, and the rollout correction
# as algorithm.rollout_correction.rollout_is=token|sequence|null (older: algorithm.rollout_is=True). A transformers
# MoE config adds its router_aux_loss_coef only with output_router_logits on; Megatron's moe_aux_loss_coeff always.
_BOOL = r"['\"]?(True|False|true|false)\b"
_IS_MODE = r"['\"]?(token|sequence|True|False|true|false|null|None|~)\b"


def _keyed(name: str, value: str) -> list[tuple[re.Pattern, bool]]:
    """`'name': value` in a printed dict, `"name": value` in JSON."""
    return [(re.compile(re.escape(f"{quote}{name}{quote}:") + r"\s*" + value), False) for quote in ("'", '"')]


SAMPLER_TRL = {
    "top_p": _flags("top_p", _NUMBER) + _keyed("top_p", _NUMBER),
    "top_k": _flags("top_k", _NUMBER) + _keyed("top_k", _NUMBER),
    "min_p": _flags("min_p", _NUMBER) + _keyed("min_p", _NUMBER),
}
SAMPLER_VERL = {
    "top_p": _compiled([("actor_rollout_ref.rollout.top_p=", False)], _NUMBER) + _keyed("top_p", _NUMBER),
    "top_k": _compiled([("actor_rollout_ref.rollout.top_k=", False)], _NUMBER) + _keyed("top_k", _NUMBER),
}
CORRECTION_TRL = _flags("vllm_importance_sampling_correction", _BOOL) + _keyed(
    "vllm_importance_sampling_correction", _BOOL
)
CORRECTION_VERL = _compiled(
    [("algorithm.rollout_correction.rollout_is=", False), ("algorithm.rollout_is=", False)], _IS_MODE
) + _keyed("rollout_is", _IS_MODE)
ROUTER_COEF = _flags("router_aux_loss_coef", _NUMBER) + _keyed("router_aux_loss_coef", _NUMBER)
ROUTER_LOGITS = _flags("output_router_logits", _BOOL) + _keyed("output_router_logits", _BOOL)
MEGATRON_COEF = _compiled([(".moe_aux_loss_coeff=", False), ("--moe-aux-loss-coeff ", False)], _NUMBER) + _keyed(
    "moe_aux_loss_coeff", _NUMBER
)


def _on(word: str) -> bool:
    return word.lower() in ("true", "token", "sequence")


def _facts(text: str, framework: str, context: dict[str, Any], found: list[str]) -> None:
    verl = framework == "verl"
    for key, patterns in (SAMPLER_VERL if verl else SAMPLER_TRL).items():
        if (match := _first(text, patterns)) is not None:
            context[key] = _as_number(match.group(1), key)
            found.append(match.group(0).strip())
    if (match := _first(text, CORRECTION_VERL if verl else CORRECTION_TRL)) is not None:
        context["is_correction"] = _on(match.group(1))
        found.append(match.group(0).strip())
    if (match := _first(text, MEGATRON_COEF)) is not None:
        context["router_aux_loss_coef"] = float(match.group(1))
        found.append(match.group(0).strip())
    elif (logits := _first(text, ROUTER_LOGITS)) is not None:
        coef = _first(text, ROUTER_COEF)
        if not _on(logits.group(1)):
            context["router_aux_loss_coef"] = 0.0  # the loss is only added with the router's logits output
        elif coef is not None:
            context["router_aux_loss_coef"] = float(coef.group(1))
        found += [match.group(0).strip() for match in (logits, coef) if match is not None]


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
    _facts(text, framework, context, found)
    if "max_completion_length" not in context and (budget := stated_budget(text)) is not None:
        context["max_completion_length"], statement = budget  # a notebook cell's `max_completion_length = 200`
        found.append(statement)
    notes = [f"setup stated in the log: {', '.join(found)}"] if found else []
    return context, notes
