"""The health metrics align_kit adds to every batch: `groups/flat_fraction` counts a group of equal totals as flat
under GRPO and GDPO alike (by hand)."""

from __future__ import annotations

import pytest
import torch


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
    trainer.flush_metrics()
    assert trainer._metrics["train"]["groups/flat_fraction"] == [1 / 8]
