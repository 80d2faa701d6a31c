"""Shared timing helpers: build a trainer for some overrides and time its training loop."""

from __future__ import annotations

import contextlib
import tempfile
import time

from transformers.trainer_callback import PrinterCallback


def plan_for(overrides: list[str], run_dir: str):
    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan
    from align_kit.train import component_choices

    return build_plan(compose(overrides), component_choices(), run_dir)


def build_align_kit(plan, cache_dir: str, scratch: str):
    from align_kit.experiment.build_trainer import build_trainer

    policy = plan.model.load(plan.task, cache_dir)
    return build_trainer(plan, policy.model, policy.tokenizer)


def build_trl(plan, cache_dir: str, scratch: str):
    from trl import GRPOConfig, GRPOTrainer

    policy = plan.model.load(plan.task, cache_dir)
    return GRPOTrainer(
        model=policy.model,
        reward_funcs=[spec.func for spec in plan.rewards],
        args=GRPOConfig(**{**plan.grpo_kwargs, "output_dir": f"{scratch}/trl"}),
        train_dataset=plan.task.dataset("train"),
        processing_class=policy.tokenizer,
    )


def base_overrides(cache_dir: str, steps: int) -> list[str]:
    return [
        f"paths.cache_dir={cache_dir}",
        "logger=none",
        f"trainer.max_steps={steps}",
        "trainer.save_strategy=no",
        "trainer.disable_tqdm=true",
    ]


def train_seconds(
    overrides: list[str], cache_dir: str, build=build_align_kit, clock=time.perf_counter, around=contextlib.nullcontext
) -> tuple[float, object]:
    """Time of trainer.train() (model load and trainer construction excluded) on `clock` (wall time by default;
    any reading whose differences divide: a float, or a numpy array of several clocks), and the trainer. `around()`:
    a context entered around trainer.train() alone (a counter of what it does)."""
    with tempfile.TemporaryDirectory() as scratch:
        plan = plan_for(overrides, f"{scratch}/run")
        trainer = build(plan, cache_dir, scratch)
        trainer.remove_callback(PrinterCallback)  # no per-step log dicts on the console
        with around():
            started = clock()
            trainer.train()
            seconds = clock() - started
        return seconds, trainer


def alternating(
    arms: dict[str, tuple[list[str], object]], repeats: int, cache_dir: str, clock=time.perf_counter
) -> dict[str, list[float]]:
    """Time every arm `repeats` times (on `clock`, see train_seconds), rotating the order so drift in machine load
    is shared."""
    times: dict[str, list[float]] = {name: [] for name in arms}
    names = list(arms)
    for repeat in range(repeats):
        for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
            overrides, build = arms[name]
            times[name].append(train_seconds(overrides, cache_dir, build, clock)[0])
    return times
