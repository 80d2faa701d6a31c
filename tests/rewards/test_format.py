"""The format reward: the think-tag rule on hand-written texts, on standard and conversational completions."""

from __future__ import annotations

import pytest

from align_kit.rewards.format import ThinkFormat, has_think_format


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>a</think>5", True),
        ("<think></think>", True),
        ("</think><think>", False),  # closes before it opens
        ("<think>no close", False),
        ("no tags at all", False),
        ("x<think>y</think>z</think>", True),  # first occurrences decide, as in the seed
    ],
)
def test_think_format(text, expected):
    assert has_think_format(text) is expected


def test_format_reward_on_standard_and_conversational_completions():
    reward = ThinkFormat()
    standard = reward(["<think>1</think>2", "2"])
    conversational = reward([[{"role": "assistant", "content": "<think>1</think>2"}]])
    assert standard == [1.0, 0.0]
    assert conversational == [1.0]
