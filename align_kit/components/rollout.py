"""Rollout engines. `hf`: transformers' generate inside the trainer (TRL's default path)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from align_kit.components.base import Component
from align_kit.errors import ConfigError


@dataclass
class HFRollout(Component):
    temperature: float = 1.0
    top_p: float = 1.0

    def validate(self) -> None:
        if self.temperature <= 0:
            raise ConfigError(f"rollout.temperature={self.temperature} must be > 0 (GRPO samples)")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"rollout.top_p={self.top_p} must be in (0, 1]")

    def grpo_fields(self) -> dict[str, Any]:
        return {"use_vllm": False, "temperature": self.temperature, "top_p": self.top_p}
