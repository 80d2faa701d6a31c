"""Clip schemes for the importance ratio. TRL implements all three; the nodes set its fields.

symmetric   : clip(r, 1-eps, 1+eps), eps = 0.2                  PPO, arXiv 1707.06347
clip_higher : clip(r, 1-eps_low, 1+eps_high), 0.2 / 0.28        DAPO §3.1, arXiv 2503.14476
gspo        : sequence-level ratio (length-normalised), 3e-4 / 4e-4   GSPO, arXiv 2507.18071
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from align_kit.components.base import Component
from align_kit.errors import ConfigError


@dataclass
class TokenClip(Component):
    """PPO-style token-level clipping with separate lower and upper bounds."""

    eps_low: float = 0.2
    eps_high: float = 0.2

    def validate(self) -> None:
        if self.eps_low <= 0 or self.eps_high <= 0:
            raise ConfigError(f"clip.eps_low={self.eps_low} and clip.eps_high={self.eps_high} must both be > 0")
        if self.eps_high < self.eps_low:
            raise ConfigError(
                f"clip.eps_high={self.eps_high} is below clip.eps_low={self.eps_low}; "
                "Clip-Higher only ever raises the upper bound: set clip.eps_high >= clip.eps_low"
            )

    def grpo_fields(self) -> dict[str, Any]:
        return {"epsilon": self.eps_low, "epsilon_high": self.eps_high, "importance_sampling_level": "token"}


@dataclass
class SequenceClip(TokenClip):
    """GSPO: one length-normalised ratio per sequence, clipped in a very narrow band."""

    eps_low: float = 3e-4
    eps_high: float = 4e-4

    def grpo_fields(self) -> dict[str, Any]:
        # GSPO averages the loss per sequence: TRL's "grpo" aggregation.
        return {**super().grpo_fields(), "importance_sampling_level": "sequence", "loss_type": "grpo"}
