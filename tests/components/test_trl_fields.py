"""TRL-native nodes set exactly the TRL fields their papers call for (values from the papers)."""

from __future__ import annotations

import pytest

from align_kit.experiment.compose import compose
from align_kit.experiment.plan import COMPONENT_GROUPS, build_plan
from align_kit.train import component_choices

EXPECTED_FIELDS = {
    ("advantage", "grpo"): {"scale_rewards": "group", "multi_objective_aggregation": "sum_then_normalize"},
    ("advantage", "batch"): {"scale_rewards": "batch", "multi_objective_aggregation": "sum_then_normalize"},
    ("advantage", "dr_grpo"): {
        "scale_rewards": "none",
        "multi_objective_aggregation": "sum_then_normalize",
        "loss_type": "dr_grpo",
    },
    ("advantage", "gdpo"): {"scale_rewards": "group", "multi_objective_aggregation": "normalize_then_sum"},
    ("clip", "symmetric"): {"epsilon": 0.2, "epsilon_high": 0.2, "importance_sampling_level": "token"},
    ("clip", "clip_higher"): {"epsilon": 0.2, "epsilon_high": 0.28, "importance_sampling_level": "token"},
    ("clip", "gspo"): {
        "epsilon": 3e-4,
        "epsilon_high": 4e-4,
        "importance_sampling_level": "sequence",
        "loss_type": "grpo",
    },
    ("kl", "none"): {"beta": 0.0, "use_bias_correction_kl": False},
    ("kl", "constant"): {"beta": 0.04, "use_bias_correction_kl": False},
    # per_domain: TRL's beta is the largest domain beta (subtraction's 0.02), so the reference loads.
    ("kl", "per_domain"): {"beta": 0.02, "use_bias_correction_kl": False},
    ("kl", "reweighted"): {"beta": 0.04, "use_bias_correction_kl": True},
    ("advantage", "ngrpo"): {"scale_rewards": "group", "multi_objective_aggregation": "sum_then_normalize"},
    ("overlong", "none"): {"mask_truncated_completions": False},
    ("overlong", "filter"): {"mask_truncated_completions": True},
    ("overlong", "soft_punish"): {"mask_truncated_completions": False},
    ("overlong", "filter_and_punish"): {"mask_truncated_completions": True},
    ("rollout", "hf"): {"use_vllm": False, "temperature": 1.0, "top_p": 1.0},
}


@pytest.mark.parametrize(("group", "name"), list(EXPECTED_FIELDS), ids=[f"{g}={n}" for g, n in EXPECTED_FIELDS])
def test_node_sets_its_trl_fields(group, name, tmp_path):
    overrides = [f"{group}={name}"] + (["advantage=grpo"] if (group, name) == ("clip", "gspo") else [])
    plan = build_plan(compose(overrides), component_choices(), str(tmp_path))
    assert plan.components[group].grpo_fields() == EXPECTED_FIELDS[(group, name)]
    for field, value in EXPECTED_FIELDS[(group, name)].items():
        assert plan.grpo_kwargs[field] == value


def test_every_node_with_trl_fields_is_listed(tmp_path):
    plan = build_plan(compose([]), component_choices(), str(tmp_path))
    setting = {group for group in COMPONENT_GROUPS if plan.components[group].grpo_fields()}
    assert {group for group, _ in EXPECTED_FIELDS} == setting


def test_bias_corrected_kl_switches_trl_flag(tmp_path):
    plan = build_plan(compose(["kl=constant", "kl.bias_corrected=true"]), component_choices(), str(tmp_path))
    assert plan.grpo_kwargs["use_bias_correction_kl"] is True


@pytest.mark.parametrize("name", ["soft_punish", "filter_and_punish"])
def test_soft_punishment_is_appended_with_its_own_weight(name, tmp_path):
    cfg = compose([f"overlong={name}", "overlong.punish_weight=0.5"])
    plan = build_plan(cfg, component_choices(), str(tmp_path))
    assert [s.name for s in plan.rewards] == ["correctness", "format", "soft_overlong"]
    assert plan.grpo_kwargs["reward_weights"] == [0.8, 0.2, 0.5]
    punish = plan.rewards[-1].func
    # Budget 32, cache 8: 0 up to 24 tokens, then (24 - L) / 8, and -1 past the budget (DAPO Eq. 13).
    lengths = [10, 24, 25, 28, 32, 33]
    assert punish(completion_ids=[[0] * n for n in lengths]) == [0.0, 0.0, -0.125, -0.5, -1.0, -1.0]
