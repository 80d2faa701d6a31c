"""The step-level loss mask (16.6.2): the seed's example, each failure kind, and the hook on the loss mask, against
hand-computed values."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from align_kit.components.step_mask import StepLossMask, StepMask, step_loss_mask
from align_kit.core.errors import ConfigError
from align_kit.core.hooks import BatchState, on_host


def test_the_seeds_five_step_example():
    # Five steps of 3, 2, 4, 3 and 2 tokens; step 4's JSON does not parse, step 5 calls an unknown tool.
    steps = [[0, 3, "ok"], [3, 5, "ok"], [5, 9, "ok"], [9, 12, "bad_json"], [12, 14, "unknown_tool"]]
    assert step_loss_mask(steps, 14) == [1] * 9 + [0] * 5
    # Only the kinds asked for are masked; positions past the last step (the final Done) stay 1.
    assert step_loss_mask(steps, 16, kinds=("bad_json",)) == [1] * 9 + [0] * 3 + [1] * 4


def test_each_failure_kind_is_masked():
    for kind in ("bad_json", "unknown_tool", "bad_params", "exec_failed"):
        assert step_loss_mask([[1, 3, kind]], 4) == [1, 0, 0, 1]


class FakeAccelerator:
    def gather(self, tensor):
        return tensor.reshape(1)


def test_the_hook_masks_the_loss_mask_not_the_attention():
    hook = StepLossMask(("bad_json", "unknown_tool", "bad_params", "exec_failed"))
    completion_mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    tool_mask = torch.tensor([[1, 1, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1]])  # position 2: an observation
    batch = {"completion_mask": completion_mask.clone(), "tool_mask": tool_mask.clone(), "num_items_in_batch": 8}
    inputs = [{"tool_steps": [[0, 2, "ok"], [3, 5, "exec_failed"]]}, {"tool_steps": [[0, 1, "bad_json"]]}]
    state = BatchState(inputs=inputs, mode="train", group_size=2)
    metrics = on_host(hook.on_scored_batch(SimpleNamespace(accelerator=FakeAccelerator()), state, batch))
    assert batch["completion_mask"].tolist() == completion_mask.tolist()  # attention untouched
    assert batch["tool_mask"].tolist() == [[1, 1, 0, 0, 0, 1], [0, 1, 1, 1, 1, 1]]
    # Model tokens: 5 in row 0 and 3 in row 1; masked: 2 (exec_failed) + 1 (bad_json).
    assert batch["num_items_in_batch"].item() == 5
    assert metrics["mask/masked_token_fraction"] == pytest.approx(3 / 8)
    assert (metrics["mask/exec_failed"], metrics["mask/bad_json"], metrics["mask/unknown_tool"]) == (1.0, 1.0, 0.0)


def test_step_mask_node_checks_its_kinds_and_the_task():
    with pytest.raises(ConfigError, match=r"step_mask.kinds has unknown kind\(s\) \['typo'\]"):
        StepMask(kinds=["typo"]).validate()
    with pytest.raises(ConfigError, match="use task=tool_calls or step_mask=off"):
        StepMask().check_dataset(SimpleNamespace(column_names=["prompt", "answer"]))
