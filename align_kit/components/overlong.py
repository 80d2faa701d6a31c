"""Overlong handling (DAPO §3.4, arXiv 2503.14476; the training-stability chapter, figure 16-12; the
policy-optimization chapter, figure 18-8).

filter      : truncated completions are masked out of the loss (TRL `mask_truncated_completions`)
soft_punish : a length penalty reward that ramps from 0 to -1 over the last `cache_length` tokens
              of the budget (TRL `get_soft_overlong_punishment`)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from align_kit.components.base import Component, RewardSpec
from align_kit.errors import ConfigError


@dataclass
class Overlong(Component):
    filter_truncated: bool = False
    soft_punish: bool = False
    cache_length: int = 8  # DAPO uses 4096 of a 20480-token budget; scaled to the tiny task's 32
    punish_weight: float = 1.0

    def validate(self) -> None:
        if self.soft_punish and self.cache_length <= 0:
            raise ConfigError(f"overlong.cache_length={self.cache_length} must be > 0 for soft punishment")
        if self.soft_punish and self.punish_weight < 0:
            raise ConfigError(
                f"overlong.punish_weight={self.punish_weight} is negative; the penalty is already <= 0, "
                "use a positive weight"
            )

    def grpo_fields(self) -> dict[str, Any]:
        return {"mask_truncated_completions": self.filter_truncated}

    def reward_specs(self, trainer_fields: dict[str, Any]) -> list[RewardSpec]:
        if not self.soft_punish:
            return []
        budget = trainer_fields["max_completion_length"]
        if self.cache_length >= budget:
            raise ConfigError(
                f"overlong.cache_length={self.cache_length} must be smaller than "
                f"trainer.max_completion_length={budget}; DAPO punishes only the last part of the budget"
            )
        from trl.rewards import get_soft_overlong_punishment

        func = get_soft_overlong_punishment(max_completion_len=budget, soft_punish_cache=self.cache_length)
        return [RewardSpec(name="soft_overlong", weight=self.punish_weight, max_value=0.0, func=func)]
