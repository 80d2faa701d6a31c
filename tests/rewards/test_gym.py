"""reward=gym_correctness / gym_format: the answer read from the last <answer> tags (or the last number) and scored by
the dataset's own verifier on the very entry the task generated."""

from __future__ import annotations

import json

import pytest

from align_kit.rewards.gym import GymCorrectness, GymFormat, last_number, tagged_answer


def test_the_answer_is_the_last_tagged_one_or_the_last_number():
    assert tagged_answer("<answer>3</answer> so <answer> 12 </answer>") == "12"
    assert tagged_answer("the answer is 12") is None
    assert tagged_answer("<answer>12") is None  # never closed
    assert last_number("5 + 7 = 12, then -4") == "-4"
    assert last_number("no digits") is None


def test_format_rewards_a_non_empty_tagged_answer():
    assert GymFormat()(["<think>x</think><answer>7</answer>", "<answer></answer>", "7"]) == [1.0, 0.0, 0.0]


def test_correctness_is_the_datasets_own_score_on_the_rows_entry():
    pytest.importorskip("reasoning_gym")
    from align_kit.tasks.reasoning_gym import ReasoningGymTask

    task = ReasoningGymTask(options={"chain_sum": {"max_terms": 2, "max_digits": 1}}, num_train=2)
    rows = task.rows("train")
    right = rows[0]["answer"]
    completions = [
        f"<answer>{right}</answer>",
        f"{right}",  # untagged: no answer under extract=tags
        f"<answer>{int(right) + 1}</answer>",
        f"<answer>= {right}</answer>",  # chain_sum's score_answer: len(answer)/len(given) when the answer is inside
    ]
    columns = {"gym_config": [rows[0]["gym_config"]] * 4, "gym_index": [rows[0]["gym_index"]] * 4}
    scores = GymCorrectness()(completions, **columns)
    assert scores[:3] == [1.0, 0.0, 0.0]
    assert scores[3] == pytest.approx(len(right) / len(f"= {right}"))
    by_number = GymCorrectness(extract="last_number")([f"so it is {right}"], **{k: v[:1] for k, v in columns.items()})
    assert by_number == [1.0]
    assert json.loads(rows[0]["gym_config"])["name"] == "chain_sum"
