"""DAPO dynamic sampling on a task where some prompts are always solved and some never are, and which groups count as
flat (by hand)."""

from __future__ import annotations

import pytest
import torch

from align_kit.components.dynamic_sampling import concat_batches, flat_groups, groups_with_signal
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
    trainer.flush_metrics()
    metrics = trainer._metrics["train"]
    rounds = metrics["sampling/gen_batches"][-1]
    assert rounds >= 2 and metrics["sampling/filled_groups"][-1] == 0
    # Round 1 kept at most the 4 mixed groups of 8; later rounds drew only mixed prompts.
    assert metrics["sampling/kept_group_fraction"][-1] <= (4 + 8 * (rounds - 1)) / (8 * rounds)


def test_round_budget_spent_trains_on_what_there_is(build_trainer):
    trainer = dynamic_trainer(build_trainer, ["11+11=", "22+22="], max_gen_batches=2)
    batch = trainer._generate_and_score_completions(rows(trainer, ["11+11=", "22+22="] * 4))
    trainer.flush_metrics()
    metrics = trainer._metrics["train"]
    assert metrics["sampling/gen_batches"][-1] == 2
    assert metrics["sampling/kept_group_fraction"][-1] == 0.0
    assert metrics["sampling/filled_groups"][-1] == 8
    assert batch["advantages"].abs().sum().item() == 0.0 and len(batch["advantages"]) == 64


@pytest.mark.slow
def test_dynamic_sampling_trains_end_to_end(train_once, tmp_path):
    train_once(tmp_path, "logger=none", "sampling=dynamic", "trainer.max_steps=4")
    logged = [row for row in read_metrics(tmp_path / "metrics.jsonl") if "sampling/gen_batches" in row]
    assert len(logged) == 2  # one generation per two mini-steps
    assert all(row["sampling/gen_batches"] >= 1 for row in logged)
    assert all(0.0 <= row["sampling/kept_group_fraction"] <= 1.0 for row in logged)


def solved_or_alternating(completions, prompts, **kwargs):
    """1.0 for every completion of an '11+' prompt (a flat group); elsewhere 0/1 alternating by
    position, so each of those groups of 8 holds four of each (never flat)."""
    return [1.0 if p.startswith("11+") else float(i % 2) for i, p in enumerate(prompts)]


def known_share_trainer(build_trainer, max_gen_batches: int):
    mixed = [f"{a}+{a}=" for a in range(30, 60)]
    trainer = dynamic_trainer(build_trainer, mixed, max_gen_batches)
    trainer.reward_funcs, trainer.reward_func_names = [solved_or_alternating], ["solved_or_alternating"]
    first = ["11+11=", "11+12=", "11+13=", "11+14=", *mixed[:4]]  # 4 of 8 groups flat at 1.0
    return trainer, rows(trainer, first)


def test_metrics_describe_the_batch_that_trains_and_the_rounds_before_the_filter(build_trainer):
    trainer, first = known_share_trainer(build_trainer, max_gen_batches=4)
    batch = trainer._generate_and_score_completions(first)
    trainer.flush_metrics()
    metrics = trainer._metrics["train"]
    # Round 1: 4 flat + 4 kept; round 2 draws 8 groups from the mixed prompts (none flat): 16 drawn,
    # 4 flat before the filter; the training batch holds 8 groups with spread.
    assert metrics["sampling/gen_batches"] == [2]
    assert metrics["sampling/groups_drawn"] == [16]
    assert metrics["sampling/flat_fraction_before_filter"] == [4 / 16]
    assert metrics["sampling/kept_group_fraction"] == [12 / 16]
    assert metrics["groups/flat_fraction"] == [0.0]
    assert metrics["adv/zero_std_fraction"] == [0.0]
    assert metrics["reward/addition"] == [0.5]  # four 1s in each group of 8 that trains
    assert metrics["completions/mean_length/addition"] == [batch["completion_mask"].sum(dim=1).float().mean().item()]
    # TRL's own metric, once per round: round 1 (4 groups at 1.0, 4 at 0.5) then round 2 (0.5).
    assert metrics["reward"] == [0.75, 0.5]


def test_a_short_batch_reports_its_filled_flat_groups(build_trainer):
    trainer, first = known_share_trainer(build_trainer, max_gen_batches=1)
    trainer._generate_and_score_completions(first)
    trainer.flush_metrics()
    metrics = trainer._metrics["train"]
    # One round: 4 kept, topped up with the 4 flat groups, which train with zero advantage.
    assert metrics["sampling/groups_drawn"] == [8]
    assert metrics["sampling/flat_fraction_before_filter"] == [0.5]
    assert metrics["sampling/filled_groups"] == [4]
    assert metrics["groups/flat_fraction"] == [0.5]
    assert metrics["adv/zero_std_fraction"] == [0.5]
    assert metrics["reward/addition"] == [(4 * 1.0 + 4 * 0.5) / 8]


