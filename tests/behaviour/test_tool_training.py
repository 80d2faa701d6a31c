"""task=tool_calls through the real training path: TRL's rollout_func runs the episode loop, the
observations and the failed steps are out of the loss, the step rewards score the episodes."""

from __future__ import annotations

import json

import pytest

from align_kit.markup.tool_format import check_call, parse_turn
from align_kit.tasks.tool_calls import TOOLS
from tests.conftest import generation_inputs

# A small warm start and batch: the loop and the masks are exercised, not the learning.
TOOL_RUN = [
    "recipe=tool_calls",
    "model.warm_start.steps=20",
    "model.warm_start.batch_size=8",
    "model.warm_start.eval_prompts=4",
    "task.num_train=64",
    "task.turn_tokens=64",
    "trainer.per_device_train_batch_size=8",
    "trainer.steps_per_generation=1",
    "trainer.num_generations=4",
    "trainer.max_completion_length=160",
]


def expected_loss_mask(tokens: list[str], eos: str) -> list[int]:
    """An independent reading of one episode, token by token (the tokenizer has one token per character):
    a model turn runs to its EOS, an observation is a following "\nObs: ...\n" line. A turn trains when it
    is `Done` or a call that passes the registry check and was not answered with an execution error."""
    mask, i = [], 0
    while i < len(tokens):
        j = tokens.index(eos, i) + 1 if eos in tokens[i:] else len(tokens)
        turn = "".join(tokens[i : j - (tokens[j - 1] == eos)])
        k = j
        if "".join(tokens[j : j + 6]) == "\nObs: ":
            k = tokens.index("\n", j + 1) + 1 if "\n" in tokens[j + 1 :] else len(tokens)
        observation = "".join(tokens[j:k])
        call = parse_turn(turn).call_text
        if call is None:
            trains = turn.strip() == "Done"
        else:
            trains = check_call(call, TOOLS)[0] == "ok" and not any(
                f"error: {status}" in observation for status in ("crash", "timeout", "oom")
            )
        mask += [int(trains)] * (j - i) + [0] * (k - j)
        i = k
    return mask


@pytest.mark.slow
def test_a_generation_round_masks_observations_and_failed_steps(build_trainer):
    trainer = build_trainer(*TOOL_RUN)
    inputs = generation_inputs(trainer, prompts=2)
    state, batch = trainer.score_round(inputs)
    tokenizer = trainer.processing_class
    for row, episode in enumerate(state.inputs):
        ids = batch["completion_ids"][row][batch["completion_mask"][row].bool()].tolist()
        tokens = tokenizer.convert_ids_to_tokens(ids)
        assert batch["tool_mask"][row][: len(ids)].tolist() == expected_loss_mask(tokens, tokenizer.eos_token)
        assert json.loads(episode["calls"])  # the ground truth reached the reward functions' rows
    # The DAPO loss's token count is recounted over the tokens that still train.
    assert batch["num_items_in_batch"].item() == (batch["completion_mask"] * batch["tool_mask"]).sum().item()


@pytest.mark.slow
def test_short_training_with_step_rewards_and_mask(train_once, tmp_path):
    summary = train_once(tmp_path / "run", *TOOL_RUN, "trainer.max_steps=2", "logger=none")
    assert summary["steps"] == 2
    assert 0.0 <= summary["policy"]["start_success_rate"] <= 1.0
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    logged = {key for line in lines for key in line}
    assert {"rewards/tool_steps/mean", "mask/masked_token_fraction", "tools/success_rate"} <= logged
    assert {"mask/bad_json", "mask/unknown_tool", "mask/bad_params", "mask/exec_failed"} <= logged


@pytest.mark.slow
def test_short_training_with_step_rewards_and_group_arena(train_once, tmp_path):
    """GAR on the tool task with a local judge (tests.rewards.test_arena.prefer_shorter: the shorter episode wins, equal
    lengths tie): every played match hands out one point in total, so with no failures the arena reward's batch
    mean is exactly 0.5, and a group of 4 makes at most 6 judge calls."""
    judge = ["reward/judge=callable", "reward.arena.judge.function=tests.rewards.test_arena.prefer_shorter"]
    arena = ["reward=[tool_steps,arena]", "reward.arena.weight=0.5", "train.allowed_targets=[tests]", *judge]
    train_once(tmp_path / "run", *TOOL_RUN, *arena, "trainer.max_steps=2", "logger=none")
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    judged = [line for line in lines if "gar/judge_calls" in line]
    assert len(judged) == 2  # one generation per step here
    for line in judged:
        assert 0 <= line["gar/judge_calls"] <= 6 and line["gar/judge_failures"] == 0
        assert line["rewards/arena/mean"] == pytest.approx(0.5, abs=1e-6)
        assert "rewards/tool_steps/mean" in line and "mask/masked_token_fraction" in line
