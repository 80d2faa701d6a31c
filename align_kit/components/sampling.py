"""Which generated groups a training step keeps.

all     : every group (TRL's behaviour)
dynamic : DAPO dynamic sampling (arXiv 2503.14476 §3.2; the policy-optimization chapter, 18.3.8 ranks it first among
          interventions). Groups whose rewards are all equal carry no signal (zero advantage,
          zero gradient); they are dropped and new groups are generated until the batch is full
          or `max_gen_batches` generation rounds were spent. A batch still short after that is
          topped up with the dropped groups, which contribute no gradient: the step trains on
          the signal it has, at the batch shape TRL expects, and `sampling/filled_groups` says so.

Under `dynamic`, align_kit's batch metrics (adv/*, groups/flat_fraction, reward/<domain>,
completions/mean_length/<domain>) describe the batch that trains; the rounds drawn before the
filter are reported as sampling/groups_drawn, sampling/flat_fraction_before_filter and
sampling/kept_group_fraction. TRL logs its own per-generation metrics (reward, rewards/*/mean,
frac_reward_zero_std, completions/*) once per round: they describe every round drawn, before the
filter (the policy on the data, not the filtered batch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from align_kit.components.base import Component
from align_kit.components.hooks import BatchState, TrainerHook
from align_kit.errors import ConfigError

# How each padded key of a TRL generation batch is padded when batches of different widths join
# (all of these are [B, width]; every other tensor is per row).
LEFT_PADDED = ("prompt_ids", "prompt_mask")
RIGHT_PADDED = (
    "completion_ids",
    "completion_mask",
    "old_per_token_logps",
    "ref_per_token_logps",
    "sampling_per_token_logps",
    "tool_mask",
    "rollout_is_ratio",
)
# [B, prompt + completion, ...] tensors (MoE routing): split at the prompt width, padded on both sides.
SEQUENCE_KEYS = ("routed_experts", "routed_experts_valid")
# Totals within this share of the batch's reward scale (its largest |total|) count as equal: float32
# sums of equal rewards can differ in the last bits, and a std test (TRL's 1e-8) misses those.
FLAT_RTOL = 1e-6


@dataclass
class AllGroups(Component):
    dynamic = False


@dataclass
class DynamicSampling(Component):
    max_gen_batches: int = 4  # generation rounds per step, the first included

    dynamic = True

    def validate(self) -> None:
        if self.max_gen_batches < 1:
            raise ConfigError(f"sampling.max_gen_batches={self.max_gen_batches} must be >= 1")

    def trainer_hooks(self) -> list:
        return [KeepGroupsWithSignal(self.max_gen_batches)]


class KeepGroupsWithSignal(TrainerHook):
    """Regenerates until the training batch holds only groups whose rewards differ, or the round
    budget is spent; each round is a full generation round with its own BatchState."""

    def __init__(self, max_gen_batches: int):
        self.max_gen_batches = max_gen_batches

    def attach(self, trainer) -> None:
        if trainer.accelerator.num_processes > 1:
            raise ConfigError("sampling=dynamic filters groups per process; it supports one process only")

    def select_batch(self, trainer, state, batch, score_round):
        from align_kit.components.advantage import weighted_reward_total

        group_size = state.group_size
        needed = len(state.inputs) // group_size
        kept: list[tuple[BatchState, dict, list[int]]] = []
        dropped: list[tuple[BatchState, dict, list[int]]] = []
        generated = kept_count = flat_count = rounds = 0
        while True:
            rounds += 1
            signal = groups_with_signal(weighted_reward_total(state.rewards_per_func, state.reward_weights), group_size)
            flags = signal.tolist()
            kept.append((state, batch, [g for g, has in enumerate(flags) if has]))
            dropped.append((state, batch, [g for g, has in enumerate(flags) if not has]))
            generated += len(signal)
            kept_count += int(signal.sum())
            flat_count += len(signal) - int(signal.sum())
            if kept_count >= needed or rounds >= self.max_gen_batches:
                break
            state, batch = score_round(self._draw_prompts(trainer, needed, rounds))
        chosen, remaining = [], needed
        for part_state, part, groups in kept + dropped:
            take = groups[:remaining]
            if take:
                chosen.append((part_state, select_groups(part, take, group_size), take))
                remaining -= len(take)
        joined = join_states([(part_state, take) for part_state, _, take in chosen], group_size)
        joined.extras["sampling"] = {
            "sampling/groups_drawn": generated,
            "sampling/flat_fraction_before_filter": flat_count / generated,
            "sampling/kept_group_fraction": kept_count / generated,
            "sampling/gen_batches": rounds,
            "sampling/filled_groups": max(needed - kept_count, 0),
        }
        return joined, concat_batches([part for _, part, _ in chosen], trainer.processing_class.pad_token_id)

    def on_train_batch(self, trainer, state, batch):
        return state.extras.get("sampling")

    @staticmethod
    def _draw_prompts(trainer, count: int, round_index: int) -> list[dict]:
        import torch

        # Seeded by run seed, step and round: a resumed run draws the same extra prompts.
        generator = torch.Generator().manual_seed(
            trainer.args.seed * 1_000_003 + trainer.state.global_step * 101 + round_index
        )
        picks = torch.randint(len(trainer.train_dataset), (count,), generator=generator).tolist()
        return [dict(trainer.train_dataset[i]) for i in picks for _ in range(trainer.num_generations)]


def join_states(parts: list[tuple[BatchState, list[int]]], group_size: int) -> BatchState:
    """The BatchState of the selected groups of several rounds (one process: rows are local)."""
    import torch

    def rows(groups):
        return torch.tensor([g * group_size + i for g in groups for i in range(group_size)], dtype=torch.long)

    first = parts[0][0]
    return BatchState(
        inputs=[state.inputs[i] for state, groups in parts for i in rows(groups).tolist()],
        mode=first.mode,
        group_size=group_size,
        rewards_per_func=torch.cat([state.rewards_per_func[rows(groups)] for state, groups in parts]),
        reward_weights=first.reward_weights,
    )


def flat_groups(total_rewards, group_size: int):
    """Bool per group: are its (non-NaN) weighted reward totals all equal, within FLAT_RTOL of the
    batch's reward scale? Such a group has zero advantage under every normaliser (no gradient)."""
    import torch

    grouped = total_rewards.view(-1, group_size)
    unscored = torch.isnan(grouped)
    scale = grouped[~unscored].abs().max().item() if bool((~unscored).any()) else 0.0
    highest = torch.where(unscored, -torch.inf, grouped).max(dim=1).values
    lowest = torch.where(unscored, torch.inf, grouped).min(dim=1).values
    return (highest - lowest) <= FLAT_RTOL * scale


