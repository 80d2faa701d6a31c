"""Wall time of one reproduction sweep with the parallel local launcher vs one job at a time.

Runs `align-kit sweep NAME` twice into fresh folders: once with `hydra/launcher=joblib hydra.launcher.n_jobs=N`
(each job ALIGN_KIT_JOB_THREADS = cores // N threads, as `align-kit sweep` chooses on an idle machine) and once
with `hydra/launcher=basic` (every core for the one running job), alternating which goes first over --repeats.
Both sweeps must finish with every job ok; the script prints each wall time, the median speed-up (goal >= 1.6x on
2 cores) and checks that the two sweeps' runs logged the same steps.

Reduced by default so it fits in minutes: --steps and --seeds shorten the sweep (the full clip_higher sweep is 15 jobs
of 480 steps). A timing is only worth reporting from an otherwise idle machine: the script prints the load average
before and after and refuses to claim anything when the machine was busy.

  python benchmarks/sweep_launchers.py --sweep clip_higher --steps 480 --seeds 1,2,3,4,5     # the full sweep
  python benchmarks/sweep_launchers.py --sweep clip_higher --steps 60 --seeds 1,2 --repeats 2  # reduced
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

THREADS_ENV = "ALIGN_KIT_JOB_THREADS"


def cores() -> int:
    return len(os.sched_getaffinity(0))


def run_sweep(sweep: str, folder: Path, launcher: list[str], common: list[str], threads: int) -> float:
    env = dict(os.environ, WANDB_SILENT="true", OMP_NUM_THREADS=str(threads), **{THREADS_ENV: str(threads)})
    command = [sys.executable, "-m", "align_kit.cli", "train", "-m", f"sweep={sweep}", *launcher, *common]
    started = time.perf_counter()
    result = subprocess.run([*command, f"hydra.sweep.dir={folder}"], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"sweep failed ({' '.join(launcher)}):\n{result.stderr[-3000:]}")
    jobs = json.loads((folder / "sweep_manifest.json").read_text())["jobs"]
    failed = [job["job"] for job in jobs if job.get("outcome") != "ok"]
    if failed:
        sys.exit(f"jobs {failed} did not finish ok in {folder}")
    return elapsed


def steps_logged(folder: Path) -> dict[str, int]:
    return {
        job.name: json.loads((job / "summary.json").read_text())["steps"]
        for job in sorted(folder.iterdir())
        if (job / "summary.json").is_file()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", default="clip_higher")
    parser.add_argument("--steps", type=int, default=60, help="trainer.max_steps per job (the sweep's own: 0)")
    parser.add_argument("--seeds", default="1,2", help="seed=... for the sweep (the sweep's own: empty)")
    parser.add_argument("--jobs-at-once", type=int, default=cores())
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("extra", nargs="*", help="more overrides for every job, e.g. clip.eps_high=0.2,0.28")
    parser.add_argument("--out", type=Path, default=None, help="keep the sweep folders here (default: a temp folder)")
    args = parser.parse_args()

    common = ["logger=none", "trainer.disable_tqdm=true", "trainer.save_strategy=no"]
    common += [f"trainer.max_steps={args.steps}"] if args.steps else []
    common += [f"seed={args.seeds}"] if args.seeds else []
    common += args.extra
    parallel = ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={args.jobs_at_once}"]
    arms = {
        "parallel": (parallel, max(1, cores() // args.jobs_at_once)),
        "one at a time": (["hydra/launcher=basic"], cores()),
    }
    load_before = os.getloadavg()[0]
    print(f"{cores()} cores; load average {load_before:.2f} before; sweep {args.sweep} {' '.join(common)}")
    times: dict[str, list[float]] = {name: [] for name in arms}
    root = args.out or Path(tempfile.mkdtemp(prefix="sweep_launchers-"))
    for repeat in range(args.repeats):
        order = list(arms) if repeat % 2 == 0 else list(reversed(arms))
        for name in order:
            launcher, threads = arms[name]
            folder = root / f"{name.replace(' ', '_')}-{repeat}"
            times[name].append(run_sweep(args.sweep, folder, launcher, common, threads))
            print(f"  repeat {repeat}: {name:13s} {times[name][-1]:7.1f} s  ({threads} thread(s) per job) {folder}")
        if steps_logged(root / f"parallel-{repeat}") != steps_logged(root / f"one_at_a_time-{repeat}"):
            sys.exit("the two sweeps did not train the same jobs for the same steps")
    load_after = os.getloadavg()[0]
    medians = {name: statistics.median(values) for name, values in times.items()}
    speedup = medians["one at a time"] / medians["parallel"]
    print(f"median wall time: parallel {medians['parallel']:.1f} s, one at a time {medians['one at a time']:.1f} s")
    print(f"speed-up {speedup:.2f}x (goal >= 1.6x on 2 cores); load average {load_after:.2f} after (with its own)")
    if load_before > 0.5:
        print("warning: the machine was busy before the benchmark (load average > 0.5); do not report this timing")


if __name__ == "__main__":
    main()
