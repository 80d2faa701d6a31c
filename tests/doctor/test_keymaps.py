"""The built-in key maps: each framework's names to the concepts the rules read, the framework told from the keys,
a user's map winning, one source per concept, and logged values as floats."""

from __future__ import annotations

import math

import pytest

from align_kit.doctor.keymaps import builtin_concept, detect_framework, resolve, to_float


@pytest.mark.parametrize(
    ("key", "framework", "concept"),
    [
        # TRL, current and older names
        ("completions/mean_length", "trl", "completions/mean_length"),
        ("completion_length", "trl", "completions/mean_length"),
        ("rewards/accuracy/mean", "trl", "rewards/accuracy/mean"),
        ("rewards/accuracy", "trl", "rewards/accuracy/mean"),
        ("rewards/accuracy/std", "trl", None),
        ("clip_ratio", "trl", "clip_ratio/region_mean"),
        ("frac_reward_zero_std", "trl", "frac_reward_zero_std"),
        ("sampling/importance_sampling_ratio/mean", "trl", "sampling/importance_sampling_ratio/mean"),
        # HF's W&B callback prefixes train/ and writes eval_x as eval/x
        ("train/reward", "trl", "reward"),
        ("train/completions/clipped_ratio", "trl", "completions/clipped_ratio"),
        ("eval/reward", "trl", "eval_reward"),
        # verl
        ("critic/score/mean", "verl", "reward"),
        ("critic/rewards/mean", "verl", None),  # the KL-penalised reward, not the score
        ("actor/entropy", "verl", "entropy"),
        ("actor/entropy_loss", "verl", "entropy"),
        ("actor/pg_clipfrac", "verl", "clip_ratio/region_mean"),
        ("response_length/clip_ratio", "verl", "completions/clipped_ratio"),
        ("actor/kl_loss", "verl", "kl"),
        ("actor/ppo_kl", "verl", None),  # old-vs-new policy, not the KL to the reference
        ("actor/grad_norm", "verl", "grad_norm"),
        ("critic/grad_norm", "verl", None),
        ("actor/pg_loss", "verl", "loss"),
        ("val-core/openai/gsm8k/acc/mean@1", "verl", "eval_reward"),
        ("val/test_score/openai/gsm8k", "verl", "eval_reward"),
        ("rollout_corr/rollout_is_mean", "verl", "sampling/importance_sampling_ratio/mean"),
        ("training/rollout_probs_diff_mean", "verl", "sampling/sampling_logp_difference/mean"),
        # OpenRLHF
        ("train/policy_loss", "openrlhf", "loss"),
        ("entropy_loss", "openrlhf", "entropy"),
        ("ppo_clip_ratio", "openrlhf", "clip_ratio/region_mean"),
        ("ppo_kl", "openrlhf", None),
        ("response_length", "openrlhf", "completions/mean_length"),
        ("rollout_corr/kl", "verl", "mismatch/kl"),
        ("rollout_corr/k3_kl", "verl", "mismatch/kl"),
        # TRL's PPOTrainer and the older RLOOTrainer
        ("objective/scores", "trl_ppo", "reward"),
        ("objective/rlhf_reward", "trl_ppo", "reward"),
        ("objective/kl", "trl_ppo", "kl"),
        ("policy/entropy_avg", "trl_ppo", "entropy"),
        ("val/ratio", "trl_ppo", "policy_ratio/mean"),
        ("policy/clipfrac_avg", "trl_ppo", "clip_ratio/region_mean"),
        ("policy/approxkl_avg", "trl_ppo", None),  # old-vs-new policy
        ("objective/non_score_reward", "trl_ppo", None),
        # NeMo-RL (train/ prefix), prime-rl, SkyRL
        ("train/token_mult_prob_error", "nemo_rl", "mismatch/logp_abs_diff/mean"),
        ("train/gen_kl_error", "nemo_rl", "mismatch/kl"),
        ("train/reward", "nemo_rl", "reward"),
        ("validation/accuracy", "nemo_rl", "eval_reward"),
        ("train/approx_entropy", "nemo_rl", "entropy"),
        ("train/mean_gen_tokens_per_sample", "nemo_rl", "completions/mean_length"),
        ("train/truncation_rate", "nemo_rl", "completions/clipped_ratio"),
        ("mismatch_kl/mean", "prime_rl", "mismatch/kl"),
        ("entropy/mean", "prime_rl", "entropy"),
        ("optim/grad_norm", "prime_rl", "grad_norm"),
        ("policy/policy_entropy", "skyrl", "entropy"),
        ("reward/avg_raw_reward", "skyrl", "reward"),
        ("generate/avg_num_tokens", "skyrl", "completions/mean_length"),
        # LLaMA-Factory's trainer_log.jsonl
        ("lr", "llamafactory", "learning_rate"),
        ("accuracy", "llamafactory", None),  # DPO's rewards/accuracies, no GRPO component
        # align_kit: TRL's names and its own
        ("policy_ratio/abs_dev", "align_kit", "policy_ratio/abs_dev"),
        ("completion_length", "align_kit", "completions/mean_length"),
    ],
)
def test_built_in_names(key, framework, concept):
    assert builtin_concept(key, framework) == concept


