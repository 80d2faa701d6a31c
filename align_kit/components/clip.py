"""Clip schemes for the importance ratio. TRL implements all three; the nodes set its fields.

symmetric   : clip(r, 1-eps, 1+eps), eps = 0.2                  PPO, arXiv 1707.06347
clip_higher : clip(r, 1-eps_low, 1+eps_high), 0.2 / 0.28        DAPO §3.1, arXiv 2503.14476
gspo        : sequence-level ratio (length-normalised), 3e-4 / 4e-4   GSPO, arXiv 2507.18071

Every token-level node also logs whether its upper bound engaged (`ClipEngagement`): Clip-Higher's claim (DAPO
§3.1) is that the upper bound caps how far a low-probability token can rise, so a comparison of eps_high values
means something only where positive-advantage tokens of low old probability actually reach that bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from align_kit.core.component import Component
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.core.hooks import Deferred, TrainerHook, Weighted, masked_mean

# DAPO §3.1's example of a token the upper bound holds back: old probability 0.01 can reach at most 0.012 at
# eps_high 0.2. Tokens below this old probability count as "low-probability".
LOW_PROBABILITY = 0.1
# The reward node whose positive score marks a completion correct (rewards/distinct_correct).
CORRECTNESS = "correctness"
# TRL's clip with no clip node: GRPOConfig's epsilon, and epsilon_high None (the same bound), on token ratios.
TRL_EPSILON = 0.2
# GSPO's sequence-level ratio needs a per-sequence loss; TRL's token-summing losses break it.
GSPO_LOSS_HINT = " (GSPO's sequence ratio needs the per-sequence 'grpo' loss, not a token-aggregated one)"


@dataclass
class TokenClip(Component):
    """PPO-style token-level clipping with separate lower and upper bounds."""

    eps_low: float = knob(
        0.2,
        gt=0,
        help="Lower clip bound: the ratio pi/pi_old is clipped at 1 - eps_low (TRL's epsilon); 0.2 as PPO and DAPO.",
        source="PPO, arXiv 1707.06347; DAPO §3.1, arXiv 2503.14476",
    )
    eps_high: float = knob(
        0.2,
        gt=0,
        help="Upper clip bound 1 + eps_high (TRL's epsilon_high), never below eps_low; Clip-Higher raises it to 0.28 "
        "(0.28-0.3 recommended) so low-probability tokens can grow and entropy does not collapse.",
        source="DAPO §3.1, arXiv 2503.14476; 16.6, figure 16-11; 18.3.4",
    )

    def validate(self) -> None:
        if self.eps_high < self.eps_low:
            raise ConfigError(
                f"clip.eps_high={self.eps_high} is below clip.eps_low={self.eps_low}; "
                "Clip-Higher only ever raises the upper bound: set clip.eps_high >= clip.eps_low"
            )

    def grpo_fields(self) -> dict[str, Any]:
        return {"epsilon": self.eps_low, "epsilon_high": self.eps_high, "importance_sampling_level": "token"}

    @property
    def is_trl_default(self) -> bool:
        """Whether this clip is the one TRL applies without a clip node (symmetric TRL_EPSILON per token)."""
        return self.eps_low == self.eps_high == TRL_EPSILON

    def check(self, plan) -> None:
        """A clip other than TRL's default acts only off-policy: on-policy the ratio is exactly 1."""
        accumulation = plan.effective("gradient_accumulation_steps")
        steps = plan.effective("steps_per_generation") or accumulation
        if not self.is_trl_default and plan.effective("num_iterations") == 1 and steps <= accumulation:
            plan.notes.append(
                f"warning: clip={plan.choices.get('clip')} has no effect: training is fully on-policy "
                f"(num_iterations=1, steps_per_generation={steps} <= gradient_accumulation_steps={accumulation}), "
                "so the ratio is exactly 1; set trainer.steps_per_generation > gradient_accumulation_steps "
                "or trainer.num_iterations >= 2"
            )

    def trainer_hooks(self) -> list:
        return [ClipEngagement(self.eps_high)]


@dataclass
class SequenceClip(TokenClip):
    """GSPO: one length-normalised ratio per sequence, clipped in a very narrow band."""

    eps_low: float = knob(
        3e-4,
        gt=0,
        help="Lower bound of the sequence ratio's clip band (TRL's epsilon); the paper's 3e-4.",
        source="GSPO, arXiv 2507.18071",
    )
    eps_high: float = knob(
        4e-4,
        gt=0,
        help="Upper bound of the sequence ratio's clip band (TRL's epsilon_high); the paper's 4e-4.",
        source="GSPO, arXiv 2507.18071",
    )

    def grpo_fields(self) -> dict[str, Any]:
        # GSPO averages the loss per sequence: TRL's "grpo" aggregation.
        return {**super().grpo_fields(), "importance_sampling_level": "sequence", "loss_type": "grpo"}

    @property
    def is_trl_default(self) -> bool:
        return False  # TRL's ratio is per token

    def field_hint(self, name: str) -> str:
        return GSPO_LOSS_HINT if name == "loss_type" else ""

    def trainer_hooks(self) -> list:
        return []  # one ratio per sequence: a token's old probability says nothing about where its bound is


