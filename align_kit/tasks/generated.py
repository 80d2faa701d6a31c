"""What the seeded synthetic tasks share: one problem stream per split from the task's seed, and the training set
and the warm-start probe built from it.

A task mixes this in beside `TaskNode` (the two counts below are its first fields), holds `seed`, and draws one
problem at a time (`draw(rng, index)`) with `prompt`, `answer` and `domain`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from align_kit.core.fields import knob


@dataclass
class GeneratedTask:
    COLUMNS = ("prompt", "answer", "domain")  # what `dataset` gives the rewards
    num_train: int = knob(
        2000,
        ge=1,
        help="Problems in the training set (>= 1), drawn from the seeded stream; 2000 covers the default "
        "200 steps (800 prompts) without repeats.",
    )
    num_eval: int = knob(
        0,
        help="Problems in the evaluation set, drawn from a stream of their own; 0: no evaluation set.",
    )
    num_demonstrations: int | None = knob(
        None,
        ge=1,
        help="Worked problems the warm start learns from (>= 1), drawn from a stream of their own; null: as many "
        "as num_train. Set apart from num_train, a few RL prompts can follow a warm start learned from many.",
    )

    def draw(self, rng: random.Random, index: int) -> Any:
        raise NotImplementedError

    @property
    def source(self) -> str:
        """How errors name this data."""
        return f"task.num_train={self.num_train}"

    def problems(self, split: str, count: int | None = None) -> list:
        # Disjoint streams per split from one seed: train and eval never share a generator state.
        rng = random.Random(f"{self.seed}/{split}")
        if count is None:
            count = self.num_eval if split == "eval" else self.num_train
            if split == "sft" and self.num_demonstrations is not None:
                count = self.num_demonstrations
        return [self.draw(rng, index) for index in range(count)]

    def dataset(self, split: str = "train"):
        from datasets import Dataset

        rows = self.problems(split)
        return Dataset.from_dict(
            {
                "prompt": [p.prompt for p in rows],
                "answer": [p.answer for p in rows],
                "domain": [p.domain for p in rows],
            }
        )

    def probe_pairs(self, count: int) -> list[tuple[str, str]]:
        """(prompt, answer) pairs held out from training, to measure the warm start."""
        return [(p.prompt, p.answer) for p in self.problems("warm_start_probe", count)]
