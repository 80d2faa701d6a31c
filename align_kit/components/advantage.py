"""Advantage normalizers that TRL implements; the nodes only choose TRL's fields.

grpo    : (r - mean_group) / std_group            DeepSeekMath, arXiv 2402.03300
batch   : (r - mean_group) / std_batch            TRL `scale_rewards="batch"` (Lite PPO, arXiv 2508.08221)
dr_grpo : r - mean_group, loss / constant length  Dr.GRPO, arXiv 2503.20783
gdpo    : normalize each reward, then weight-sum  GDPO (seed 000, 16.6.3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from align_kit.components.base import Component
from align_kit.errors import ConfigError

_SCALES = ("group", "batch", "none")
_AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")


@dataclass
class TRLAdvantage(Component):
    scale_rewards: str = "group"
    aggregation: str = "sum_then_normalize"
    loss_type: str | None = None  # Dr.GRPO also changes the loss normalisation

    def validate(self) -> None:
        if self.scale_rewards not in _SCALES:
            raise ConfigError(
                f"advantage.scale_rewards={self.scale_rewards!r} is not one of {list(_SCALES)}; "
                "pick one or select another advantage node"
            )
        if self.aggregation not in _AGGREGATIONS:
            raise ConfigError(f"advantage.aggregation={self.aggregation!r} is not one of {list(_AGGREGATIONS)}")

    def grpo_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "scale_rewards": self.scale_rewards,
            "multi_objective_aggregation": self.aggregation,
        }
        if self.loss_type is not None:
            fields["loss_type"] = self.loss_type
        return fields
