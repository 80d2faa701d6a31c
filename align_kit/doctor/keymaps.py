"""Each framework's logged metric names -> the concepts the monitor's rules read (its own metric names, TRL's where
TRL has one), which framework a set of keys comes from, and the one conversion of a logged value to a float.

A user's `--map concept=column` wins over every built-in name. Each concept is read from one source key: when a
log holds two keys for the same concept (verl's `actor/entropy` and older `actor/entropy_loss`, several val-core
datasets) the first in the built-in order wins and the others are listed as unmapped.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from align_kit.doctor import reward_roles

# The names the rules read (align_kit/monitor/rules.py). A key map may point only at these.
CONCEPTS = (
    "loss",
    "grad_norm",
    "learning_rate",
    "reward",
    "reward_std",
    "eval_reward",
    "frac_reward_zero_std",
    "groups/flat_fraction",
    "entropy",
    "completions/mean_length",
    "completions/max_length",
    "completions/min_length",
    "completions/clipped_ratio",
    "kl",
    "clip_ratio/region_mean",
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "policy_ratio/mean",
    "policy_ratio/abs_dev",
    "sampling/sampling_logp_difference/mean",
    "sampling/importance_sampling_ratio/mean",
    "mismatch/logp_abs_diff/mean",
    "mismatch/kl",
    "adv/zero_std_fraction",
    "reward/max_attainable",
    # Reward components by role (`roles`): the accuracy-like and the format-like component's mean.
    "accuracy",
    "format",
)
# One reward function's mean: `rewards/<name>/mean` (older TRL logs `rewards/<name>` without `/mean`).
PER_REWARD = re.compile(r"^rewards/([^/]+)(?:/mean)?$")

# TRL's GRPOTrainer, current names and the older ones (TRL <= 0.15 logged completion_length and rewards/<f>;
# 0.16-0.17 a single clip_ratio).
TRL = {
    "loss": "loss",
    "grad_norm": "grad_norm",
    "learning_rate": "learning_rate",
    "reward": "reward",
    "reward_std": "reward_std",
    "eval_reward": "eval_reward",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "entropy": "entropy",
    "entropy/mean": "entropy",  # ms-swift's GRPO (TRL's names otherwise): entropy/mean, /max, /min
    "completions/mean_length": "completions/mean_length",
    "completion_length": "completions/mean_length",
    "completions/max_length": "completions/max_length",
    "completions/min_length": "completions/min_length",
    "completions/clipped_ratio": "completions/clipped_ratio",
    "kl": "kl",
    "clip_ratio/region_mean": "clip_ratio/region_mean",
    "clip_ratio": "clip_ratio/region_mean",
    "clip_ratio/low_mean": "clip_ratio/low_mean",
    "clip_ratio/high_mean": "clip_ratio/high_mean",
    "sampling/sampling_logp_difference/mean": "sampling/sampling_logp_difference/mean",
    "sampling/importance_sampling_ratio/mean": "sampling/importance_sampling_ratio/mean",
}

# verl (verl/trainer/ppo/metric_utils.py and the actor's metrics). critic/score is the reward function's score;
# critic/rewards has the in-reward KL penalty folded in, so it is not the reward. actor/ppo_kl is old-vs-new
# policy, not the KL to the reference (that is actor/kl_loss); critic/grad_norm is the critic's.
VERL = {
    "critic/score/mean": "reward",
    "actor/entropy": "entropy",
    "actor/entropy_loss": "entropy",  # older verl's name for the same mean token entropy
    "actor/pg_clipfrac": "clip_ratio/region_mean",
    "response_length/mean": "completions/mean_length",
    "response_length/max": "completions/max_length",
    "response_length/min": "completions/min_length",
    "response_length/clip_ratio": "completions/clipped_ratio",
    "actor/kl_loss": "kl",
    "actor/grad_norm": "grad_norm",
    "actor/pg_loss": "loss",
    "actor/lr": "learning_rate",
    # Rollout correction (docs/algo/rollout_corr.md): the mean IS weight trainer/sampler and the mean absolute
    # log-perplexity gap; older verl logged the mean absolute token-probability gap as training/rollout_probs_diff.
    "rollout_corr/rollout_is_mean": "sampling/importance_sampling_ratio/mean",
    "rollout_corr/log_ppl_abs_diff": "sampling/sampling_logp_difference/mean",
    "training/rollout_probs_diff_mean": "sampling/sampling_logp_difference/mean",
    # rollout_corr/kl is KL(rollout || training policy) (verl/trainer/ppo/rollout_corr_helper.py), k3_kl its
    # k3 estimate (read only when kl is absent).
    "rollout_corr/kl": "mismatch/kl",
    "rollout_corr/k3_kl": "mismatch/kl",
}
# The validation reward: val-core/<dataset>/<acc|reward|score>/mean@N (newer), val/test_score/<dataset> (older).
VERL_EVAL = re.compile(r"^val-core/.+/(?:acc|reward|score)/mean@\d+$|^val/test_score/.+$")

# TRL's PPOTrainer and the RLOOTrainer before TRL 0.21 (docs/source/logging.md, "PPO Logging"): objective/scores is
# the reward model's score, objective/rlhf_reward that score less the KL penalty (read only when scores is absent);
# policy/entropy_avg is the mean token entropy, objective/entropy a sum over each sequence's tokens (read only when
# entropy_avg is absent); val/ratio the mean new/old probability ratio.
TRL_PPO = {
    "objective/scores": "reward",
    "objective/rlhf_reward": "reward",
    "objective/kl": "kl",
    "policy/entropy_avg": "entropy",
    "objective/entropy": "entropy",
    "policy/clipfrac_avg": "clip_ratio/region_mean",
    "val/ratio": "policy_ratio/mean",
    "loss/policy_avg": "loss",
    "lr": "learning_rate",
    "eval_objective/scores": "eval_reward",
}

# NeMo-RL (docs/guides/grpo.md "Metrics"; nemo_rl/algorithms/loss_functions.py), logged under train/:
# token_mult_prob_error is the masked mean of exp(|logp_generation - logp_training|), 1.0 when they agree; it is read
# as its log (`CONVERSIONS`), an upper bound of the mean |logp gap| (Jensen) and close to it for small gaps.
# gen_kl_error is the KL between the generation and the training policy; validation/accuracy the eval score.
# approx_entropy is the sampled tokens' mean -log p, mean_gen_tokens_per_sample the mean completion length,
# truncation_rate the share of completions cut at the budget, probs_ratio the mean new/old ratio and
# sampling_importance_ratio the mean training/generation ratio.
NEMO_RL = {
    "reward": "reward",
    "loss": "loss",
    "grad_norm": "grad_norm",
    "lr": "learning_rate",
    "approx_entropy": "entropy",
    "mean_gen_tokens_per_sample": "completions/mean_length",
    "truncation_rate": "completions/clipped_ratio",
    "probs_ratio": "policy_ratio/mean",
    "sampling_importance_ratio": "sampling/importance_sampling_ratio/mean",
    "token_mult_prob_error": "mismatch/logp_abs_diff/mean",
    "gen_kl_error": "mismatch/kl",
    "validation/accuracy": "eval_reward",
}

# prime-rl's trainer (src/prime_rl/trainer/rl/train.py's step message; docs "Stability" metrics) and orchestrator
# (reward/all/mean, reward/mean).
PRIME_RL = {
    "loss/mean": "loss",
    "entropy/mean": "entropy",
    "mismatch_kl/mean": "mismatch/kl",
    "optim/lr": "learning_rate",
    "optim/grad_norm": "grad_norm",
    "reward/mean": "reward",
    "reward/all/mean": "reward",
}

# SkyRL's skyrl_train trainer (policy/* from the policy worker, reward/avg_raw_reward from the generator output).
SKYRL = {
    "reward/avg_raw_reward": "reward",
    "loss/avg_final_rewards": "reward",
    "policy/policy_entropy": "entropy",
    "policy/policy_kl": "kl",
    "policy/raw_grad_norm": "grad_norm",
    "policy/grad_norm": "grad_norm",
    "policy/ppo_clip_ratio": "clip_ratio/region_mean",
    "policy/policy_loss": "loss",
    "generate/avg_num_tokens": "completions/mean_length",
}

# LLaMA-Factory's trainer_log.jsonl (src/llamafactory/train/callbacks.py, LogCallback.on_log): the Trainer's last
# log entry renamed (learning_rate -> lr), with current_steps/total_steps; its `accuracy` is DPO's
# rewards/accuracies, no GRPO reward component.
LLAMAFACTORY = {"loss": "loss", "reward": "reward", "lr": "learning_rate"}

# OpenRLHF's PPO/GRPO status (openrlhf/trainer/ray/ppo_actor.py, logged under train/ to W&B): entropy_loss is the
# masked mean token entropy; ppo_kl is old-vs-new policy; vllm_kl is the sampler-vs-trainer KL.
OPENRLHF = {
    "policy_loss": "loss",
    "actor_lr": "learning_rate",
    "reward": "reward",
    "kl": "kl",
    "response_length": "completions/mean_length",
    "entropy_loss": "entropy",
    "ppo_clip_ratio": "clip_ratio/region_mean",
    "vllm_kl": "mismatch/kl",
    "grad_norm": "grad_norm",
}

# align_kit logs TRL's names and its own, which are the concepts themselves.
ALIGN_KIT = {**TRL, **{concept: concept for concept in CONCEPTS}}

# Names printed on console step lines (`readers.step_pairs`), normalised: lower case, words joined by `_`, dots of
# abbreviations dropped. Sources: mlx-lm's mlx_lm/tuner/grpo_trainer.py (the `Iter N: Train loss ...` report);
# prime-rl's trainer (src/prime_rl/trainer/rl/train.py, `Step N | Loss | Entropy | Mismatch KL | Grad. Norm | LR`)
# and orchestrator (src/prime_rl/orchestrator/orchestrator.py, `Step N | Reward | Seq. Length`); DeepSpeed-Chat's
# step 3 (training/step3_rlhf_finetuning/main.py: `act_loss`, `cri_loss`, `average reward score`); Megatron's
# iteration line (megatron/training/training.py: `learning rate`, `grad norm`, `loss`).
PRINTED = {
    **ALIGN_KIT,
    "train_loss": "loss",
    "act_loss": "loss",  # DeepSpeed-Chat: the actor's (policy) loss
    "total_rewards_mean": "reward",
    "total_rewards_std": "reward_std",
    "val_total_rewards_mean": "eval_reward",
    "average_reward_score": "reward",
    "mismatch_kl": "mismatch/kl",
    "lr": "learning_rate",
    "learning_rate": "learning_rate",
    "grad_norm": "grad_norm",
    "seq_length": "completions/mean_length",
}
# One reward function's mean as mlx-lm prints it: `r1_accuracy_reward_func mean` -> r1_accuracy_reward_func_mean (not
# a validation line's `val_...`, and not the totals above, which the table names first).
PRINTED_COMPONENT = re.compile(r"^(?!val_|total_|grouped_)(\w*reward\w*?)_mean$")
# An averaged reward or accuracy as consoles word it: `Avg Reward`, `average reward`, `mean_accuracy`, `Reward moyen
# (100 ep)` (an average over a window of episodes); not `Best Reward` (the best so far is no current value).
PRINTED_AVERAGE = re.compile(
    r"^(?:(?:avg|average|mean|running|smoothed)_)?(?P<what>reward|accuracy)"
    r"(?:_(?:moyen|moyenne))?(?:_\([^)]*\))?$"  # `reward_mean` is the table names' own (abbreviated_name)
)
# Printed metric names no rule reads, still evidence that a line is a metric line (a critic's loss, throughput).
PRINTED_OTHER = frozenset(
    {
        "cri_loss",
        "unsuper_loss",
        "val_loss",
        "grouped_rewards_mean",
        "grouped_rewards_std",
        "throughput",
        "mfu",
        "tokens/sec",
        "it/sec",
        "peak_mem",
        "loss_scale",
    }
)

BUILT_IN = {
    "trl": TRL,
    "trl_ppo": TRL_PPO,
    "verl": VERL,
    "openrlhf": OPENRLHF,
    "nemo_rl": NEMO_RL,
    "prime_rl": PRIME_RL,
    "skyrl": SKYRL,
    "llamafactory": LLAMAFACTORY,
    "align_kit": ALIGN_KIT,
    "generic": ALIGN_KIT,
    "printed": PRINTED,
}
# Whose terms the advice uses, for a family of names that is not a framework the advice knows by that name.
ADVICE_FRAMEWORK = {"trl_ppo": "trl", "printed": "generic"}
# A logged value that is another quantity's function: read as the concept's value.
CONVERSIONS = {"token_mult_prob_error": lambda value: math.log(value) if value > 0 else math.nan}

# Bookkeeping every logger writes beside the metrics: not metrics, never listed as unmapped.
NOT_METRICS = frozenset(
    {
        "step",
        "global_step",
        "epoch",
        "_step",
        "_runtime",
        "_timestamp",
        "train/global_step",
        "train/epoch",
        "training/global_step",
        "training/epoch",
        "Step",
        "iteration",
        "num_tokens",
        "train/num_tokens",
        "current_steps",
        "total_steps",
        "episode",
        "eps",
    }
)

_VERL_MARKS = ("actor/", "critic/", "response_length/", "val-core/", "val-aux/", "timing_s/", "global_seqlen/")
_OPENRLHF_ONLY = frozenset({"policy_loss", "actor_lr", "ppo_clip_ratio", "response_length", "ppo_kl", "vllm_kl"})
_ALIGN_KIT_ONLY = frozenset(set(CONCEPTS) - set(TRL.values()) - {"eval_reward", "accuracy", "format"})
# Names only one family logs (after HF's train/ prefix is taken off), each family's telling marks.
_MARKS = (
    (
        "trl_ppo",
        frozenset({"objective/scores", "objective/rlhf_reward", "objective/kl", "policy/approxkl_avg", "val/ratio"}),
    ),
    ("nemo_rl", frozenset({"token_mult_prob_error", "gen_kl_error", "approx_entropy", "mean_gen_tokens_per_sample"})),
    ("prime_rl", frozenset({"mismatch_kl/mean", "entropy/mean", "optim/grad_norm", "loss/mean"})),
    (
        "skyrl",
        frozenset({"policy/policy_entropy", "reward/avg_raw_reward", "policy/policy_loss", "policy/raw_grad_norm"}),
    ),
    # LLaMA-Factory's step keys are bookkeeping (NOT_METRICS): its JSONL reader names the family itself.
)


def _bare(key: str) -> str:
    """A W&B key without HF's `train/` prefix, and `eval/x` as the Trainer names it, `eval_x`."""
    if key.startswith("train/"):
        return key[6:]
    if key.startswith("eval/"):
        return "eval_" + key[5:]
    return key


