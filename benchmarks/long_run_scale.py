"""align_kit's own per-step work over a long run: flat, or growing with the history?

Drives what align_kit adds to each training step, with synthetic logs and tiny tensors instead of a model:
the built-in metrics hook (TrainingMetrics: advantages, flat groups, per-domain rewards, lengths, entropies,
KL, tokens/s), their gathering (AlignTrainer._record), the metrics file append, the health monitor's rules,
and the dashboard (HealthMonitorCallback.on_log); a checkpoint's monitor state every `--save-every` steps.
Two mini-steps per generation (a reward every other step) and an evaluation every 100 steps, as a default run.

Reports the median per-step time around step 100 and around the last step (ratio ~1: flat), the checkpoint
save of the monitor's state early and late, and the resume (cutting metrics.jsonl after the checkpoint and
restoring the monitor) of a short and a long history, beside the full re-read of the history that a
checkpoint without the monitor's state falls back to.

Run: PYTHONPATH=. .venv/bin/python benchmarks/long_run_scale.py          (10,000 steps; resumes at 1k and 10k)
     PYTHONPATH=. .venv/bin/python benchmarks/long_run_scale.py --quick  (2,000 steps; resumes at 200 and 2k)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import torch
from transformers import TrainerControl, TrainerState

from align_kit.components.training_metrics import TrainingMetrics
from align_kit.core.hooks import BatchState, LossState
from align_kit.monitor import HealthMonitor, HealthMonitorConfig
from align_kit.monitor.callback import MONITOR_STATE_FILE, HealthMonitorCallback
from align_kit.tracking.metrics_file import MetricsFileCallback
from align_kit.trainer import AlignTrainer

GROUPS, GROUP_SIZE, WIDTH, DOMAINS = 8, 8, 24, ["addition", "subtraction"]
# What TRL logs itself on a step, beside align_kit's metrics (values are synthetic).
TRL_KEYS = ("loss", "grad_norm", "learning_rate", "entropy", "clip_ratio/region_mean", "clip_ratio/low_mean",
            "clip_ratio/high_mean", "num_tokens", "step_time")  # fmt: skip
TRL_GENERATION_KEYS = ("reward", "reward_std", "frac_reward_zero_std", "completions/mean_length",
                       "completions/clipped_ratio", "rewards/correctness/mean", "rewards/format/mean")  # fmt: skip


class FakeTrainer(SimpleNamespace):
    """What TrainingMetrics and AlignTrainer._record / flush_metrics read of a trainer, on one process."""

    def __init__(self):
        accelerator = SimpleNamespace(device="cpu", gather=lambda tensor: tensor, is_main_process=True, num_processes=1)
        metrics = {"train": defaultdict(list)}
        super().__init__(accelerator=accelerator, domains=DOMAINS, _metrics=metrics, _hook_metrics=[])


def tensors(step: int) -> tuple[BatchState, dict, LossState]:
    generator = torch.Generator().manual_seed(step)
    rows = GROUPS * GROUP_SIZE
    inputs = [{"domain": DOMAINS[i % 2]} for i in range(rows)]
    state = BatchState(inputs=inputs, mode="train", group_size=GROUP_SIZE)
    state.rewards_per_func = torch.randint(0, 2, (rows, 2), generator=generator).float()
    state.reward_weights = torch.ones(2)
    mask = (torch.rand(rows, WIDTH, generator=generator) > 0.2).long()
    batch = {"advantages": torch.randn(rows, generator=generator), "completion_mask": mask,
             "prompt_mask": torch.ones(rows, 6, dtype=torch.long)}  # fmt: skip
    logps = -torch.rand(rows, WIDTH, generator=generator)
    loss_inputs = {**batch, "old_per_token_logps": logps + 0.01, "ref_per_token_logps": logps - 0.01}
    loss = LossState(inputs=loss_inputs, mode="train", forward=(logps, torch.rand(rows, WIDTH, generator=generator)))
    return state, batch, loss


def synthetic_logs(step: int, hook_metrics: dict[str, list[float]]) -> dict[str, float]:
    wobble = lambda i: 0.25 + 0.125 * ((step * (i + 3)) % 7) / 7  # noqa: E731
    logs = {name: wobble(i) for i, name in enumerate(TRL_KEYS)}
    if step % 2 == 1:  # a generation step (2 mini-steps per generation)
        logs.update({name: wobble(i) for i, name in enumerate(TRL_GENERATION_KEYS)})
    logs.update({name: statistics.fmean(values) for name, values in hook_metrics.items()})
    return logs


def run(folder: Path, steps: int, save_every: int) -> tuple[list[float], dict[int, float]]:
    """Per-step seconds of align_kit's work, and the seconds of each checkpoint's monitor-state save."""
    folder.mkdir()
    args = SimpleNamespace(output_dir=str(folder))
    metrics_file = MetricsFileCallback(folder / "metrics.jsonl")
    health = HealthMonitorCallback(HealthMonitor(HealthMonitorConfig()), folder, folder / "metrics.jsonl")
    hook, trainer = TrainingMetrics(), FakeTrainer()
    control, per_step, saves = TrainerControl(), [], {}
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):  # the dashboard's blocks
        for step in range(1, steps + 1):
            state, batch, loss = tensors(step)  # what TRL's step would have produced: not timed
            progress = TrainerState(global_step=step, max_steps=steps)
            started = time.perf_counter()
            if step % 2 == 1:
                AlignTrainer._record(trainer, hook.on_scored_batch(trainer, state, batch), "train")
                AlignTrainer._record(trainer, hook.on_train_batch(trainer, state, batch), "train")
            AlignTrainer._record(trainer, hook.on_loss(trainer, loss), "train")
            AlignTrainer._record(trainer, hook.on_step_end(trainer, 0.1), "train")
            AlignTrainer.flush_metrics(trainer)  # as the trainer's log does
            logs = synthetic_logs(step, trainer._metrics["train"])
            trainer._metrics["train"].clear()  # as TRL's log does
            metrics_file.on_log(args, progress, control, logs=logs)
            health.on_log(args, progress, control, logs=logs)
            if step % 100 == 0:
                eval_logs = {"eval_reward": 0.5 + 0.0625 * (step // 100 % 3), "eval_loss": 0.5}
                metrics_file.on_log(args, progress, control, logs=eval_logs)
                health.on_log(args, progress, control, logs=eval_logs)
            per_step.append(time.perf_counter() - started)
            if step % save_every == 0:
                (folder / f"checkpoint-{step}").mkdir()
                started = time.perf_counter()
                health.on_save(args, progress, control)
                saves[step] = time.perf_counter() - started
    return per_step, saves


def resume_seconds(source: Path, step: int, with_state: bool, scratch: Path) -> float:
    """A resume from checkpoint-`step` of a copy of `source`'s run, 37 logged rows past the checkpoint."""
    folder = scratch / f"resume-{with_state}"
    folder.mkdir(parents=True)
    rows = (source / "metrics.jsonl").read_text().splitlines(keepends=True)
    last = max(i for i, line in enumerate(rows) if json.loads(line)["step"] <= step)
    (folder / "metrics.jsonl").write_text("".join(rows[: last + 1 + 37]))
    (folder / f"checkpoint-{step}").mkdir()
    if with_state:
        saved = source / f"checkpoint-{step}" / MONITOR_STATE_FILE
        (folder / f"checkpoint-{step}" / MONITOR_STATE_FILE).write_text(saved.read_text())
    args, state = SimpleNamespace(output_dir=str(folder)), TrainerState(global_step=step)
    health = HealthMonitorCallback(HealthMonitor(HealthMonitorConfig()), folder, folder / "metrics.jsonl")
    started = time.perf_counter()
    MetricsFileCallback(folder / "metrics.jsonl").on_train_begin(args, state, None)
    health.on_train_begin(args, state, None)
    seconds = time.perf_counter() - started
    assert health.monitor.history["entropy"].count == step  # restored to the checkpoint, not past it
    return seconds


