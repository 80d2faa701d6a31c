"""Which generated groups a training step keeps.

all     : every group (TRL's behaviour)
dynamic : DAPO dynamic sampling (arXiv 2503.14476 §3.2; the policy-optimization chapter, 18.3.8 ranks it first among
          interventions). Groups whose rewards are all equal carry no signal (zero advantage,
          zero gradient); they are dropped and new groups are generated until the batch is full
          or `max_gen_batches` generation rounds were spent. A batch still short after that is
          topped up with the dropped groups, which contribute no gradient: the step trains on
          the signal it has, at the batch shape TRL expects, and `sampling/filled_groups` says so.

With several processes the groups to keep are decided from the rewards gathered over all of them, so every process
keeps the same groups' rows it generated and draws the same number of rounds.

Under `dynamic`, align_kit's batch metrics (adv/*, groups/flat_fraction, reward/<domain>,
completions/mean_length/<domain>) describe the batch that trains; the rounds drawn before the
filter are reported as sampling/groups_drawn, sampling/flat_fraction_before_filter and
sampling/kept_group_fraction. TRL logs its own per-generation metrics (reward, rewards/*/mean,
frac_reward_zero_std, completions/*) once per round: they describe every round drawn, before the
filter (the policy on the data, not the filtered batch).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from align_kit.core.component import Component
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.core.hooks import BatchKey, BatchState, TrainerHook
from align_kit.core.processes import world_size

# Totals within this share of the batch's reward scale (its largest |total|) count as equal: float32
# sums of equal rewards can differ in the last bits, and a std test (TRL's 1e-8) misses those.
FLAT_RTOL = 1e-6


@dataclass
class AllGroups(Component):
    dynamic = False


@dataclass
class DynamicSampling(Component):
    max_gen_batches: int = knob(
        4,
        ge=1,
        help="Generation rounds per step, the first included, >= 1; a batch still short after them is filled with "
        "dropped, zero-gradient groups (sampling/filled_groups).",
        source="DAPO §3.2, arXiv 2503.14476; 18.3.8",
    )

    dynamic = True

    def validate(self) -> None:
        return None  # max_gen_batches' range is its field's (knob)

    def check(self, plan) -> None:
        # Each process keeps or drops whole groups of its own rows (TRL hands each process a contiguous share).
        generations, processes = plan.effective("num_generations"), world_size()
        per_process = plan.generation_batch // processes
        if per_process % generations:
            raise ConfigError(
                f"sampling=dynamic keeps whole prompt groups per process, but each of the {processes} processes "
                f"holds {per_process} completions, not a multiple of trainer.num_generations={generations}; "
                "raise trainer.per_device_train_batch_size or steps_per_generation"
            )

    def monitor_facts(self) -> dict[str, Any]:
        return {"dynamic_sampling": True, "max_gen_batches": self.max_gen_batches}

    def trainer_hooks(self) -> list:
        return [KeepGroupsWithSignal(self.max_gen_batches)]


class KeepGroupsWithSignal(TrainerHook):
    """Regenerates until the training batch holds only groups whose rewards differ, or the round
    budget is spent; each round is a full generation round with its own BatchState.

    With several processes every process keeps whole groups of its own rows, and every decision comes from the
    rewards TRL gathered over all processes: each process sees the same signal, draws the same number of rounds
    (generation holds collective calls) and knows which groups every other process keeps."""

    def __init__(self, max_gen_batches: int):
        self.max_gen_batches = max_gen_batches

    def select_batch(self, trainer, state, batch, score_round):
        from align_kit.components.advantage import weighted_reward_total

        group_size = state.group_size
        needed = len(state.inputs) // group_size  # groups per process
        processes, me = trainer.accelerator.num_processes, trainer.accelerator.process_index
        rounds: list[tuple[BatchState, dict]] = []
        signals = []  # per round: [processes, needed] bools
        while True:
            rounds.append((state, batch))
            total = weighted_reward_total(state.rewards_per_func, state.reward_weights)
            signals.append(groups_with_signal(total, group_size).view(processes, needed))
            kept_per_process = sum(signal.sum(dim=1) for signal in signals)
            if int(kept_per_process.min()) >= needed or len(rounds) >= self.max_gen_batches:
                break
            state, batch = score_round(self._draw_prompts(trainer, needed, len(rounds), me))
        picks = [chosen_groups([signal[p].tolist() for signal in signals], needed) for p in range(processes)]
        mine = picks[me]
        joined = BatchState(
            inputs=[rounds[r][0].inputs[g * group_size + i] for r, g in mine for i in range(group_size)],
            mode=rounds[0][0].mode,
            group_size=group_size,
            start=me * needed * group_size,
            rewards_per_func=_gathered_rows(rounds, picks, needed, group_size),
            reward_weights=rounds[0][0].reward_weights,
        )
        drawn = processes * needed * len(rounds)
        kept = int(sum(signal.sum() for signal in signals))
        joined.extras["sampling"] = {
            "sampling/groups_drawn": drawn,
            "sampling/flat_fraction_before_filter": (drawn - kept) / drawn,
            "sampling/kept_group_fraction": kept / drawn,
            "sampling/gen_batches": len(rounds),
            "sampling/filled_groups": int((needed - kept_per_process).clamp(min=0).sum()),
        }
        parts = [select_groups(rounds[r][1], groups, group_size) for r, groups in _runs(mine)]
        added = [key for hook in trainer.hooks for key in hook.batch_keys]
        return joined, concat_batches(parts, trainer.processing_class.pad_token_id, added)

    def on_train_batch(self, trainer, state, batch):
        return state.extras.get("sampling")

    @staticmethod
    def _draw_prompts(trainer, count: int, round_index: int, process_index: int = 0) -> list[dict]:
        import torch

        # Seeded by run seed, step, round and process: a resumed run draws the same extra prompts, and
        # processes draw different ones.
        generator = torch.Generator().manual_seed(
            trainer.args.seed * 1_000_003 + trainer.state.global_step * 101 + round_index + process_index * 7919
        )
        picks = torch.randint(len(trainer.train_dataset), (count,), generator=generator).tolist()
        return [dict(trainer.train_dataset[i]) for i in picks for _ in range(trainer.num_generations)]


def chosen_groups(signals: list[list[bool]], needed: int) -> list[tuple[int, int]]:
    """(round, group) pairs one process trains on: groups with signal in round order, then, if short, flat ones
    (they add no gradient; they keep the batch at the shape TRL expects)."""
    with_signal = [(r, g) for r, flags in enumerate(signals) for g, has in enumerate(flags) if has]
    flat = [(r, g) for r, flags in enumerate(signals) for g, has in enumerate(flags) if not has]
    return (with_signal + flat)[:needed]


def _runs(picks: list[tuple[int, int]]) -> list[tuple[int, list[int]]]:
    """Consecutive picks from the same round, as (round, groups)."""
    runs: list[tuple[int, list[int]]] = []
    for r, g in picks:
        if runs and runs[-1][0] == r:
            runs[-1][1].append(g)
        else:
            runs.append((r, [g]))
    return runs


def _gathered_rows(rounds, picks: list[list[tuple[int, int]]], needed: int, group_size: int):
    """The kept rows of every process's rewards, in process order: the joined batch's gathered rewards."""
    import torch

    parts = []
    for process, chosen in enumerate(picks):
        for r, groups in _runs(chosen):
            rows = [(process * needed + g) * group_size + i for g in groups for i in range(group_size)]
            parts.append(rounds[r][0].rewards_per_func[torch.tensor(rows, dtype=torch.long)])
    return torch.cat(parts)


def flat_groups(total_rewards, group_size: int):
    """Bool per group: are its (non-NaN) weighted reward totals all equal, within FLAT_RTOL of the
    batch's reward scale? Such a group has zero advantage under every normaliser (no gradient)."""
    import torch

    grouped = total_rewards.view(-1, group_size)
    unscored = torch.isnan(grouped)
    # On the device (no read-back): the largest |total| of the scored rows, 0 when none is scored.
    scale = torch.where(unscored, 0.0, grouped.abs()).max()
    highest = torch.where(unscored, -torch.inf, grouped).max(dim=1).values
    lowest = torch.where(unscored, torch.inf, grouped).min(dim=1).values
    # The tolerance in float64 first, then the totals' dtype: what a Python float scale compared as.
    return (highest - lowest) <= (FLAT_RTOL * scale.double()).to(grouped.dtype)


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


