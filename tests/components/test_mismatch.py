"""Train/inference mismatch: IS corrections on hand-made tensors, and the bf16 and perturbed sampler copies."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from align_kit.components.mismatch import importance_ratio, mismatch_metrics
from align_kit.components.routing_replay import RouteReplay
from align_kit.core.hooks import on_host
from align_kit.experiment.compose import compose
from align_kit.tracking.metrics_file import read_metrics
from tests.conftest import generation_inputs, sampler_of

TRAIN = torch.tensor([[-1.0, -2.0, -0.5], [-0.1, -0.2, -9.0]])
SAMPLER = torch.tensor([[-1.5, -1.0, -0.5], [-0.1, -0.3, -1.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # the last token of row 2 is padding
# log ratio train - sampler, masked: row 1 [0.5, -1.0, 0.0], row 2 [0.0, 0.1, 0]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        # token: exp(d) per token, then clamp to [0.5, 1.5] or zero outside it
        ("token_truncate", [[1.5, 0.5, 1.0], [1.0, math.exp(0.1), 1.0]]),
        ("token_mask", [[0.0, 0.0, 1.0], [1.0, math.exp(0.1), 1.0]]),
        # sequence: exp(sum d) = exp(-0.5) = 0.6065 for row 1, exp(0.1) for row 2, repeated per token
        ("sequence_truncate", [[math.exp(-0.5)] * 3, [math.exp(0.1)] * 3]),
        ("sequence_mask", [[math.exp(-0.5)] * 3, [math.exp(0.1)] * 3]),
    ],
)
def test_importance_ratio_modes(mode, expected):
    ratio = importance_ratio(TRAIN, SAMPLER, MASK, mode, cap_min=0.5, cap_max=1.5)
    assert ratio.tolist() == [pytest.approx(row) for row in expected]


def test_sequence_mask_zeroes_a_sequence_outside_the_caps():
    ratio = importance_ratio(TRAIN, SAMPLER, MASK, "sequence_mask", cap_min=0.7, cap_max=1.5)
    assert ratio[0].tolist() == [0.0, 0.0, 0.0]  # exp(-0.5) = 0.61 < 0.7


def test_mismatch_metrics_by_hand():
    metrics = on_host(mismatch_metrics(TRAIN, SAMPLER, MASK))
    gaps = [0.5, -1.0, 0.0, 0.0, 0.1]  # the five real tokens
    assert metrics["mismatch/logp_abs_diff/mean"] == pytest.approx(sum(abs(g) for g in gaps) / 5)
    assert metrics["mismatch/logp_abs_diff/max"] == pytest.approx(1.0)
    assert metrics["mismatch/kl"] == pytest.approx(sum(math.exp(g) - g - 1 for g in gaps) / 5)


def nucleus_logprob(logits, token: int, temperature: float, top_p: float) -> float:
    """log p(token) under softmax(logits / T) restricted to the top-p nucleus and renormalised (a second,
    plain implementation: sort descending, keep tokens while the mass before them is below top_p)."""
    probs = torch.softmax(logits.double() / temperature, dim=-1)
    ordered, order = probs.sort(descending=True)
    kept = order[(ordered.cumsum(0) - ordered) < top_p]
    assert token in kept.tolist()
    return math.log(probs[token].item() / probs[kept].sum().item())


def test_sampler_log_probs_are_those_of_the_distribution_sampled(build_trainer):
    # The fp32 control with temperature and top-p on: every recorded log-prob is the token's log-prob under
    # the processed distribution generate drew it from, recomputed here from a plain unpadded forward.
    trainer = build_trainer("rollout.log_mismatch=true", "rollout.temperature=0.7", "rollout.top_p=0.8")
    batch = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=2))
    checked = 0
    for row in range(batch["completion_ids"].size(0)):
        prompt = batch["prompt_ids"][row][batch["prompt_mask"][row].bool()]
        completion = batch["completion_ids"][row][batch["completion_mask"][row].bool()]
        with torch.no_grad():
            logits = trainer.model(input_ids=torch.cat([prompt, completion])[None]).logits[0]
        for t, token in enumerate(completion.tolist()):
            expected = nucleus_logprob(logits[len(prompt) + t - 1], token, temperature=0.7, top_p=0.8)
            assert batch["sampling_per_token_logps"][row, t].item() == pytest.approx(expected, abs=1e-4)
            checked += 1
    assert checked == batch["completion_mask"].sum().item()


def test_fp32_control_gap_is_float_rounding(build_trainer):
    # Same weights and dtype: what is left is the rounding difference between generate's incremental
    # (KV-cache) forwards and the trainer's full forward, measured at ~4e-7 mean, ~7e-6 max.
    trainer = build_trainer("rollout.log_mismatch=true")
    assert sampler_of(trainer) is None
    trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4))
    trainer.flush_metrics()
    metrics = trainer._metrics["train"]
    assert metrics["mismatch/logp_abs_diff/mean"][0] < 1e-5
    assert metrics["mismatch/logp_abs_diff/max"][0] < 1e-4
    assert abs(metrics["mismatch/kl"][0]) < 1e-8
    assert "mismatch/rescore_kl" not in metrics  # re-scoring with the trainer's own model measures nothing


def test_a_perturbed_sampler_copy_shows_a_large_gap(build_trainer):
    trainer = build_trainer("rollout.dtype=bfloat16")
    sync = sampler_of(trainer).sync

    def sync_then_perturb(model, step):
        sync(model, step)
        torch.manual_seed(0)
        with torch.no_grad():
            for parameter in sampler_of(trainer).model.parameters():
                parameter.add_(parameter.float().std() * torch.randn_like(parameter))

    sampler_of(trainer).sync = sync_then_perturb
    trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4))
    trainer.flush_metrics()
    metrics = trainer._metrics["train"]
    assert metrics["mismatch/logp_abs_diff/mean"][0] > 0.3  # the healthy bf16 copy: ~0.005
    assert metrics["mismatch/kl"][0] > 0.01


def test_a_sampler_that_draws_from_other_settings_is_seen_only_by_the_sampling_time_gap(build_trainer):
    # Weights intact, generation broken behind the trainer's back (the kind of fault issue 16 was): the
    # re-scoring comparison cannot see it, the log-probs recorded at sampling time do.
    trainer = build_trainer("rollout.dtype=bfloat16")
    trainer.generation_config.temperature = 2.0  # the trainer still scores at temperature 1.0
    trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4))
    trainer.flush_metrics()
    metrics = trainer._metrics["train"]
    sampled_gap, rescored_gap = (
        metrics["mismatch/logp_abs_diff/mean"][0],
        metrics["mismatch/rescore_logp_abs_diff/mean"][0],
    )
    assert sampled_gap > 0.3
    assert rescored_gap < 0.1 * sampled_gap  # precision alone, on these improbable tokens


@pytest.mark.slow
def test_the_issue_16_sampler_shows_a_large_gap_where_re_scoring_did_not(train_once, tmp_path, monkeypatch):
    # Main's copy (a plain deepcopy that kept the policy-bound forward) put back: what it sampled is far
    # from the policy (~4.6 nats a token), while re-scoring the tokens with the copy saw ~0.04.
    monkeypatch.setattr(
        "align_kit.components.mismatch.independent_copy",
        lambda model, dtype: copy.deepcopy(model).to(getattr(torch, dtype)).eval(),
    )
    # The bound forward was the one gradient checkpointing wraps (TRL's default, on when that copy was made; align_kit
    # turns it off by default now, docs/real-model.md): it is switched on to put the old conditions back.
    train_once(tmp_path, "logger=none", "rollout.dtype=bfloat16", "trainer.gradient_checkpointing=true")
    rows = [row for row in read_metrics(tmp_path / "metrics.jsonl") if "mismatch/kl" in row]
    assert len(rows) == 2
    assert all(row["mismatch/logp_abs_diff/mean"] > 1.0 for row in rows)
    assert all(row["mismatch/rescore_logp_abs_diff/mean"] < 0.2 for row in rows)


@pytest.mark.slow  # 10-45 s of real processes: in the slow tier, which CI runs too
def test_bf16_generation_routing_agrees_with_the_sampler_copy_s_full_forward(build_trainer):
    trainer = build_trainer("model=tiny_moe", "rollout.dtype=bfloat16", "routing_replay=r3")
    batch = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=8))
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    sampler_routing = trainer.hook(RouteReplay).generation_hooks
    with torch.no_grad(), sampler_routing.record():
        output = sampler_of(trainer).model(input_ids=ids, attention_mask=attention)
    full_forward = sampler_routing.take()
    assert output.logits.dtype == torch.bfloat16  # the copy's own forward
    valid = batch["routed_experts_valid"] & attention.bool()
    recorded = batch["routed_experts"].sort(-1).values
    # A real top-2 choice names two experts (issue 16's copy recorded an untouched all-zero buffer).
    assert (recorded[..., 1:] != recorded[..., :-1]).all(-1).all(-1)[valid].all()
    # Expert sets per (token, layer); a position agrees when every layer chose the same set. bf16 rounding
    # differs between generate's incremental forwards and one full forward (measured: 99.5 % agree).
    same = (recorded == full_forward.sort(-1).values).all(-1).all(-1)
    assert same[valid].float().mean() >= 0.99


def test_bf16_sampler_mismatch_is_measured_and_corrected(build_trainer):
    trainer = build_trainer("rollout.dtype=bfloat16", "rollout.is_correction=token_truncate")
    assert next(sampler_of(trainer).model.parameters()).dtype == torch.bfloat16
    assert next(trainer.model.parameters()).dtype == torch.float32
    batch = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4))
    trainer.flush_metrics()
    metrics = trainer._metrics["train"]
    assert 0 < metrics["mismatch/logp_abs_diff/mean"][0] < 0.05
    assert metrics["mismatch/logp_abs_diff/max"][0] >= metrics["mismatch/logp_abs_diff/mean"][0]
    assert 0 < metrics["mismatch/rescore_logp_abs_diff/mean"][0] < 0.05
    # The correction divides by the probabilities the tokens were sampled with.
    mask = batch["completion_mask"].bool()
    expected = torch.exp(batch["old_per_token_logps"] - batch["sampling_per_token_logps"]).clamp(max=3.0)
    ratio = batch["rollout_is_ratio"]
    assert ratio.shape == batch["completion_ids"].shape
    assert torch.allclose(ratio[mask], expected[mask])
    assert not torch.allclose(ratio[mask], torch.ones_like(ratio[mask]))


def generation_summary(run_dir) -> dict[str, float]:
    """Success rate, format rate and mean completion length over every generation batch a run logged,
    and the number of batches. Batches are equal-sized: the mean of batch means is the mean over samples."""
    rows = [row for row in read_metrics(run_dir / "metrics.jsonl") if "rewards/correctness/mean" in row]
    names = {
        "success": "rewards/correctness/mean",
        "format": "rewards/format/mean",
        "length": "completions/mean_length",
    }
    summary = {name: sum(row[key] for row in rows) / len(rows) for name, key in names.items()}
    return {**summary, "batches": len(rows)}


def test_the_sampler_copy_computes_with_its_own_weights(build_trainer):
    # Issue 16: the copy kept TRL's fused-head wrapper, whose closure called the fp32 policy's forward.
    trainer = build_trainer("rollout.dtype=bfloat16")
    ids = torch.tensor([trainer.processing_class("12+34=<think>", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        before = sampler_of(trainer).model(input_ids=ids).logits
        for parameter in trainer.model.parameters():
            parameter.zero_()  # a policy change the sampler has not been synced to must not reach it
        after = sampler_of(trainer).model(input_ids=ids).logits
    assert before.dtype == torch.bfloat16
    assert torch.equal(before, after)


@pytest.mark.slow
def test_bf16_sampler_samples_the_policy_inside_training(train_once, tmp_path):
    # 4 steps = 2 generation batches of 8 prompts x 8 completions; fp32 is the reference distribution. The
    # fast test policy rarely answers right, so its format rate carries the signal (on the bug: ~0.01 vs ~0.98).
    train_once(tmp_path / "fp32", "logger=none")
    train_once(tmp_path / "bf16", "logger=none", "rollout.dtype=bfloat16")
    fp32, bf16 = generation_summary(tmp_path / "fp32"), generation_summary(tmp_path / "bf16")
    assert fp32["batches"] == bf16["batches"] == 2
    assert bf16["success"] == pytest.approx(fp32["success"], abs=0.1)
    assert bf16["format"] == pytest.approx(fp32["format"], abs=0.1)
    assert bf16["length"] == pytest.approx(fp32["length"], abs=2.0)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["tiny", "tiny_moe"])
def test_bf16_sampler_matches_fp32_on_the_default_warm_start(model, train_once, tmp_path):
    default_policy = [f"model.warm_start.{key}={value}" for key, value in compose([]).model.warm_start.items()]
    runs = {}
    for dtype in ("float32", "bfloat16"):
        overrides = [*default_policy, f"model={model}", f"rollout.dtype={dtype}", "trainer.max_steps=10"]
        train_once(tmp_path / dtype, "logger=none", *overrides)
        runs[dtype] = generation_summary(tmp_path / dtype)
    fp32, bf16 = runs["float32"], runs["bfloat16"]
    assert fp32["batches"] == bf16["batches"] == 5  # 5 x 64 = 320 samples each
    assert fp32["success"] > 0.1  # the default warm start answers right often enough to compare
    assert bf16["success"] == pytest.approx(fp32["success"], abs=0.1)
    assert bf16["length"] == pytest.approx(fp32["length"], abs=2.0)
    if model == "tiny_moe":
        # First mini-step of each generation: sampler and trainer hold the same weights, so routing flips
        # are the bf16/fp32 precision gap alone (measured ~0.5 %; issue 16's copy: 100 %).
        rows = read_metrics(tmp_path / "bfloat16" / "metrics.jsonl")
        flips = [row["routing/flip_rate"] for row in rows if "routing/flip_rate" in row]
        assert len(flips) == 6 and max(flips[::2]) < 0.05  # generations 0, 2, 4 of 5 (drift is sampled)


def test_sampler_resyncs_when_the_policy_changes(build_trainer):
    trainer = build_trainer("rollout.dtype=bfloat16")
    sampler_of(trainer).sync(trainer.model, step=0)
    with torch.no_grad():
        next(trainer.model.parameters()).add_(1.0)
    sampler_of(trainer).sync(trainer.model, step=0)  # same step: no copy
    first = lambda module: next(module.parameters())  # noqa: E731
    assert not torch.equal(first(sampler_of(trainer).model).float(), first(trainer.model).to(torch.bfloat16).float())
    sampler_of(trainer).sync(trainer.model, step=1)
    assert torch.equal(first(sampler_of(trainer).model), first(trainer.model).to(torch.bfloat16))
