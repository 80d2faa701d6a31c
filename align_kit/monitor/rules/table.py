"""The rule table, built from what the family modules register, in the order of HealthMonitorConfig's blocks
(each rule's settings are the block of its name)."""

from __future__ import annotations

# Importing a family module registers its rules.
import align_kit.monitor.rules.entropy  # noqa: F401
import align_kit.monitor.rules.gradients  # noqa: F401
import align_kit.monitor.rules.kl_ratio  # noqa: F401
import align_kit.monitor.rules.length  # noqa: F401
import align_kit.monitor.rules.mismatch_routing  # noqa: F401
import align_kit.monitor.rules.reward  # noqa: F401
from align_kit.monitor.rules.base import REGISTRY, Rule
from align_kit.monitor.settings import HealthMonitorConfig


def _table() -> tuple[Rule, ...]:
    blocks = HealthMonitorConfig.rule_names()
    if set(blocks) != set(REGISTRY):
        raise RuntimeError(
            f"rules without a settings block: {sorted(set(REGISTRY) - set(blocks))}; settings blocks without a rule: "
            f"{sorted(set(blocks) - set(REGISTRY))}"
        )
    return tuple(REGISTRY[name] for name in blocks)


RULES: tuple[Rule, ...] = _table()
