"""What every reward node shares: a weight, a best attainable score, and text extraction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from align_kit.core.component import Component, RewardSpec
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob


def completion_text(completion: Any) -> str:
    """TRL passes plain strings for standard prompts and message lists for conversational ones."""
    if isinstance(completion, str):
        return completion
    return "".join(message.get("content", "") for message in completion)


@dataclass
class RewardNode(Component):
    # A node whose score says whether the answer is right (correctness) sets this: the run finds it by this
    # declaration, never by the node's name.
    JUDGES_ANSWER: ClassVar[bool] = False

    weight: float = knob(
        1.0,
        help="This reward's weight in the weighted sum TRL trains on (reward_weights); keep it >= 0, a penalty is a "
        "negative score. The shipped nodes' weights make a perfect completion score exactly 1.0 (correctness 0.8 "
        "+ format 0.2).",
        source="16.6.3",
    )
    max_value: float = knob(
        1.0,
        help="The best score a perfect completion earns from this reward; the plan checks that the sum of weight "
        "times max_value over the rewards reaches 1.0. 1.0 for a 0/1 reward.",
        source="16.6.3",
    )

    def validate(self) -> None:
        if self.weight < 0:
            raise ConfigError(
                f"reward.{self.group}.weight={self.weight} is negative; penalties belong in the reward "
                "itself (a negative score), keep weights >= 0"
            )

    def reward_specs(self, trainer_fields: dict[str, Any]) -> list[RewardSpec]:
        """This node's reward function; `trainer_fields` are the GRPOConfig fields in force (GAR reads
        num_generations from them)."""
        return [self.spec()]

    def needs(self) -> dict[str, str]:
        """The dataset columns this reward reads, each with what to do when the task lacks it (checked against
        the task's `COLUMNS` before anything loads: a missing one was a KeyError at step 0)."""
        return {}

    def spec(self) -> RewardSpec:
        # TRL names reward metrics after `__name__` (rewards/<name>/mean).
        self.__name__ = self.group
        return RewardSpec(
            name=self.group, weight=self.weight, max_value=self.max_value, func=self, judges_answer=self.JUDGES_ANSWER
        )

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        raise NotImplementedError