def groups_with_signal(total_rewards, group_size: int):
    """Bool per group: do its (non-NaN) rewards differ?"""
    return ~flat_groups(total_rewards, group_size)


def select_groups(batch: dict[str, Any], groups: list[int], group_size: int) -> dict[str, Any]:
    import torch

    rows = torch.tensor([g * group_size + i for g in groups for i in range(group_size)], dtype=torch.long)
    return {
        key: value[rows] if isinstance(value, torch.Tensor) and value.dim() > 0 else value
        for key, value in batch.items()
    }


def _pad_to(tensor, width: int, value, left: bool):
    import torch.nn.functional as F

    missing = width - tensor.size(1)
    if missing == 0:
        return tensor
    padding = [0, 0] * (tensor.dim() - 2) + ([missing, 0] if left else [0, missing])
    return F.pad(tensor, padding, value=value)


def concat_batches(batches: list[dict[str, Any]], pad_token_id: int) -> dict[str, Any]:
    """Join TRL generation batches row-wise, re-padding to common prompt and completion widths."""
    import torch

    pad_values = {"prompt_ids": pad_token_id, "completion_ids": pad_token_id, "tool_mask": 1, "rollout_is_ratio": 1.0}
    joined: dict[str, Any] = {}
    prompt_width = max(batch["prompt_ids"].size(1) for batch in batches)
    completion_width = max(batch["completion_ids"].size(1) for batch in batches)
    for key, first in batches[0].items():
        if not isinstance(first, torch.Tensor) or first.dim() == 0:
            continue
        parts = [batch[key] for batch in batches]
        if key in SEQUENCE_KEYS:
            parts = [
                torch.cat(
                    [
                        _pad_to(part[:, : batch["prompt_ids"].size(1)], prompt_width, 0, left=True),
                        _pad_to(part[:, batch["prompt_ids"].size(1) :], completion_width, 0, left=False),
                    ],
                    dim=1,
                )
                for part, batch in zip(parts, batches, strict=True)
            ]
        elif key in LEFT_PADDED or key in RIGHT_PADDED:
            width = max(part.size(1) for part in parts)
            parts = [_pad_to(part, width, pad_values.get(key, 0), key in LEFT_PADDED) for part in parts]
        joined[key] = torch.cat(parts, dim=0)
    mask = joined["completion_mask"] * joined.get("tool_mask", 1)
    joined["num_items_in_batch"] = mask.sum()
    return joined
