"""Overhead of align_kit over plain TRL, measured as ratios inside one process.

1. Training steps/s: AlignTrainer vs trl.GRPOTrainer on the same plan (tiny model, same
   GRPOConfig, rewards and data), alternating which goes first, median over repeats.
   Target ratio (align_kit time / TRL time) <= 1.03.
2. Start-up: wall time of `align-kit train --cfg job` vs `python -c "from trl import GRPOTrainer"`.
   Target <= 2 s vs about 10 s.

Run: make bench   (or .venv/bin/python benchmarks/trainer_overhead.py --steps 40 --repeats 3)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def build_align_kit(plan, cache_dir: str, scratch: str):
    from align_kit.trainer import AlignTrainer

    policy = plan.model.load(plan.task, cache_dir)
    return AlignTrainer.from_plan(plan, policy.model, policy.tokenizer)


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


def time_training(steps: int, repeats: int, cache_dir: str) -> tuple[list[float], list[float]]:
    from align_kit.config import compose
    from align_kit.plan import build_plan
    from align_kit.train import component_choices

    overrides = [
        f"paths.cache_dir={cache_dir}",
        "logger=none",
        f"trainer.max_steps={steps}",
        "trainer.save_strategy=no",
        "trainer.disable_tqdm=true",
    ]
    times: dict = {build_align_kit: [], build_trl: []}
    for repeat in range(repeats):
        order = [build_align_kit, build_trl] if repeat % 2 == 0 else [build_trl, build_align_kit]
        for build in order:
            with tempfile.TemporaryDirectory() as scratch:
                plan = build_plan(compose(overrides), component_choices(), f"{scratch}/align_kit")
                trainer = build(plan, cache_dir, scratch)
                started = time.perf_counter()
                trainer.train()
                times[build].append(time.perf_counter() - started)
    return times[build_align_kit], times[build_trl]


def time_command(command: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "align_kit"))
    args = parser.parse_args()

    align_kit_cli = str(Path(sys.executable).with_name("align-kit"))
    cfg_times = time_command([align_kit_cli, "train", "--cfg", "job"], args.repeats)
    trl_times = time_command([sys.executable, "-c", "from trl import GRPOTrainer"], args.repeats)
    print(f"align-kit train --cfg job: median {statistics.median(cfg_times):.2f} s  {[round(t, 2) for t in cfg_times]}")
    print(
        f"from trl import GRPOTrainer: median {statistics.median(trl_times):.2f} s  {[round(t, 2) for t in trl_times]}"
    )

    ours, theirs = time_training(args.steps, args.repeats, args.cache_dir)
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    print(
        f"training {args.steps} steps: align_kit {[round(t, 2) for t in ours]} s, TRL {[round(t, 2) for t in theirs]} s"
    )
    print(
        f"step-time ratio align_kit/TRL: median {statistics.median(ratios):.3f}, "
        f"range {min(ratios):.3f}-{max(ratios):.3f} over {args.repeats} alternating repeats (target <= 1.03)"
    )


if __name__ == "__main__":
    main()
