"""The format-weight schedule, step by step, its weight reaching the trainer's advantages, and the reward maximum in
force it logs and keeps at 1.0 or above."""

from __future__ import annotations

import pytest
import torch

from align_kit.components.format_schedule import FormatWeightSchedule
from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.tracking.metrics_file import read_metrics
from align_kit.train import component_choices
from tests.conftest import generation_inputs


def test_constant_keeps_the_configured_weight():
    schedule = FormatWeightSchedule(kind="constant")
    schedule.bind(0.2)
    assert [schedule.weight(step) for step in (0, 50, 500)] == [0.2, 0.2, 0.2]


def test_linear_interpolates_then_holds():
    schedule = FormatWeightSchedule(kind="linear", start=1.0, end=0.2, steps=4)
    # 1.0 + (0.2 - 1.0) * step / 4: 1.0, 0.8, 0.6, 0.4, 0.2, then 0.2
    assert [schedule.weight(step) for step in range(6)] == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2, 0.2])


def test_step_switches_at_the_step():
    schedule = FormatWeightSchedule(kind="step", start=1.0, end=0.3, at_step=3)
    assert [schedule.weight(step) for step in range(5)] == [1.0, 1.0, 1.0, 0.3, 0.3]


def test_adaptive_lowers_after_a_full_window_above_threshold_and_stays_low():
    schedule = FormatWeightSchedule(kind="adaptive", start=1.0, threshold=0.9, window=3, floor=0.2)
    stream = [0.5, 0.95, 0.92, 0.85, 0.91, 0.93, 0.97, 0.4, 0.99]
    # above 0.9?  no  yes  yes  no(reset)  yes  yes  yes(3 in a row: lowered)  -> floor for good
    weights = []
    for value in stream:
        weights.append(schedule.weight(step=0))  # the weight in force for this batch
        schedule.observe(value)
    assert weights == [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.2, 0.2]


def test_adaptive_state_round_trips():
    schedule = FormatWeightSchedule(kind="adaptive", window=2)
    schedule.bind(1.0)
    schedule.observe(0.95)
    restored = FormatWeightSchedule(kind="adaptive", window=2)
    restored.bind(1.0)
    restored.load_state_dict(schedule.state_dict())
    restored.observe(0.95)
    assert restored.weight(0) == restored.floor


@pytest.mark.parametrize("advantage", ["grpo", "gdpo"])
def test_trainer_uses_the_new_weight_after_the_switch(advantage, build_trainer):
    trainer = build_trainer(
        f"advantage={advantage}",
        "format_schedule=step",
        "format_schedule.start=1.0",
        "rollout.temperature=3.0",
        "format_schedule.end=0.05",
        "format_schedule.at_step=1",
        "train.allow_reward_max_below_one=true",
    )  # fmt: skip (0.8 + 0.05 < 1.0: allowed here, a large weight change shows in the advantages)
    node = trainer.plan.components["advantage"]
    before = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4))
    assert trainer.reward_weights.tolist() == pytest.approx([0.8, 1.0])
    assert torch.equal(
        before["advantages"], node.compute(trainer.last_state.rewards_per_func, torch.tensor([0.8, 1.0]), 8)
    )

    trainer.state.global_step = 1
    after = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4, start=4))
    assert trainer.reward_weights.tolist() == pytest.approx([0.8, 0.05])
    rewards = trainer.last_state.rewards_per_func
    assert torch.equal(after["advantages"], node.compute(rewards, torch.tensor([0.8, 0.05]), 8))
    assert rewards[:, 1].std() > 0  # format varies, so the old weight would give other advantages
    assert not torch.equal(after["advantages"], node.compute(rewards, torch.tensor([0.8, 1.0]), 8))


def test_weight_is_logged_every_step(train_once, tmp_path):
    train_once(tmp_path, "logger=none", "format_schedule=linear", "format_schedule.steps=4", "trainer.max_steps=4")
    rows = [row for row in read_metrics(tmp_path / "metrics.jsonl") if "loss" in row]
    # A batch keeps the weight of the step it was generated at. Two mini-steps per generation:
    # batches generated at steps 0 and 2 carry 1.0 - 0.8 * step / 4 = 1.0 and 0.6.
    assert [row["schedule/format_weight"] for row in rows] == pytest.approx([1.0, 1.0, 0.6, 0.6])


def test_adaptive_schedule_observes_the_batch_that_trains_once_per_step(build_trainer):
    # Under dynamic sampling a step draws several generation rounds; the window counts training batches,
    # and every round of one step gets the same weight.
    trainer = build_trainer("format_schedule=adaptive", "sampling=dynamic", "sampling.max_gen_batches=3")
    hook = next(h for h in trainer.hooks if h.name == "format_schedule")
    seen = []
    observe = hook.schedule.observe
    hook.schedule.observe = lambda mean: (seen.append(mean), observe(mean))
    trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4))
    state = trainer.last_state
    assert len(seen) == 1
    assert seen[0] == pytest.approx(torch.nanmean(state.rewards_per_func[:, 1]).item())


def test_trainer_logs_the_maximum_in_force(build_trainer):
    trainer = build_trainer("format_schedule=step", "format_schedule.start=1.0", "format_schedule.at_step=1")
    trainer._generate_and_score_completions(generation_inputs(trainer, prompts=2))
    trainer.state.global_step = 1
    trainer._generate_and_score_completions(generation_inputs(trainer, prompts=2, start=2))
    # 0.8 * 1 + 1.0 * 1 before the switch, 0.8 * 1 + 0.2 * 1 after.
    trainer.flush_metrics()
    assert trainer._metrics["train"]["reward/max_attainable"] == pytest.approx([1.8, 1.0])


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["format_schedule=adaptive", "format_schedule.floor=0.1"], "format_schedule.floor"),
        (["format_schedule=linear", "format_schedule.end=0.15"], "format_schedule.end"),
        (["format_schedule=step", "format_schedule.start=0.1"], "format_schedule.end"),
    ],
)
def test_every_weight_a_schedule_reaches_keeps_the_maximum_at_one(overrides, key, tmp_path):
    # correctness 0.8 + format weight 0.1 / 0.15 = 0.9 / 0.95 < 1.0
    with pytest.raises(ConfigError, match=key):
        build_plan(compose(overrides), component_choices(), str(tmp_path))
    allowed = build_plan(compose([*overrides, "train.allow_reward_max_below_one=true"]), component_choices(), "x")
    assert allowed.components["format_schedule"].kind == overrides[0].split("=")[1]


def test_default_schedules_pass():
    for kind in ("adaptive", "linear", "step"):
        build_plan(compose([f"format_schedule={kind}"]), component_choices(), "x")


def test_adaptive_needs_the_format_reward_strictly_above_threshold():
    schedule = FormatWeightSchedule(kind="adaptive", start=1.0, threshold=0.9, window=1, floor=0.2)
    for _ in range(5):
        schedule.observe(0.9)  # exactly 0.9 is not above it
    assert schedule.weight(0) == 1.0
    schedule.observe(0.9001)
    assert schedule.weight(0) == 0.2
