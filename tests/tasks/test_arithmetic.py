"""task=arithmetic, the embedded task: each problem and its demonstration by hand, the seeded dataset and its splits."""

from __future__ import annotations

import pytest

from align_kit.rewards.correctness import Correctness
from align_kit.rewards.format import ThinkFormat
from align_kit.tasks.arithmetic import ArithmeticTask, make_problem


@pytest.mark.parametrize(
    ("a", "b", "domain", "prompt", "answer", "reasoning"),
    [
        (37, 45, "addition", "37+45=", "82", "37+40=77,77+5=82"),
        (82, 45, "subtraction", "82-45=", "37", "82-40=42,42-5=37"),
        (45, 82, "subtraction", "82-45=", "37", "82-40=42,42-5=37"),  # operands ordered: no negatives
        (10, 90, "addition", "10+90=", "100", "10+90=100,100+0=100"),
    ],
)
def test_problem_and_its_demonstration(a, b, domain, prompt, answer, reasoning):
    problem = make_problem(a, b, domain)
    assert (problem.prompt, problem.answer, problem.reasoning) == (prompt, answer, reasoning)
    assert problem.demonstration == f"<think>{reasoning}</think>{answer}"


def test_demonstrations_earn_full_reward():
    task = ArithmeticTask(num_train=50)
    completions = [completion for _, completion in task.demonstrations()]
    answers = [p.answer for p in task.problems("sft")]
    assert Correctness()(completions, answer=answers) == [1.0] * 50
    assert ThinkFormat()(completions) == [1.0] * 50


def test_dataset_is_seeded_and_has_two_domains():
    first, second = ArithmeticTask(num_train=40).dataset(), ArithmeticTask(num_train=40).dataset()
    assert first["prompt"] == second["prompt"]
    assert set(first["domain"]) == {"addition", "subtraction"}
    assert first.column_names == ["prompt", "answer", "domain"]
    other_seed = ArithmeticTask(num_train=40, seed=7).dataset()
    assert other_seed["prompt"] != first["prompt"]


def test_splits_do_not_share_problems_streams():
    task = ArithmeticTask(num_train=30, num_eval=30)
    assert [p.prompt for p in task.problems("train")] != [p.prompt for p in task.problems("eval")]


def test_num_demonstrations_sets_the_warm_start_set_apart_from_the_training_set():
    default = ArithmeticTask(num_train=2000)
    few_prompts = ArithmeticTask(num_train=16, num_demonstrations=2000)
    assert len(few_prompts.dataset()) == 16
    # The warm start learns from the same 2000 demonstrations as the default task's (one cached model for both),
    assert few_prompts.demonstrations() == default.demonstrations()
    # and the 16 RL prompts are the default training set's first 16.
    assert few_prompts.dataset()["prompt"] == default.dataset()["prompt"][:16]
    assert len(ArithmeticTask(num_train=30, num_demonstrations=5).demonstrations()) == 5
    assert len(ArithmeticTask(num_train=30).demonstrations()) == 30  # null: as many as num_train
    assert ArithmeticTask(num_train=30, num_demonstrations=5).problems("eval") == []  # num_eval stays 0
