"""A probe reward for task=two_style: 1.0 when the completion reasons in steps, 0.0 when it answers directly.

Its default weight is 0, so it never moves the advantage; TRL still logs it as rewards/careful_style/mean,
the share of careful completions, the outcome the Clip-Higher and Overlong sweeps predict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from align_kit.core.fields import knob
from align_kit.rewards.base import RewardNode, completion_text
from align_kit.rewards.format import THINK_CLOSE, THINK_OPEN


def is_careful(text: str) -> bool:
    """A completion reasons in steps when its think block holds anything."""
    opening, closing = text.find(THINK_OPEN), text.find(THINK_CLOSE)
    start = opening + len(THINK_OPEN)
    if opening == -1:
        return False
    end = closing if closing > opening else len(text)
    return text[start:end].strip() != ""


@dataclass
class CarefulStyle(RewardNode):
    weight: float = knob(
        1.0,
        help="This probe's weight in the reward TRL trains on; keep 0 (its YAML node's value) so it only logs the "
        "careful share and never moves the advantage.",
    )

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        return [float(is_careful(completion_text(c))) for c in completions]
