"""Rewards and the embedded task, checked on hand-written examples."""

from __future__ import annotations

import pytest

from align_kit.core.errors import ConfigError
from align_kit.rewards.coin_flip import CoinFlip
from align_kit.rewards.correctness import Correctness, final_answer
from align_kit.rewards.format import ThinkFormat, has_think_format
from align_kit.tasks.arithmetic import ArithmeticTask, make_problem


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


def test_correctness_checks_the_text_after_the_reasoning():
    reward = Correctness()
    completions = ["<think>37+40=77,77+5=82</think>82", "<think>x</think> 82 ", "<think>82</think>83", "82"]
    assert final_answer(completions[1]) == "82"
    assert reward(completions, answer=["82"] * 4) == [1.0, 1.0, 0.0, 1.0]


def test_correctness_names_a_missing_answer_column():
    with pytest.raises(KeyError, match="answer_column='solution' is not a dataset column"):
        Correctness(answer_column="solution")(["1"], answer=["1"])


def test_unknown_checker_is_a_config_error():
    node = Correctness(checker="fuzzy")
    node.group = "correctness"
    with pytest.raises(ConfigError, match=r"reward.correctness.checker='fuzzy' is not one of"):
        node.validate()


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


def test_math_verify_checker_accepts_equivalent_latex():
    # TRL's accuracy_reward: the answer must be boxed; 0.5 and \frac{1}{2} are the same number.
    reward = Correctness(checker="math_verify")
    completions = [r"<think>x</think>\boxed{0.5}", r"<think>x</think>\boxed{3}", r"<think>x</think>\boxed{\frac{2}{4}}"]
    assert reward(completions, answer=[r"$\frac{1}{2}$"] * 3) == [1.0, 0.0, 1.0]


class _State:
    def __init__(self, global_step: int):
        self.global_step = global_step


def test_coin_flip_is_fixed_by_seed_and_step_and_has_the_asked_rate():
    coin = CoinFlip(seed=3)
    completions = ["anything"] * 4000
    first = coin(completions, trainer_state=_State(7))
    assert first == coin(completions, trainer_state=_State(7))  # a resumed run draws the same coins
    assert first != coin(completions, trainer_state=_State(8))
    assert set(first) == {0.0, 1.0}
    # Binomial(4000, p): the standard error of the mean is sqrt(p(1-p)/4000) <= 0.008; allow 4 of them.
    assert abs(sum(first) / len(first) - 0.5) < 0.032
    skewed = CoinFlip(seed=3, p_one=0.2)(completions, trainer_state=_State(7))
    assert abs(sum(skewed) / len(skewed) - 0.2) < 0.026


def test_coin_flip_ignores_the_completion():
    coin = CoinFlip(seed=0)
    assert coin(["a", "b", "c"], trainer_state=_State(1)) == coin(["x", "y", "z"], trainer_state=_State(1))


def _reward_node(name: str):
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from align_kit import CONF_DIR

    loaded = OmegaConf.merge({"seed": 0}, OmegaConf.load(CONF_DIR / "reward" / f"{name}.yaml"))  # coin_flip: ${seed}
    node = instantiate(loaded[name], _convert_="all")
    node.group = name
    return node


# What each built-in reward reads from the rows (by hand from each reward's __call__) and what each task gives.
READS = {
    "correctness": {"answer"},
    "format": set(),
    "coin_flip": set(),
    "careful_style": set(),
    "tool_steps": {"calls"},
    "tool_choice": {"calls"},
    "tool_params": {"calls"},
    "tool_reasoning": {"calls"},
    "tool_plan": {"calls"},
    "tool_penalty": {"calls"},
}
GIVES = {
    "arithmetic": ("prompt", "answer", "domain"),
    "two_style": ("prompt", "answer", "domain"),
    "hf_dataset": ("prompt", "answer", "domain"),
    "tool_calls": ("prompt", "calls", "domain"),
}


@pytest.mark.parametrize("reward", READS)
def test_each_reward_declares_the_columns_it_reads(reward):
    assert set(_reward_node(reward).needs()) == READS[reward]


def test_each_task_declares_the_columns_its_dataset_gives():
    from align_kit.tasks.hf_dataset import HFDatasetTask
    from align_kit.tasks.tool_calls import ToolCallsTask
    from align_kit.tasks.two_style import TwoStyleTask

    classes = {"arithmetic": ArithmeticTask, "two_style": TwoStyleTask, "hf_dataset": HFDatasetTask}
    for name, cls in {**classes, "tool_calls": ToolCallsTask}.items():
        assert cls.COLUMNS == GIVES[name]
    for name, task in (("arithmetic", ArithmeticTask(num_train=4)), ("tool_calls", ToolCallsTask(num_train=4))):
        assert tuple(task.dataset("train").column_names) == GIVES[name]


def test_a_reward_the_task_cannot_feed_is_refused_before_anything_loads(tmp_path):
    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan
    from align_kit.train import component_choices

    cfg = compose(["task=two_style", "reward=[correctness,tool_plan]", "reward.tool_plan.weight=0.2"])
    with pytest.raises(ConfigError, match="reward.tool_plan reads the column 'calls', which task=two_style does not"):
        build_plan(cfg, {**component_choices(), "task": "two_style"}, str(tmp_path))
