"""Step-time ratio of each stability component on vs off, on the tiny model, in one process.

Each pair differs only in the component (the "off" arm is the closest TRL-native setting, e.g.
kl=constant for kl=per_domain). Target ratio <= 1.05, except dynamic sampling, whose cost is the
extra generation rounds it reports (sampling/gen_batches), and rollout.dtype=bfloat16, which samples
on a second model (bf16 matmuls on a CPU) and re-scores each batch with it (mismatch/rescore_*):
medians 1.23 and 1.35 in two runs of 5 repeats on 2 shared cores; the re-scoring alone: 1.18.
Median over alternating repeats.

Run: .venv/bin/python benchmarks/component_overhead.py --steps 40 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from timing import alternating, base_overrides, build_align_kit

TOOL_TASK = ["recipe=tool_calls"]
PAIRS = {
    "advantage=ngrpo": (["advantage=ngrpo"], ["advantage=grpo"]),
    "kl=per_domain": (["kl=per_domain"], ["kl=constant", "kl.beta=0.02"]),
    "kl=reweighted": (["kl=reweighted"], ["kl=constant", "kl.bias_corrected=true"]),
    "format_schedule=adaptive": (["format_schedule=adaptive"], ["reward.format.weight=1.0"]),
    "rollout.dtype=bfloat16": (["rollout.dtype=bfloat16"], []),
    "rollout.log_mismatch (fp32)": (["rollout.log_mismatch=true"], []),
    "rollout.check_retokenize": ([], ["rollout.check_retokenize=false"]),
    "sampling=dynamic": (["sampling=dynamic"], []),
    "routing_replay=r2 (tiny_moe)": (["model=tiny_moe", "routing_replay=r2"], ["model=tiny_moe", "routing_replay=off"]),
    "routing_replay=r3 (tiny_moe)": (["model=tiny_moe", "routing_replay=r3"], ["model=tiny_moe", "routing_replay=off"]),
    # GAR scored at weight 0: the same training, plus the tournaments (arithmetic judge, 8 groups of 8 per generation).
    "reward arena (round robin)": (["reward=[correctness,format,arena]", "reward.arena.weight=0.0"], []),
    "reward arena (swiss 3 rounds)": (
        ["reward=[correctness,format,arena]", "reward.arena.weight=0.0", "reward.arena.scheme=swiss"],
        [],
    ),
    # GAR on the tool task (groups of 8 episodes), a local judge: the shorter episode wins (PYTHONPATH=. for tests).
    "reward arena on tool_calls (round robin)": (
        [*TOOL_TASK, "reward=[tool_steps,arena]", "reward.arena.weight=0.0", "train.allowed_targets=[tests]"]
        + ["reward/judge=callable", "reward.arena.judge.function=tests.rewards.test_arena.prefer_shorter"],
        TOOL_TASK,
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "align_kit"))
    parser.add_argument("--only", default=None, help="comma-separated pair names")
    args = parser.parse_args()

    base = base_overrides(args.cache_dir, args.steps)
    names = args.only.split(",") if args.only else list(PAIRS)
    for name in names:
        on, off = PAIRS[name]
        times = alternating({"on": ([*base, *on], build_align_kit), "off": ([*base, *off], build_align_kit)},
                            args.repeats, args.cache_dir)  # fmt: skip
        ratios = [a / b for a, b in zip(times["on"], times["off"], strict=True)]
        print(
            f"{name:30s} on/off median {statistics.median(ratios):.3f} "
            f"(range {min(ratios):.3f}-{max(ratios):.3f}; on {[round(t, 1) for t in times['on']]} s, "
            f"off {[round(t, 1) for t in times['off']]} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
