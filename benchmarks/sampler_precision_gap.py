"""The sampler/trainer gap per sampler precision, before any update (rollout.dtype, rollout.quantization).

For each model and seed, one trainer per sampler setting samples completions of the task's prompts (the same
prompts and torch seed for every setting) and scores them, through the trainer's own path
(`_generate_and_score_completions`): `mismatch/*` is the sampler's recorded log-probs against the fp32 trainer's, and
on an MoE `routing/sampler_gap` (share of completion (token, layer) router choices that differ) and
`routing/sampler_gap_tokens` (share of completion tokens differing in some layer), as routing_replay=off logs them.
fp32 is the control (rollout.log_mismatch=true: an fp32 sampler, only KV-cache rounding differs).

Models: tiny (dense: mismatch only), tiny_moe (the default warm start), sweep_moe (sweeps/routing_replay.yaml's
MoE: 8 layers, 32 experts, top-4, 900-step warm start). Warm starts come from the cache as training gets them.
Prints mean and sample sd over seeds per (model, sampler), and the machine load.

Run: .venv/bin/python benchmarks/sampler_precision_gap.py --models tiny,tiny_moe,sweep_moe --seeds 1,2,3
Other MoE variants by overrides: --variant 'NAME:model=tiny_moe model.num_layers=8 ...' --models NAME
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = {
    "tiny": ["model=tiny"],
    "tiny_moe": ["model=tiny_moe"],
    "sweep_moe": [
        "model=tiny_moe",
        "model.num_layers=8",
        "model.num_experts=32",
        "model.experts_per_token=4",
        "model.warm_start.steps=900",
    ],
}
BF16 = ["rollout.dtype=bfloat16"]
SAMPLERS = {
    "fp32": ["rollout.log_mismatch=true"],
    "bf16": BF16,
    "fp8 channel": [*BF16, "rollout.quantization=fp8", "rollout.quant_scale=channel"],
    "fp8 tensor": [*BF16, "rollout.quantization=fp8", "rollout.quant_scale=tensor"],
    "int8 channel": [*BF16, "rollout.quantization=int8", "rollout.quant_scale=channel"],
    "fp8 channel +router": [*BF16, "rollout.quantization=fp8", "rollout.quantize_router=true"],
    "fp8 tensor +router": [*BF16, "rollout.quantization=fp8", "rollout.quant_scale=tensor",
                           "rollout.quantize_router=true"],
    "int8 channel +router": [*BF16, "rollout.quantization=int8", "rollout.quantize_router=true"],
}  # fmt: skip
METRICS = ("mismatch/logp_abs_diff/mean", "mismatch/logp_abs_diff/max", "mismatch/kl")
ROUTING = ("routing/sampler_gap", "routing/sampler_gap_tokens")


def measure(model: str, sampler: str, seed: int, prompts: int, cache_dir: str) -> dict[str, float]:
    """One generation batch on fresh weights: the trainer's own metrics for it."""
    import torch

    from align_kit.experiment.build_trainer import build_trainer
    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan
    from align_kit.train import component_choices

    overrides = [f"paths.cache_dir={cache_dir}", "logger=none", f"seed={seed}", *MODELS[model], *SAMPLERS[sampler]]
    with tempfile.TemporaryDirectory() as scratch:
        plan = build_plan(compose(overrides), component_choices(), f"{scratch}/run")
        correctness = next((spec.func for spec in plan.rewards if spec.name == "correctness"), None)
        policy = plan.model.load(plan.task, cache_dir, correctness, plan.effective("max_completion_length"))
        trainer = build_trainer(plan, policy.model, policy.tokenizer)
        trainer.model.train()  # as in training: the sampler copy is in eval mode, the policy is not
        trainer.current_gradient_accumulation_steps = 1
        start = (seed - 1) * prompts  # other prompts per seed, the same ones for every sampler
        rows = [dict(trainer.train_dataset[i]) for i in range(start, start + prompts)]
        rows = [row for row in rows for _ in range(trainer.num_generations)]  # as TRL's sampler repeats them
        torch.manual_seed(seed)
        trainer._generate_and_score_completions(rows)
        trainer.flush_metrics()
        logged = trainer._metrics["train"]
        return {name: float(logged[name][0]) for name in (*METRICS, *ROUTING) if name in logged}


def spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.3g}"
    return f"{statistics.mean(values):.3g} ± {statistics.stdev(values):.2g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="tiny,tiny_moe,sweep_moe")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:OVERRIDES",
        help="another model, as NAME:space-separated overrides (e.g. 'moe8:model=tiny_moe model.num_layers=8'); "
        "repeatable, then name it in --models",
    )
    parser.add_argument("--samplers", default=",".join(SAMPLERS), help="comma-separated names from SAMPLERS")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--prompts", type=int, default=8, help="prompts per seed (x num_generations completions)")
    parser.add_argument("--cache-dir", default=os.environ.get("ALIGN_KIT_CACHE", str(Path.home() / ".cache/align_kit")))
    args = parser.parse_args()
    for variant in args.variant:
        name, _, overrides = variant.partition(":")
        if not overrides.split():
            sys.exit(f"--variant {variant!r}: give NAME:OVERRIDES")
        MODELS[name] = overrides.split()
    models, samplers = args.models.split(","), args.samplers.split(",")
    seeds = [int(seed) for seed in args.seeds.split(",")]
    unknown = [name for name in models if name not in MODELS] + [name for name in samplers if name not in SAMPLERS]
    if unknown:
        sys.exit(f"unknown model or sampler: {', '.join(unknown)} (models {list(MODELS)}, samplers {list(SAMPLERS)})")

    print(f"load before: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    started = time.time()
    header = ["model", "sampler", "logp gap mean", "logp gap max", "mismatch/kl", "sampler_gap", "sampler_gap_tokens"]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for model in models:
        for sampler in samplers:
            if "model=tiny" in MODELS[model] and "router" in sampler:
                continue  # a dense model has no router
            runs = [measure(model, sampler, seed, args.prompts, args.cache_dir) for seed in seeds]
            cells = [spread([run[name] for run in runs]) if name in runs[0] else "-" for name in (*METRICS, *ROUTING)]
            print(f"| {model} | {sampler} | " + " | ".join(cells) + " |", flush=True)
    print(f"\n{len(seeds)} seeds ({args.seeds}) x {args.prompts} prompts x num_generations completions each; "
          f"mean ± sample sd over seeds; {time.time() - started:.0f} s")  # fmt: skip
    print(f"load after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
