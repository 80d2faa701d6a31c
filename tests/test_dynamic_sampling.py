"""DAPO dynamic sampling on a task where some prompts are always solved and some never are."""

from __future__ import annotations

import torch

from align_kit.components.sampling import concat_batches, groups_with_signal
from align_kit.tracking.metrics_file import read_metrics


def test_groups_with_signal_by_hand():
    totals = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.5, float("nan"), 0.5, 0.5])
    # groups of 2: [1,1] flat, [0,1] varies, [0.5, nan] flat once NaN is ignored, [0.5,0.5] flat
    assert groups_with_signal(totals, 2).tolist() == [False, True, False, False]


def test_concat_pads_prompts_left_and_completions_right():
    first = {
        "prompt_ids": torch.tensor([[5, 6]]), "prompt_mask": torch.tensor([[1, 1]]),
        "completion_ids": torch.tensor([[7]]), "completion_mask": torch.tensor([[1]]),
        "advantages": torch.tensor([0.5]), "num_items_in_batch": torch.tensor(1),
    }  # fmt: skip
    second = {
        "prompt_ids": torch.tensor([[8]]), "prompt_mask": torch.tensor([[1]]),
        "completion_ids": torch.tensor([[9, 10, 11]]), "completion_mask": torch.tensor([[1, 1, 0]]),
        "advantages": torch.tensor([-0.5]), "num_items_in_batch": torch.tensor(2),
    }  # fmt: skip
    joined = concat_batches([first, second], pad_token_id=0)
    assert joined["prompt_ids"].tolist() == [[5, 6], [0, 8]]
    assert joined["prompt_mask"].tolist() == [[1, 1], [0, 1]]
    assert joined["completion_ids"].tolist() == [[7, 0, 0], [9, 10, 11]]
    assert joined["completion_mask"].tolist() == [[1, 0, 0], [1, 1, 0]]
    assert joined["advantages"].tolist() == [0.5, -0.5]
    assert joined["num_items_in_batch"].item() == 3  # 1 + 2 completion tokens


def solved_by_prompt(completions, prompts, **kwargs):
    """1 for 'solved' prompts, 0 for 'unsolved' ones, and a completion-dependent score otherwise."""
    scores = []
    for text, question in zip(completions, prompts, strict=True):
        if question.startswith("11+"):
            scores.append(1.0)
        elif question.startswith("22+"):
            scores.append(0.0)
        else:
            scores.append(float(len(text) % 2))
    return scores


def build_dataset(prompts: list[str]):
    from datasets import Dataset

    return Dataset.from_dict({"prompt": prompts, "answer": ["0"] * len(prompts), "domain": ["addition"] * len(prompts)})


def dynamic_trainer(build_trainer, prompts: list[str], max_gen_batches: int):
    trainer = build_trainer("sampling=dynamic", f"sampling.max_gen_batches={max_gen_batches}")
    trainer.reward_funcs = [solved_by_prompt]
    trainer.reward_func_names = ["solved_by_prompt"]
    trainer.reward_processing_classes = [None]
    trainer.reward_weights = torch.ones(1)
    trainer.train_dataset = build_dataset(prompts)
    return trainer


def rows(trainer, prompts: list[str]) -> list[dict]:
    return [{"prompt": p, "answer": "0", "domain": "addition"} for p in prompts for _ in range(trainer.num_generations)]


def test_flat_groups_are_replaced_by_groups_with_signal(build_trainer):
    mixed = [f"{a}+{b}=" for a, b in zip(range(30, 60), range(40, 70), strict=True)]
    trainer = dynamic_trainer(build_trainer, mixed, max_gen_batches=6)
    first = ["11+11=", "22+22=", "11+12=", "22+23=", *mixed[:4]]  # half the groups flat by construction
    batch = trainer._generate_and_score_completions(rows(trainer, first))

    prompts = trainer.processing_class.batch_decode(batch["prompt_ids"], skip_special_tokens=True)
    assert len(prompts) == 64 and not any(p.startswith(("11+", "22+")) for p in prompts)
    groups = batch["advantages"].view(-1, 8)
    assert bool((groups.abs().sum(dim=1) > 0).all())  # every kept group carries a gradient signal
    assert batch["num_items_in_batch"].item() == batch["completion_mask"].sum().item()
    metrics = trainer._metrics["train"]
    rounds = metrics["sampling/gen_batches"][-1]
    assert rounds >= 2 and metrics["sampling/filled_groups"][-1] == 0
    # Round 1 kept at most the 4 mixed groups of 8; later rounds drew only mixed prompts.
    assert metrics["sampling/kept_group_fraction"][-1] <= (4 + 8 * (rounds - 1)) / (8 * rounds)


def test_round_budget_spent_trains_on_what_there_is(build_trainer):
    trainer = dynamic_trainer(build_trainer, ["11+11=", "22+22="], max_gen_batches=2)
    batch = trainer._generate_and_score_completions(rows(trainer, ["11+11=", "22+22="] * 4))
    metrics = trainer._metrics["train"]
    assert metrics["sampling/gen_batches"][-1] == 2
    assert metrics["sampling/kept_group_fraction"][-1] == 0.0
    assert metrics["sampling/filled_groups"][-1] == 8
    assert batch["advantages"].abs().sum().item() == 0.0 and len(batch["advantages"]) == 64


def test_dynamic_sampling_trains_end_to_end(train_once, tmp_path):
    train_once(tmp_path, "logger=none", "sampling=dynamic", "trainer.max_steps=4")
    logged = [row for row in read_metrics(tmp_path / "metrics.jsonl") if "sampling/gen_batches" in row]
    assert len(logged) == 2  # one generation per two mini-steps
    assert all(row["sampling/gen_batches"] >= 1 for row in logged)
    assert all(0.0 <= row["sampling/kept_group_fraction"] <= 1.0 for row in logged)
