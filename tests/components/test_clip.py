"""Clip engagement (`clip/*`): how often the upper bound binds on low- and high-probability tokens, worked out
by hand on small tensors, and which clip nodes attach the hook that measures it."""

from __future__ import annotations

import math

import pytest
import torch

from align_kit.components.clip import ClipEngagement, SequenceClip, TokenClip
from align_kit.core.hooks import LossState


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
    metrics = ClipEngagement(eps_high).on_loss(None, clip_loss_state())
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
    assert ClipEngagement(0.2).on_loss(None, state)["clip/low_prob_per_positive"] == pytest.approx(1.5)
    state.inputs["advantages"] = torch.tensor([-1.0, 0.0])  # none favoured: NaN, not 0
    assert math.isnan(ClipEngagement(0.2).on_loss(None, state)["clip/low_prob_per_positive"])


def test_on_policy_nothing_reaches_the_bound_and_empty_groups_are_nan():
    metrics = ClipEngagement(0.2).on_loss(None, clip_loss_state(old_logps=False))
    assert metrics["clip/upper_bound_low_prob"] == 0.0  # ratio exactly 1 without old log-probs
    state = clip_loss_state()
    state.inputs["advantages"] = torch.tensor([-1.0, -1.0])  # no positive advantage: the bound clips nothing
    assert math.isnan(ClipEngagement(0.2).on_loss(None, state)["clip/upper_bound_low_prob"])


def test_token_clip_nodes_attach_the_engagement_hook_and_gspo_does_not():
    (hook,) = TokenClip(eps_low=0.2, eps_high=0.28).trainer_hooks()
    assert isinstance(hook, ClipEngagement) and hook.eps_high == 0.28
    assert SequenceClip().trainer_hooks() == []
