"""model=hf on a locally saved model: it loads the same weights, refuses a folder from_pretrained cannot read, and
checks prompts with the saved tokenizer and positions."""

from __future__ import annotations

from pathlib import Path

import pytest

from align_kit.models.hf import HFModel


@pytest.mark.slow
def test_hf_node_loads_a_locally_saved_model(tiny_policy, tmp_path):
    import torch

    _, _, policy = tiny_policy
    policy.model.save_pretrained(tmp_path)
    policy.tokenizer.save_pretrained(tmp_path)
    node = HFModel(name_or_path=str(tmp_path))
    node.validate()
    loaded = node.load(task=None, cache_dir=None)
    ids = torch.tensor([[5, 6, 7]])
    assert torch.equal(loaded.model(ids).logits, policy.model(ids).logits)
    assert loaded.tokenizer.padding_side == "left"


def test_hf_node_accepts_a_saved_folder_and_refuses_one_from_pretrained_cannot_read(tiny_policy, tmp_path):
    from align_kit.core.errors import ConfigError

    saved = Path(tiny_policy[2].path)
    HFModel(name_or_path=str(saved)).validate()
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "model.safetensors"):  # a copy without its tokenizer files
        (broken / name).write_bytes((saved / name).read_bytes())
    with pytest.raises(ConfigError, match="holds no tokenizer"):
        HFModel(name_or_path=str(broken)).validate()


def test_hf_node_checks_prompts_with_the_saved_tokenizer_and_positions(tiny_policy):
    # The saved tiny model: a character tokenizer with <unk>, and 256 positions in its config.json.
    model = HFModel(name_or_path=tiny_policy[2].path)
    assert model.prompt_problem("12+7=", 32) is None
    assert model.prompt_problem("12+7=é", 32).startswith("holds 'é', which the tokenizer of model.name_or_path=")
    assert model.prompt_problem("x" * 224, 32) is None  # 256 - 32 = 224 positions for the prompt
    assert model.prompt_problem("x" * 225, 32).startswith("is 225 tokens, more than the 224 positions")
    assert HFModel(name_or_path="Qwen/Qwen3-0.6B").prompt_problem("é" * 10**5, 32) is None  # a hub name: not fetched