def detect_framework(keys: Iterable[str]) -> str:
    """Whose names these are: verl (actor/, critic/, response_length/ ...), TRL's PPO/RLOO (objective/...), NeMo-RL,
    prime-rl, SkyRL, LLaMA-Factory, openrlhf (policy_loss, actor_lr ...), align_kit (its own metrics beside TRL's),
    trl, or generic when none of them."""
    keys = list(keys)
    if any(key.startswith(_VERL_MARKS) for key in keys):
        return "verl"
    bare = {_bare(key) for key in keys}
    marked = [family for family, marks in _MARKS if bare & marks]
    if bare & _OPENRLHF_ONLY:
        marked.append("openrlhf")
    if bare & _ALIGN_KIT_ONLY:
        marked.append("align_kit")
    if any(key in TRL or PER_REWARD.match(key) for key in bare):
        marked.append("trl")
    if not marked:
        return "generic"
    # One telling name is not enough: ms-swift logs TRL's names with prime-rl's `entropy/mean` beside them. The family
    # whose table names the most keys wins (the first of the marked families on a tie).
    return max(marked, key=lambda family: sum(builtin_concept(key, family) is not None for key in keys))


def builtin_concept(key: str, framework: str) -> str | None:
    """The concept a framework's key names, or None."""
    table = BUILT_IN.get(framework, ALIGN_KIT)
    if key in table:
        return table[key]
    if framework == "verl":
        return "eval_reward" if VERL_EVAL.match(key) else None
    bare = _bare(key)
    if bare in table:
        return table[bare]
    if framework == "printed" and (match := PRINTED_COMPONENT.match(key)) and match.group(1) not in table:
        return f"rewards/{match.group(1)}/mean"
    if framework == "printed" and (match := PRINTED_AVERAGE.match(key)):
        return match.group("what")
    if framework in ("trl", "align_kit", "generic", "printed") and (match := PER_REWARD.match(bare)):
        return f"rewards/{match.group(1)}/mean"
    return None


