"""Clip-Higher on SmolLM2 (sweeps/clip_higher_real_model.yaml), one seed-arm at a time, resumable: trains each
(seed, eps_high) through `align-kit train sweep=clip_higher_real_model` into its own folder under --runs, then
measures greedy held-out accuracy of the final checkpoint (and once of the untrained model) on the sweep's task mix,
and writes one JSON per run to --out with that accuracy and the run's engagement by generation (the upper bound's
shares, entropy and its covariance with the advantage, the share of completions cut at the budget).

A result JSON already in --out is skipped; a finished run folder (its summary.json) is evaluated, not retrained; an
unfinished one is refused (remove it or resume it with `align-kit train ... --resume`), never overwritten. Run one
at a time (each training takes one core):
    OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python benchmarks/real_model_clip_higher.py --seeds 1 --eps-high 0.2 0.28 \
        --runs outputs/clip_higher_real_model/tune --out docs/real_model/clip_higher
Needs `make install-real-model`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf

from align_kit.core.run_files import METRICS_FILE, SUMMARY_FILE, latest_checkpoint
from benchmarks.real_model_grpo import accuracy, load

SWEEP = "sweep=clip_higher_real_model"
# Engagement metrics, read per optimizer step (TRL's and align_kit/components/clip.py's names).
ENGAGEMENT = (
    "rewards/correctness/mean",
    "completions/clipped_ratio",
    "entropy",
    "entropy/cov_logp_adv",
    "clip_ratio/high_mean",
    "clip/upper_bound_low_prob",
    "clip/upper_bound_high_prob",
    "clip/low_prob_per_positive",
    "policy_ratio/abs_dev",
)
OFF_POLICY = ("clip_ratio/high_mean", "clip/upper_bound_low_prob", "clip/upper_bound_high_prob", "policy_ratio/abs_dev")


def held_out_rows(config_file: Path, items: int) -> list[dict]:
    """The task of the run's config, with `items` held-out rows (other generator seeds than training's)."""
    from align_kit.tasks.reasoning_gym import ReasoningGymTask

    task = OmegaConf.to_container(OmegaConf.load(config_file).task, resolve=True)
    task.pop("_target_")
    return ReasoningGymTask(**{**task, "num_eval": items}).rows("eval")


def held_out(folder: str, rows: list[dict], args) -> dict:
    """Greedy accuracy per domain (each domain's rows scored apart) and over all rows."""
    started = time.time()
    domains = {
        domain: [row for row in rows if row["domain"] == domain] for domain in sorted({r["domain"] for r in rows})
    }
    result = {domain: accuracy(folder, part, args) for domain, part in domains.items()}
    overall = sum(result[domain]["accuracy"] * len(part) for domain, part in domains.items()) / len(rows)
    return {"accuracy": overall, "items": len(rows), "by_domain": result, "seconds": round(time.time() - started, 1)}


def base_model() -> str:
    """The untrained model: the converted GGUF in the default cache (the one the runs load)."""
    from align_kit.models.gguf import ensure_converted
    from align_kit.models.smollm2 import SmolLM2

    cache = os.environ.get("ALIGN_KIT_CACHE", str(Path.home() / ".cache" / "align_kit"))
    node = SmolLM2()
    node.validate()  # fills in the installed wheel's folder
    return str(ensure_converted(node.gguf_path(), cache))


def by_generation(run_dir: Path, steps_per_generation: int) -> list[dict]:
    """Each engagement metric per generation: its mean over the generation's steps that logged it (the bound's
    shares over the off-policy ones; a share is logged only with positive-advantage tokens), entropy as first -> last
    step."""
    rows = [json.loads(line) for line in (run_dir / METRICS_FILE).read_text().splitlines() if line.strip()]
    steps = sorted((row for row in rows if "entropy" in row and "step" in row), key=lambda row: row["step"])
    generations = []
    for start in range(0, len(steps), steps_per_generation):
        chunk = steps[start : start + steps_per_generation]
        summary = {
            "steps": [chunk[0]["step"], chunk[-1]["step"]],
            "entropy_first_last": [chunk[0]["entropy"], chunk[-1]["entropy"]],
        }
        for key in ENGAGEMENT:
            # The first step of a generation is on-policy (every ratio 1): the bound's shares are over the others.
            rows_for = chunk[1:] if key in OFF_POLICY else chunk
            values = [row[key] for row in rows_for if isinstance(row.get(key), (int, float))]
            summary[key] = round(statistics.fmean(values), 4) if values else None
        generations.append(summary)
    return generations


def report(out: Path) -> None:
    """The engagement table of every result in `out`, one row per run and generation, and held-out accuracy."""
    columns = ("rewards/correctness/mean", "completions/clipped_ratio", "entropy/cov_logp_adv", "clip_ratio/high_mean")
    columns += ("clip/upper_bound_low_prob", "clip/upper_bound_high_prob", "policy_ratio/abs_dev")
    print("| run | steps | entropy first -> last | " + " | ".join(f"`{c}`" for c in columns) + " |")
    print("|---" * (len(columns) + 3) + "|")
    results = [json.loads(path.read_text()) for path in sorted(out.glob("eps*_seed*.json"))]
    for result in sorted(results, key=lambda r: (r["seed"], r["eps_high"])):
        for gen in result["generations"]:
            cells = ["-" if gen[c] is None else f"{gen[c]:.3f}" for c in columns]
            first, last = gen["entropy_first_last"]
            run = f"eps_high {result['eps_high']}, seed {result['seed']}"
            print(
                f"| {run} | {gen['steps'][0]}-{gen['steps'][1]} | {first:.2f} -> {last:.2f} | "
                + " | ".join(cells)
                + " |"
            )
    for result in results:
        after = result["held_out_after"]
        domains = ", ".join(f"{d} {a['accuracy']:.3f}" for d, a in after["by_domain"].items())
        print(
            f"eps_high {result['eps_high']} seed {result['seed']}: held-out {result['held_out_before']:.3f} -> "
            f"{after['accuracy']:.3f} ({domains}; {after['items']} items), wall {result['wall_seconds']} s, "
            f"load {result['load_at_start']} -> {result['load_at_end']}"
        )
    print(held_out_difference(results))


def held_out_difference(results: list[dict], baseline: float = 0.2) -> str:
    """Held-out accuracy after training, each other arm against `baseline`: the difference of the arms' means with
    compare's Welch standard error, and the paired seeds where the arm was not lower (the committed "not lower")."""
    arms: dict[float, dict[int, float]] = {}
    for result in results:
        arms.setdefault(result["eps_high"], {})[result["seed"]] = result["held_out_after"]["accuracy"]
    base, lines = arms.get(baseline, {}), []
    for eps_high, arm in sorted(arms.items()):
        if eps_high == baseline or len(arm) < 2 or len(base) < 2:
            continue
        se = (statistics.variance(arm.values()) / len(arm) + statistics.variance(base.values()) / len(base)) ** 0.5
        delta = statistics.fmean(arm.values()) - statistics.fmean(base.values())
        paired = [seed for seed in arm if seed in base]
        not_lower = sum(arm[seed] >= base[seed] for seed in paired)
        lines.append(
            f"held-out accuracy, eps_high {eps_high} vs {baseline}: {delta:+.3f} ± {se:.3f} (Welch SE), "
            f"not lower in {not_lower}/{len(paired)} paired seeds"
        )
    return "\n".join(lines)


def train(seed: int, eps_high: float, run_dir: Path, args) -> float:
    overrides = [SWEEP, f"clip.eps_high={eps_high}", f"seed={seed}", "logger=none", "trainer.disable_tqdm=true"]
    started = time.time()
    with open(run_dir.parent / f"{run_dir.name}.log", "w") as log:
        code = subprocess.run(
            [sys.executable, "-m", "align_kit.cli", "train", *overrides, *args.override, f"hydra.run.dir={run_dir}"],
            stdout=log, stderr=subprocess.STDOUT,
        ).returncode  # fmt: skip
    if code != 0:
        raise SystemExit(f"training {run_dir} exited {code}: see {run_dir}.log")
    return round(time.time() - started, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[])
    parser.add_argument("--eps-high", type=float, nargs="+", default=[0.2, 0.28], help="arms, run in this order")
    parser.add_argument("--eval-items", type=int, default=32, help="held-out items, split evenly over the datasets")
    parser.add_argument("--max-tokens", type=int, default=64, help="greedy budget of the held-out answers")
    parser.add_argument("--override", action="append", default=[], help="an extra train override (repeatable)")
    parser.add_argument("--report", action="store_true", help="only print the tables of the results in --out")
    parser.add_argument(
        "--runs",
        default="outputs/clip_higher_real_model",
        help="the run folders (checkpoints are 0.5 GB: outside the docs)",
    )
    parser.add_argument("--out", required=True, help="one JSON per run, and before.json")
    args = parser.parse_args()
    args.extract = "last_number"  # the sweep's reward.correctness.extract
    out, runs = Path(args.out), Path(args.runs)
    if args.report:
        report(out)
        return
    if not args.seeds:
        parser.error("--seeds: name the seeds to run (or --report to print the results in --out)")
    out.mkdir(parents=True, exist_ok=True)
    runs.mkdir(parents=True, exist_ok=True)
    planned = [(seed, eps_high, f"eps{eps_high}_seed{seed}") for seed in args.seeds for eps_high in args.eps_high]
    for _, _, name in planned:  # checked before anything trains
        if (
            (runs / name).exists()
            and not (runs / name / SUMMARY_FILE).is_file()
            and not (out / f"{name}.json").is_file()
        ):
            print(
                f"{runs / name} holds an unfinished run: resume it or remove it, then run this again", file=sys.stderr
            )
            raise SystemExit(2)
    for seed, eps_high, name in planned:
        result_file, run_dir = out / f"{name}.json", runs / name
        if result_file.is_file():
            continue
        load_before = load()
        wall = None if run_dir.exists() else train(seed, eps_high, run_dir, args)
        rows = held_out_rows(run_dir / "config.yaml", args.eval_items)
        before_file = out / "before.json"
        if not before_file.is_file():
            before_file.write_text(json.dumps({"load": load(), **held_out(base_model(), rows, args)}, indent=2))
        config = OmegaConf.load(run_dir / "config.yaml")
        result = {
            "seed": seed,
            "eps_high": eps_high,
            "run_dir": str(run_dir),
            "overrides": [SWEEP, *args.override],
            "load_at_start": load_before,
            "wall_seconds": wall,
            "held_out_before": json.loads(before_file.read_text())["accuracy"],
            "held_out_after": held_out(str(latest_checkpoint(run_dir)), rows, args),
            "load_at_end": load(),
            "generations": by_generation(run_dir, config.trainer.steps_per_generation * config.trainer.num_iterations),
        }
        result_file.write_text(json.dumps(result, indent=2))
        print(json.dumps({k: result[k] for k in ("seed", "eps_high", "wall_seconds", "held_out_after")}), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
