"""Alert calibration: the health monitor's false alarms on healthy runs and detection on failing ones.

Trains a labelled set of runs on the embedded default (each with `monitor=off`, so a run is never
cut short and keeps its whole metric history), then replays every run's `metrics.jsonl` through
the monitor as shipped (`conf/monitor/default.yaml`, built by `HealthMonitor.from_plan` from the
run's own overrides, as `align-kit train` builds it) and reports, per rule:

- healthy runs: how many got a `warn`/`halt` alert from it (a false alarm) and at which steps;
- failing runs: the first step it fired, and whether it is one of the rules whose advice fits the
  failure (the "fits" column of FAILING below).

Target: no warn/halt alert on the healthy set; every failing run flagged by a fitting rule.
Runs are kept under --out and reused when their summary.json exists, so the rules can be
re-evaluated without retraining (--evaluate-only). One run at a time, one thread each.

Run: python benchmarks/alert_calibration.py --out outputs/alert_calibration
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Every run: no W&B, no checkpoints (nothing here resumes), no monitor (replayed offline below).
COMMON = ["logger=none", "monitor=off", "trainer.save_strategy=no", "trainer.disable_tqdm=true"]


@dataclass(frozen=True)
class Case:
    name: str
    overrides: tuple[str, ...]
    fits: tuple[str, ...] = ()  # failing runs: the rules whose advice addresses the failure


# The advantage sweep's arms (sweeps/advantage.yaml; grpo is the default) over 3 seeds, 200 steps
# each, and the default with a KL penalty and with dynamic sampling (nodes whose metrics other rules
# read): 14 runs, about 2.5-3 minutes each on 2 shared cores.
HEALTHY = (
    *(
        Case(f"{arm}_s{seed}", (f"advantage={arm}", f"seed={seed}"))
        for seed in (0, 1, 2)
        for arm in ("grpo", "dr_grpo", "gdpo", "ngrpo")
    ),
    Case("kl_constant_s0", ("kl=constant",)),
    Case("dynamic_sampling_s0", ("sampling=dynamic",)),
)

FAILING = (
    # The design notes' probe: lr 1e-3 with 8 mini-steps per generation collapses the policy.
    Case(
        "lr_collapse",
        ("trainer.learning_rate=1e-3", "trainer.steps_per_generation=8", "trainer.max_steps=160"),
        # The rules whose advice is a lower learning rate or fewer updates (entropy_exploding's, first when few
        # completions are truncated).
        fits=(
            "policy_ratio_drift",
            "policy_ratio_noise",
            "clip_ratio_rising",
            "reward_decline",
            "non_finite",
            "entropy_exploding",
        ),
    ),
    # The Clip-Higher sweep's regime with the symmetric clip: no reward signal, only clipping's
    # bias, 16 mini-steps per generation; entropy collapses (policy-optimization chapter, 18.3.3).
    Case(
        "coin_flip_16_mini_steps",
        (
            "reward=[coin_flip]",
            "trainer.learning_rate=2e-3",
            "trainer.steps_per_generation=16",
            "trainer.per_device_train_batch_size=8",
            "trainer.max_steps=320",
        ),
        fits=("entropy_collapse", "entropy_drop", "entropy_decline"),
    ),
    # Completions need 20-22 tokens: a 12-token budget cuts every one of them.
    Case(
        "overlong_budget_12",
        ("trainer.max_completion_length=12", "trainer.max_steps=60"),
        fits=("length_near_max", "length_pinned"),
    ),
    # Only the format reward counts (correctness is still scored, with weight 0). A 10-step warm start
    # leaves the format unlearnt (format reward 0.05 at step 1), so the format can rise while
    # correctness stays flat: the reward collapse of the policy-optimization chapter, 18.3.2.
    Case(
        "format_only_reward",
        (
            "reward.correctness.weight=0",
            "reward.format.weight=1",
            "model.warm_start.steps=10",
            "trainer.learning_rate=2e-4",
            "trainer.max_steps=160",
        ),
        fits=("reward_collapse",),
    ),
)


def train(case: Case, out: Path, cache_dir: str) -> Path:
    folder = out / case.name
    if (folder / "summary.json").exists():
        return folder
    if folder.exists():  # an interrupted earlier attempt: this benchmark owns its run folders
        shutil.rmtree(folder)
    env = dict(os.environ, ALIGN_KIT_CACHE=cache_dir, OMP_NUM_THREADS="1", WANDB_SILENT="true")
    command = [sys.executable, "-m", "align_kit.train", *COMMON, *case.overrides, f"hydra.run.dir={folder}"]
    print(f"training {case.name}: {' '.join(case.overrides)}", flush=True)
    with (out / f"{case.name}.log").open("w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, env=env)
    return folder


def replay(case: Case, folder: Path) -> list[dict]:
    """The alerts the shipped monitor raises on this run's logged metrics, in logging order."""
    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan, reward_choice
    from align_kit.monitor import HealthMonitor
    from align_kit.tracking.metrics_file import read_metrics
    from align_kit.train import component_choices

    # The run's own overrides with the shipped monitor node: the monitor `align-kit train` would build.
    cfg = compose([*[o for o in COMMON if not o.startswith("monitor=")], *case.overrides])
    choices = {**component_choices(), "reward": reward_choice(cfg.reward.keys())}
    with tempfile.TemporaryDirectory() as scratch:
        monitor = HealthMonitor.from_plan(build_plan(cfg, choices, scratch))
    alerts = []
    for row in read_metrics(folder / "metrics.jsonl"):
        metrics = {key: value for key, value in row.items() if key != "step"}
        alerts += [json.loads(alert.to_json()) for alert in monitor.update(row["step"], metrics)]
    # The end of the run: level rules that never had `span` points judge on the points there are.
    alerts += [json.loads(alert.to_json()) for alert in monitor.finish()]
    return alerts


