"""Rewards of task=reasoning_gym: each dataset's own verifier (`score_answer`, in [0, 1]) on the answer the
completion gives, and the format that answer must take.

The answer is read from the last `<answer>...</answer>` pair (reasoning-gym's own convention: its system prompts ask
for it and its evaluation extracts it with `reasoning_gym.utils.extract_answer`). Tags rather than the last number:
about a hundred datasets answer with words, lists and grids, not numbers, and in a worked solution the last number is
often an intermediate result or the question's own operand repeated. `extract=last_number` is offered for numeric
datasets (chain_sum, basic_arithmetic) and small models that have not learned the tags yet.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from align_kit.core.fields import knob
from align_kit.rewards.base import RewardNode, completion_text

ANSWER_TAGS = re.compile(r"<answer>\s?(.*?)\s?</answer>", re.DOTALL)
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def tagged_answer(text: str) -> str | None:
    """The last `<answer>...</answer>` pair's content, stripped (as reasoning_gym.utils.extract_answer reads it)."""
    matches = ANSWER_TAGS.findall(text)
    return matches[-1].strip() if matches else None


def last_number(text: str) -> str | None:
    numbers = NUMBER.findall(text)
    return numbers[-1] if numbers else None


@lru_cache(maxsize=64)
def _dataset(encoded_config: str):
    return build_dataset(json.loads(encoded_config))


def build_dataset(config: dict):
    """reasoning-gym's dataset from a full config (`name` plus its options): deterministic in the options, so the
    reward rebuilds the very entries the task generated (it lives here, below the tasks, for the reward to call)."""
    import reasoning_gym

    options = {k: plain_option(v) for k, v in config.items() if k != "name"}
    return reasoning_gym.create_dataset(config["name"], **options)


def plain_option(value: Any) -> Any:
    """A task option as reasoning-gym's configs expect it: Hydra's ListConfig and JSON's lists become tuples (the
    configs' own defaults, e.g. operators=('+', '-', '*', '/'))."""
    if type(value).__name__ in ("ListConfig", "DictConfig"):
        from omegaconf import OmegaConf

        value = OmegaConf.to_container(value)
    if isinstance(value, list):
        return tuple(plain_option(v) for v in value)
    return value


def gym_score(answer: str | None, encoded_config: str, index: int) -> float:
    """The dataset's own `score_answer` on row `index` of the dataset `encoded_config` describes (rebuilt once and
    kept: generation is deterministic in the config)."""
    dataset = _dataset(encoded_config)
    return float(dataset.score_answer(answer, dataset[int(index)]))


@dataclass
class GymCorrectness(RewardNode):
    extract: Literal["tags", "last_number"] = knob(
        "tags",
        help="Where the answer is read: tags (the last <answer>...</answer>, reasoning-gym's convention, any "
        "dataset) or last_number (the last number in the completion, numeric datasets only).",
    )

    def needs(self) -> dict[str, str]:
        fix = "use task=reasoning_gym, whose rows carry it"
        return {"gym_config": fix, "gym_index": fix}

    def answer(self, text: str) -> str | None:
        return tagged_answer(text) if self.extract == "tags" else last_number(text)

    def __call__(self, completions: list[Any], gym_config: list[str], gym_index: list[int], **kwargs: Any):
        answers = [self.answer(completion_text(c)) for c in completions]
        return [gym_score(a, cfg, i) for a, cfg, i in zip(answers, gym_config, gym_index, strict=True)]


@dataclass
class GymFormat(RewardNode):
    """1.0 when the completion gives its answer between <answer> tags, non-empty (what gym_correctness reads)."""

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        return [float(bool(tagged_answer(completion_text(c)))) for c in completions]
