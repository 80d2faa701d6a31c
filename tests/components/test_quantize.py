"""The FP8/INT8 sampler copy: the quantization grid by hand, which weights it touches, and the trainer paths
(mismatch metrics, IS correction, R3) on a quantized sampler."""

from __future__ import annotations

import itertools

import pytest
import torch

from align_kit.components.quantize import fake_quantize, quantized_parameters
from align_kit.components.routing_replay import RouteReplay
from align_kit.tracking.metrics_file import read_metrics
from tests.conftest import generation_inputs, sampler_of

BF16 = ("rollout.dtype=bfloat16",)


def e4m3_values() -> torch.Tensor:
    """Every finite non-negative E4M3 value from the format's definition (OCP FP8: 4 exponent bits, bias 7, 3
    mantissa bits, subnormals at exponent 0, the top mantissa of the top exponent is NaN): 0 ... 448."""
    values = [m / 8 * 2.0**-6 for m in range(8)]  # subnormals
    values += [(1 + m / 8) * 2.0 ** (e - 7) for e, m in itertools.product(range(1, 16), range(8))]
    return torch.tensor(values[:-1], dtype=torch.float64)  # e=15, m=7 is NaN


def nearest(grid: torch.Tensor, x: float) -> float:
    """The grid value nearest to |x| with x's sign; a tie goes to the even mantissa (its index is even)."""
    distance = (grid - abs(x)).abs()
    best = torch.nonzero(distance == distance.min()).flatten()
    index = best[0] if len(best) == 1 or best[0] % 2 == 0 else best[1]
    return float(grid[index]) * (1 if x >= 0 else -1)


def test_fp8_channel_scales_put_each_row_on_the_e4m3_grid_by_hand():
    grid = e4m3_values()
    assert grid.max() == 448
    weight = torch.tensor([[0.7, -0.013, 0.25, 1e-4], [30.0, 2.9, -31.5, 0.01]])
    result = fake_quantize(weight, "fp8", "channel")
    for row, out in zip(weight.tolist(), result.tolist(), strict=True):
        step = max(abs(v) for v in row) / 448  # the largest |w| of the row maps to 448
        assert out == pytest.approx([nearest(grid, v / step) * step for v in row], rel=1e-6, abs=1e-12)
    assert result[0, 0] == pytest.approx(0.7) and result[1, 2] == pytest.approx(-31.5)  # the row maxima are exact


def test_fp8_tensor_scale_shares_one_step_and_loses_the_small_row():
    grid = e4m3_values()
    weight = torch.tensor([[0.7, -0.013, 0.25, 3e-5], [30.0, 2.9, -31.5, 0.01]])
    step = 31.5 / 448
    result = fake_quantize(weight, "fp8", "tensor")
    expected = [[nearest(grid, v / step) * step for v in row] for row in weight.tolist()]
    assert result.tolist() == [pytest.approx(row, rel=1e-6, abs=1e-12) for row in expected]
    assert result[0, 3] == 0  # 3e-5 / step = 0.00043, below half the smallest subnormal 2**-9


def test_int8_rounds_to_127_levels_per_channel_by_hand():
    weight = torch.tensor([[1.0, -0.5, 0.3, 0.004], [0.0, 0.0, 0.0, 0.0], [-2.54, 0.01, 1.0, 0.03]])
    result = fake_quantize(weight, "int8", "channel")
    # row 1: step 1/127: 0.5 * 127 = 63.5 -> 64 (round half to even), 0.3 * 127 = 38.1 -> 38, 0.508 -> 1
    assert result[0].tolist() == pytest.approx([1.0, -64 / 127, 38 / 127, 1 / 127])
    assert result[1].tolist() == [0.0] * 4  # an all-zero row stays zero, not NaN
    # row 3: step 2.54 / 127 = 0.02: 0.01 -> 0.5 -> 0 (even), 1.0 -> 50, 0.03 -> 1.5 -> 2
    assert result[2].tolist() == pytest.approx([-2.54, 0.0, 1.0, 0.04], abs=1e-6)


def test_int8_tensor_scale_by_hand():
    weight = torch.tensor([[1.0, -0.5], [0.02, 0.003]])
    assert fake_quantize(weight, "int8", "tensor").tolist() == [
        pytest.approx([1.0, -64 / 127]),
        pytest.approx([3 / 127, 0.0]),  # 0.02 * 127 = 2.54 -> 3; 0.381 -> 0
    ]


def test_fused_expert_tensors_get_scales_per_expert_row_or_per_expert():
    weight = torch.tensor([[[1.0, 0.5], [8.0, 2.0]], [[0.01, 0.002], [0.3, 0.299]]])  # [experts, out, in]
    per_channel = fake_quantize(weight, "int8", "channel")
    per_tensor = fake_quantize(weight, "int8", "tensor")
    for expert in range(2):
        assert torch.equal(per_tensor[expert], fake_quantize(weight[expert], "int8", "tensor"))
        for row in range(2):
            expected = fake_quantize(weight[expert, row][None], "int8", "tensor")[0]
            assert torch.equal(per_channel[expert, row], expected)
    # expert 2's own step 0.3 / 127, not expert 1's 8 / 127 (which would zero it): 0.01 -> 4 levels
    assert per_tensor[1, 0, 0] == pytest.approx(4 * 0.3 / 127)


