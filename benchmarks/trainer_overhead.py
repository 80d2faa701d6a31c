"""Overhead of align_kit over plain TRL, measured so that the number means something.

Both arms train the same plan (the tiny model, the same GRPOConfig, rewards, data and seed) at a learning rate
so small (`--learning-rate`, 1e-12: below float32's resolution of the weights) that neither policy moves: both
sample the same completions at every step, which the benchmark checks (it records TRL's completion ids in both
arms and compares them), so the step-time ratio is align_kit's own cost and not the noise of two trajectories.

1. Step time, align_kit / TRL: median and range over alternating repeats (target <= 1.03), in process CPU time
   (what the step computes: on a shared machine wall time mostly measures the other processes; one torch thread
   by default, `--threads`, since spinning threads inflate CPU time there too) and wall time (the figure on a
   quiet machine).
2. align_kit's own work per phase, timed inside the align_kit arm by wrappers this script installs (the product
   code has no timers): each hook's methods (the default-on measurements: TrainingMetrics' health metrics, the
   re-tokenization check, routing drift), the reading and gathering of their metrics once per log
   (AlignTrainer.flush_metrics), the metrics file, the monitor's rules, the dashboard; in the main thread's CPU
   time, per step and as a share of TRL's step (CPU time). What is left
   (align_kit step - TRL step - the phases) is the trainer's own plumbing plus noise.
3. Routing drift only runs on an MoE policy (on the dense default it attaches nothing): priced on model=tiny_moe,
   against TRL on the same model (`--moe-repeats 0` skips it).
4. Start-up: wall time of `align-kit train --cfg job` vs `python -c "from trl import GRPOTrainer"`.

Measured (24 steps x 4 alternating repeats, one thread, 2 shared cores at load average 1.5-1.9): completions
identical in both arms; step-time ratio median 0.993 (range 0.945-1.014); align_kit's phases 2.3 ms of TRL's
330 ms step (0.7 %): re-tokenization check 0.22 % + 0.02 % gathering, training metrics 0.19 % + 0.09 %, metrics
file 0.07 %, rules 0.05 %, printing 0.02 %, dashboard 0.01 %. On tiny_moe routing drift 0.89 % + 0.06 %
(1.29 % before it was sampled on every other generation); that ratio, over 2 repeats, 1.108 (range 1.01-1.20).

Run: PYTHONPATH=. .venv/bin/python benchmarks/trainer_overhead.py --steps 40 --repeats 4
     PYTHONPATH=. .venv/bin/python benchmarks/trainer_overhead.py --quick     (a few steps: the script works)
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from timing import alternating, base_overrides, build_align_kit, build_trl
from trl import GRPOTrainer

from align_kit.components.retokenize import RetokenizeCheck
from align_kit.components.router_capture import RouterHooks
from align_kit.components.routing_replay import RouteReplay
from align_kit.components.training_metrics import TrainingMetrics
from align_kit.monitor.callback import HealthMonitorCallback
from align_kit.monitor.dashboard import Dashboard
from align_kit.monitor.rules import HealthMonitor
from align_kit.monitor.samples import SampleBook, SampleRecorder
from align_kit.tracking.metrics_file import MetricsFileCallback
from align_kit.trainer import AlignTrainer

HOOK_METHODS = ("on_rewards", "on_scored_batch", "on_train_batch", "on_loss", "on_step_end", "loss_terms")
HOOK_CONTEXTS = ("generation", "forward")  # context managers: their entry and exit are timed
MEASUREMENTS = {TrainingMetrics: "training metrics", RetokenizeCheck: "re-tokenization check",
                RouteReplay: "routing drift", SampleRecorder: "alert samples"}  # fmt: skip


CALLBACK = "the monitor's callback"


class Phases:
    """Seconds spent in align_kit's phases, by label; installed once per process on the classes."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.active = False  # only the timed arm's calls count

    def add(self, label: str, started: float) -> None:
        if self.active:
            self.seconds[label] += time.thread_time() - started

    def wrap(self, owner: type, name: str, label: str, *, context: bool = False) -> None:
        original = getattr(owner, name)
        phases = self

        def timed(*args, **kwargs):
            started = time.thread_time()
            try:
                result = original(*args, **kwargs)
            finally:
                phases.add(label, started)
            return _TimedContext(result, phases, label) if context else result

        setattr(owner, name, timed)

    def install(self) -> None:
        for hook_class, label in MEASUREMENTS.items():
            for name in HOOK_METHODS:
                if name in hook_class.__dict__:
                    self.wrap(hook_class, name, label)
            for name in HOOK_CONTEXTS:
                if name in hook_class.__dict__:
                    self.wrap(hook_class, name, label, context=True)
        # The routers' own forward hooks, registered when RouteReplay attaches (before any trainer is built here).
        for name in ("_open_forward", "_close_forward"):
            self.wrap(RouterHooks, name, "routing drift")
        original_router_hook = RouterHooks._router_hook
        phases = self

        def router_hook(hooks, index, family):
            inner = original_router_hook(hooks, index, family)

            def timed(*args, **kwargs):
                started = time.thread_time()
                try:
                    return inner(*args, **kwargs)
                finally:
                    phases.add("routing drift", started)

            return timed

        RouterHooks._router_hook = router_hook
        # The hooks' metrics are read from the device and gathered once per log (AlignTrainer.flush_metrics).
        self.wrap(AlignTrainer, "flush_metrics", "hook metrics: read and gathered per log")
        self.wrap(MetricsFileCallback, "on_log", "metrics file")
        self.wrap(HealthMonitor, "update", "monitor rules")
        self.wrap(Dashboard, "update", "dashboard")
        self.wrap(HealthMonitorCallback, "on_log", CALLBACK)
        self.wrap(HealthMonitorCallback, "on_step_end", CALLBACK)
        self.wrap(SampleBook, "on_alert", "alert samples: files")
        self.wrap(SampleBook, "on_step", "alert samples: files")


