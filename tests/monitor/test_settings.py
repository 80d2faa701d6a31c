"""The monitor's settings: conf/monitor/default.yaml equals the dataclass defaults, every rule has its block, and a
bad setting names its key."""

from __future__ import annotations

import pytest

from align_kit.core.errors import ConfigError
from align_kit.monitor import RULES, HealthMonitorConfig


def test_default_yaml_equals_the_dataclass_defaults(configs):
    assert configs["default"] == HealthMonitorConfig()
    assert configs["strict"] != configs["default"]
    assert configs["off"].enabled is False


def test_every_rule_has_a_settings_block():
    assert [rule.name for rule in RULES] == HealthMonitorConfig.rule_names()


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"kl_rising": {"action": "stop"}}, "monitor.kl_rising.action"),
        ({"kl_rising": {"window": 1}}, "monitor.kl_rising.window"),
        ({"entropy_drop": {"fall": 1.5}}, "monitor.entropy_drop.fall"),
        ({"grad_norm_vanishing": {"windw": 5}}, "monitor.grad_norm_vanishing"),
        ({"length_pinned": {"clipped": 1.0}}, "monitor.length_pinned.clipped"),
        ({"kl_rising_flat_reward": {"window": 1}}, "monitor.kl_rising_flat_reward.window"),
        ({"no_signal": {"span": 0}}, "monitor.no_signal.span"),
    ],
)
def test_bad_settings_name_their_key(overrides, key):
    with pytest.raises(ConfigError, match=key):
        HealthMonitorConfig(**overrides)
