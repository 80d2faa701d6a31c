"""Advantage normalizers: hand-computed values (NGRPO's virtual sample at the best total in force included), and the
trainer uses exactly what compute returns."""

from __future__ import annotations

import math
import statistics

import pytest
import torch

from align_kit.components.advantage import NGRPOAdvantage, TRLAdvantage
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.train import component_choices
from tests.conftest import generation_inputs

NAN = float("nan")
EPS = 1e-4  # TRL's std guard


def column(*values: float) -> torch.Tensor:
    return torch.tensor([[v] for v in values])


def test_ngrpo_seed_example():
    # The training-stability chapter, 16.6.5: four answers at 0.8 plus one virtual 1.0 -> mean 0.84, std > 0,
    # all negative.
    augmented = [0.8, 0.8, 0.8, 0.8, 1.0]
    assert statistics.mean(augmented) == pytest.approx(0.84)
    expected = (0.8 - 0.84) / (statistics.stdev(augmented) + EPS)  # stdev: Bessel-corrected, as TRL
    advantages = NGRPOAdvantage().compute(column(0.8, 0.8, 0.8, 0.8), torch.tensor([1.0]), 4)
    assert advantages.tolist() == pytest.approx([expected] * 4)
    assert expected < 0


def test_ngrpo_full_score_group_stays_at_zero_and_mixed_group_uses_the_virtual_sample():
    rewards = column(1.0, 1.0, 0.0, 1.0)
    advantages = NGRPOAdvantage().compute(rewards, torch.tensor([1.0]), 2)
    mixed = [0.0, 1.0, 1.0]  # second group plus the virtual 1.0
    mean, spread = statistics.mean(mixed), statistics.stdev(mixed)
    assert advantages.tolist() == pytest.approx([0.0, 0.0, (0 - mean) / (spread + EPS), (1 - mean) / (spread + EPS)])


def test_ngrpo_acts_on_the_weighted_total_and_skips_unscorable_rows():
    rewards = torch.tensor([[1.0, 1.0], [0.0, 1.0], [NAN, NAN]])
    weights = torch.tensor([0.8, 0.2])
    totals = [0.8 * 1 + 0.2 * 1, 0.8 * 0 + 0.2 * 1]  # the unscorable row is left out
    augmented = [*totals, 1.0]
    mean, spread = statistics.mean(augmented), statistics.stdev(augmented)
    advantages = NGRPOAdvantage().compute(rewards, weights, 3)
    assert advantages.tolist() == pytest.approx([(t - mean) / (spread + EPS) for t in totals] + [0.0])


@pytest.mark.parametrize(("weights", "group_size"), [([0.8, 1.0], 8), ([0.8, 1.0], 5), ([0.7, 0.2, 0.1], 16)])
def test_ngrpo_perfect_group_is_exactly_zero_under_any_weights(weights, group_size):
    # The rule of 16.6.5: every sample at the best total, mean = r_max, so every advantage is 0 (no float noise
    # divided by the 1e-4 guard: with 0.8 and 1.0 that noise was -0.0012 each).
    rewards = torch.ones(group_size, len(weights))
    advantages = NGRPOAdvantage().compute(rewards, torch.tensor(weights), group_size)
    assert advantages.tolist() == [0.0] * group_size


def test_ngrpo_group_within_float_tolerance_of_the_best_total_is_flat():
    # Totals 1.8 less a float32 rounding (1.8 - 2**-22 ~ 1.8 - 2.4e-7): the best total, so flat.
    below = 1.8 - 2**-22
    advantages = NGRPOAdvantage(r_max=1.8).compute(column(below, 1.8, below, below), torch.tensor([1.0]), 4)
    assert advantages.tolist() == [0.0] * 4


def test_ngrpo_group_clearly_below_the_best_total_is_pushed_down():
    # 1.79 is a real shortfall (0.01 below r_max = 1.8): five samples at 1.79 and one virtual 1.8.
    augmented = [1.79] * 5 + [1.8]
    mean, spread = statistics.mean(augmented), statistics.stdev(augmented)
    expected = (1.79 - mean) / (spread + EPS)
    advantages = NGRPOAdvantage(r_max=1.8).compute(column(*[1.79] * 5), torch.tensor([1.0]), 5)
    assert advantages.tolist() == pytest.approx([expected] * 5, rel=1e-4)
    assert expected == pytest.approx(-0.39848, rel=1e-4)  # -(0.01/6) / (0.0040825 + 1e-4)


