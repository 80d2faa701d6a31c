"""Overlong engagement (`overlong/*`): the truncated share in mixed groups and the probe that continues
truncated completions, worked out by hand on a toy model; and a short run that logs them."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch

from align_kit.components.overlong import OverlongEngagement
from align_kit.core.hooks import BatchState, on_host
from align_kit.rewards.correctness import Correctness

EOS, PAD = 2, 0
DIGITS = {10 + d: str(d) for d in range(10)}  # a toy vocabulary: ids 10-19 are the digits 0-9


class ToyTokenizer:
    pad_token_id = PAD

    def batch_decode(self, rows, skip_special_tokens=True):
        return ["".join(DIGITS.get(int(i), "") for i in row) for row in rows]


class ToyModel:
    """generate() appends a fixed continuation per row: row 0 writes '2' then EOS, row 1 never stops. It starts in
    training mode and records the mode each generate() ran in."""

    def __init__(self):
        self.training, self.generated_in = True, []

    def train(self, mode=True):
        self.training = mode
        return self

    def eval(self):
        return self.train(False)

    def generate(self, input_ids, attention_mask, max_new_tokens, **kwargs):
        self.generated_in.append(self.training)
        rows = [[12, EOS, PAD, PAD], [13, 13, 13, 13]][: len(input_ids)]
        return torch.cat([input_ids, torch.tensor(rows)[:, :max_new_tokens]], dim=1)


def toy_trainer(reward_funcs):
    accelerator = SimpleNamespace(gather=lambda tensor: tensor, unwrap_model=lambda model: model)
    return SimpleNamespace(
        eos_token_ids=[EOS],
        accelerator=accelerator,
        model=ToyModel(),
        processing_class=ToyTokenizer(),
        max_completion_length=4,
        temperature=1.0,
        args=SimpleNamespace(seed=0),
        reward_funcs=reward_funcs,
    )


def overlong_batch():
    # Groups of 2. Group 0: finished + truncated (mixed); group 1: both truncated; group 2: both finished.
    completion_ids = torch.tensor(
        [[11, EOS, PAD], [14, 14, 14], [11, 11, 11], [13, 13, 13], [11, EOS, PAD], [12, EOS, PAD]]
    )
    batch = {
        "completion_ids": completion_ids,
        "prompt_ids": torch.full((6, 2), 15),
        "prompt_mask": torch.ones(6, 2, dtype=torch.long),
    }
    inputs = [{"prompt": "5+5=", "answer": answer} for answer in ("1", "42", "12", "2", "1", "2")]
    return BatchState(inputs=inputs, mode="train", group_size=2), batch


def test_truncated_share_in_mixed_groups_by_hand():
    state, batch = overlong_batch()
    metrics = on_host(OverlongEngagement().on_train_batch(toy_trainer([]), state, batch))
    assert metrics == {"overlong/truncated_in_mixed_groups": pytest.approx(1 / 3)}  # 3 truncated, 1 in group 0


def test_the_probe_continues_truncated_completions_and_checks_them_by_hand():
    checker = Correctness(answer_column="answer")
    state, batch = overlong_batch()
    hook = OverlongEngagement(probe_every=1, probe_samples=2)
    metrics = on_host(hook.on_train_batch(toy_trainer([checker]), state, batch))
    # The first two truncated rows (1 and 2) are probed. Row 1 ('444', answer 42) + '2' = '4442': finished, wrong;
    # row 2 ('111', answer 12) gets '3333', no EOS: not finished. Neither would have been right.
    assert metrics["overlong/probe_would_finish"] == pytest.approx(1 / 2)
    assert metrics["overlong/probe_would_be_correct"] == 0.0
    state.inputs[1]["answer"] = "4442"
    metrics = on_host(hook.on_train_batch(toy_trainer([checker]), state, batch))
    assert metrics["overlong/probe_would_be_correct"] == pytest.approx(1 / 2)
    assert math.isnan(hook.on_train_batch(toy_trainer([]), state, batch)["overlong/probe_would_be_correct"])


def test_the_probe_generates_in_eval_mode_and_restores_training_mode():
    # In train mode (gradient checkpointing, no KV cache) the tiny policy's continuations were garbage.
    trainer = toy_trainer([])
    state, batch = overlong_batch()
    OverlongEngagement(probe_every=1, probe_samples=2).on_train_batch(trainer, state, batch)
    assert trainer.model.generated_in == [False]
    assert trainer.model.training is True


def test_a_short_run_logs_the_overlong_engagement(train_once, tmp_path):
    # A 20-token budget cuts some warm-started arithmetic completions (they end near 20 tokens with EOS).
    train_once(
        tmp_path,
        "logger=none",
        "trainer.max_completion_length=20",
        "overlong.probe_every=1",
        "overlong.probe_tokens=16",
    )
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    generations = [row for row in rows if "overlong/truncated_in_mixed_groups" in row]
    assert generations and all(0 <= row["overlong/truncated_in_mixed_groups"] <= 1 for row in generations)
    assert all(0 <= row["overlong/probe_would_finish"] <= 1 for row in generations)
    assert max(row["completions/clipped_ratio"] for row in rows if "completions/clipped_ratio" in row) > 0