class _FakeTrainer:
    """What KeepGroupsWithSignal reads from the trainer, for process `index` of `processes`."""

    def __init__(self, processes: int, index: int):
        from types import SimpleNamespace

        self.accelerator = SimpleNamespace(num_processes=processes, process_index=index)
        self.processing_class = SimpleNamespace(pad_token_id=0)
        self.args = SimpleNamespace(seed=1)
        self.state = SimpleNamespace(global_step=0)
        self.train_dataset = [{"prompt": f"p{i}"} for i in range(10)]
        self.num_generations = 2
        self.hooks = []  # no hook adds a batch key here


def _round(gathered_rewards: list[float], round_index: int, process: int, local_rows: int = 4):
    """Round `round_index` as process `process` sees it: the rewards gathered over every process, and a batch of
    its own rows whose completion ids read round*100 + process*10 + row."""
    from align_kit.core.hooks import BatchState

    state = BatchState(
        inputs=[{"row": (round_index, i)} for i in range(local_rows)],
        mode="train",
        group_size=2,
        start=process * local_rows,
        rewards_per_func=torch.tensor(gathered_rewards).unsqueeze(1),
        reward_weights=torch.ones(1),
    )
    batch = {
        "prompt_ids": torch.ones(local_rows, 1, dtype=torch.long),
        "prompt_mask": torch.ones(local_rows, 1, dtype=torch.long),
        "completion_ids": torch.tensor([[round_index * 100 + process * 10 + i] for i in range(local_rows)]),
        "completion_mask": torch.ones(local_rows, 1, dtype=torch.long),
    }
    return state, batch


@pytest.mark.parametrize(
    ("process", "kept_ids", "local_rewards"),
    [(0, [0, 1, 100, 101], [1, 0, 0, 1]), (1, [110, 111, 112, 113], [1, 0, 0, 1])],
)
def test_two_processes_keep_their_own_groups_and_draw_the_same_rounds(process, kept_ids, local_rewards):
    from align_kit.components.dynamic_sampling import KeepGroupsWithSignal

    # 2 processes x 2 groups of 2 completions. Round 0: process 0 has one group with signal, process 1 none, so
    # both draw round 1, where process 0 finds one more and process 1 two.
    rounds = [[1, 0, 1, 1, 0, 0, 1, 1], [0, 1, 1, 1, 1, 0, 0, 1]]
    drawn = []

    def score_round(inputs):
        drawn.append(len(inputs))
        return _round(rounds[1], 1, process)

    state, batch = _round(rounds[0], 0, process)
    joined, chosen = KeepGroupsWithSignal(max_gen_batches=4).select_batch(
        _FakeTrainer(2, process), state, batch, score_round
    )
    assert drawn == [4]  # one more round of 2 prompts x 2 completions, on each process
    assert chosen["completion_ids"].view(-1).tolist() == kept_ids
    # The joined batch's gathered rewards: process 0's picks (round 0 group 0, round 1 group 0), then process 1's
    # (round 1 groups 0 and 1); this process's slice of them matches its rows.
    assert joined.rewards_per_func.view(-1).tolist() == [1, 0, 0, 1, 1, 0, 0, 1]
    assert joined.local_rows(joined.rewards_per_func).view(-1).tolist() == local_rewards
    assert joined.extras["sampling"] == {
        "sampling/groups_drawn": 8,  # 2 rounds x 2 processes x 2 groups
        "sampling/flat_fraction_before_filter": 0.5,  # 4 of them flat
        "sampling/kept_group_fraction": 0.5,
        "sampling/gen_batches": 2,
        "sampling/filled_groups": 0,
    }


def test_flat_groups_by_hand():
    point_eight = torch.full((4,), 0.8)  # float32: std of these is not exactly 0, the range is
    almost = torch.tensor([0.8, 0.8, 0.8, 0.8 + 1e-3])
    with_nan = torch.tensor([1.0, float("nan"), 1.0, 1.0])
    assert flat_groups(torch.cat([point_eight, almost, with_nan]), 4).tolist() == [True, False, True]
    # The tolerance is relative: totals on a scale of 1000 may differ in the last float32 bits.
    large = torch.tensor([1000.0, 1000.0 + 6.1e-5, 1000.0, 1000.0, 0.0, 1000.0, 0.0, 1000.0])
    assert flat_groups(large, 4).tolist() == [True, False]
