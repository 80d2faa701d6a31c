"""A run killed one step past its checkpoint resumes to the same metrics as an uninterrupted run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from align_kit.tracking.metrics_file import read_metrics
from tests.behaviour.logged_steps import step_rows, without_timing
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
from align_kit.experiment import build_trainer as builder

class KillAfterStepFive(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.global_step == 5:
            os.kill(os.getpid(), signal.SIGKILL)

build = builder.build_trainer
builder.build_trainer = lambda plan, model, tokenizer, extra_callbacks=(), train_dataset=None: build(
    plan, model, tokenizer, (*extra_callbacks, KillAfterStepFive()), train_dataset
)
from align_kit.train import main
sys.argv = ["align-kit train", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
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
    assert (killed / "checkpoint-4" / "align_kit_monitor.json").exists()  # what the resumed monitor starts from

    summary = train_once(killed, *RESUME_RUN, "train.resume=true", fast_training=False)
    assert summary["steps"] == 8
    whole = step_rows(read_metrics(tmp_path / "whole" / "metrics.jsonl"))
    resumed = step_rows(read_metrics(killed / "metrics.jsonl"))
    assert [row["step"] for row in resumed] == list(range(1, 9))
    assert without_timing(resumed) == without_timing(whole)
