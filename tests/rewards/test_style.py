"""The careful-style probe reward: which texts reason in steps, and its weight of 0 by default."""

import pytest

from align_kit.rewards.style import is_careful


@pytest.mark.parametrize(
    ("text", "careful"),
    [
        ("<think>12+30=42,42+4=46</think>46", True),
        ("<think></think>46", False),
        ("<think> </think>46", False),
        ("46", False),
        ("<think>12+30=42,42+4", True),  # truncated mid-reasoning still reasons in steps
        ("</think><think>1+2=3", True),
    ],
)
def test_is_careful(text, careful):
    assert is_careful(text) is careful


def test_careful_style_probe_weighs_nothing_by_default():
    from omegaconf import OmegaConf

    from align_kit.experiment.compose import CONF_DIR

    node = OmegaConf.load(CONF_DIR / "reward" / "careful_style.yaml")["careful_style"]
    assert node["weight"] == 0.0