def evaluate(out: Path, cases: list[tuple[Case, bool]]) -> dict:
    from align_kit.monitor import RULES

    results = {"healthy": {}, "failing": {}}
    for case, healthy in cases:
        alerts = replay(case, out / case.name)
        shown = [a for a in alerts if a["action"] in ("warn", "halt")]
        if healthy:
            results["healthy"][case.name] = [(a["step"], a["rule"], a["action"]) for a in shown]
        else:
            first: dict[str, int] = {}
            for alert in shown:
                first.setdefault(alert["rule"], alert["step"])
            fitting = {rule: step for rule, step in first.items() if rule in case.fits}
            results["failing"][case.name] = {
                "first_alert_per_rule": first,
                "flagged_by_fitting_rule": bool(fitting),
                "first_fitting": min(fitting.items(), key=lambda item: item[1]) if fitting else None,
                "fits": list(case.fits),
            }
    per_rule = {}
    for rule in (r.name for r in RULES):
        false_alarms = {name: [s for s, r, _ in hits if r == rule] for name, hits in results["healthy"].items()}
        per_rule[rule] = {
            "false_alarm_runs": sum(1 for steps in false_alarms.values() if steps),
            "false_alarm_steps": {name: steps for name, steps in false_alarms.items() if steps},
            "detection_step": {
                name: found["first_alert_per_rule"][rule]
                for name, found in results["failing"].items()
                if rule in found["first_alert_per_rule"]
            },
        }
    results["per_rule"] = per_rule
    return results


def print_report(results: dict, healthy_count: int) -> None:
    print(f"\nper rule: false alarms on {healthy_count} healthy runs | first warn/halt step on each failing run")
    failing = list(results["failing"])
    print(f"{'rule':24s} {'false alarms':>12s}  " + "  ".join(f"{name:>24s}" for name in failing))
    for rule, row in results["per_rule"].items():
        cells = []
        for name in failing:
            step = row["detection_step"].get(name)
            fit = "*" if rule in results["failing"][name]["fits"] else " "
            cells.append(f"{('-' if step is None else str(step)) + fit:>24s}")
        print(f"{rule:24s} {row['false_alarm_runs']:>7d}/{healthy_count:<4d}  " + "  ".join(cells))
    print("(* = a rule whose advice fits that failure)")
    for name, found in results["failing"].items():
        verdict = f"flagged by {found['first_fitting'][0]} at step {found['first_fitting'][1]}" if found[
            "first_fitting"] else "NOT flagged by a fitting rule"  # fmt: skip
        print(f"  {name}: {verdict}")
    noisy = {name: hits for name, hits in results["healthy"].items() if hits}
    print(f"healthy runs with a warn/halt alert: {len(noisy)}/{healthy_count}" + "".join(
        f"\n  {name}: {hits}" for name, hits in noisy.items()))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/alert_calibration", type=Path)
    parser.add_argument("--cache-dir", default=os.environ.get("ALIGN_KIT_CACHE", str(Path.home() / ".cache/align_kit")))
    parser.add_argument("--only", nargs="*", help="case names to train/evaluate (default: all)")
    parser.add_argument("--evaluate-only", action="store_true", help="replay the runs already under --out")
    args = parser.parse_args()

    cases = [(case, True) for case in HEALTHY] + [(case, False) for case in FAILING]
    if args.only:
        cases = [(case, healthy) for case, healthy in cases if case.name in args.only]
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.evaluate_only:
        for case, _ in sorted(cases, key=lambda pair: pair[1]):  # failing runs first: the uncertain ones
            train(case, args.out, args.cache_dir)
    cases = [(case, healthy) for case, healthy in cases if (args.out / case.name / "metrics.jsonl").exists()]
    results = evaluate(args.out, cases)
    (args.out / "calibration.json").write_text(json.dumps(results, indent=2))
    print_report(results, sum(1 for _, healthy in cases if healthy))


if __name__ == "__main__":
    main()
