"""Step-level loss masks (the training-stability chapter, 16.6.2): only valid steps train.

Every token of a step whose call is bad JSON, names a tool outside the registry, has wrongly typed
(or missing, or extra) parameters, or ran `code_exec` into a crash, timeout or out-of-memory is
masked out of the GRPO loss; the other steps of the same episode still train (the seed's example:
5 steps, steps 4 and 5 bad, steps 1-3 train). The step records come from task=tool_calls' rollout.

The mask enters TRL's loss mask (`completion_mask * tool_mask` in `_compute_loss`) through the
`tool_mask`, not the completion mask itself, which is also the attention mask: zeroing it would hide
the masked tokens from the later ones and change their log-probs. `num_items_in_batch` (the DAPO
loss's token count) is recounted so the loss is a mean over the tokens that train, as the seed's
`masked_sft_loss` is (align_kit/models/warm_start.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from align_kit.core.component import Component
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.core.hooks import BatchKey, Deferred, TrainerHook
from align_kit.markup.tool_format import FAILURE_KINDS


def step_loss_mask(steps: list[list], width: int, kinds: tuple[str, ...] = FAILURE_KINDS) -> list[int]:
    """[width] 0/1: 0 on every token of a step [start, end, kind] whose kind is in `kinds`, 1 elsewhere
    (valid steps, the final turn, observations: those are masked by the env mask)."""
    mask = [1] * width
    for start, end, kind in steps:
        if kind in kinds:
            mask[start:end] = [0] * (min(end, width) - start)
    return mask


@dataclass
class StepMask(Component):
    kinds: list[str] = knob(
        default_factory=lambda: list(FAILURE_KINDS),
        help="The step failures whose tokens leave the loss: bad_json, unknown_tool, bad_params, exec_failed (all "
        "four by default); the episode's valid steps still train.",
        source="16.6.2",
    )

    def validate(self) -> None:
        unknown = sorted(set(self.kinds) - set(FAILURE_KINDS))
        if unknown:
            raise ConfigError(f"step_mask.kinds has unknown kind(s) {unknown}; known: {list(FAILURE_KINDS)}")

    def check_dataset(self, dataset) -> None:
        if "calls" not in dataset.column_names:
            raise ConfigError(
                "step_mask=on masks the steps of task=tool_calls episodes, but this task has no tool steps; "
                "use task=tool_calls or step_mask=off"
            )

    def trainer_hooks(self) -> list:
        return [StepLossMask(tuple(self.kinds))]


class StepLossMask(TrainerHook):
    batch_keys = (BatchKey("tool_mask", "completion", pad=1),)  # TRL's loss-only mask, narrowed to valid steps

    def __init__(self, kinds: tuple[str, ...]):
        self.kinds = kinds

    def on_scored_batch(self, trainer, state, batch):
        import torch

        completion_mask = batch["completion_mask"]
        tool_mask = batch.get("tool_mask", torch.ones_like(completion_mask))
        steps = [row["tool_steps"] for row in state.inputs]
        width = completion_mask.size(1)
        # Copied without waiting for the device's queue (a copy from host memory).
        step_mask = torch.tensor([step_loss_mask(s, width, self.kinds) for s in steps])
        step_mask = step_mask.to(tool_mask.device, non_blocking=True)
        model_tokens = completion_mask * tool_mask
        batch["tool_mask"] = tool_mask * step_mask.to(tool_mask.dtype)
        trained = completion_mask * batch["tool_mask"]
        batch["num_items_in_batch"] = trainer.accelerator.gather(trained.sum()).sum()
        total = model_tokens.sum().double()  # on the device, in float64 as Python divides; 0 with no model token
        metrics = {"mask/masked_token_fraction": Deferred(torch.where(total > 0, (total - trained.sum()) / total, 0.0))}
        for kind in FAILURE_KINDS:
            metrics[f"mask/{kind}"] = float(sum(step[2] == kind for rows in steps for step in rows))
        return metrics