_KNOWN: dict[str, str | None] = {}


def known_concept(key: str) -> str | None:
    """The concept any framework's built-in names map `key` to (the first family's), or None."""
    if key in _KNOWN:
        return _KNOWN[key]
    concept = _KNOWN[key] = next(
        (concept for family in BUILT_IN if (concept := builtin_concept(key, family)) is not None), None
    )
    return concept


_MEAN_SUFFIXES = ("_mean", "/mean", " mean")
_SHORTEST_PREFIX = 4  # `rewa` may start reward or reward_std: shorter prefixes name too much


@functools.lru_cache(maxsize=4096)  # a table's title cells repeat; prose lines tried as headers repeat words
def abbreviated_name(header: str) -> str | None:
    """The TRL/align_kit name a shortened table header stands for, when exactly one concept fits: the last part of a
    name, whole or cut short (`mean_len` -> completions/mean_length), a name with `_mean` added (`reward_mean` ->
    reward), or a header cut short (`completions/clipp...` -> completions/clipped_ratio). None when none or several
    concepts fit."""
    header = header.strip().rstrip(".…").strip()
    if len(header) < _SHORTEST_PREFIX:
        return None
    if header in ALIGN_KIT:
        return header
    for suffix in _MEAN_SUFFIXES:
        if header.endswith(suffix) and header[: -len(suffix)] in ALIGN_KIT:
            return header[: -len(suffix)]
    fits = {
        name: concept
        for name, concept in ALIGN_KIT.items()
        if name.startswith(header) or ("/" in name and name.rsplit("/", 1)[1].startswith(header))
    }
    return next(iter(fits)) if len(set(fits.values())) == 1 else None


