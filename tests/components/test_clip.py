"""Clip engagement (`clip/*`): how often the upper bound binds on low- and high-probability tokens, worked out
by hand on small tensors, and which clip nodes attach the hook that measures it."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from align_kit.components.clip import ClipEngagement, SequenceClip, TokenClip, distinct_correct
from align_kit.core.hooks import BatchState, LossState, on_host


def clip_loss_state(old_logps: bool = True) -> LossState:
    # Row 0 has a positive advantage, row 1 a negative one; row 1's last token is padding.
    old = torch.tensor([[0.05, 0.5, 0.02], [0.08, 0.9, 0.3]])
    new = torch.tensor([[0.07, 0.55, 0.021], [0.09, 0.95, 0.2]])  # ratios 1.4, 1.1, 1.05 | 1.125, 1.056, 0.667
    inputs = {
        "completion_mask": torch.tensor([[1, 1, 1], [1, 1, 0]]),
        "advantages": torch.tensor([1.0, -0.5]),
    }
    if old_logps:
        inputs["old_per_token_logps"] = old.log()
    entropies = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    return LossState(inputs=inputs, mode="train", forward=(new.log(), entropies, None))


@pytest.mark.parametrize(("eps_high", "low_prob_hits"), [(0.2, 0.5), (0.28, 0.5), (0.5, 0.0)])
def test_clip_engagement_by_hand(eps_high, low_prob_hits):
    metrics = on_host(ClipEngagement(eps_high).on_loss(None, clip_loss_state()))
    # Positive-advantage tokens are row 0's three. Below probability 0.1: tokens 0 (ratio 1.4) and 2 (1.05);
    # at or above: token 1 (1.1), which no bound of 1.2 or more reaches.
    assert metrics["clip/upper_bound_low_prob"] == pytest.approx(low_prob_hits)
    assert metrics["clip/upper_bound_high_prob"] == pytest.approx(0.0)
    # Of the 5 completion tokens, 3 had old probability below 0.1 (0.05, 0.02, 0.08); entropies 1, 3 and 4.
    assert metrics["clip/low_prob_share"] == pytest.approx(3 / 5)
    assert metrics["clip/low_prob_entropy"] == pytest.approx(8 / 3)
    # One positive-advantage completion (row 0), holding two tokens below 0.1 (0.05 and 0.02).
    assert metrics["clip/low_prob_per_positive"] == pytest.approx(2.0)


def test_low_prob_per_positive_averages_over_the_favoured_completions():
    state = clip_loss_state()
    state.inputs["advantages"] = torch.tensor([1.0, 0.5])  # both rows favoured: 2 low tokens and 1 (0.08)
    assert on_host(ClipEngagement(0.2).on_loss(None, state))["clip/low_prob_per_positive"] == pytest.approx(1.5)
    state.inputs["advantages"] = torch.tensor([-1.0, 0.0])  # none favoured: NaN, not 0
    assert math.isnan(on_host(ClipEngagement(0.2).on_loss(None, state))["clip/low_prob_per_positive"])


def test_on_policy_nothing_reaches_the_bound_and_empty_groups_are_nan():
    metrics = on_host(ClipEngagement(0.2).on_loss(None, clip_loss_state(old_logps=False)))
    assert metrics["clip/upper_bound_low_prob"] == 0.0  # ratio exactly 1 without old log-probs
    state = clip_loss_state()
    state.inputs["advantages"] = torch.tensor([-1.0, -1.0])  # no positive advantage: the bound clips nothing
    assert math.isnan(on_host(ClipEngagement(0.2).on_loss(None, state))["clip/upper_bound_low_prob"])


def test_token_clip_nodes_attach_the_engagement_hook_and_gspo_does_not():
    (hook,) = TokenClip(eps_low=0.2, eps_high=0.28).trainer_hooks()
    assert isinstance(hook, ClipEngagement) and hook.eps_high == 0.28
    assert SequenceClip().trainer_hooks() == []


def test_covariance_of_old_logprob_and_advantage_by_hand():
    state = clip_loss_state()
    # Old log-probs -1, -2, -3 | -4, -5 (padding -9 left out), advantages +1 | -1: the favoured completion is the
    # likelier one. Means -3 and 0.2; cross-products 2*0.8, 1*0.8, 0, -1*-1.2, -2*-1.2 sum to 6, over 5 tokens.
    state.inputs["old_per_token_logps"] = torch.tensor([[-1.0, -2.0, -3.0], [-4.0, -5.0, -9.0]])
    state.inputs["advantages"] = torch.tensor([1.0, -1.0])
    assert on_host(ClipEngagement(0.2).on_loss(None, state))["entropy/cov_logp_adv"] == pytest.approx(1.2)
    state.inputs["advantages"] = torch.tensor([-1.0, 1.0])  # the reward favours the unlikely one: entropy rises
    assert on_host(ClipEngagement(0.2).on_loss(None, state))["entropy/cov_logp_adv"] == pytest.approx(-1.2)
    state.inputs["advantages"] = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])  # constant advantage: none
    assert on_host(ClipEngagement(0.2).on_loss(None, state))["entropy/cov_logp_adv"] == pytest.approx(0.0)


def scored_round(correctness):
    # Two groups of three. Group 1: rows 0 and 1 are the same answer once padding is masked, row 2 another.
    ids = torch.tensor([[5, 6, 0], [5, 6, 7], [5, 7, 7], [5, 6, 0], [8, 0, 0], [8, 0, 0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0], [1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 0, 0]])
    rewards = torch.stack([torch.ones(6), torch.tensor(correctness)], dim=1)  # columns: format, correctness
    state = BatchState(inputs=[{}] * 6, mode="train", group_size=3, rewards_per_func=rewards)
    trainer = SimpleNamespace(reward_func_names=["format", "correctness"])
    return trainer, state, {"completion_ids": ids, "completion_mask": mask}


def test_distinct_correct_answers_per_group_by_hand():
    # Group 1 all correct: two distinct answers. Group 2: rows 4 and 5 correct and identical (one answer), row 3
    # unscored (NaN counts as not correct). Mean over groups (2 + 1) / 2.
    trainer, state, batch = scored_round([1.0, 1.0, 1.0, math.nan, 1.0, 1.0])
    assert on_host(ClipEngagement(0.2).on_scored_batch(trainer, state, batch))["rewards/distinct_correct"] == 1.5
    trainer, state, batch = scored_round([0.0, 1.0, 0.0, 0.0, 0.0, 0.0])  # one correct answer; a group with none: 0
    assert on_host(ClipEngagement(0.2).on_scored_batch(trainer, state, batch))["rewards/distinct_correct"] == 0.5
    trainer.reward_func_names = ["format", "judge"]  # no correctness reward: nothing to count
    assert on_host(ClipEngagement(0.2).on_scored_batch(trainer, state, batch)) is None
    assert math.isnan(distinct_correct(batch["completion_ids"][:4], batch["completion_mask"][:4], [1] * 4, 3))