def test_ngrpo_mixed_group_under_weights_0_8_and_1_0_by_hand():
    # Totals 1.8, 1.8, 1.0, 1.8 plus the virtual 1.8: mean 8.2/5 = 1.64; squared deviations 4*0.0256 + 0.4096 =
    # 0.512, Bessel /4 = 0.128, std = 0.357771.
    rewards = torch.tensor([[1.0, 1.0], [1.0, 1.0], [0.0, 1.0], [1.0, 1.0]])
    advantages = NGRPOAdvantage().compute(rewards, torch.tensor([0.8, 1.0]), 4)
    high, low = 0.16 / (0.357771 + EPS), -0.64 / (0.357771 + EPS)
    assert advantages.tolist() == pytest.approx([high, high, low, high], rel=1e-5)


GROUPED = torch.tensor([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
WEIGHTS = torch.tensor([0.8, 0.2])
TOTALS = [1.0, 0.2, 0.8, 0.0, 1.0, 0.8]  # 0.8 * correctness + 0.2 * format, by row


def by_hand(scale: str) -> list[float]:
    groups = [TOTALS[:3], TOTALS[3:]]
    result = []
    for group in groups:
        mean = statistics.mean(group)
        spread = {"group": statistics.stdev(group), "batch": statistics.stdev(TOTALS), "none": None}[scale]
        result += [(r - mean) if spread is None else (r - mean) / (spread + EPS) for r in group]
    return result


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_sum_then_normalize_scales(scale):
    advantages = TRLAdvantage(scale_rewards=scale).compute(GROUPED, WEIGHTS, 3)
    assert advantages.tolist() == pytest.approx(by_hand(scale))


def test_gdpo_normalises_each_reward_then_the_batch():
    def normalised(values: list[float]) -> list[float]:
        mean, spread = statistics.mean(values), statistics.stdev(values)
        return [(v - mean) / (spread + EPS) for v in values]

    per_reward = []
    for k in range(2):
        values = GROUPED[:, k].tolist()
        per_reward.append(normalised(values[:3]) + normalised(values[3:]))
    summed = [0.8 * a + 0.2 * b for a, b in zip(*per_reward, strict=True)]
    mean, spread = statistics.mean(summed), statistics.stdev(summed)
    expected = [(s - mean) / (spread + EPS) for s in summed]
    advantages = TRLAdvantage(aggregation="normalize_then_sum").compute(GROUPED, WEIGHTS, 3)
    assert advantages.tolist() == pytest.approx(expected, abs=1e-6)


def test_unscorable_rows_get_zero_and_leave_the_group_statistics():
    rewards = column(1.0, 0.0, NAN, 1.0)
    advantages = TRLAdvantage().compute(rewards, torch.tensor([1.0]), 4)
    scored = [1.0, 0.0, 1.0]
    mean, spread = statistics.mean(scored), statistics.stdev(scored)
    assert advantages.tolist() == pytest.approx([(1 - mean) / (spread + EPS), (0 - mean) / (spread + EPS), 0.0,
                                                 (1 - mean) / (spread + EPS)])  # fmt: skip
    assert not math.isnan(advantages.sum().item())


@pytest.mark.parametrize("node", ["grpo", "batch", "dr_grpo", "gdpo", "ngrpo"])
def test_trainer_advantages_are_what_compute_returns(node, build_trainer):
    trainer = build_trainer(f"advantage={node}")
    batch = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4))
    expected = trainer.plan.components["advantage"].compute(
        trainer.last_state.rewards_per_func, trainer.reward_weights, trainer.num_generations
    )
    assert torch.equal(batch["advantages"], expected)
    assert batch["advantages"].abs().sum() > 0  # a batch with signal: the comparison is not of zeros


def test_gdpo_keeps_a_scored_row_whose_normalised_rewards_are_all_nan():
    # Group A: row 0 has one scored reward, row 1 none. A single value has no std (NaN), so row 0's
    # normalised rewards are all NaN; TRL still counts it (nansum -> 0) and drops only row 1.
    # Group B: each column [1, 0] -> +-0.5 / (stdev 0.70711 + eps); the weighted sum is +-x.
    rewards = torch.tensor([[1.0, NAN], [NAN, NAN], [1.0, 1.0], [0.0, 0.0]])
    x = 2 * 0.5 / (statistics.stdev([1.0, 0.0]) + EPS)
    totals = [0.0, x, -x]  # rows 0, 2, 3; batch mean 0
    spread = statistics.stdev(totals)
    expected = [0.0, 0.0, x / (spread + EPS), -x / (spread + EPS)]
    advantages = TRLAdvantage(aggregation="normalize_then_sum").compute(rewards, torch.tensor([1.0, 1.0]), 2)
    assert advantages.tolist() == pytest.approx(expected, abs=1e-6)


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
