"""A killed run resumes to the same metrics; with TRL-native nodes align_kit equals plain TRL."""

from __future__ import annotations

import subprocess
import sys

from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.tracking.metrics_file import read_metrics
from align_kit.train import component_choices
from tests.behaviour.test_training import step_rows, without_timing
from tests.conftest import cli_env

RESUME_RUN = [
    "logger=none",
    "seed=5",
    "trainer.max_steps=8",
    "trainer.save_strategy=steps",
    "trainer.save_steps=4",
]

# Runs the real entry point and SIGKILLs the process right after step 5 is logged, one step past
# checkpoint-4: what a killed job leaves behind (a checkpoint plus metrics the resume must redo).
KILLED_RUN = """
import os, signal, sys
from transformers import TrainerCallback
from align_kit import trainer

class KillAfterStepFive(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.global_step == 5:
            os.kill(os.getpid(), signal.SIGKILL)

build = trainer.AlignTrainer.from_plan.__func__
trainer.AlignTrainer.from_plan = classmethod(
    lambda cls, plan, model, tokenizer, extra_callbacks=(), train_dataset=None: build(
        cls, plan, model, tokenizer, (*extra_callbacks, KillAfterStepFive()), train_dataset
    )
)
from align_kit.train import main
sys.argv = ["align-kit train", *sys.argv[1:]]
main()
"""


def test_resume_after_a_kill_matches_an_uninterrupted_run(train_once, overrides_for, cache_dir, tmp_path):
    train_once(tmp_path / "whole", *RESUME_RUN, fast_training=False)

    killed = tmp_path / "killed"
    args = [
        *overrides_for(*RESUME_RUN, fast_training=False),
        "trainer.disable_tqdm=true",
        f"hydra.run.dir={killed}",
    ]
    result = subprocess.run([sys.executable, "-c", KILLED_RUN, *args], capture_output=True, env=cli_env(cache_dir))
    assert result.returncode == -9
    assert [row["step"] for row in read_metrics(killed / "metrics.jsonl")] == [1, 2, 3, 4, 5]
    assert (killed / "checkpoint-4" / "trainer_state.json").exists()

    summary = train_once(killed, *RESUME_RUN, "train.resume=true", fast_training=False)
    assert summary["steps"] == 8
    whole = step_rows(read_metrics(tmp_path / "whole" / "metrics.jsonl"))
    resumed = step_rows(read_metrics(killed / "metrics.jsonl"))
    assert [row["step"] for row in resumed] == list(range(1, 9))
    assert without_timing(resumed) == without_timing(whole)


PARITY_KEYS = (
    "loss",
    "reward",
    "reward_std",
    "entropy",
    "grad_norm",
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
    "frac_reward_zero_std",
    "rewards/correctness/mean",
    "rewards/format/mean",
    "completions/mean_length",
)


def test_align_kit_matches_plain_trl_step_for_step(overrides_for, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from align_kit.trainer import AlignTrainer

    overrides = overrides_for(
        "advantage=grpo", "clip=symmetric", "kl=none", "overlong=none", "logger=none",
        "trainer.max_steps=6", "trainer.steps_per_generation=2", "trainer.num_iterations=2",
        "trainer.learning_rate=1e-3",
    )  # fmt: skip
    plan = build_plan(compose(overrides), component_choices(), str(tmp_path / "align_kit"))
    assert plan.effective("steps_per_generation") > plan.effective("gradient_accumulation_steps")

    policy = plan.model.load(plan.task, plan_cache(overrides))
    ours = AlignTrainer.from_plan(plan, policy.model, policy.tokenizer)
    ours.train()

    fresh = plan.model.load(plan.task, plan_cache(overrides))
    plain = GRPOTrainer(
        model=fresh.model,
        reward_funcs=[spec.func for spec in plan.rewards],
        args=GRPOConfig(**{**plan.grpo_kwargs, "output_dir": str(tmp_path / "plain")}),
        train_dataset=plan.task.dataset("train"),
        processing_class=fresh.tokenizer,
    )
    plain.train()

    ours_rows = [row for row in ours.state.log_history if "loss" in row]
    plain_rows = [row for row in plain.state.log_history if "loss" in row]
    assert len(ours_rows) == len(plain_rows) == 6
    for mine, theirs in zip(ours_rows, plain_rows, strict=True):
        assert {k: mine.get(k) for k in PARITY_KEYS} == {k: theirs.get(k) for k in PARITY_KEYS}
    # The policy moved and clipping acted at some step, so the comparison covers the clipped path.
    assert any(row["clip_ratio/region_mean"] > 0 for row in ours_rows)
    assert ours_rows[0]["grad_norm"] > 0


def plan_cache(overrides: list[str]) -> str:
    return next(o.split("=", 1)[1] for o in overrides if o.startswith("paths.cache_dir="))
