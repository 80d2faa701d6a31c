"""Held-out success rate of a task=tool_calls run: its warm-started policy against its last checkpoint.

Both are sampled the same way as the warm start's own measurement (temperature 1.0, the task's
held-out probe goals, torch seeded the same): the share of episodes whose calls equal the ground
truth, the mean step reward at the default weights and the share of call steps that failed. The training curve's own
`tools/success_rate` (first and last 10 generations) is printed beside them.

Run: PYTHONPATH=. .venv/bin/python benchmarks/tool_calls_success.py outputs/runs/<time> [--prompts 256]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def measure(folder: Path, task, prompts: int, budget: int, seed: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder, dtype="float32").eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    torch.manual_seed(seed)
    return task.warm_start_success_rate(model, tokenizer, prompts, budget)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    for run in args.runs:
        cfg = OmegaConf.load(run / "config.yaml")
        task = instantiate(cfg.task, _convert_="all")
        budget = int(cfg.trainer.max_completion_length)
        summary = json.loads((run / "summary.json").read_text())
        checkpoint = max(run.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
        start = measure(Path(summary["policy"]["cached_at"]), task, args.prompts, budget, args.seed)
        end = measure(checkpoint, task, args.prompts, budget, args.seed)
        lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        curve = [line["tools/success_rate"] for line in lines if "tools/success_rate" in line]
        print(
            f"{run}: held-out success {start['start_success_rate']:.3f} -> {end['start_success_rate']:.3f} "
            f"({checkpoint.name}), step reward {start['start_step_reward']:.3f} -> {end['start_step_reward']:.3f}, "
            f"failed steps {start['start_failed_step_share']:.3f} -> {end['start_failed_step_share']:.3f}; "
            f"training tools/success_rate first 10 {statistics.mean(curve[:10]):.3f}, "
            f"last 10 {statistics.mean(curve[-10:]):.3f} ({len(curve)} generations)",
            flush=True,
        )


if __name__ == "__main__":
    main()