@pytest.mark.parametrize(
    ("keys", "framework"),
    [
        (["loss", "reward", "completion_length"], "trl"),
        (["train/reward", "train/global_step"], "trl"),
        (["actor/entropy", "critic/score/mean"], "verl"),
        (["train/policy_loss", "train/actor_lr"], "openrlhf"),
        (["reward", "policy_ratio/mean", "groups/flat_fraction"], "align_kit"),
        (["acc", "my_reward"], "generic"),
        (["objective/scores", "objective/kl", "policy/entropy_avg"], "trl_ppo"),
        (["train/token_mult_prob_error", "train/reward"], "nemo_rl"),
        (["loss/mean", "entropy/mean", "mismatch_kl/mean"], "prime_rl"),
        (["policy/policy_entropy", "reward/avg_raw_reward"], "skyrl"),
        (["rewards/accuracy/mean", "reward"], "trl"),  # `accuracy`, a role concept, is no align_kit mark
    ],
)
def test_framework_from_keys(keys, framework):
    assert detect_framework(keys) == framework


def test_ppo_entropy_prefers_the_token_mean():
    # policy/entropy_avg is the mean token entropy; objective/entropy sums each sequence's tokens.
    mapping, notes = resolve(
        ["objective/entropy", "policy/entropy_avg", "objective/rlhf_reward", "objective/scores"], "trl_ppo"
    )
    assert mapping == {"policy/entropy_avg": "entropy", "objective/scores": "reward"}
    assert len(notes) == 2


def test_a_user_map_wins_and_one_key_per_concept():
    mapping, notes = resolve(["actor/entropy_loss", "actor/entropy", "score"], "verl", {"reward": "score"})
    # actor/entropy is first in verl's table (the current name), whatever the order the log shows them in.
    assert mapping == {"actor/entropy": "entropy", "score": "reward"}
    assert notes == ["entropy read from actor/entropy; also logged as actor/entropy_loss (left unmapped)"]
    # A user's map beats a built-in name for the same concept.
    mapping, _ = resolve(["reward", "my_reward"], "trl", {"reward": "my_reward"})
    assert mapping == {"my_reward": "reward"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, 1.0), (0.5, 0.5), ("0.25", 0.25), ("1e-3", 0.001), (" inf ", math.inf), ("-inf", -math.inf)],
)
def test_numbers(value, expected):
    assert to_float(value) == expected


def test_nan_is_kept_and_non_numbers_are_none():
    assert math.isnan(to_float(float("nan")))
    assert math.isnan(to_float("nan"))
    for value in (True, None, "warmup", [1.0], {"a": 1}):
        assert to_float(value) is None
