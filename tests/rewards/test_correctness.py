"""The correctness reward on hand-written completions: the text after the reasoning, a missing answer column, the
checkers."""

from __future__ import annotations

import pytest

from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from align_kit.experiment.schema import check_config
from align_kit.rewards.correctness import Correctness, final_answer


def test_correctness_checks_the_text_after_the_reasoning():
    reward = Correctness()
    completions = ["<think>37+40=77,77+5=82</think>82", "<think>x</think> 82 ", "<think>82</think>83", "82"]
    assert final_answer(completions[1]) == "82"
    assert reward(completions, answer=["82"] * 4) == [1.0, 1.0, 0.0, 1.0]


def test_correctness_names_a_missing_answer_column():
    with pytest.raises(KeyError, match="answer_column='solution' is not a dataset column"):
        Correctness(answer_column="solution")(["1"], answer=["1"])


def test_unknown_checker_is_a_config_error():
    expected = r"^reward.correctness.checker=fuzzy: expected one of \[exact, math_verify\]$"
    with pytest.raises(ConfigError, match=expected):
        check_config(compose(["reward.correctness.checker=fuzzy"]))


def test_math_verify_checker_accepts_equivalent_latex():
    # TRL's accuracy_reward: the answer must be boxed; 0.5 and \frac{1}{2} are the same number.
    reward = Correctness(checker="math_verify")
    completions = [r"<think>x</think>\boxed{0.5}", r"<think>x</think>\boxed{3}", r"<think>x</think>\boxed{\frac{2}{4}}"]
    assert reward(completions, answer=[r"$\frac{1}{2}$"] * 3) == [1.0, 0.0, 1.0]
