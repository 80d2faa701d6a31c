"""The warm start's masked SFT: the loss by hand and against the label-ignoring loss, and trajectory demonstrations
that train only the model's turns."""

from __future__ import annotations

import io
import logging
import math
import re

import pytest
import torch
from transformers import AutoModelForCausalLM

from align_kit.models.char_tokenizer import build_char_tokenizer
from align_kit.models.tiny import TinyModel
from align_kit.models.warm_start import encode_demonstrations, masked_sft_loss, progress, supervised_warm_start
from align_kit.tasks.arithmetic import ArithmeticTask


def test_masked_sft_loss_by_hand():
    # One row of three positions over a vocabulary of two. Position t predicts label t+1.
    logits = torch.tensor([[[0.0, 0.0], [math.log(3.0), 0.0], [5.0, 5.0]]])
    labels = torch.tensor([[1, 0, 1]])
    # Targets: position 0 -> label 0 (p = 1/2), position 1 -> label 1 (p = 1/4); the last logits predict nothing.
    both = masked_sft_loss(logits, labels, torch.tensor([[0, 1, 1]]))
    assert both.item() == pytest.approx((math.log(2) + math.log(4)) / 2)
    first_only = masked_sft_loss(logits, labels, torch.tensor([[1, 1, 0]]))  # mask[0] never counts (no target)
    assert first_only.item() == pytest.approx(math.log(2))
    assert masked_sft_loss(logits, labels, torch.tensor([[1, 0, 0]])).item() == 0.0  # nothing to train: 0, not NaN


def test_masked_sft_loss_equals_the_label_ignoring_loss():
    torch.manual_seed(0)
    logits, labels = torch.randn(2, 5, 7), torch.randint(0, 7, (2, 5))
    mask = torch.tensor([[0, 1, 1, 0, 1], [0, 0, 1, 1, 1]])
    ignored = torch.where(mask.bool(), labels, -100)
    reference = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 7), ignored[:, 1:].reshape(-1))
    assert masked_sft_loss(logits, labels, mask).item() == pytest.approx(reference.item(), rel=1e-6)


class Chars:
    eos_token_id = 0

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


def test_trajectory_demonstrations_train_only_the_model_turns():
    segments = [("ab", True, True), ("xy", False, False), ("z", False, True), ("c", True, True)]
    rows = encode_demonstrations(Chars(), [("P", segments), ("Q", "d")])
    # A model turn ends with EOS (0); an observation has none; a masked turn's EOS is masked with it.
    assert rows[0] == ([80, 97, 98, 0, 120, 121, 122, 0, 99, 0], [-100, 97, 98, 0, -100, -100, -100, -100, 99, 0])
    assert rows[1] == ([81, 100, 0], [-100, 100, 0])  # a plain completion: as before


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_off_a_terminal_logs_every_tenth_of_the_steps_with_an_eta(caplog):
    with caplog.at_level(logging.INFO, logger="align_kit.models.warm_start"), progress(450, io.StringIO()) as advance:
        for step in range(450):
            advance(1.0 / (step + 1))
    lines = [record.getMessage() for record in caplog.records]
    # 450 steps: a line at 45, 90, ..., 450 (ceil(450 k / 10)), each with the loss of that step.
    assert [line.split(" steps")[0] for line in lines] == [f"warm start: {45 * k}/450" for k in range(1, 11)]
    assert lines[0].startswith("warm start: 45/450 steps (10 %), loss 0.022, ")
    assert re.fullmatch(r".*, \d\d:\d\d elapsed, ETA \d\d:\d\d", lines[0])
    assert lines[-1].endswith("ETA 00:00")


def test_progress_on_a_terminal_is_a_bar(caplog):
    terminal = Terminal()
    with caplog.at_level(logging.INFO, logger="align_kit.models.warm_start"), progress(20, terminal) as advance:
        for _ in range(20):
            advance(0.5)
    assert "warm start: 100%" in terminal.getvalue() and "20/20" in terminal.getvalue()
    assert caplog.records == []  # the bar alone: no log lines besides it


def test_the_warm_start_reports_its_progress(caplog):
    model = TinyModel(warm_start={"steps": 10, "batch_size": 4, "eval_prompts": 1})
    tokenizer = build_char_tokenizer()
    policy = AutoModelForCausalLM.from_config(model.hf_config(len(tokenizer), tokenizer.pad_token_id,
                                                              tokenizer.eos_token_id))  # fmt: skip
    with caplog.at_level(logging.INFO, logger="align_kit.models.warm_start"):
        supervised_warm_start(policy, tokenizer, ArithmeticTask().demonstrations(), model.warm_start_config)
    assert [record.getMessage().split(" steps")[0] for record in caplog.records] == [
        f"warm start: {k}/10" for k in range(1, 11)
    ]


def _one_step_changes(router_lr_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """|change| of every router weight and of every other decoder weight after one SFT step of a 1-layer MoE."""
    settings = {"steps": 1, "batch_size": 4, "learning_rate": 1e-3, "router_lr_scale": router_lr_scale}
    node = TinyModel(architecture="qwen3_moe", num_layers=1, num_experts=4, experts_per_token=2, warm_start=settings)
    tokenizer = build_char_tokenizer()
    torch.manual_seed(0)
    policy = AutoModelForCausalLM.from_config(node.hf_config(len(tokenizer), tokenizer.pad_token_id,
                                                             tokenizer.eos_token_id))  # fmt: skip
    before = {name: p.detach().clone() for name, p in policy.named_parameters()}
    supervised_warm_start(policy, tokenizer, ArithmeticTask().demonstrations(), node.warm_start_config)
    changes = {name: (p.detach() - before[name]).abs() for name, p in policy.named_parameters()}
    router = torch.cat([c.flatten() for name, c in changes.items() if name.endswith("mlp.gate.weight")])
    other = torch.cat([c.flatten() for name, c in changes.items() if "layers.0.mlp.experts" in name])
    return router, other


def test_router_lr_scale_zero_keeps_the_routers_at_their_init():
    router, experts = _one_step_changes(0.0)
    assert router.numel() == 4 * 128 and router.max().item() == 0.0  # lr 0: neither Adam's step nor weight decay
    # AdamW's first step moves every weight with a gradient by lr x g / (|g| + eps) = lr (1e-3), plus lr x 0.01 |w|.
    assert experts.median().item() == pytest.approx(1e-3, rel=0.05)


def test_router_lr_scale_scales_the_routers_first_step():
    router, experts = _one_step_changes(0.5)
    # The routers' group has lr 0.5e-3: their first Adam step is 0.5e-3 per weight (plus decay 0.5e-3 x 0.01 |w|,
    # |w| ~ 0.02 at init: 1e-7), the experts' still 1e-3.
    assert router.median().item() == pytest.approx(0.5e-3, rel=0.05)
    assert router.max().item() <= 0.5e-3 * (1 + 1e-3)
    assert experts.median().item() == pytest.approx(1e-3, rel=0.05)
