"""A run folder's logged series, kept small enough to commit: the named metrics at the steps that logged them, with
the run's choices, seed, steps and wall time. Used for long runs whose folders (checkpoints, every metric) stay out
of git, e.g. sweeps/routing_replay_horizon.yaml's, whose reward is logged once per generation.

Run: python benchmarks/run_series.py RUN_DIR OUT.json [--keys reward entropy ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

KEYS = ("reward", "rewards/correctness/mean", "entropy", "routing/sampler_gap", "mismatch/kl", "policy_ratio/abs_dev")


def series(run: Path, keys) -> dict:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    summary = json.loads((run / "summary.json").read_text())
    return {
        "run": str(run),
        "choices": summary["choices"],
        "seed": summary["seed"],
        "steps": summary["steps"],
        "wall_seconds": round(summary["wall_seconds"], 1),
        "series": {key: [[row["step"], row[key]] for row in rows if row.get(key) is not None] for key in keys},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--keys", nargs="+", default=list(KEYS))
    args = parser.parse_args()
    args.out.write_text(json.dumps(series(args.run, args.keys), indent=1))


if __name__ == "__main__":
    main()