class _TimedContext(contextlib.AbstractContextManager):
    def __init__(self, inner, phases: Phases, label: str):
        self.inner, self.phases, self.label = inner, phases, label

    def __enter__(self):
        started = time.thread_time()
        try:
            return self.inner.__enter__()
        finally:
            self.phases.add(self.label, started)

    def __exit__(self, *exc):
        started = time.thread_time()
        try:
            return self.inner.__exit__(*exc)
        finally:
            self.phases.add(self.label, started)


class Completions:
    """TRL's sampled completion ids per generation, per arm and repeat (both arms go through TRL's method)."""

    def __init__(self):
        self.runs: dict[str, list[list]] = defaultdict(list)
        self.arm: str | None = None
        original = GRPOTrainer._generate_and_score_completions
        completions = self

        def recorded(trainer, inputs):
            batch = original(trainer, inputs)
            completions.runs[completions.arm][-1].append(batch["completion_ids"].clone())
            return batch

        GRPOTrainer._generate_and_score_completions = recorded

    def builder(self, arm: str, build, phases: Phases | None = None):
        def build_arm(plan, cache_dir, scratch):
            self.arm = arm
            self.runs[arm].append([])
            if phases is not None:
                phases.active = arm == "align_kit"
            return build(plan, cache_dir, scratch)

        return build_arm

    def first_difference(self, arm: str, other: str) -> str | None:
        """Where two arms' samples first differ (every repeat of each against the first of `arm`), or None."""
        reference = self.runs[arm][0]
        for name in (arm, other):
            for repeat, run in enumerate(self.runs[name]):
                for index, (ours, theirs) in enumerate(zip(reference, run, strict=True)):
                    if ours.shape != theirs.shape or not bool((ours == theirs).all()):
                        return f"{name} repeat {repeat + 1}, generation {index + 1}"
        return None


