"""Overhead of align_kit over plain TRL, measured as ratios inside one process.

1. Training steps/s: AlignTrainer vs trl.GRPOTrainer on the same plan (tiny model, same
   GRPOConfig, rewards and data), alternating which goes first, median over repeats.
   Target ratio (align_kit time / TRL time) <= 1.03.
2. Start-up: wall time of `align-kit train --cfg job` vs `python -c "from trl import GRPOTrainer"`.
   Target <= 2 s vs about 10 s.

Run: make bench   (or .venv/bin/python benchmarks/trainer_overhead.py --steps 100 --repeats 6)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from timing import alternating, base_overrides, build_align_kit, build_trl


def time_command(command: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "align_kit"))
    parser.add_argument(
        "--override", action="append", default=[], help="extra Hydra override for both trainers (repeatable), "
        "e.g. --override rollout=vllm --override trainer.use_cpu=false on a GPU"
    )  # fmt: skip
    args = parser.parse_args()

    align_kit_cli = str(Path(sys.executable).with_name("align-kit"))
    cfg_times = time_command([align_kit_cli, "train", "--cfg", "job"], args.repeats)
    trl_times = time_command([sys.executable, "-c", "from trl import GRPOTrainer"], args.repeats)
    print(f"align-kit train --cfg job: median {statistics.median(cfg_times):.2f} s  {[round(t, 2) for t in cfg_times]}")
    print(
        f"from trl import GRPOTrainer: median {statistics.median(trl_times):.2f} s  {[round(t, 2) for t in trl_times]}"
    )

    # The TRL-native default with align_kit's own extra (the re-tokenization check) switched off,
    # so both trainers do the same work; the check's own cost is in component_overhead.py.
    overrides = [*base_overrides(args.cache_dir, args.steps), "rollout.check_retokenize=false", *args.override]
    times = alternating({"align_kit": (overrides, build_align_kit), "trl": (overrides, build_trl)}, args.repeats,
                        args.cache_dir)  # fmt: skip
    ratios = [a / b for a, b in zip(times["align_kit"], times["trl"], strict=True)]
    print(f"training {args.steps} steps: align_kit {[round(t, 2) for t in times['align_kit']]} s, "
          f"TRL {[round(t, 2) for t in times['trl']]} s")  # fmt: skip
    print(
        f"step-time ratio align_kit/TRL: median {statistics.median(ratios):.3f}, "
        f"range {min(ratios):.3f}-{max(ratios):.3f} over {args.repeats} alternating repeats (target <= 1.03)"
    )


if __name__ == "__main__":
    main()
