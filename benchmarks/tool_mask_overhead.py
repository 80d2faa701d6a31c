"""Step-time ratio of the step-level loss mask on task=tool_calls (step_mask=on vs off), in one process.

Both arms run recipe=tool_calls from the same warm-started policy and seed. With the recipe's learning
rate the arms train differently, so their rollouts (lengths, turns) drift apart and the ratio also
holds that drift; `--learning-rate 1e-12` keeps both policies where they started, so both arms sample
the same episodes and the ratio is the mask's own cost. The hook's own time per step is measured too
(`StepLossMask.on_scored_batch`, wall clock). Median over alternating repeats.

Run: PYTHONPATH=. .venv/bin/python benchmarks/tool_mask_overhead.py --steps 10 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from timing import alternating, base_overrides, build_align_kit

from align_kit.components.step_mask import StepLossMask


def timed_hook() -> list[float]:
    """Wrap the hook's method so every call's wall time is recorded."""
    seconds: list[float] = []
    original = StepLossMask.on_scored_batch

    def on_scored_batch(self, trainer, state, batch):
        started = time.perf_counter()
        try:
            return original(self, trainer, state, batch)
        finally:
            seconds.append(time.perf_counter() - started)

    StepLossMask.on_scored_batch = on_scored_batch
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=None, help="default: the recipe's")
    parser.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "align_kit"))
    parser.add_argument("overrides", nargs="*", help="more overrides for both arms")
    args = parser.parse_args()

    base = [*base_overrides(args.cache_dir, args.steps), "recipe=tool_calls", *args.overrides]
    if args.learning_rate is not None:
        base.append(f"trainer.learning_rate={args.learning_rate}")
    hook_seconds = timed_hook()
    arms = {"on": ([*base, "step_mask=on"], build_align_kit), "off": ([*base, "step_mask=off"], build_align_kit)}
    times = alternating(arms, args.repeats, args.cache_dir)
    ratios = [a / b for a, b in zip(times["on"], times["off"], strict=True)]
    steps = args.steps * args.repeats
    print(
        f"step_mask on/off median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}; "
        f"on {[round(t, 1) for t in times['on']]} s, off {[round(t, 1) for t in times['off']]} s for "
        f"{args.steps} steps each); the hook itself: {1000 * sum(hook_seconds) / steps:.2f} ms per step "
        f"= {sum(hook_seconds) / sum(times['on']):.4f} of the 'on' arm's time",
        flush=True,
    )


if __name__ == "__main__":
    main()
