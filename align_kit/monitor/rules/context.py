"""What a run composes (`RunContext`), built once for every caller: `RunContext.from_stated` reads the settings a
run states, by their GRPOConfig names (the doctor's context keys, a TRL callback's GRPOConfig), and
`RunContext.from_plan` hands align_kit's own plan to the same function. Alerts judge against the run's limits and
advise only what is off; the setup rules (rules/setup.py) judge the sampler and the router from it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

# trl.rewards.get_soft_overlong_punishment's function: DAPO's soft overlong punishment is on as a reward term.
OVERLONG_REWARD = "soft_overlong_punishment_reward"


# The GRPOConfig fields a RunContext is built from (RunContext.from_stated), read from a plan or a TRL run's args.
STATED_GRPO_FIELDS = (
    "epsilon",
    "epsilon_high",
    "importance_sampling_level",
    "beta",
    "max_completion_length",
    "learning_rate",
    "num_generations",
    "mask_truncated_completions",
    "multi_objective_aggregation",
    "top_p",
    "top_k",
    "min_p",
)


@dataclass(frozen=True, slots=True)  # read by most rules at every step: slots are quicker to reach
class RunContext:
    """What the run composes, so alerts judge against its limits and advise only what is off."""

    max_completion_length: int | None = None
    reward_max: float = 1.0
    reward_min: float = 0.0  # the lowest total reward attainable: reward rules judge shares of max - min
    # Whether the range above is stated (the plan's, the log's, the caller's) or only the [0, 1] default: without a
    # stated range, a reward that leaves [0, 1] has no scale, and reward_decline reads the run's own spread instead.
    reward_scale_stated: bool = True
    advantage: str = "grpo"
    clip_higher: bool = False  # token-level clip with eps_high > eps_low
    sequence_clip: bool = False  # GSPO
    eps_high: float | None = None
    kl_on: bool = False
    reward_weights: Mapping[str, float] = field(default_factory=dict)
    # Declared by the nodes themselves (Component.monitor_facts): which fix is on.
    dynamic_sampling: bool = False
    max_gen_batches: int | None = None
    overlong_shaping: bool = False  # the soft overlong punishment is a reward term
    overlong_filter: bool = False  # truncated completions are masked out of the loss
    routing_replay: bool = False
    # The numbers the advice words its next step from (None: not stated).
    beta: float | None = None
    learning_rate: float | None = None
    num_generations: int | None = None
    # The sampler's filters and the importance-sampling correction (rules/setup.py): None when not stated.
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    is_correction: bool | None = None
    # An MoE model's router auxiliary (load-balancing) loss coefficient, None when not stated or not MoE, and
    # whether the model adds it to the loss (transformers' output_router_logits; None when not stated).
    router_aux_loss_coef: float | None = None
    output_router_logits: bool | None = None

    @classmethod
    def from_stated(
        cls,
        stated: Mapping[str, Any],
        max_completion_length: int | None = None,
        reward_max: float | None = None,
        reward_min: float | None = None,
    ) -> RunContext:
        """The context the `stated` settings give (GRPOConfig's names, the doctor's context keys; align_kit's
        config-group `choices` and the nodes' declared `facts` where there are), with the caller's overrides;
        reward_max / reward_min default to [0, 1] when nothing says."""
        choices = stated.get("choices") or {}
        facts = stated.get("facts") or {}
        eps_low, eps_high = number(stated.get("epsilon")), number(stated.get("epsilon_high"))
        clip = str(choices.get("clip", ""))
        sequence_clip = stated.get("importance_sampling_level") == "sequence" or clip == "gspo"
        clip_higher = clip == "clip_higher" or (
            not sequence_clip and eps_high is not None and eps_high > (eps_low if eps_low is not None else 0.2)
        )
        beta = number(stated.get("beta"))
        kl_choice = str(choices.get("kl", ""))
        weights = stated.get("reward_weights") or {}
        overlong = str(choices.get("overlong", ""))
        # TRL's multi_objective_aggregation=normalize_then_sum is GDPO (each reward normalised in its group).
        gdpo = stated.get("multi_objective_aggregation") == "normalize_then_sum"
        values = {
            "max_completion_length": (
                max_completion_length
                if max_completion_length is not None
                else count(stated.get("max_completion_length"))
            ),
            "reward_max": reward_max if reward_max is not None else number(stated.get("reward_max")),
            "reward_min": reward_min if reward_min is not None else number(stated.get("reward_min")),
            "advantage": "gdpo" if gdpo else str(choices.get("advantage", "grpo")),
            "clip_higher": clip_higher,
            "sequence_clip": sequence_clip,
            "eps_high": eps_high if eps_high is not None else eps_low,
            "kl_on": (beta or 0.0) > 0 or kl_choice not in ("", "none"),
            "reward_weights": {str(name): float(weight) for name, weight in weights.items()},
            "dynamic_sampling": choices.get("sampling") == "dynamic",
            "overlong_shaping": overlong in ("soft_punish", "filter_and_punish") or OVERLONG_REWARD in weights,
            "overlong_filter": stated.get("mask_truncated_completions") is True or overlong.startswith("filter"),
            "routing_replay": str(choices.get("routing_replay", "off")) not in ("", "off"),
            "beta": beta,
            "learning_rate": number(stated.get("learning_rate")),
            "num_generations": count(stated.get("num_generations")),
            "top_p": number(stated.get("top_p")),
            "top_k": whole(stated.get("top_k")),
            "min_p": number(stated.get("min_p")),
            "is_correction": flag(stated.get("is_correction")),
            "router_aux_loss_coef": number(stated.get("router_aux_loss_coef")),
            "output_router_logits": flag(stated.get("output_router_logits")),
        }
        values["reward_scale_stated"] = values["reward_max"] is not None or values["reward_min"] is not None
        known = {item.name for item in fields(cls)}
        values.update({name: value for name, value in facts.items() if name in known})
        return cls(**{key: value for key, value in values.items() if value is not None})  # None: the default

    @classmethod
    def from_plan(cls, plan) -> RunContext:
        """The GRPOConfig fields and choices in force, and the facts each node declares."""
        stated = {name: plan.effective(name) for name in STATED_GRPO_FIELDS}
        declared: dict[str, Any] = {}
        for node in plan.components.values():
            declared.update(node.monitor_facts())
        if stated["epsilon_high"] is None:  # TRL's epsilon_high defaults to epsilon: no Clip-Higher
            stated["epsilon_high"] = stated["epsilon"]
        stated.update(
            choices=plan.choices,
            facts=declared,
            reward_max=plan.reward_max,
            reward_weights={spec.name: spec.weight for spec in plan.rewards},
        )
        return cls.from_stated(stated)


def number(value: Any) -> float | None:
    """A stated setting as a finite float (a learning rate, a clip bound; "1e-6" as text parsed), None when it is
    none."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def whole(value: Any) -> int | None:
    """A stated integer (top_k: -1 and 0 mean off), None when it is none."""
    found = number(value)
    return int(found) if found is not None and found.is_integer() else None


def count(value: Any) -> int | None:
    """A stated count as a positive int (a length budget, a group size), None when it is none."""
    found = whole(value)
    return found if found is not None and found > 0 else None


def flag(value: Any) -> bool | None:
    """A stated on/off setting: a bool, or a mode name ("none"/"off"/"" off), None when it is none."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() not in ("", "none", "off", "false", "null")
    return None
