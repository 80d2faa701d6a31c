"""Issue 11 §2: the reward ceiling follows a format schedule, align_kit's own flat-group fraction,
and the adaptive schedule's strict threshold. Expected values are worked out by hand."""

from __future__ import annotations

import statistics

import pytest
import torch

from align_kit.components.advantage import NGRPOAdvantage
from align_kit.components.dynamic_sampling import flat_groups
from align_kit.components.format_schedule import FormatWeightSchedule
from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.monitor import HealthMonitor, HealthMonitorConfig
from align_kit.monitor.settings import AboveThreshold, RewardPlateau
from align_kit.train import component_choices
from tests.conftest import generation_inputs

EPS = 1e-4

# --- the reward ceiling under a format schedule ---------------------------------------------


def test_ngrpo_virtual_sample_scores_the_best_total_for_the_weights_given():
    # Weights 0.8 / 1.0 (a schedule's start): the best total is 1.8, so a perfect group stays at 0
    # (with the old fixed r_max = 1.0 each of its samples got a positive advantage).
    perfect = torch.ones(4, 2)
    assert NGRPOAdvantage().compute(perfect, torch.tensor([0.8, 1.0]), 4).tolist() == [0.0] * 4
    # A mixed group [1.8, 0.8] plus the virtual 1.8.
    mixed = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    augmented = [1.8, 1.0, 1.8]
    mean, spread = statistics.mean(augmented), statistics.stdev(augmented)
    expected = [(1.8 - mean) / (spread + EPS), (1.0 - mean) / (spread + EPS)]
    assert NGRPOAdvantage().compute(mixed, torch.tensor([0.8, 1.0]), 2).tolist() == pytest.approx(expected)


def test_ngrpo_ceiling_uses_each_rewards_maximum(tmp_path):
    plan = build_plan(compose(["advantage=ngrpo", "overlong=soft_punish"]), component_choices(), str(tmp_path))
    node = plan.components["advantage"]
    assert node.reward_maxes == [1.0, 1.0, 0.0]  # correctness, format, soft overlong (at most 0)
    node.reward_maxes = [1.0, 0.5]
    # Best total 1.0 * 1 + 2.0 * 0.5 = 2.0: a group that reached it stays at 0.
    best = torch.tensor([[1.0, 0.5], [1.0, 0.5]])
    assert node.compute(best, torch.tensor([1.0, 2.0]), 2).tolist() == [0.0, 0.0]


def test_plateau_rule_uses_the_maximum_in_force():
    config = HealthMonitorConfig(reward_plateau=RewardPlateau(window=4, tolerance=0.02, gap=0.05))
    monitor = HealthMonitor(config, max_completion_length=32, reward_max=1.0)
    # Flat at 1.7 while a schedule makes 1.8 attainable: 1.7 <= 1.8 - 0.05, a plateau below the ceiling.
    alerts = [
        alert for step in range(1, 5) for alert in monitor.update(step, {"reward": 1.7, "reward/max_attainable": 1.8})
    ]
    assert [(a.step, a.rule) for a in alerts] == [(4, "reward_plateau")]
    assert alerts[0].values["reward_max"] == pytest.approx(1.8)


def test_trainer_logs_the_maximum_in_force(build_trainer):
    trainer = build_trainer("format_schedule=step", "format_schedule.start=1.0", "format_schedule.at_step=1")
    trainer._generate_and_score_completions(generation_inputs(trainer, prompts=2))
    trainer.state.global_step = 1
    trainer._generate_and_score_completions(generation_inputs(trainer, prompts=2, start=2))
    # 0.8 * 1 + 1.0 * 1 before the switch, 0.8 * 1 + 0.2 * 1 after.
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


# --- align_kit's own flat-group fraction ----------------------------------------------------


def test_flat_groups_by_hand():
    point_eight = torch.full((4,), 0.8)  # float32: std of these is not exactly 0, the range is
    almost = torch.tensor([0.8, 0.8, 0.8, 0.8 + 1e-3])
    with_nan = torch.tensor([1.0, float("nan"), 1.0, 1.0])
    assert flat_groups(torch.cat([point_eight, almost, with_nan]), 4).tolist() == [True, False, True]
    # The tolerance is relative: totals on a scale of 1000 may differ in the last float32 bits.
    large = torch.tensor([1000.0, 1000.0 + 6.1e-5, 1000.0, 1000.0, 0.0, 1000.0, 0.0, 1000.0])
    assert flat_groups(large, 4).tolist() == [True, False]


def position_parity(completions, prompts, **kwargs):
    """1.0 for every completion of an '11+' prompt (a flat group); elsewhere alternating 0/1 by
    position, so each of those groups of 8 holds four of each (never flat)."""
    return [1.0 if p.startswith("11+") else float(i % 2) for i, p in enumerate(prompts)]


@pytest.mark.parametrize("advantage", ["grpo", "gdpo"])
def test_one_flat_group_of_eight_is_counted(advantage, build_trainer):
    trainer = build_trainer(f"advantage={advantage}")
    trainer.reward_funcs, trainer.reward_func_names = [position_parity], ["position_parity"]
    trainer.reward_processing_classes = [None]
    trainer.reward_weights = torch.tensor([0.8])  # flat totals at 0.8, as with correctness' weight
    prompts = ["11+11=", *[f"{a}+{a}=" for a in range(30, 37)]]
    inputs = [{"prompt": p, "answer": "0", "domain": "addition"} for p in prompts for _ in range(8)]
    trainer._generate_and_score_completions(inputs)
    assert trainer._metrics["train"]["groups/flat_fraction"] == [1 / 8]


def test_zero_std_groups_rule_reads_the_flat_fraction():
    config = HealthMonitorConfig(zero_std_groups=AboveThreshold(span=1, threshold=0.5))
    monitor = HealthMonitor(config, max_completion_length=32, reward_max=1.0)
    # TRL's undercount (0.0) is not what the rule reads once align_kit's share is logged.
    assert monitor.update(1, {"frac_reward_zero_std": 0.0, "groups/flat_fraction": 0.9})[0].rule == "zero_std_groups"


# --- the adaptive schedule's threshold ------------------------------------------------------


def test_adaptive_needs_the_format_reward_strictly_above_threshold():
    schedule = FormatWeightSchedule(kind="adaptive", start=1.0, threshold=0.9, window=1, floor=0.2)
    for _ in range(5):
        schedule.observe(0.9)  # exactly 0.9 is not above it
    assert schedule.weight(0) == 1.0
    schedule.observe(0.9001)
    assert schedule.weight(0) == 0.2
