"""The fixes the rules name (FIX ids), each written once for every framework: TRL 1.16's `GRPOConfig`, verl's
`ppo_trainer.yaml` / `actor.yaml` (and its DAPO recipe's `filter_groups` and `overlong_buffer`), OpenRLHF's
`train_ppo_ray` flags and align_kit's own config nodes, side by side; where a framework has no such knob, the line
says so. Ordered by the tuning priorities of the policy-optimization chapter, 18.3.8: data first, then clipping, then
KL and learning rate, then sampling and generation.

A fix is written for the run's own composition (`RunContext`): what the run already has on is skipped or turned
into the next step (`resolve`: Clip-Higher already on -> raise eps_high; a KL term already on -> raise its
coefficient). A live alert's advice is its rule's fixes in align_kit's terms (or the plain-TRL callback's, in
GRPOConfig's: `in_terms`); the doctor merges every fired rule's fixes (align_kit.doctor.advice).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from align_kit.monitor.rules.context import RunContext

# 18.3.8: 1 data, 2 clipping, 3 KL and learning rate, 4 sampling and generation.
PRIORITY: dict[str, int] = {
    **dict.fromkeys(
        (
            "dynamic_sampling",
            "harder_data",
            "easier_data",
            "fix_reward",
            "lower_format_weight",
            "gdpo",
            "ngrpo",
            "overlong_filter",
            "overlong_shaping",
            "more_data",
        ),
        1,
    ),
    **dict.fromkeys(("clip_higher", "raise_eps_high", "gspo"), 2),
    **dict.fromkeys(("lower_lr", "fewer_updates", "add_kl", "raise_kl"), 3),
    **dict.fromkeys(
        (
            "raise_max_length",
            "match_sampler_precision",
            "is_correction",
            "unfiltered_sampler",
            "router_aux_off",
            "routing_replay",
            "group_size",
            "temperature",
        ),
        4,
    ),
}
PRIORITY_NAMES = {1: "data", 2: "clipping", 3: "KL and learning rate", 4: "sampling and generation"}
FRAMEWORKS = ("align_kit", "trl", "verl", "openrlhf", "generic")


def _g(value: float | None) -> str:
    return f"{value:g}" if value is not None else "?"


def _now(value: float | None) -> str:
    return f" (now {value:g})" if value is not None else ""


def resolve(fix: str, setup: RunContext) -> str | None:
    """The fix the run still lacks: None when it is already on and there is no further step, or the next step
    (clip_higher with Clip-Higher on -> raise_eps_high; add_kl with KL on -> raise_kl)."""
    if fix == "clip_higher" and (setup.clip_higher or setup.sequence_clip):
        return "raise_eps_high"
    if fix == "raise_eps_high" and not (setup.clip_higher or setup.sequence_clip):
        return "clip_higher"  # the first step: a bound above eps_low at all
    if fix == "add_kl" and setup.kl_on:
        return "raise_kl"
    if fix == "raise_kl" and not setup.kl_on:
        return "add_kl"  # the first step: a KL term at all
    if fix == "gspo" and setup.sequence_clip:
        return None
    if fix == "overlong_filter" and setup.overlong_filter:
        return None
    if fix == "gdpo" and setup.advantage == "gdpo":
        return None
    if fix == "ngrpo" and setup.advantage == "ngrpo":
        return None
    if fix == "routing_replay" and setup.routing_replay:
        return None
    return fix


def _double(value: int | None) -> str:
    return str(2 * value) if value else "a larger value"


def _next_eps_high(setup: RunContext) -> str:
    # DAPO's 0.28, then the chapter's upper end 0.3 and beyond (18.3.8: eps_high 0.28-0.3).
    if setup.sequence_clip:
        return f"{2 * setup.eps_high:g}" if setup.eps_high else "a wider bound"
    if setup.eps_high is None or setup.eps_high < 0.28:
        return "0.28"
    return f"{max(0.3, round(setup.eps_high + 0.05, 2)):g}"


def _lower_lr(setup: RunContext) -> str:
    # 18.3.8: start from 1e-6.
    return f"{setup.learning_rate / 2:g}" if setup.learning_rate else "1e-6"


def _raised_beta(setup: RunContext) -> str:
    return f"{2 * setup.beta:g}" if setup.beta else "twice its value"


def text(fix: str, framework: str, setup: RunContext) -> str:
    """The fix `fix` for a `framework` run (align_kit | trl | verl | openrlhf | generic)."""
    framework = framework if framework in FRAMEWORKS else "generic"
    table = _TEXTS[fix]
    return table.get(framework, table["generic"])(setup)


def _t(template: str):
    return lambda setup: template


_TEXTS: dict[str, dict[str, Any]] = {
    "dynamic_sampling": {
        "generic": _t("drop groups whose rewards are all equal and sample new ones (DAPO dynamic sampling)"),
        "align_kit": lambda s: (
            "dynamic sampling is on yet flat groups remain: raise sampling.max_gen_batches or change the data mix"
            if s.dynamic_sampling
            else "sampling=dynamic (drop groups whose rewards are all equal, DAPO)"
        ),
        "trl": _t(
            "TRL's GRPOConfig has no dynamic sampling: drop the prompts whose groups come out all equal from the "
            "dataset (filter it between runs)"
        ),
        "verl": lambda s: (
            "raise algorithm.filter_groups.max_num_gen_batches (dynamic sampling is on)"
            if s.dynamic_sampling
            else "algorithm.filter_groups.enable=True algorithm.filter_groups.metric=acc (DAPO recipe trainer)"
        ),
        "openrlhf": _t("--dynamic_filtering --dynamic_filtering_reward_range 0 1"),
    },
    "harder_data": {
        "generic": _t("the data is too easy (groups all solved): drop solved prompts and mix in harder ones"),
        "align_kit": _t("the data is too easy (groups all solved): drop solved prompts, choose a harder task mix"),
        "trl": _t("the data is too easy (groups all solved): drop solved prompts from train_dataset, add harder ones"),
        "verl": _t("the data is too easy (groups all solved): drop solved prompts from data.train_files, add harder"),
        "openrlhf": _t("the data is too easy (groups all solved): drop solved prompts from --prompt_data, add harder"),
    },
    "easier_data": {
        "generic": _t("the data is too hard (groups all failed): easier prompts or a curriculum from easy to hard"),
        "align_kit": _t("the data is too hard (groups all failed): an easier task mix or a curriculum"),
        "trl": _t("the data is too hard (groups all failed): easier prompts in train_dataset, or a curriculum"),
        "verl": _t("the data is too hard (groups all failed): easier prompts in data.train_files, or a curriculum"),
        "openrlhf": _t("the data is too hard (groups all failed): easier prompts in --prompt_data, or a curriculum"),
    },
    "fix_reward": {
        "generic": _t("check the reward function gives signal: score a few completions by hand"),
        "align_kit": _t("check the reward gives signal: score a few completions by hand (the reward= nodes)"),
        "trl": _t("check the reward_funcs give signal: call them on a few completions by hand"),
        "verl": _t("check the reward gives signal: call custom_reward_function.path's function on a few responses"),
        "openrlhf": _t("check the reward gives signal: query --remote_rm_url / --reward_pretrain on a few responses"),
    },
    "lower_format_weight": {
        "generic": _t("lower the format reward's weight against correctness"),
        "align_kit": _t("lower the format reward's weight: reward.format.weight"),
        "trl": _t("lower the format function's entry in reward_weights"),
        "verl": _t("verl has no reward weights: lower the format term inside the reward function"),
        "openrlhf": _t("OpenRLHF has no reward weights: lower the format term inside the reward function"),
    },
    "gdpo": {
        "generic": _t("normalise each reward in its group before summing (GDPO)"),
        "align_kit": _t("advantage=gdpo (normalise each reward in its group before summing)"),
        "trl": _t('multi_objective_aggregation="normalize_then_sum" (GDPO)'),
        "verl": _t("verl has no GDPO aggregation: normalise each reward term in the reward function"),
        "openrlhf": _t("OpenRLHF has no GDPO aggregation: normalise each reward term in the reward function"),
    },
    "ngrpo": {
        "generic": _t("give all-equal groups a signal with a virtual full-score sample (NGRPO)"),
        "align_kit": _t("advantage=ngrpo (a virtual full-score sample gives all-equal groups a signal)"),
        "trl": _t("TRL has no NGRPO advantage (no knob); use dynamic sampling or data changes instead"),
        "verl": _t("verl has no NGRPO advantage (no knob); use algorithm.filter_groups instead"),
        "openrlhf": _t("OpenRLHF has no NGRPO advantage (no knob); use --dynamic_filtering instead"),
    },
    "overlong_filter": {
        "generic": _t("mask truncated completions out of the loss (DAPO overlong filtering)"),
        "align_kit": lambda s: (
            "overlong=filter_and_punish (also mask truncated completions out of the loss)"
            if s.overlong_shaping
            else "overlong=filter (mask truncated completions out of the loss)"
        ),
        "trl": _t("mask_truncated_completions=True"),
        "verl": _t(
            "verl has no truncated-completion mask: use the overlong buffer "
            "(reward_model.overlong_buffer.enable=True) or raise data.max_response_length"
        ),
        "openrlhf": _t("OpenRLHF has no truncated-completion mask: use --overlong_buffer_len instead"),
    },
    "overlong_shaping": {
        "generic": _t("punish completions softly as they approach the length budget (DAPO overlong shaping)"),
        "align_kit": lambda s: (
            "overlong shaping is on: raise overlong.punish_weight or widen overlong.cache_length"
            if s.overlong_shaping
            else ("overlong=filter_and_punish" if s.overlong_filter else "overlong=soft_punish")
        ),
        "trl": lambda s: (
            "add trl.rewards.get_soft_overlong_punishment(max_completion_len="
            f"{s.max_completion_length or 'max_completion_length'}, soft_punish_cache=...) to reward_funcs"
        ),
        "verl": _t(
            "reward_model.overlong_buffer.enable=True reward_model.overlong_buffer.len=<tokens> "
            "reward_model.overlong_buffer.penalty_factor=1.0 (DAPO recipe)"
        ),
        "openrlhf": _t("--overlong_buffer_len <tokens> --overlong_penalty_factor 1.0"),
    },
    "more_data": {
        "generic": _t("add training data (more prompts, fewer repeats)"),
        "align_kit": _t("add training data (a larger task split)"),
        "trl": _t("add training data to train_dataset"),
        "verl": _t("add training data to data.train_files"),
        "openrlhf": _t("add training data to --prompt_data"),
    },
    "clip_higher": {
        "generic": _t("Clip-Higher: an upper clip bound eps_high=0.28 above eps_low=0.2"),
        "align_kit": _t("clip=clip_higher (eps_high 0.28)"),
        "trl": _t("epsilon_high=0.28 (Clip-Higher; epsilon stays 0.2)"),
        "verl": _t("actor_rollout_ref.actor.clip_ratio_low=0.2 actor_rollout_ref.actor.clip_ratio_high=0.28"),
        "openrlhf": _t("--eps_clip_low_high 0.2 0.28"),
    },
    "raise_eps_high": {
        "generic": lambda s: f"raise the upper clip bound to {_next_eps_high(s)}{_now(s.eps_high)}",
        "align_kit": lambda s: f"clip.eps_high={_next_eps_high(s)}{_now(s.eps_high)}",
        "trl": lambda s: f"epsilon_high={_next_eps_high(s)}{_now(s.eps_high)}",
        "verl": lambda s: f"actor_rollout_ref.actor.clip_ratio_high={_next_eps_high(s)}{_now(s.eps_high)}",
        "openrlhf": lambda s: f"--eps_clip_low_high 0.2 {_next_eps_high(s)}{_now(s.eps_high)}",
    },
    "gspo": {
        "generic": _t("clip one length-normalised ratio per sequence (GSPO), for MoE models and long sequences"),
        "align_kit": _t("clip=gspo (or recipe=gspo)"),
        "trl": _t('importance_sampling_level="sequence", epsilon=3e-4, epsilon_high=4e-4 (GSPO)'),
        "verl": _t(
            "actor_rollout_ref.actor.policy_loss.loss_mode=gspo actor_rollout_ref.actor.clip_ratio_low=3e-4 "
            "actor_rollout_ref.actor.clip_ratio_high=4e-4"
        ),
        "openrlhf": _t("--policy_loss_type gspo"),
    },
    "lower_lr": {
        "generic": lambda s: f"lower the learning rate to {_lower_lr(s)}{_now(s.learning_rate)}",
        "align_kit": lambda s: f"trainer.learning_rate={_lower_lr(s)}{_now(s.learning_rate)}",
        "trl": lambda s: f"learning_rate={_lower_lr(s)}{_now(s.learning_rate)}",
        "verl": lambda s: f"actor_rollout_ref.actor.optim.lr={_lower_lr(s)}{_now(s.learning_rate)}",
        "openrlhf": lambda s: f"--actor_learning_rate {_lower_lr(s)}{_now(s.learning_rate)}",
    },
    "fewer_updates": {
        "generic": _t("take fewer updates per rollout batch"),
        "align_kit": _t("trainer.num_iterations=1 and fewer trainer.steps_per_generation"),
        "trl": _t("num_iterations=1 and fewer steps_per_generation"),
        "verl": _t("actor_rollout_ref.actor.ppo_epochs=1 and a larger actor_rollout_ref.actor.ppo_mini_batch_size"),
        "openrlhf": _t("--max_epochs 1 and a larger --train_batch_size (fewer updates per rollout)"),
    },
    "add_kl": {
        "generic": _t("add a KL penalty to the reference policy"),
        "align_kit": _t("kl=constant (kl.beta=0.04)"),
        "trl": _t("beta=0.04 (a KL term to the reference; TRL's default is 0.0)"),
        "verl": _t("actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0.001"),
        "openrlhf": _t("--use_kl_loss --init_kl_coef 0.001"),
    },
    "raise_kl": {
        "generic": lambda s: f"raise the KL coefficient to {_raised_beta(s)}{_now(s.beta)}",
        "align_kit": lambda s: f"kl.beta={_raised_beta(s)}{_now(s.beta)}",
        "trl": lambda s: f"beta={_raised_beta(s)}{_now(s.beta)}",
        "verl": lambda s: f"actor_rollout_ref.actor.kl_loss_coef={_raised_beta(s)}{_now(s.beta)}",
        "openrlhf": lambda s: f"--init_kl_coef {_raised_beta(s)}{_now(s.beta)}",
    },
    "raise_max_length": {
        "generic": lambda s: f"raise the completion length budget to {_double(s.max_completion_length)}",
        "align_kit": lambda s: f"trainer.max_completion_length={_double(s.max_completion_length)}",
        "trl": lambda s: f"max_completion_length={_double(s.max_completion_length)}",
        "verl": lambda s: f"data.max_response_length={_double(s.max_completion_length)}",
        "openrlhf": lambda s: f"--generate_max_len {_double(s.max_completion_length)}",
    },
    "match_sampler_precision": {
        "generic": _t("sample in the trainer's precision (the same dtype on both sides) and check tokenization"),
        "align_kit": _t("rollout.dtype=float32 (the trainer's precision) and keep rollout.check_retokenize=true"),
        "trl": _t("run vLLM and the trainer in the same dtype (model_init_kwargs dtype), cast_lm_head_to_fp32=True"),
        "verl": _t("actor_rollout_ref.rollout.dtype to the actor's dtype (it is bfloat16 by default)"),
        "openrlhf": _t("OpenRLHF has no sampler precision flag: run vLLM in the trainer's dtype (--bf16 on both)"),
    },
    "is_correction": {
        "generic": _t("correct the sampler/trainer gap with truncated importance sampling"),
        "align_kit": _t("rollout.is_correction=token_truncate (bounded by rollout.is_cap_max)"),
        "trl": _t('vllm_importance_sampling_correction=True, vllm_importance_sampling_mode="token_truncate"'),
        "verl": _t(
            "algorithm.rollout_correction.rollout_is=token algorithm.rollout_correction.rollout_is_threshold=2.0"
        ),
        "openrlhf": _t("--enable_vllm_is_correction --vllm_is_truncated_threshold 2"),
    },
    "unfiltered_sampler": {
        "generic": _t(
            "sample from the whole distribution while the importance-sampling correction is on (top_p 1, no top_k, "
            "no min_p), or turn the correction off: a filtered sampler scales every ratio by the kept mass"
        ),
        "align_kit": _t("rollout.top_p=1.0 (and trainer.top_k=0 trainer.min_p=null), or rollout.is_correction=none"),
        "trl": _t(
            "top_p=1.0, top_k=0, min_p=None while vllm_importance_sampling_correction=True (TRL issue 6789), or "
            "vllm_importance_sampling_correction=False"
        ),
        "verl": _t(
            "actor_rollout_ref.rollout.top_p=1.0 actor_rollout_ref.rollout.top_k=-1 while "
            "algorithm.rollout_correction is on, or turn the correction off"
        ),
        "openrlhf": _t("--top_p 1.0 (no top-k) while --enable_vllm_is_correction is on, or drop that flag"),
    },
    "router_aux_off": {
        "generic": _t("turn the MoE router's auxiliary (load-balancing) loss off for RL"),
        "align_kit": _t("the policy model's router_aux_loss_coef=0 (or output_router_logits=false) for RL"),
        "trl": _t(
            'model_init_kwargs={"output_router_logits": False} (transformers adds router_aux_loss_coef x the '
            "load-balancing loss only when it is True)"
        ),
        "verl": _t(
            "actor_rollout_ref.model.override_config.router_aux_loss_coef=0 (Megatron: "
            "actor_rollout_ref.actor.megatron.override_transformer_config.moe_aux_loss_coeff=0)"
        ),
        "openrlhf": _t("--aux_loss_coef 0"),
    },
    "routing_replay": {
        "generic": _t("on an MoE model, replay the sampler's expert routing in training (routing replay)"),
        "align_kit": _t("routing_replay=r2 (MoE models)"),
        "trl": _t("TRL has no routing replay (no knob); on an MoE model, GSPO's sequence clip is the fallback"),
        "verl": _t("actor_rollout_ref.actor.router_replay.mode=R2 (MoE, Megatron backend)"),
        "openrlhf": _t("OpenRLHF has no routing replay (no knob); --policy_loss_type gspo is the fallback"),
    },
    "group_size": {
        "generic": lambda s: f"group size 8-16 (18.3.8){_now(s.num_generations)}",
        "align_kit": lambda s: f"trainer.num_generations=16 (18.3.8: 8-16){_now(s.num_generations)}",
        "trl": lambda s: f"num_generations=16 (18.3.8: 8-16){_now(s.num_generations)}",
        "verl": lambda s: f"actor_rollout_ref.rollout.n=16 (18.3.8: 8-16){_now(s.num_generations)}",
        "openrlhf": lambda s: f"--n_samples_per_prompt 16 (18.3.8: 8-16){_now(s.num_generations)}",
    },
    "temperature": {
        "generic": _t("sampling temperature 0.8-1.0 (18.3.8)"),
        "align_kit": _t("rollout.temperature=1.0 (18.3.8: 0.8-1.0)"),
        "trl": _t("temperature=1.0 (18.3.8: 0.8-1.0)"),
        "verl": _t("actor_rollout_ref.rollout.temperature=1.0 (18.3.8: 0.8-1.0)"),
        "openrlhf": _t("--temperature 1.0 (18.3.8: 0.8-1.0)"),
    },
}


def in_terms(fixes: Iterable[str], framework: str, context: RunContext) -> str:
    """The fixes the run still lacks, in `framework`'s terms, in 18.3.8's tuning order (then the rule's own, best
    first), joined; what to do when every one is on."""
    wanted = list(dict.fromkeys(found for fix in fixes if (found := resolve(fix, context)) is not None))
    wanted.sort(key=PRIORITY.__getitem__)  # stable: the rule's order within a level
    if not wanted:
        return "every fix this rule names is already on: check the data and the reward by hand"
    return "; ".join(text(fix, framework, context) for fix in wanted)
