"""benchmarks/real_model_step.py's arithmetic: the FLOPs of a forward and of a recorded step, and the bounds, on
made-up shapes small enough to count by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

SHAPES = {"layer_params": 10, "head_params": 7, "attention_width": 3, "layers": 2, "parameters": 17}
# One generation: 2 rows, 3 prompt positions, 3 new tokens (5 of them not padding); one loss forward over 2 rows of
# 6 positions, logits for 3, 11 tokens not padding, 5 of them completion tokens.
RECORD = {"shapes": {"generation": [(2, 3, 3, 5)], "loss forward": [(2, 6, 3, 11, 5)]}}


@pytest.fixture
def step(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import real_model_step

    return real_model_step


def test_forward_flops_by_hand(step):
    # 2 rows x 3 positions: 6 tokens x 2 x 10; keys 2 x (1 + 2 + 3) = 12, x 4 x 3 x 2 layers; head 4 rows x 2 x 7.
    assert step.forward_flops(SHAPES, 2, 3, 4) == {"layers": 120, "attention": 288, "head": 56}
    # one new position per row over 5 cached ones: keys 2 x 6.
    assert step.forward_flops(SHAPES, 2, 1, 2, context=5) == {"layers": 40, "attention": 288, "head": 28}


def test_step_work_by_hand(step):
    work = step.step_work(SHAPES, RECORD, checkpointing=False, full_head=False)
    # Prefill: 6 tokens (120), keys 12 (288), the head on the 2 last positions (28). Decode: 2 more tokens per row,
    # over 3 and 4 cached positions: keys 2 x 4 and 2 x 5 (192 + 240), 2 x 40 layers, 2 x 28 head.
    assert work["generation"] == {
        "prefill layers": 120, "prefill attention": 288, "prefill head": 28,
        "decode layers": 80, "decode attention": 432, "decode head": 56,
    }  # fmt: skip
    # Loss forward: 12 positions x 2 x 10; keys 2 x 21 = 42, x 24; the head on the 5 completion tokens.
    assert work["loss forward"] == {"layers": 240, "attention": 1008, "head": 70}
    # Backward twice the forward, and the chunked head's logits once more.
    assert work["backward"] == {"layers": 480, "attention": 2016, "head": 140, "head recompute": 70}
    assert work["scoring forwards"] == {}


def test_full_head_and_checkpointing_add_their_work(step):
    work = step.step_work(SHAPES, RECORD, checkpointing=True, full_head=True)
    assert work["loss forward"]["head"] == 2 * 7 * 2 * 5  # every position but the last of each row
    assert work["backward"]["recompute layers"] == 240
    assert work["backward"]["recompute attention"] == 1008
    assert work["backward"]["head recompute"] == 140


def test_bounds_divide_each_phase_by_its_rate(step):
    work = step.step_work(SHAPES, RECORD, checkpointing=False, full_head=False)
    rates = {"forward, update rows": 2.0, "forward, generation rows": 1.0, "backward, update rows": 4.0,
             "LM head, update rows": 0.5}  # fmt: skip
    bound = step.bounds(work, rates, bandwidth=1.0, parameters=17)
    assert bound["generation"] == pytest.approx((80 + 432 + 56) / 1e9 + (120 + 288 + 28) / 2e9)
    assert bound["loss forward"] == pytest.approx((240 + 1008) / 2e9 + 70 / 0.5e9)
    assert bound["backward"] == pytest.approx((480 + 2016) / 4e9 + (140 + 70) / 0.5e9)
    assert bound["optimizer"] == pytest.approx(9 * 4 * 17 / 1e9)
