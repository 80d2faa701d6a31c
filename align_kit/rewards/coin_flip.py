"""Coin-flip reward: 0 or 1 at random, independent of the completion.

A probe, not a task reward. With no signal to learn, whatever happens to the policy's entropy comes
from the update rule alone, which isolates the bias of the clip bounds (DAPO §3.1): symmetric
clipping caps how far an unlikely token's probability may rise per update, not how far a likely
one's may, so entropy drifts down; a higher upper bound slows that drift.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from align_kit.core.fields import SEED, knob
from align_kit.rewards.base import RewardNode


@dataclass
class CoinFlip(RewardNode):
    p_one: float = knob(
        0.5,
        gt=0,
        lt=1,
        text="a number strictly between 0 and 1 (0 or 1 gives every group zero advantage, so nothing trains)",
        help="The chance that a completion scores 1; strictly between 0 and 1. 0.5 gives the most groups with mixed "
        "scores, so every step has a gradient that carries no signal, only the clip bounds' bias.",
        source="DAPO §3.1, arXiv 2503.14476",
    )
    seed: int = knob(
        0,
        within=SEED,
        help="Seeds the coins together with the training step, so a resumed run draws the same coins; the YAML node "
        "sets it to the run's seed.",
    )

    def validate(self) -> None:
        super().validate()  # p_one's range is its field's (knob)

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        # Seeded by the training step, so a resumed run draws the same coins as an uninterrupted one.
        state = kwargs.get("trainer_state")
        step = state.global_step if state is not None else 0
        coins = random.Random(f"{self.seed}:{step}")
        return [float(coins.random() < self.p_one) for _ in completions]