def trl_batch_keys(pad_token_id: int) -> tuple[BatchKey, ...]:
    """TRL's own width-following keys of a generation batch (other nodes' hooks declare theirs in
    TrainerHook.batch_keys); `tool_mask` is TRL's for tool episodes (0 on tool output tokens)."""
    return (
        BatchKey("prompt_ids", "prompt", pad=pad_token_id),
        BatchKey("prompt_mask", "prompt"),
        BatchKey("completion_ids", "completion", pad=pad_token_id),
        BatchKey("completion_mask", "completion"),
        BatchKey("old_per_token_logps", "completion"),
        BatchKey("ref_per_token_logps", "completion"),
        BatchKey("sampling_per_token_logps", "completion"),
        BatchKey("tool_mask", "completion", pad=1),
    )


def _pad_to(tensor, width: int, value, left: bool):
    import torch.nn.functional as F

    missing = width - tensor.size(1)
    if missing == 0:
        return tensor
    padding = [0, 0] * (tensor.dim() - 2) + ([missing, 0] if left else [0, missing])
    return F.pad(tensor, padding, value=value)


def concat_batches(
    batches: list[dict[str, Any]], pad_token_id: int, added_keys: Iterable[BatchKey] = ()
) -> dict[str, Any]:
    """Join TRL generation batches row-wise, re-padding TRL's keys and `added_keys` (what the run's hooks add) to
    common prompt and completion widths; every other tensor is per row."""
    import torch

    layout = {key.name: key for key in (*trl_batch_keys(pad_token_id), *added_keys)}
    joined: dict[str, Any] = {}
    prompt_width = max(batch["prompt_ids"].size(1) for batch in batches)
    completion_width = max(batch["completion_ids"].size(1) for batch in batches)
    for name, first in batches[0].items():
        if not isinstance(first, torch.Tensor) or first.dim() == 0:
            continue
        parts = [batch[name] for batch in batches]
        key = layout.get(name)
        if key is not None and key.span == "sequence":
            parts = [
                torch.cat(
                    [
                        _pad_to(part[:, : batch["prompt_ids"].size(1)], prompt_width, key.pad, left=True),
                        _pad_to(part[:, batch["prompt_ids"].size(1) :], completion_width, key.pad, left=False),
                    ],
                    dim=1,
                )
                for part, batch in zip(parts, batches, strict=True)
            ]
        elif key is not None:
            width = max(part.size(1) for part in parts)
            parts = [_pad_to(part, width, key.pad, key.span == "prompt") for part in parts]
        joined[name] = torch.cat(parts, dim=0)
    mask = joined["completion_mask"] * joined.get("tool_mask", 1)
    joined["num_items_in_batch"] = mask.sum()
    return joined