def is_printed_metric(key: str) -> bool:
    """Whether a normalised console name is a metric no rule reads (`PRINTED_OTHER`): evidence, not a concept."""
    return key in PRINTED_OTHER


def is_known_metric(key: str) -> bool:
    """Whether any framework's built-in names map `key` to a concept: the evidence that a row is a metric row."""
    return known_concept(key) is not None


def _priority(key: str, framework: str) -> int:
    """Which of two keys for one concept wins: the earlier in the built-in table (current names before older)."""
    table = BUILT_IN.get(framework, ALIGN_KIT)
    bare = _bare(key)
    for rank, name in enumerate(table):
        if name in (key, bare):
            return rank
    return len(table)


def unknown_concepts(key_map: Mapping[str, str]) -> list[str]:
    """The concepts of a user's key map that no rule reads (a typo such as `rewrad`)."""
    return [concept for concept in key_map if concept not in CONCEPTS and not PER_REWARD.match(concept)]


def resolve(
    keys: Iterable[str], framework: str, key_map: Mapping[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """(source key -> concept for each key read, notes on keys that lost to another key for the same concept).
    `keys` in the order first seen; a user's key map ({concept: column}) comes first."""
    chosen: dict[str, str] = {}  # concept -> key
    notes: list[str] = []
    user = {column: concept for concept, column in (key_map or {}).items()}
    keys = list(keys)
    candidates: dict[str, list[str]] = {}
    for key in keys:
        concept = user.get(key) or builtin_concept(key, framework)
        if concept is not None:
            candidates.setdefault(concept, []).append(key)
    for concept, found in candidates.items():
        by_user = [key for key in found if user.get(key) == concept]
        ranked = by_user or sorted(found, key=lambda key: _priority(key, framework))  # stable: first seen on ties
        chosen[concept] = ranked[0]
        if len(found) > 1:
            others = ", ".join(key for key in found if key != ranked[0])
            notes.append(f"{concept} read from {ranked[0]}; also logged as {others} (left unmapped)")
    return {key: concept for concept, key in chosen.items()}, notes


def role_keys(
    mapping: Mapping[str, str], key_map: Mapping[str, str] | None = None, flat: Iterable[str] = ()
) -> tuple[dict[str, str], list[str]]:
    """({source key: role} for the reward components read as `accuracy` and `format`, notes). A component keeps its
    own concept (`rewards/<name>/mean`) too: its values are read under both. A role the user's map gives a column
    is not guessed; `flat` names the keys whose logged value never changes (`reward_roles.assign`)."""
    user = set((key_map or {}).values())
    components = [
        (key, match.group(1))
        for key, concept in mapping.items()
        if key not in user and (match := PER_REWARD.match(concept))
    ]
    if not components:
        return {}, []
    return reward_roles.assign(components, reward_roles.user_roles(key_map), flat)


def to_float(value: Any) -> float | None:
    """A logged value as a float (NaN and inf kept; "nan", "inf", "1e-3" as text parsed), None when it is no number
    (a bool, a phase name, a list, null)."""
    kind = type(value)
    if kind is float:
        return value
    if kind is int:
        return float(value)
    if kind is str:
        try:
            return float(value.strip())
        except ValueError:
            return None
    if kind is bool or not isinstance(value, int | float):
        return None
    return float(value)


def finite_number(value: Any) -> float | None:
    """A stated setting as a finite float (a learning rate, a clip bound), None when it is none."""
    number = to_float(value)
    return number if number is not None and math.isfinite(number) else None


def whole_number(value: Any) -> int | None:
    """A stated count as a positive int (a length budget, a group size), None when it is none."""
    number = finite_number(value)
    return int(number) if number is not None and number.is_integer() and number > 0 else None