class ClipEngagement(TrainerHook):
    """Per loss call, over completion tokens with a positive advantage (the only ones the upper bound clips):
    clip/upper_bound_low_prob and clip/upper_bound_high_prob, the share whose ratio pi/pi_old exceeded
    1 + eps_high among tokens of old probability below LOW_PROBABILITY and at or above it; clip/low_prob_share,
    the share of completion tokens below it; clip/low_prob_entropy, the policy's entropy at those positions;
    clip/low_prob_per_positive, how many such tokens a positive-advantage completion holds (on average over those
    completions): whether the answers the reward favours need one rare token or rare tokens at several positions.
    On-policy (no old log-probs) every ratio is 1 and nothing reaches the bound.

    Two more say whether entropy is set to collapse, the other half of the claim. entropy/cov_logp_adv, per loss
    call: the covariance over completion tokens of their log-probability under the old policy and their advantage.
    A policy-gradient step changes entropy by about minus this covariance (arXiv 2505.22617, §2-3): positive when
    the answers the reward favours are already the likely ones, so entropy falls. rewards/distinct_correct, per
    generation round: distinct completions (token sequences) among each group's correct ones (correctness reward
    > 0), averaged over groups; a policy that sharpens onto few correct answers drives it towards 1."""

    def __init__(self, eps_high: float, correctness: str = CORRECTNESS):
        self.eps_high = eps_high
        self.correctness = correctness

    def on_scored_batch(self, trainer, state, batch):
        names = list(getattr(trainer, "reward_func_names", []))
        if self.correctness not in names or state.rewards_per_func is None:
            return None
        correct = state.local_rows(state.rewards_per_func[:, names.index(self.correctness)]) > 0  # NaN: not correct
        return {
            "rewards/distinct_correct": distinct_correct(
                batch["completion_ids"], batch["completion_mask"], correct, state.group_size
            )
        }

    def on_loss(self, trainer, loss):
        import torch

        logps, entropies = (tensor.detach() for tensor in loss.forward[:2])
        inputs = loss.inputs
        mask = inputs["completion_mask"].float()
        old = inputs.get("old_per_token_logps")
        old = logps if old is None else old.detach()
        ratio = torch.exp(logps - old)
        advantages = inputs["advantages"]
        advantages = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
        positive = mask * (advantages > 0).float()
        low = (old < math.log(LOW_PROBABILITY)).float()
        above = (ratio > 1 + self.eps_high).float()
        favoured = (positive.amax(dim=1) > 0).float()  # completions with a positive advantage
        return {
            "clip/upper_bound_low_prob": masked_mean(above, positive * low),
            "clip/upper_bound_high_prob": masked_mean(above, positive * (1 - low)),
            "clip/low_prob_share": masked_mean(low, mask),
            "clip/low_prob_entropy": masked_mean(entropies, mask * low),
            "clip/low_prob_per_positive": masked_mean((positive * low).sum(dim=1), favoured),
            "entropy/cov_logp_adv": token_covariance(old, advantages.expand_as(old), mask),
        }


def token_covariance(x, y, mask) -> Deferred:
    """Covariance of x and y over the positions where mask is 1 (population form: divided by their count)."""
    x_mean, y_mean = masked_mean(x, mask).value, masked_mean(y, mask).value
    return masked_mean((x - x_mean) * (y - y_mean), mask)


def distinct_correct(completion_ids, completion_mask, correct, group_size: int) -> Deferred | Weighted:
    """Mean over groups (consecutive rows of `group_size`) of the number of distinct completions among the correct
    ones; a completion is its token ids where the mask is 1 (TRL's completion masks are 1s then 0s, so two rows hold
    the same completion when their ids agree wherever either mask is 1). Groups with no correct completion count 0.
    On the device: a set of token tuples per group would read every row back to the host."""
    import torch

    rows = len(correct)
    if rows == 0 or rows % group_size:
        return Weighted(float("nan"), 0)
    groups = rows // group_size
    filled = completion_ids.masked_fill(completion_mask == 0, -1).view(groups, group_size, -1)
    same = (filled.unsqueeze(2) == filled.unsqueeze(1)).all(dim=-1)  # [group, i, j]: rows i and j hold one answer
    correct = torch.as_tensor(correct, device=completion_ids.device).bool().view(groups, 1, group_size)
    earlier = torch.ones(group_size, group_size, dtype=torch.bool, device=completion_ids.device).tril(-1)  # j < i
    repeated = (same & earlier & correct).any(dim=-1)  # a correct row before row i holds its answer
    distinct = (correct.view(groups, group_size) & ~repeated).sum()
    return Deferred(distinct.double() / groups, groups)  # float64, as Python divides
