"""The warm start's masked SFT: the loss by hand and against the label-ignoring loss, and trajectory demonstrations
that train only the model's turns."""

from __future__ import annotations

import math

import pytest
import torch

from align_kit.models.warm_start import encode_demonstrations, masked_sft_loss


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
