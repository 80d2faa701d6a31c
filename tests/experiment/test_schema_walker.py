"""align_kit.experiment.schema walks every node generically: a field's range and choices come from the node's own
dataclass (align_kit.core.fields), so a bad value is refused with that field's range text or allowed names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from align_kit.core.component import Component
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.experiment.compose import compose
from align_kit.experiment.schema import check_config, check_node

TARGETS = {
    "advantage": "align_kit.components.advantage.NGRPOAdvantage",
    "overlong": "align_kit.components.overlong.Overlong",
    "monitor": "align_kit.monitor.settings.HealthMonitorConfig",
    "routing_replay": "align_kit.components.routing_replay.RoutingReplay",
    "rollout": "align_kit.components.rollout.HFRollout",
    "model": "align_kit.models.tiny.TinyModel",
    "kl": "align_kit.components.kl.ReweightedKL",
}


def refusal(group: str, **keys) -> str:
    with pytest.raises(ConfigError) as caught:
        check_node(group, {"_target_": TARGETS[group], **keys}, [], group)
    return str(caught.value)


@pytest.mark.parametrize(
    ("group", "keys", "message"),
    [
        ("advantage", {"r_max": 0}, "advantage.r_max=0: expected a number > 0"),
        ("advantage", {"r_max": -1.5}, "advantage.r_max=-1.5: expected a number > 0"),
        ("overlong", {"probe_samples": 0}, "overlong.probe_samples=0: expected an integer >= 1"),
        ("overlong", {"punish_weight": -0.5}, "overlong.punish_weight=-0.5: expected a number >= 0"),
        ("monitor", {"length_growth": {"factor": 0}}, "monitor.length_growth.factor=0: expected a number > 0"),
        ("monitor", {"logp_mismatch": {"threshold": -1}}, "monitor.logp_mismatch.threshold=-1: expected a number >= 0"),
        ("rollout", {"is_cap_min": 0.0}, "rollout.is_cap_min=0.0: expected a number > 0"),
        ("model", {"hidden_size": 65537}, "model.hidden_size=65537: expected an integer in [1, 65536]"),
        ("model", {"init_seed": 2**32}, "model.init_seed=4294967296: expected an integer in [0, 2^32)"),
        ("model", {"warm_start": {"batch_size": 0}}, "model.warm_start.batch_size=0: expected an integer >= 1"),
    ],
)
def test_a_ranged_field_is_refused_with_its_own_range(group, keys, message):
    assert refusal(group, **keys) == message


@pytest.mark.parametrize(
    ("group", "keys", "message"),
    [
        ("routing_replay", {"mode": "r4"}, "routing_replay.mode=r4: expected one of [off, r2, r3]"),
        ("rollout", {"quant_scale": "row"}, "rollout.quant_scale=row: expected one of [channel, tensor]"),
        ("kl", {"weighting": "bogus"}, "kl.weighting=bogus: expected one of [entropy, none]"),
        (
            "monitor",
            {"kl_rising": {"action": "stop"}},
            "monitor.kl_rising.action=stop: expected one of [log, warn, halt]",
        ),
    ],
)
def test_a_literal_choice_is_refused_naming_the_allowed_names(group, keys, message):
    assert refusal(group, **keys) == message


def test_values_inside_their_ranges_pass():
    check_node("advantage", {"_target_": TARGETS["advantage"], "r_max": 1e-6, "n_virtual": 2}, [], "advantage")
    check_node("overlong", {"_target_": TARGETS["overlong"], "probe_samples": 1, "probe_every": 0}, [], "overlong")
    check_node("routing_replay", {"_target_": TARGETS["routing_replay"], "mode": "r3"}, [], "routing_replay")


@dataclass
class Budget(Component):
    """A node the schema has never heard of: its range and choices are its own."""

    share: float = knob(0.5, gt=0, lt=1, help="A share strictly inside (0, 1).")
    style: Literal["terse", "verbose"] = knob("terse", help="How it talks.")
    rounds: int = knob(2, help="A count with no range of its own: never negative.")


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"share": 1}, "budget.share=1: expected a number in (0, 1)"),
        ({"share": 0.0}, "budget.share=0.0: expected a number in (0, 1)"),
        ({"style": "loud"}, "budget.style=loud: expected one of [terse, verbose]"),
        ({"rounds": -1}, "budget.rounds=-1: expected an integer >= 0"),
    ],
)
def test_a_new_node_is_checked_by_its_own_fields(keys, message):
    node = {"_target_": f"{Budget.__module__}.Budget", **keys}
    with pytest.raises(ConfigError) as caught:
        check_node("budget", node, [Budget.__module__])
    assert str(caught.value) == message


def test_the_composed_config_is_walked_the_same_way():
    with pytest.raises(ConfigError) as caught:
        check_config(compose(["advantage=ngrpo", "advantage.r_max=0"]))
    assert str(caught.value) == "advantage.r_max=0: expected a number > 0"
    with pytest.raises(ConfigError) as caught:
        check_config(compose(["advantage.scale_rewards=bogus"]))
    assert str(caught.value) == "advantage.scale_rewards=bogus: expected one of [group, batch, none]"
