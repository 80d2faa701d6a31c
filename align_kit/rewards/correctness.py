"""Correctness reward: the final answer (after `</think>`) checked against the task's answer column."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, Literal

from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.rewards.base import RewardNode, completion_text
from align_kit.rewards.format import THINK_CLOSE

Checker = Literal["exact", "math_verify"]


def final_answer(text: str) -> str:
    """Text after the last `</think>`, or the whole completion when there is no reasoning block."""
    return text.rsplit(THINK_CLOSE, 1)[-1].strip()


@dataclass
class Correctness(RewardNode):
    JUDGES_ANSWER = True

    answer_column: str = knob(
        "answer",
        help="The dataset column holding the reference answer; `answer` for every built-in task and task=hf_dataset.",
    )
    checker: Checker = knob(
        "exact",
        help="How the final answer (after </think>) is compared: `exact` (string equality, the embedded tasks) or "
        "`math_verify` (TRL's accuracy_reward, LaTeX-aware equivalence; needs the math extra) for math datasets.",
    )

    def validate(self) -> None:
        super().validate()
        if self.checker == "math_verify" and importlib.util.find_spec("math_verify") is None:
            raise ConfigError(
                f"reward.{self.group}.checker=math_verify needs the math-verify package: "
                "pip install 'align_kit[math]', or use checker=exact"
            )

    def needs(self) -> dict[str, str]:
        return {self.answer_column: f"set reward.{self.group}.answer_column to one of them, or choose another reward"}

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        if self.answer_column not in kwargs:
            raise KeyError(
                f"reward.{self.group}.answer_column={self.answer_column!r} is not a dataset column; "
                f"columns: {sorted(k for k in kwargs if not k.startswith(('trainer_', 'log_')))}"
            )
        answers = [str(a).strip() for a in kwargs[self.answer_column]]
        predictions = [final_answer(completion_text(c)) for c in completions]
        if self.checker == "exact":
            return [float(p == a) for p, a in zip(predictions, answers, strict=True)]
        from trl.rewards import accuracy_reward

        wrapped = [[{"role": "assistant", "content": p}] for p in predictions]
        return accuracy_reward(wrapped, answers)
