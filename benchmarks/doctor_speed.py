"""Time of `align-kit doctor`'s work (read + diagnose, no figures, no printing) on synthetic histories of 1,000 /
10,000 / 100,000 logged steps, in two formats: an align_kit run folder (metrics.jsonl) and a TRL trainer_state.json.

Each history logs TRL's ~27 keys per step with a healthy-looking course (reward rising slowly, entropy holding),
so every rule with its metric judges at every step. Each size is timed `--repeats` times (the best is kept), and the
machine's load (os.getloadavg) is printed beside it: the numbers are relative to the same run's 1,000-step
baseline (s per 1,000 steps and its ratio to the baseline's; about 1.0 at every size means linear cost), not
thresholds asserted in a test. The target: 10,000 steps under 2 s.

  python benchmarks/doctor_speed.py            # 1k / 10k / 100k
  python benchmarks/doctor_speed.py --quick    # 1k / 2k / 4k: a smoke run
  python benchmarks/doctor_speed.py --sizes 1000 10000    # the target's size alone, beside its baseline
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LOGGED_KEYS = (
    "loss grad_norm learning_rate num_tokens completions/mean_length completions/min_length completions/max_length "
    "completions/clipped_ratio rewards/correctness/mean rewards/correctness/std rewards/format/mean "
    "rewards/format/std reward reward_std frac_reward_zero_std entropy clip_ratio/low_mean clip_ratio/low_min "
    "clip_ratio/high_mean clip_ratio/high_max clip_ratio/region_mean kl step_time"
).split()


def row(step: int, rng: random.Random) -> dict[str, float]:
    progress = step / 100_000
    values = {key: rng.random() for key in LOGGED_KEYS}
    values.update(
        {
            "loss": 0.01 * rng.gauss(0, 1),
            "grad_norm": 0.3 + 0.2 * rng.random(),
            "learning_rate": 1e-6,
            "reward": min(0.95, 0.3 + 0.4 * progress + 0.1 * rng.random()),
            "frac_reward_zero_std": 0.1 + 0.1 * rng.random(),
            "entropy": 0.8 + 0.1 * rng.random(),
            "completions/mean_length": 200 + 20 * rng.random(),
            "completions/clipped_ratio": 0.01 * rng.random(),
            "kl": 0.001 + 0.001 * rng.random(),
            "clip_ratio/region_mean": 0.002 * rng.random(),
        }
    )
    return values


def write_align_kit(folder: Path, steps: int) -> Path:
    rng = random.Random(0)
    folder.mkdir(parents=True)
    with open(folder / "metrics.jsonl", "w") as out:
        for step in range(1, steps + 1):
            out.write(json.dumps({"step": step, **row(step, rng)}) + "\n")
    return folder


def write_trl_state(folder: Path, steps: int) -> Path:
    rng = random.Random(0)
    folder.mkdir(parents=True)
    history = [{"step": step, "epoch": step / steps, **row(step, rng)} for step in range(1, steps + 1)]
    state = {"global_step": steps, "max_steps": steps, "logging_steps": 1, "log_history": history}
    path = folder / "trainer_state.json"
    path.write_text(json.dumps(state))
    return path


def doctor_seconds(path: Path, repeats: int) -> tuple[float, float, int]:
    """Best wall and best CPU seconds over the repeats (on a shared machine the CPU time is what load cannot
    inflate), and the rows read."""
    from align_kit.doctor.diagnose import diagnose
    from align_kit.doctor.readers import read_runs

    best, best_cpu, rows = math.inf, math.inf, 0
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        diagnoses = [diagnose(history) for history in read_runs(str(path))]
        best = min(best, time.perf_counter() - started)
        best_cpu = min(best_cpu, time.process_time() - started_cpu)
        rows = sum(len(d.history.rows) for d in diagnoses)
    return best, best_cpu, rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1k / 2k / 4k steps")
    parser.add_argument("--repeats", type=int, default=3, help="timings per size; the best is kept (default 3)")
    parser.add_argument("--sizes", type=int, nargs="+", help="the step counts to time (the first is the baseline)")
    args = parser.parse_args(argv)
    sizes = args.sizes or ((1_000, 2_000, 4_000) if args.quick else (1_000, 10_000, 100_000))
    print(f"cpus {os.cpu_count()}, python {sys.version.split()[0]}")
    header = f"{'format':<12} {'steps':>7} {'rows':>7} {'s':>8} {'cpu s':>8} {'s/1k':>7} {'ratio':>6}"
    print(f"{header}  load (1, 5, 15 min)")
    with tempfile.TemporaryDirectory() as scratch:
        for name, write in (("align_kit", write_align_kit), ("trl_state", write_trl_state)):
            baseline = None
            for steps in sizes:
                path = write(Path(scratch) / f"{name}-{steps}", steps)
                repeats = args.repeats if steps <= 10_000 else 1
                seconds, cpu_seconds, rows = doctor_seconds(path, repeats)
                per_thousand = seconds / steps * 1000
                baseline = baseline or per_thousand
                load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
                print(
                    f"{name:<12} {steps:>7} {rows:>7} {seconds:>8.3f} {cpu_seconds:>8.3f} {per_thousand:>7.3f} "
                    f"{per_thousand / baseline:>6.2f}  {load}"
                )


if __name__ == "__main__":
    main()
