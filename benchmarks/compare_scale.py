"""Time and peak memory of `align-kit compare` over 10 / 100 / 1,000 synthetic run folders of 1,000 steps.

Each size is a sweep folder of run folders as `align-kit train -m` writes them (config.yaml, summary.json,
metrics.jsonl with TRL's ~30 keys per logged step, .hydra/config.yaml and overrides.yaml): arms of 5 seeds over a
grid of clip.eps_high x learning rate. Each comparison runs in a fresh interpreter, which reports its wall time (the
load of the runs and the whole comparison) and its peak resident memory beyond what the imports already took.
Linear cost shows as a ratio of about 10 between 1,000 and 100 folders; the slope is seconds (and MiB) per folder
between those two sizes. Folder writing is not timed.

  python benchmarks/compare_scale.py             # 10, 100, 1,000 folders of 1,000 steps
  python benchmarks/compare_scale.py --quick     # 10, 20, 40 folders of 50 steps: a smoke run
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SEEDS_PER_ARM = 5
# What TRL 1.16 and align_kit log per step (metrics.jsonl keys), besides `step` and `epoch`.
LOGGED_KEYS = (
    "loss grad_norm learning_rate num_tokens completions/mean_length completions/min_length completions/max_length "
    "completions/clipped_ratio completions/mean_terminated_length completions/min_terminated_length "
    "completions/max_terminated_length rewards/correctness/mean rewards/correctness/std rewards/format/mean "
    "rewards/format/std reward reward_std frac_reward_zero_std entropy clip_ratio/low_mean clip_ratio/low_min "
    "clip_ratio/high_mean clip_ratio/high_max clip_ratio/region_mean policy_ratio/mean policy_ratio/abs_dev "
    "step_time"
).split()

# Runs in the child interpreter: import what compare uses, note the memory that took, then compare.
CHILD = """
import json, resource, sys, time
from pathlib import Path
import align_kit.compare.arms, align_kit.compare.plots, align_kit.compare.report, align_kit.compare.runs
import align_kit.compare.statistics, align_kit.compare.verdict
import matplotlib.backends.backend_agg, matplotlib.figure
from align_kit.compare.command import compare

def peak_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

before = peak_kib()
started = time.perf_counter()
result = compare([sys.argv[1]], out=Path(sys.argv[2]))
seconds = time.perf_counter() - started
runs = sum(len(arm.runs) for arm in result.arms)
print(json.dumps({"seconds": seconds, "peak_mib": (peak_kib() - before) / 1024, "runs": runs}), file=sys.stderr)
"""


def logged_row(step: int, steps: int, arm: int, seed: int) -> dict:
    progress = step / steps
    row = {"step": step, "epoch": progress}
    for index, key in enumerate(LOGGED_KEYS):
        row[key] = round(math.sin(0.01 * step * (index + 1) + seed) * 0.1 + progress * (1 + 0.01 * arm), 6)
    return row


def write_sweep(root: Path, folders: int, steps: int) -> None:
    eps_highs = (0.2, 0.24, 0.28, 0.32)
    for job in range(folders):
        arm, seed = divmod(job, SEEDS_PER_ARM)
        eps_high, learning_rate = eps_highs[arm % 4], 1e-3 * (1 + arm // 4)
        folder = root / str(job)
        (folder / ".hydra").mkdir(parents=True)
        config = {
            "seed": seed,
            "paths": {"output_root": str(root)},
            "clip": {"_target_": "align_kit.components.clip.TokenClip", "eps_low": 0.2, "eps_high": eps_high},
            "trainer": {"learning_rate": learning_rate, "num_iterations": 2, "max_steps": steps},
        }
        overrides = [f"clip.eps_high={eps_high}", f"trainer.learning_rate={learning_rate}", f"seed={seed}"]
        (folder / "config.yaml").write_text(json.dumps(config))  # JSON is valid YAML
        (folder / ".hydra" / "config.yaml").write_text(json.dumps(config))
        (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {item}\n" for item in overrides))
        (folder / "summary.json").write_text(json.dumps({"choices": {"clip": "clip_higher"}, "seed": seed}))
        rows = [logged_row(step, steps, arm, seed) for step in range(1, steps + 1)]
        rows.append({"step": steps, "train_runtime": 1.0, "train_loss": 0.1, "epoch": 1.0})
        (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (root / "multirun.yaml").write_text("hydra: {}\n")


def measure(folders: int, steps: int, scratch: Path) -> dict:
    sweep = scratch / f"sweep-{folders}"
    write_sweep(sweep, folders, steps)
    # Run in the scratch folder: the child imports the align_kit this process would (PYTHONPATH, else the install),
    # not whatever checkout the current folder happens to be.
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(sweep), str(scratch / f"compare-{folders}")],
        capture_output=True,
        text=True,
        cwd=scratch,
    )
    if result.returncode != 0:
        sys.exit(f"compare over {folders} folders failed:\n{result.stderr[-3000:]}")
    measured = json.loads(result.stderr.strip().splitlines()[-1])
    if measured["runs"] != folders:
        sys.exit(f"compare counted {measured['runs']} runs in {folders} folders")
    return measured


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg()) + f" (1, 5, 15 min; {os.cpu_count()} cores)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10, 20, 40 folders of 50 steps (a smoke run)")
    parser.add_argument("--sizes", help="comma-separated folder counts (default 10,100,1000)")
    parser.add_argument("--steps", type=int, help="logged steps per run (default 1000)")
    args = parser.parse_args()
    sizes = [int(size) for size in (args.sizes or ("10,20,40" if args.quick else "10,100,1000")).split(",")]
    steps = args.steps or (50 if args.quick else 1000)

    print(f"align_kit measured: {Path(importlib.util.find_spec('align_kit').origin).parent}")
    print(f"load average before: {load()}")
    measured = {}
    with tempfile.TemporaryDirectory() as scratch:
        for size in sizes:
            measured[size] = measure(size, steps, Path(scratch))
            seconds, peak = measured[size]["seconds"], measured[size]["peak_mib"]
            print(
                f"{size:5d} folders x {steps} steps: {seconds:7.2f} s ({1000 * seconds / size:6.1f} ms/folder), "
                f"peak memory +{peak:7.1f} MiB ({1024 * peak / size:7.1f} KiB/folder)",
                flush=True,
            )
    small, large = sizes[-2], sizes[-1]
    time_ratio = measured[large]["seconds"] / measured[small]["seconds"]
    memory_ratio = measured[large]["peak_mib"] / max(measured[small]["peak_mib"], 1e-9)
    slope = (measured[large]["seconds"] - measured[small]["seconds"]) / (large - small)
    memory_slope = (measured[large]["peak_mib"] - measured[small]["peak_mib"]) / (large - small)
    print(
        f"{large}/{small} folders: time x{time_ratio:.1f}, peak memory x{memory_ratio:.1f} "
        f"(linear: x{large / small:g}); slope {1000 * slope:.1f} ms and {1024 * memory_slope:.0f} KiB per folder"
    )
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
