"""Two processes (torchrun, gloo on CPU) against one, on the same global batch: training step time.

Each arm trains the embedded default for `--steps` steps, 64 completions per generation in both (one process
x 32 per device, or two x 16), alternately, `--repeats` times; the step time is the median of align_kit's
`step_time` over steps after the first two. On a 2-core machine the ideal ratio is 0.5 plus the gradient
all-reduce and the gathers; run it on a quiet machine (the load average is printed).

    .venv/bin/python benchmarks/multiprocess_step_time.py --steps 30 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def step_times(folder: Path) -> list[float]:
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [row["step_time"] for row in rows if "step_time" in row][2:]


def run(processes: int, steps: int, folder: Path) -> float:
    per_device = 64 // (2 * processes)  # 2 steps per generation
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
    command = [*(launcher if processes > 1 else [sys.executable]), "-m", "align_kit.train"]
    overrides = [f"trainer.max_steps={steps}", f"trainer.per_device_train_batch_size={per_device}"]
    overrides += ["trainer.save_strategy=no", "trainer.disable_tqdm=true", "logger=none", f"hydra.run.dir={folder}"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([*command, *overrides], check=True, capture_output=True, env=env)
    return statistics.median(step_times(folder))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    one, two = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(args.repeats):
            one.append(run(1, args.steps, Path(scratch, f"one-{repeat}")))
            two.append(run(2, args.steps, Path(scratch, f"two-{repeat}")))
    print(f"1 process : {statistics.median(one):.3f} s/step (runs: {', '.join(f'{v:.3f}' for v in one)})")
    print(f"2 processes: {statistics.median(two):.3f} s/step (runs: {', '.join(f'{v:.3f}' for v in two)})")
    print(f"ratio 2 / 1: {statistics.median(two) / statistics.median(one):.2f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