def window(per_step: list[float], around: int, width: int = 100) -> float:
    """Seconds per step over the `width` steps ending at step `around`: the median over its generations (a
    generation step and its mini-step cost differently, so single steps have no meaningful median)."""
    steps = per_step[max(around - width, 0) : around]
    return statistics.median(a + b for a, b in zip(steps[::2], steps[1::2], strict=True)) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="2,000 steps (a test's size)")
    parser.add_argument("--save-every", type=int, default=500)
    args = parser.parse_args()
    steps = 2_000 if args.quick else args.steps
    short = max(steps // 10, args.save_every) // args.save_every * args.save_every

    print(f"load average before: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    with tempfile.TemporaryDirectory() as scratch:
        # Steps 100-200 of fresh runs before and after the long one (their median), so a burst of load on the
        # shared machine during one of them does not pass for growth.
        early = [window(run(Path(scratch, "early-before"), 200, args.save_every)[0], 200)]
        folder = Path(scratch, "run")
        per_step, saves = run(folder, steps, args.save_every)
        early.append(window(run(Path(scratch, "early-after"), 200, args.save_every)[0], 200))
        early.append(window(per_step, 200))
        late = window(per_step, steps)
        print(f"per-step align_kit work: median {1e3 * statistics.median(early):.3f} ms at steps 100-200 "
              f"({', '.join(f'{1e3 * t:.3f}' for t in early)}), {1e3 * late:.3f} ms at steps {steps - 100}-{steps}: "
              f"ratio {late / statistics.median(early):.2f}")  # fmt: skip
        first_save, last_save = min(saves), max(saves)
        print(f"monitor state saved with a checkpoint: {1e3 * saves[first_save]:.2f} ms at step {first_save}, "
              f"{1e3 * saves[last_save]:.2f} ms at step {last_save}")  # fmt: skip
        resume_seconds(folder, short, True, Path(scratch, "warm-up"))  # the first call also pays for imports
        for with_state, label in ((True, "from the checkpoint's monitor state"), (False, "full re-read (fallback)")):
            times = {}
            for at in (short, steps):
                runs = [resume_seconds(folder, at, with_state, Path(scratch, f"{at}-{k}")) for k in range(3)]
                times[at] = statistics.median(runs)
            print(f"resume {label}: {1e3 * times[short]:.1f} ms at step {short}, {1e3 * times[steps]:.1f} ms at "
                  f"step {steps}: ratio {times[steps] / times[short]:.2f} (median of 3)")  # fmt: skip
    print(f"load average after: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
