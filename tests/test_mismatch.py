"""Train/inference mismatch: IS corrections on hand-made tensors, the bf16 sampler, re-tokenization."""

from __future__ import annotations

import json
import math

import pytest
import torch

from align_kit.components.rollout import importance_ratio, mismatch_metrics, retokenize_differences
from align_kit.config import compose
from align_kit.models.char_tokenizer import build_char_tokenizer
from align_kit.tracking.metrics_file import read_metrics
from tests.conftest import generation_inputs

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
    metrics = mismatch_metrics(TRAIN, SAMPLER, MASK)
    gaps = [0.5, -1.0, 0.0, 0.0, 0.1]  # the five real tokens
    assert metrics["mismatch/logp_abs_diff/mean"] == pytest.approx(sum(abs(g) for g in gaps) / 5)
    assert metrics["mismatch/logp_abs_diff/max"] == pytest.approx(1.0)
    assert metrics["mismatch/kl"] == pytest.approx(sum(math.exp(g) - g - 1 for g in gaps) / 5)


def test_fp32_sampler_has_no_mismatch(build_trainer):
    trainer = build_trainer("rollout.log_mismatch=true")
    assert trainer.sampler is None
    trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4))
    metrics = trainer._metrics["train"]
    assert metrics["mismatch/logp_abs_diff/mean"] == [0.0]
    assert metrics["mismatch/logp_abs_diff/max"] == [0.0]
    assert metrics["mismatch/kl"] == [0.0]


def test_bf16_sampler_mismatch_is_measured_and_corrected(build_trainer):
    trainer = build_trainer("rollout.dtype=bfloat16", "rollout.is_correction=token_truncate")
    assert next(trainer.sampler.model.parameters()).dtype == torch.bfloat16
    assert next(trainer.model.parameters()).dtype == torch.float32
    batch = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4))
    metrics = trainer._metrics["train"]
    assert metrics["mismatch/logp_abs_diff/mean"][0] > 0
    assert metrics["mismatch/logp_abs_diff/max"][0] >= metrics["mismatch/logp_abs_diff/mean"][0]
    ratio = batch["rollout_is_ratio"]
    assert ratio.shape == batch["completion_ids"].shape and ratio.max() <= 3.0  # TRL's default cap
    assert not torch.allclose(ratio, torch.ones_like(ratio))


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
        before = trainer.sampler.model(input_ids=ids).logits
        for parameter in trainer.model.parameters():
            parameter.zero_()  # a policy change the sampler has not been synced to must not reach it
        after = trainer.sampler.model(input_ids=ids).logits
    assert before.dtype == torch.bfloat16
    assert torch.equal(before, after)


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


def test_sampler_resyncs_when_the_policy_changes(build_trainer):
    trainer = build_trainer("rollout.dtype=bfloat16")
    trainer.sampler.sync(trainer.model, step=0)
    with torch.no_grad():
        next(trainer.model.parameters()).add_(1.0)
    trainer.sampler.sync(trainer.model, step=0)  # same step: no copy
    first = lambda module: next(module.parameters())  # noqa: E731
    assert not torch.equal(first(trainer.sampler.model).float(), first(trainer.model).to(torch.bfloat16).float())
    trainer.sampler.sync(trainer.model, step=1)
    assert torch.equal(first(trainer.sampler.model), first(trainer.model).to(torch.bfloat16))


def test_spelled_out_tag_does_not_survive_re_encoding():
    tokenizer = build_char_tokenizer()
    encode = lambda texts: [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]  # noqa: E731
    prompt_ids = encode(["1+1="])[0]
    clean = encode(["<think>1+1=2</think>2"])[0]
    spelled = [tokenizer.convert_tokens_to_ids(c) for c in "<think>"] + encode(["2</think>2"])[0]
    differences = retokenize_differences(
        tokenizer, encode, ["1+1=", "1+1="], [(prompt_ids, clean), (prompt_ids, spelled)]
    )
    assert list(differences) == [1]
    sampled, rebuilt, text = differences[1]
    assert text == "<think>2</think>2" and len(rebuilt) == len(sampled) - 6  # seven characters became one tag


def test_conversational_rollouts_are_rebuilt_with_the_chat_template():
    tokenizer = build_char_tokenizer()
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'] }}:{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    )
    prompt = [{"role": "user", "content": "1+1="}]
    prompt_ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)
    completion = tokenizer("<think>2</think>2", add_special_tokens=False)["input_ids"]
    sampled = [(list(prompt_ids["input_ids"]), completion)]
    assert retokenize_differences(tokenizer, None, [prompt], sampled) == {}


def test_retokenize_rate_is_logged_and_the_first_example_saved(build_trainer, tmp_path):
    trainer = build_trainer()
    spelled = [trainer.processing_class.convert_tokens_to_ids(c) for c in "<think>"]
    inputs = generation_inputs(trainer, prompts=1)
    prompts = [row["prompt"] for row in inputs]
    prompt_ids = [trainer._tokenize_prompts([p])[0][0] for p in prompts]
    batch = {
        "prompt_ids": torch.tensor(prompt_ids),
        "prompt_mask": torch.ones(len(prompts), len(prompt_ids[0]), dtype=torch.long),
        "completion_ids": torch.tensor([spelled] + [[5] * 7] * (len(prompts) - 1)),
        "completion_mask": torch.ones(len(prompts), 7, dtype=torch.long),
    }
    trainer._check_retokenization(inputs, batch)
    assert trainer._metrics["train"]["mismatch/retokenize_rate"] == [1 / len(prompts)]
    saved = json.loads((tmp_path / "run" / "retokenize_mismatch.json").read_text())
    assert saved["completion_text"] == "<think>" and saved["sampled_ids"][-7:] == spelled