def test_which_weights_an_engine_quantizes(build_trainer):
    trainer = build_trainer("model=tiny_moe", *BF16)
    model = trainer.model
    names = quantized_parameters(model, quantize_router=False)
    shapes = dict(model.named_parameters())
    assert not any("embed" in n or "lm_head" in n or "norm" in n or n.endswith(".gate.weight") for n in names)
    assert all(shapes[n].dim() >= 2 for n in names)
    per_layer = {n.split(".layers.0.")[1] for n in names if ".layers.0." in n}
    assert per_layer == {
        "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
        "mlp.experts.gate_up_proj", "mlp.experts.down_proj",
    }  # fmt: skip
    with_router = set(quantized_parameters(model, quantize_router=True)) - set(names)
    assert with_router == {f"model.layers.{i}.mlp.gate.weight" for i in range(model.config.num_hidden_layers)}


def copy_and_policy(trainer, name):
    return dict(sampler_of(trainer).model.named_parameters())[name], dict(trainer.model.named_parameters())[name]


def test_the_copy_holds_the_quantized_weights_and_requantizes_at_every_sync(build_trainer):
    trainer = build_trainer(*BF16, "rollout.quantization=int8")
    sampler_of(trainer).sync(trainer.model, step=0)
    name = "model.layers.1.mlp.down_proj.weight"
    copy, policy = copy_and_policy(trainer, name)
    assert copy.dtype == torch.bfloat16
    assert torch.equal(copy, fake_quantize(policy, "int8", "channel").to(torch.bfloat16))
    levels = copy.float() / (policy.abs().amax(-1, keepdim=True) / 127)
    # Integers, up to the bf16 rounding of the stored value (8 significant bits: at most 2**-8 relative).
    assert ((levels - levels.round()).abs() <= levels.abs() * 2**-8 + 1e-4).all()
    embed, embed_policy = copy_and_policy(trainer, "model.embed_tokens.weight")
    assert torch.equal(embed, embed_policy.to(torch.bfloat16))  # kept bf16
    with torch.no_grad():
        policy.mul_(1.5)
    sampler_of(trainer).sync(trainer.model, step=1)
    assert torch.equal(copy, fake_quantize(policy, "int8", "channel").to(torch.bfloat16))


def test_router_weights_follow_the_switch(build_trainer):
    name = "model.layers.0.mlp.gate.weight"
    kept = build_trainer("model=tiny_moe", *BF16, "rollout.quantization=fp8")
    sampler_of(kept).sync(kept.model, step=0)
    copy, policy = copy_and_policy(kept, name)
    assert torch.equal(copy, policy.to(torch.bfloat16))
    quantized = build_trainer("model=tiny_moe", *BF16, "rollout.quantization=fp8", "rollout.quantize_router=true")
    sampler_of(quantized).sync(quantized.model, step=0)
    copy, policy = copy_and_policy(quantized, name)
    assert torch.equal(copy, fake_quantize(policy, "fp8", "channel").to(torch.bfloat16))
    assert not torch.equal(copy, policy.to(torch.bfloat16))


def first_generation(run_dir) -> dict:
    return next(row for row in read_metrics(run_dir / "metrics.jsonl") if "mismatch/kl" in row)


@pytest.mark.slow
def test_an_fp8_sampler_logs_a_larger_gap_than_bf16_on_the_same_weights(train_once, tmp_path):
    # Same seed and warm start: the first generation samples from the same fp32 weights in both runs.
    train_once(tmp_path / "bf16", "logger=none", *BF16, "trainer.max_steps=2")
    train_once(tmp_path / "fp8", "logger=none", *BF16, "rollout.quantization=fp8", "trainer.max_steps=2")
    bf16, fp8 = first_generation(tmp_path / "bf16"), first_generation(tmp_path / "fp8")
    assert fp8["mismatch/kl"] > 3 * bf16["mismatch/kl"] > 0
    assert fp8["mismatch/rescore_kl"] > 3 * bf16["mismatch/rescore_kl"] > 0
    assert fp8["mismatch/logp_abs_diff/mean"] > bf16["mismatch/logp_abs_diff/mean"]


def test_is_correction_and_r3_run_on_a_quantized_moe_sampler(build_trainer):
    trainer = build_trainer(
        "model=tiny_moe", *BF16, "rollout.quantization=fp8", "rollout.quantize_router=true",
        "rollout.is_correction=token_truncate", "routing_replay=r3",
    )  # fmt: skip
    batch = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4))
    trainer.flush_metrics()
    metrics = trainer._metrics["train"]
    mask = batch["completion_mask"].bool()
    expected = torch.exp(batch["old_per_token_logps"] - batch["sampling_per_token_logps"]).clamp(max=3.0)
    assert torch.allclose(batch["rollout_is_ratio"][mask], expected[mask])
    assert metrics["mismatch/kl"][0] > 0
    assert 0 <= metrics["routing/sampler_gap"][0] <= metrics["routing/sampler_gap_tokens"][0] <= 1
    # R3 replays the quantized sampler's own choices: the recorded routing rides in the batch.
    assert batch["routed_experts"].shape[:2] == torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1).shape
    assert trainer.hook(RouteReplay).generation_hooks is not trainer.hook(RouteReplay).hooks


@pytest.mark.slow
def test_r3_trains_with_an_int8_sampler(train_once, tmp_path):
    summary = train_once(
        tmp_path, "logger=none", "model=tiny_moe", *BF16, "rollout.quantization=int8", "routing_replay=r3"
    )
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert summary["steps"] == 4
    assert [row["routing/replayed_fraction"] for row in rows if "routing/replayed_fraction" in row]
    assert all(row["mismatch/kl"] > 0 for row in rows if "mismatch/kl" in row)
