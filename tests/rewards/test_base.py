"""The columns contract between rewards and tasks: what each reward reads, what each task's dataset gives, and a
reward the task cannot feed refused before anything loads."""

from __future__ import annotations

import pytest

from align_kit.core.errors import ConfigError
from align_kit.tasks.arithmetic import ArithmeticTask


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
