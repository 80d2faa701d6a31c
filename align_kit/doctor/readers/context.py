"""What a run's config states of its setup, in the doctor's context keys (max_completion_length, epsilon,
epsilon_high, beta, reward_max, num_generations, learning_rate, loss_type, importance_sampling_level, and the
sampler's top_p / top_k / min_p, is_correction, router_aux_loss_coef), each only when the config states it:
align_kit's resolved config, a GRPOConfig as HF's W&B callback logs it, verl's config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from align_kit.doctor.keymaps import to_float

# GRPOConfig field -> context key, numbers.
_TRL_NUMBERS = {
    "max_completion_length": "max_completion_length",
    "epsilon": "epsilon",
    "epsilon_high": "epsilon_high",
    "beta": "beta",
    "num_generations": "num_generations",
    "learning_rate": "learning_rate",
}
_TRL_TEXT = ("loss_type", "importance_sampling_level")
# The sampler's filters (GRPOConfig fields); top_k <= 0 is vLLM's "no filter".
_TRL_SAMPLER = ("top_p", "top_k", "min_p")


def _number(value: Any) -> float | int | None:
    number = to_float(value)
    if number is None:
        return None
    return int(number) if isinstance(value, int) and not isinstance(value, bool) else number


def _get(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    # W&B's API can wrap config values as {"value": ...}.
    if isinstance(node, Mapping) and set(node) <= {"value", "desc"} and "value" in node:
        return node["value"]
    return node


def from_trl_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A GRPOConfig's fields (W&B run config of an HF run, or a flat dict of them)."""
    context: dict[str, Any] = {}
    for field, key in _TRL_NUMBERS.items():
        number = _number(_get(config, field))
        if number is not None:
            context[key] = number
    for field in _TRL_TEXT:
        value = _get(config, field)
        if isinstance(value, str) and value:
            context[field] = value
    for field in _TRL_SAMPLER:
        number = _number(_get(config, field))
        if number is not None:
            context[field] = number
    correction = _get(config, "vllm_importance_sampling_correction")
    if isinstance(correction, bool):
        context["is_correction"] = correction
    context.update(_router(config))
    return context


def _router(config: Mapping[str, Any]) -> dict[str, Any]:
    """An MoE router's auxiliary loss: transformers adds router_aux_loss_coef x the balance loss only with
    output_router_logits on (the model's config, or the model_init_kwargs that override it)."""
    for node in (_get(config, "model_init_kwargs"), config):
        if not isinstance(node, Mapping):
            continue
        logits = _get(node, "output_router_logits")
        if logits is False:
            return {"router_aux_loss_coef": 0.0}
        coef = _number(_get(node, "router_aux_loss_coef"))
        if logits is True and coef is not None:
            return {"router_aux_loss_coef": coef}
    return {}


def from_verl_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """verl's ppo_trainer config (nested, as verl logs it to W&B)."""
    context: dict[str, Any] = {}
    pairs = {
        "max_completion_length": "data.max_response_length",
        "epsilon": "actor_rollout_ref.actor.clip_ratio_low",
        "epsilon_high": "actor_rollout_ref.actor.clip_ratio_high",
        "num_generations": "actor_rollout_ref.rollout.n",
        "learning_rate": "actor_rollout_ref.actor.optim.lr",
    }
    for key, dotted in pairs.items():
        number = _number(_get(config, dotted))
        if number is not None:
            context[key] = number
    if "epsilon" not in context and (clip := _number(_get(config, "actor_rollout_ref.actor.clip_ratio"))) is not None:
        context["epsilon"] = clip
    use_kl = _get(config, "actor_rollout_ref.actor.use_kl_loss")
    coef = _number(_get(config, "actor_rollout_ref.actor.kl_loss_coef"))
    if use_kl is False:
        context["beta"] = 0.0
    elif use_kl is True and coef is not None:
        context["beta"] = coef
    loss_agg = _get(config, "actor_rollout_ref.actor.loss_agg_mode")
    if isinstance(loss_agg, str):
        context["loss_type"] = loss_agg
    for key in ("top_p", "top_k"):
        number = _number(_get(config, f"actor_rollout_ref.rollout.{key}"))
        if number is not None:
            context[key] = number
    # The rollout correction: algorithm.rollout_correction.rollout_is = token | sequence | null (older verl:
    # algorithm.rollout_is = true/false).
    mode = _get(config, "algorithm.rollout_correction.rollout_is")
    if mode is None:
        mode = _get(config, "algorithm.rollout_is")
    if mode is not None or isinstance(_get(config, "algorithm.rollout_correction"), Mapping):
        context["is_correction"] = mode is True or mode in ("token", "sequence")
    coef = _number(_get(config, "actor_rollout_ref.actor.megatron.override_transformer_config.moe_aux_loss_coeff"))
    if coef is not None:
        context["router_aux_loss_coef"] = coef
    return context


def from_align_kit_config(config: Mapping[str, Any], summary: Mapping[str, Any]) -> dict[str, Any]:
    """align_kit's resolved config (config.yaml or .hydra/config.yaml) and summary.json, when there is one."""
    context: dict[str, Any] = {}
    trainer = config.get("trainer") if isinstance(config.get("trainer"), Mapping) else {}
    context.update(from_trl_config(trainer))
    clip = config.get("clip") if isinstance(config.get("clip"), Mapping) else {}
    for field, key in (("eps_low", "epsilon"), ("eps_high", "epsilon_high")):
        number = _number(clip.get(field))
        if number is not None:
            context[key] = number
    target = str(clip.get("_target_", ""))
    if target.endswith("SequenceClip"):
        context["importance_sampling_level"] = "sequence"
    elif target.endswith("TokenClip"):
        context["importance_sampling_level"] = "token"
    kl = config.get("kl") if isinstance(config.get("kl"), Mapping) else {}
    if (beta := _number(kl.get("beta"))) is not None:
        context["beta"] = beta
    advantage = config.get("advantage") if isinstance(config.get("advantage"), Mapping) else {}
    if isinstance(advantage.get("loss_type"), str):
        context["loss_type"] = advantage["loss_type"]
    reward_max = _number(summary.get("reward_max"))
    if reward_max is None:
        reward_max = _configured_reward_max(config.get("reward"))
    if reward_max is not None:
        context["reward_max"] = reward_max
    return context


def _configured_reward_max(rewards: Any) -> float | None:
    """What a perfect completion earns under the configured weights (sum of weight x max_value), when every reward
    states both."""
    if not isinstance(rewards, Mapping) or not rewards:
        return None
    total = 0.0
    for spec in rewards.values():
        if not isinstance(spec, Mapping):
            return None
        weight, top = to_float(spec.get("weight")), to_float(spec.get("max_value"))
        if weight is None or top is None:
            return None
        total += weight * top
    return total
