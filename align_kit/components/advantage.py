"""Advantage normalizers behind one pure interface:

    compute(rewards_per_func [N, K], reward_weights [K], group_size) -> advantages [N]

usable without a trainer. Rows are grouped as TRL groups them (G consecutive completions of one
prompt). A row whose rewards are all NaN (every reward function returned None) is unscorable: it
is left out of the group statistics and gets advantage 0, as in TRL.

grpo    : (r - mean_group) / std_group             DeepSeekMath, arXiv 2402.03300
batch   : (r - mean_group) / std_batch             TRL scale_rewards="batch" (Lite PPO, arXiv 2508.08221)
dr_grpo : r - mean_group (loss also changes)       Dr.GRPO, arXiv 2503.20783
gdpo    : per-reward group normalisation, weighted sum, then TRL normalises the sum over the
          whole batch (the training-stability chapter, 16.6.3 gives the first two steps; the batch step is TRL's)
ngrpo   : group statistics include virtual samples with the best reward   NGRPO, arXiv 2509.18851

r is the weighted sum of the rewards. The TRL-native nodes leave TRL's computation in place and
`compute` reproduces it (tested against the trainer); NGRPO replaces TRL's advantages with its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from align_kit.core.component import Component
from align_kit.core.fields import knob
from align_kit.core.hooks import TrainerHook

STD_EPSILON = 1e-4  # TRL's guard in (r - mean) / (std + eps)
# NGRPO: a total this close to r_max is r_max. float32 totals (0.8*1 + 1.0*1) and a group mean of equal values
# differ from r_max in the last bits; divided by the 1e-4 guard, that noise gave a perfect group ~-1e-3.
BEST_TOTAL_RTOL, BEST_TOTAL_ATOL = 1e-5, 1e-6


def weighted_reward_total(values, reward_weights, unscorable=None):
    """sum_k w_k * values[:, k], NaN terms skipped; NaN for unscorable rows (default: rows whose
    values are all NaN). GDPO passes the mask of the raw rewards, as TRL does: a normalised row can
    be all NaN (a group with a single scored value) while its rewards are not."""
    import torch

    # Copied without waiting (the weights live on the host); NaN set by `where`, not a boolean-mask assignment
    # (whose indices a GPU would read back).
    total = (values * reward_weights.to(values.device, non_blocking=True).unsqueeze(0)).nansum(dim=1)
    return torch.where(torch.isnan(values).all(dim=1) if unscorable is None else unscorable, torch.nan, total)


def attainable_max(reward_weights, reward_maxes: list[float] | None = None) -> float:
    """The best weighted total a completion can earn, sum_k w_k max_k (each max 1.0 when not given)."""
    maxes = [1.0] * len(reward_weights) if reward_maxes is None else reward_maxes
    return float(sum(float(w) * m for w, m in zip(reward_weights, maxes, strict=True)))


@dataclass
class TRLAdvantage(Component):
    scale_rewards: Literal["group", "batch", "none"] = knob(
        "group",
        help="What divides the reward minus its group mean (TRL's scale_rewards): the group's std (GRPO), the "
        "batch's std (more robust when many groups have a tiny std), or nothing (Dr.GRPO: no difficulty bias).",
        source="GRPO arXiv 2402.03300; Lite PPO arXiv 2508.08221; Dr.GRPO arXiv 2503.20783",
    )
    aggregation: Literal["sum_then_normalize", "normalize_then_sum"] = knob(
        "sum_then_normalize",
        help="sum_then_normalize normalises the weighted sum of the rewards (GRPO); normalize_then_sum normalises "
        "each reward within its group first, then sums (GDPO: format cannot average correctness away).",
        source="GDPO, 16.6.3; TRL multi_objective_aggregation",
    )
    loss_type: str | None = knob(
        None,
        help="TRL's loss_type this node sets: dr_grpo normalises the loss by a constant instead of each sequence's "
        "length (removes the length bias); null leaves trainer.loss_type as it is.",
        source="Dr.GRPO, arXiv 2503.20783",
    )

    def grpo_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "scale_rewards": self.scale_rewards,
            "multi_objective_aggregation": self.aggregation,
        }
        if self.loss_type is not None:
            fields["loss_type"] = self.loss_type
        return fields

    def compute(self, rewards_per_func, reward_weights, group_size: int):
        import torch
        from trl.trainer.utils import nanstd

        if self.aggregation == "normalize_then_sum":
            grouped = rewards_per_func.view(-1, group_size, rewards_per_func.size(1))
            spread = nanstd(grouped, dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(grouped[:, :1])
            normalised = (grouped - torch.nanmean(grouped, dim=1, keepdim=True)) / (spread + STD_EPSILON)
            unscorable = torch.isnan(rewards_per_func).all(dim=1)
            total = weighted_reward_total(normalised.view_as(rewards_per_func), reward_weights, unscorable)
            batch_std = nanstd(total) if total.numel() > 1 else torch.zeros(())
            return torch.nan_to_num((total - torch.nanmean(total)) / (batch_std + STD_EPSILON), nan=0.0)

        total = weighted_reward_total(rewards_per_func, reward_weights)
        grouped = total.view(-1, group_size)
        centred = total - torch.nanmean(grouped, dim=1).repeat_interleave(group_size)
        if self.scale_rewards == "none":
            return torch.nan_to_num(centred, nan=0.0)
        if self.scale_rewards == "group":
            spread = nanstd(grouped, dim=1) if group_size > 1 else torch.zeros(grouped.size(0))
            spread = spread.repeat_interleave(group_size)
        else:
            spread = nanstd(total).expand_as(total) if total.numel() > 1 else torch.zeros_like(total)
        return torch.nan_to_num(centred / (spread + STD_EPSILON), nan=0.0)


@dataclass
class NGRPOAdvantage(Component):
    """Virtual-sample injection (the training-stability chapter, 16.6.5): each group's mean and std are taken over its
    real rewards plus `n_virtual` virtual samples scoring `r_max`; only real samples get
    advantages. A group that all scored 0.8 is no longer flat: mean 0.84, so each 0.8 is pushed
    down ("there is room to improve"); a group that all reached r_max stays at advantage 0.

    Several rewards: NGRPO acts on the weighted total r = sum_k w_k r_k, like GRPO, and the
    virtual sample's total is r_max. Unset, r_max is the best attainable total for the weights
    `compute` is given, sum_k w_k max_k, so it follows a format-weight schedule (max_k: each
    reward's maximum, bound from the run's rewards; 1.0 when unbound).
    """

    n_virtual: int = knob(
        1,
        ge=1,
        help="Virtual samples scoring r_max added to each group's mean and std; 1 is the paper's setting.",
        source="NGRPO, arXiv 2509.18851; 16.6.5",
    )
    r_max: float | None = knob(
        None,
        gt=0,
        help="The virtual sample's reward: the best attainable total; null (recommended) takes sum_k w_k max_k for "
        "the weights in force, so it follows a format-weight schedule.",
        source="NGRPO, arXiv 2509.18851",
    )
    reward_maxes: list[float] | None = field(default=None, init=False, repr=False)  # bound by the plan

    def validate(self) -> None:
        return None  # n_virtual's range is its field's (knob)

    def bind_rewards(self, rewards) -> None:
        self.reward_maxes = [spec.max_value for spec in rewards]

    def grpo_fields(self) -> dict[str, Any]:
        # TRL still computes (and logs) its own group statistics; align_kit replaces the advantages.
        return {"scale_rewards": "group", "multi_objective_aggregation": "sum_then_normalize"}

    def trainer_hooks(self) -> list:
        return [ReplaceAdvantages(self)]

    def compute(self, rewards_per_func, reward_weights, group_size: int):
        import torch
        from trl.trainer.utils import nanstd

        total = weighted_reward_total(rewards_per_func, reward_weights)
        grouped = total.view(-1, group_size)
        r_max = attainable_max(reward_weights, self.reward_maxes) if self.r_max is None else self.r_max
        at_best = torch.isclose(grouped, torch.tensor(r_max, dtype=total.dtype), BEST_TOTAL_RTOL, BEST_TOTAL_ATOL)
        grouped = torch.where(at_best, r_max, grouped)
        virtual = torch.full((grouped.size(0), self.n_virtual), r_max, dtype=total.dtype)
        augmented = torch.cat([grouped, virtual], dim=1)
        mean = torch.nanmean(augmented, dim=1, keepdim=True)
        spread = nanstd(augmented, dim=1, keepdim=True)
        advantages = (grouped - mean) / (spread + STD_EPSILON)
        perfect = (at_best | torch.isnan(grouped)).all(dim=1, keepdim=True)  # every sample at r_max: flat, as 16.6.5
        return torch.nan_to_num(advantages.masked_fill(perfect, 0.0).view(-1), nan=0.0)


class ReplaceAdvantages(TrainerHook):
    """Replaces TRL's advantages with the node's `compute` on the same rewards and weights."""

    def __init__(self, node):
        self.node = node

    def on_scored_batch(self, trainer, state, batch):
        advantages = self.node.compute(state.rewards_per_func, state.reward_weights, state.group_size)
        batch["advantages"] = state.local_rows(advantages).to(batch["advantages"].device)
        return None
