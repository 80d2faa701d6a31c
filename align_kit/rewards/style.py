"""A probe reward for task=two_style: 1.0 when the completion reasons in steps, 0.0 when it answers directly.

Its default weight is 0, so it never moves the advantage; TRL still logs it as rewards/careful_style/mean,
the share of careful completions, the outcome the Clip-Higher and Overlong sweeps predict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from align_kit.rewards.base import RewardNode, completion_text
from align_kit.tasks.two_style import is_careful


@dataclass
class CarefulStyle(RewardNode):
    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        return [float(is_careful(completion_text(c))) for c in completions]