def time_command(command: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def compare(label: str, overrides: list[str], steps: int, repeats: int, cache_dir: str, phases: Phases) -> None:
    """Alternating align_kit / TRL repeats on `overrides`: the ratio, the completions check, the phases."""
    completions = Completions.current
    completions.runs.clear()
    phases.seconds.clear()
    arms = {
        "align_kit": (overrides, completions.builder("align_kit", build_align_kit, phases)),
        "trl": (overrides, completions.builder("trl", build_trl, phases)),
    }
    clocks = alternating(arms, repeats, cache_dir, clock=lambda: np.array([time.process_time(), time.perf_counter()]))
    cpu = {arm: [float(reading[0]) for reading in readings] for arm, readings in clocks.items()}
    wall = {arm: [float(reading[1]) for reading in readings] for arm, readings in clocks.items()}
    trl_step = statistics.median(cpu["trl"]) / steps
    align_step = statistics.median(cpu["align_kit"]) / steps
    difference = completions.first_difference("align_kit", "trl")
    generations = len(completions.runs["trl"][0])
    print(f"\n== {label}: {steps} steps x {repeats} alternating repeats (load {load()})")
    same = "identical in both arms and every repeat" if difference is None else f"DIFFER at {difference}"
    print(f"sampled completions: {same} ({generations} generations each)")
    for name, times in (("CPU", cpu), ("wall", wall)):
        ratios = [a / b for a, b in zip(times["align_kit"], times["trl"], strict=True)]
        ours, theirs = ([round(t, 2) for t in times[arm]] for arm in ("align_kit", "trl"))
        print(f"{name} time per step: align_kit {1e3 * statistics.median(times['align_kit']) / steps:.1f} ms, TRL "
              f"{1e3 * statistics.median(times['trl']) / steps:.1f} ms (medians); ratio align_kit/TRL median "
              f"{statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f} (target <= 1.03); "
              f"align_kit {ours} s, TRL {theirs} s")  # fmt: skip
    total_steps = steps * repeats
    print(f"align_kit's own work per step (CPU), as a share of TRL's step ({1e3 * trl_step:.1f} ms CPU):")
    spent = dict(phases.seconds)
    # The callback's time holds the rules', the dashboard's and the sample files': what remains is its printing and
    # alert writing.
    callback = spent.pop(CALLBACK, 0.0)
    inside = ("monitor rules", "dashboard", "alert samples: files")
    spent["monitor: printing, alerts"] = callback - sum(spent.get(name, 0.0) for name in inside)
    for name, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        per_step = seconds / total_steps
        print(f"  {name:52s} {1e3 * per_step:8.3f} ms  {100 * per_step / trl_step:6.2f} %")
    print(f"  {'(align_kit step - TRL step: everything above + plumbing + noise)':52s} "
          f"{1e3 * (align_step - trl_step):8.3f} ms  {100 * (align_step - trl_step) / trl_step:6.2f} %")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--moe-repeats", type=int, default=2, help="repeats of the tiny_moe comparison (0: skip)")
    parser.add_argument("--startup-repeats", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=1e-12, help="small enough that no policy moves")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads; 1: CPU time counts the work alone (threads that spin "
        "waiting for a descheduled peer inflated it 3x on a shared machine); 0: torch's default"
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="4 steps, 2 repeats, 1 MoE repeat, 1 start-up repeat")
    parser.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "align_kit"))
    parser.add_argument(
        "--override", action="append", default=[], help="extra Hydra override for both trainers (repeatable), "
        "e.g. --override rollout=vllm --override trainer.use_cpu=false on a GPU"
    )  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeats, args.moe_repeats, args.startup_repeats = 4, 2, 1, 1

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"load average at start: {load()}; torch threads: {torch.get_num_threads()}")
    align_kit_cli = str(Path(sys.executable).with_name("align-kit"))
    cfg_times = time_command([align_kit_cli, "train", "--cfg", "job"], args.startup_repeats)
    trl_times = time_command([sys.executable, "-c", "from trl import GRPOTrainer"], args.startup_repeats)
    print(f"align-kit train --cfg job: median {statistics.median(cfg_times):.2f} s  {[round(t, 2) for t in cfg_times]}")
    print(
        f"from trl import GRPOTrainer: median {statistics.median(trl_times):.2f} s  {[round(t, 2) for t in trl_times]}"
    )

    phases = Phases()
    phases.install()
    Completions.current = Completions()
    base = [*base_overrides(args.cache_dir, args.steps), f"trainer.learning_rate={args.learning_rate}", *args.override]
    title = f"with {' '.join(args.override)}" if args.override else "the default composition (model=tiny)"
    compare(title, base, args.steps, args.repeats, args.cache_dir, phases)
    if args.moe_repeats:
        moe = [*base, "model=tiny_moe"]
        compare("model=tiny_moe (routing drift measured)", moe, args.steps, args.moe_repeats, args.cache_dir, phases)
    print(f"\nload average at the end: {load()}")


if __name__ == "__main__":
    main()
