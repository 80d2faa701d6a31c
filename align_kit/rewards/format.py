"""Format reward: `<think>` must open before `</think>` closes (the policy-optimization chapter, 18.3.6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from align_kit.rewards.base import RewardNode, completion_text

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def has_think_format(text: str) -> bool:
    """The policy-optimization chapter's check (18.3.6) on the first occurrence of each tag; a missing tag fails."""
    opening, closing = text.find(THINK_OPEN), text.find(THINK_CLOSE)
    return opening != -1 and closing != -1 and opening < closing


@dataclass
class ThinkFormat(RewardNode):
    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        return [float(has_think_format(completion_text(c))) for c in completions]
