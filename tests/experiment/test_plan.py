"""Bad configurations fail before any model loads, with one line naming the keys and the fix; the batch shapes
counted over processes; the notes a plan carries."""

from __future__ import annotations

import pytest
from hydra.errors import ConfigCompositionException

from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from tests.plans import plan_for

BAD_CONFIGS = [
    (
        ["clip=clip_higher", "clip.eps_high=0.1"],
        "clip.eps_high=0.1 is below clip.eps_low=0.2; Clip-Higher only ever raises the upper bound: "
        "set clip.eps_high >= clip.eps_low",
    ),
    (
        ["kl=constant", "kl.beta=-0.01"],
        "kl.beta=-0.01: expected a number >= 0 (kl=none for no KL term)",
    ),
    (
        ["clip=gspo", "advantage=dr_grpo"],
        "advantage=dr_grpo sets loss_type='dr_grpo' but clip=gspo sets loss_type='grpo'; these nodes cannot be "
        "combined (GSPO's sequence ratio needs the per-sequence 'grpo' loss, not a token-aggregated one)",
    ),
    (
        ["clip=gspo", "trainer.loss_type=dapo"],
        "trainer.loss_type='dapo' contradicts clip=gspo, which sets loss_type='grpo'; change the clip node's own "
        "key (see conf/clip/) or select another clip node (GSPO's sequence ratio needs the per-sequence 'grpo' "
        "loss, not a token-aggregated one)",
    ),
    (
        ["reward=[correctness]"],
        "a perfect completion earns 0.8*1 (correctness) = 0.8 < 1.0, so group normalisation loses resolution "
        "and the reward plateaus below 1.0 (the training-stability chapter, 16.6.3); "
        "raise reward.<name>.weight so the maximum is 1.0, or set train.allow_reward_max_below_one=true",
    ),
    (
        ["clip=clip_higher", "trainer.epsilon_high=0.3"],
        "trainer.epsilon_high=0.3 contradicts clip=clip_higher, which sets epsilon_high=0.28; change the clip "
        "node's own key (see conf/clip/) or select another clip node",
    ),
    (
        ["trainer.num_generations=6"],
        "trainer.num_generations=6 does not divide the generation batch of 64 completions "
        "(trainer.per_device_train_batch_size=32 x steps_per_generation=2); make the batch a multiple of "
        "num_generations",
    ),
    (
        ["model=hf"],
        "model=hf needs model.name_or_path=<hub name or local folder>",
    ),
    (
        ["model=hf", "model.name_or_path=./no/such/model"],
        "model.name_or_path=./no/such/model is not a folder; point it at a saved model "
        "(config.json + weights + tokenizer files)",
    ),
    (
        ["trainer.learning_rte=1e-5"],
        "trainer.learning_rte is not a GRPOConfig field; did you mean trainer.learning_rate?",
    ),
    (
        ["trainer.seed=3"],
        "trainer.seed is set by align_kit; use seed=<int> instead",
    ),
    (
        ["kl=constant", "kl.beta=0", "kl.bias_corrected=true"],
        "kl.bias_corrected=true has no effect with kl.beta=0; set kl.beta > 0",
    ),
    (
        ["overlong=soft_punish", "overlong.cache_length=40"],
        "overlong.cache_length=40 must be smaller than trainer.max_completion_length=32; DAPO punishes only "
        "the last part of the budget",
    ),
    (
        ["reward.format.weight=-0.2"],
        "reward.format.weight=-0.2 is negative; penalties belong in the reward itself (a negative score), "
        "keep weights >= 0",
    ),
    (
        ["reward=[coin_flip]", "reward.coin_flip.p_one=1.0"],
        "reward.coin_flip.p_one=1.0: expected a number strictly between 0 and 1 (0 or 1 gives every group zero "
        "advantage, so nothing trains)",
    ),
    (
        ["rollout=vllm", "rollout.mode=remote"],
        "rollout.mode=remote: expected one of [colocate, server]",
    ),
    (
        ["train.resume=true"],
        "train.resume=true but /tmp/align_kit_validation holds no checkpoint; pass the killed run's folder as "
        "hydra.run.dir=<folder> (it needs a checkpoint-*/ from trainer.save_steps)",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_CONFIGS, ids=[" ".join(o) for o, _ in BAD_CONFIGS])
def test_bad_config_is_rejected_with_its_message(overrides, message):
    with pytest.raises(ConfigError) as caught:
        plan_for(*overrides)
    assert str(caught.value) == message


def test_unknown_option_is_hydras_error():
    with pytest.raises(ConfigCompositionException, match="Could not find 'clip/clip_highest'"):
        compose(["clip=clip_highest"])


def test_typo_in_a_component_key_is_rejected():
    with pytest.raises(ConfigCompositionException, match="Could not override 'clip.eps_hgh'"):
        compose(["clip.eps_hgh=0.3"])


def test_repeating_a_node_value_under_trainer_is_allowed():
    plan = plan_for("clip=clip_higher", "trainer.epsilon_high=0.28")
    assert plan.grpo_kwargs["epsilon_high"] == 0.28


def test_reward_maximum_above_one_is_reported_once():
    plan = plan_for("reward.format.weight=0.5")
    assert plan.notes == ["reward maximum is 0.8*1 (correctness) + 0.5*1 (format) = 1.3 (above 1.0, as in the "
                          "policy-optimization chapter's correctness + format)"]  # fmt: skip


def test_below_one_can_be_allowed_explicitly():
    plan = plan_for("reward=[correctness]", "train.allow_reward_max_below_one=true")
    assert plan.reward_max == pytest.approx(0.8)


def test_clip_node_on_policy_warns():
    plan = plan_for("clip=clip_higher", "trainer.steps_per_generation=1")
    assert len(plan.notes) == 1
    assert plan.notes[0].startswith("warning: clip=clip_higher has no effect: training is fully on-policy")


def test_clip_node_with_mini_steps_does_not_warn():
    assert plan_for("clip=clip_higher").notes == []


def test_batch_shape_counts_processes(two_processes, tmp_path):
    # 12 rows per process x 2 processes x 2 steps = 48 completions: 8 divides it, but 5 does not.
    plan_for(
        "logger=none",
        "trainer.per_device_train_batch_size=12",
        "trainer.num_generations=8",
        run_dir=str(tmp_path / "run"),
    )
    shape = r"generation batch of 48 completions \(trainer.per_device_train_batch_size=12 x 2 processes x "
    with pytest.raises(ConfigError, match=shape):
        plan_for(
            "logger=none",
            "trainer.per_device_train_batch_size=12",
            "trainer.num_generations=5",
            run_dir=str(tmp_path / "run"),
        )


def test_explicit_generation_batch_must_cover_every_process(two_processes, tmp_path):
    with pytest.raises(ConfigError, match=r"trainer.generation_batch_size=48 is not a multiple of the global batch"):
        plan_for(
            "logger=none",
            "trainer.per_device_train_batch_size=32",
            "trainer.steps_per_generation=null",
            "trainer.generation_batch_size=48",
            run_dir=str(tmp_path / "run"),
        )


def test_dynamic_sampling_needs_whole_groups_on_each_process(two_processes, tmp_path):
    # 12 x 2 x 2 = 48 = 6 groups of 8 in all, but each process holds 24 rows: 3 groups, fine; with 4 per device
    # each holds 8 rows = 1 group, fine; with 6 per device each holds 12 rows, a group and a half.
    plan_for("logger=none", "sampling=dynamic", "trainer.per_device_train_batch_size=12", run_dir=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match=r"sampling=dynamic keeps whole prompt groups per process"):
        plan_for(
            "logger=none",
            "sampling=dynamic",
            "trainer.per_device_train_batch_size=6",
            "trainer.steps_per_generation=2",
            run_dir=str(tmp_path / "run"),
        )


def test_a_sweeps_jobs_share_each_nodes_build_but_not_the_node(tmp_path):
    from align_kit.experiment.plan import build_plan
    from align_kit.train import component_choices

    # the http judge holds a lock, which no copy can take: it is built for each job
    cfg = compose(["reward=[correctness,arena]", "reward/judge=http", "logger=none"])
    built: dict = {}
    first, second = (build_plan(cfg, component_choices(), str(tmp_path), built) for _ in range(2))
    assert first == second == build_plan(cfg, component_choices(), str(tmp_path))
    assert not any(first.components[group] is second.components[group] for group in first.components)
    assert first.rewards[1].func is not second.rewards[1].func and first.monitor is not second.monitor
    assert [group for group, _ in built].count("arena") == 1


def test_a_node_telling_the_monitor_a_name_it_does_not_know_is_refused_before_the_trainer_is_built():
    from dataclasses import dataclass

    from align_kit.core.component import Component
    from align_kit.experiment.plan import _check_monitor_facts

    @dataclass
    class Declares(Component):
        facts: dict

        def monitor_facts(self):
            return self.facts

    _check_monitor_facts({"sampling": Declares({"dynamic_sampling": True, "max_gen_batches": 4})}, {})
    with pytest.raises(ConfigError, match=r"^sampling=mine: its monitor_facts\(\) names dynamic_sampler, which the"):
        _check_monitor_facts({"sampling": Declares({"dynamic_sampler": True})}, {"sampling": "mine"})


def test_the_reward_that_judges_answers_is_found_by_its_declaration_not_its_name():
    plan = plan_for(
        "+reward.right={_target_: align_kit.rewards.correctness.Correctness, weight: 0.8}", "~reward.correctness"
    )
    assert [spec.name for spec in plan.rewards if spec.judges_answer] == ["right"]
    assert plan.answer_judge.__name__ == "right"
    assert plan_for("reward=[coin_flip]", "reward.coin_flip.weight=1").answer_judge is None
