"""Pre-flight time per job at the sweep sizes users run, beside plain Hydra composing the same jobs.

Cases: value-only sweeps of 10, 100 and 1000 jobs (`seed=range(0,N)`: one shape), and 1000 jobs over 10 group shapes
(`advantage=` 5 nodes x `clip=` 2 nodes x 100 seeds). Each is timed through align_kit's pre-flight in this process
(`align_kit.runs.preflight.check_command`, as `align-kit train -m` and `align-kit sweep` run it: every job composed and
validated, nothing written), wall and CPU seconds. The reference is plain Hydra: `hydra.compose` of the same jobs in a
loop (composition only, no validation; Hydra initialised once), timed on --reference-jobs of them spread over the sweep,
as each takes a few hundred milliseconds (all 1000 would take minutes); the ratio is per job. The machine's load
average is printed before and after: on a shared machine the wall times stretch, the CPU seconds less.

Targets (issue 26): 1000 value-only jobs under 30 s on 2 cores, 1000 jobs of 10 group shapes under 60 s.

  python benchmarks/preflight_scale.py            # the four cases
  python benchmarks/preflight_scale.py --quick    # 10 value-only jobs and 10 jobs of 2 shapes (a smoke run)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

GROUP_SHAPES = ["advantage=grpo,dr_grpo,gdpo,batch,ngrpo", "clip=symmetric,clip_higher"]  # 10 shapes
QUICK_GROUP_SHAPES = ["clip=symmetric,clip_higher"]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cases(quick: bool) -> list[tuple[str, list[str], int | None]]:
    """(name, the command's sweep overrides, the target in seconds for 1000 jobs)."""
    if quick:
        return [
            ("value-only", ["seed=range(0,10)"], None),
            ("2 group shapes", [*QUICK_GROUP_SHAPES, "seed=1,2,3,4,5"], None),
        ]
    return [
        *((f"value-only {n}", [f"seed=range(0,{n})"], 30 if n == 1000 else None) for n in (10, 100, 1000)),
        ("10 group shapes", [*GROUP_SHAPES, "seed=range(0,100)"], 60),
    ]


def preflight_seconds(overrides: list[str]) -> tuple[float, float, int]:
    """(wall, CPU seconds, jobs) of the pre-flight of `align-kit train -m <overrides>`."""
    from align_kit.runs.preflight import check_command

    wall, cpu = time.perf_counter(), time.process_time()
    plans = check_command(overrides, multirun=True)
    return time.perf_counter() - wall, time.process_time() - cpu, len(plans)


def hydra_compose_ms(jobs: list[list[str]], sample: int) -> tuple[float, float, int]:
    """Plain Hydra's `hydra.compose` of `sample` of the jobs spread evenly, in a loop: (wall and CPU ms per job,
    jobs timed)."""
    from hydra import compose, version
    from hydra.core.global_hydra import GlobalHydra

    from align_kit.experiment.compose import CONFIG_NAME, JOB_NAME, register_open_trainer_node, search_path
    from align_kit.experiment.hydra_private import initialize_app

    chosen = jobs[:: max(1, len(jobs) // sample)][:sample]
    register_open_trainer_node()
    GlobalHydra.instance().clear()
    version.setbase("1.3")
    initialize_app(JOB_NAME, search_path())
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        for job in chosen:
            compose(config_name=CONFIG_NAME, overrides=job, return_hydra_config=True)
        per_job = 1000 / len(chosen)
        return (time.perf_counter() - wall) * per_job, (time.process_time() - cpu) * per_job, len(chosen)
    finally:
        GlobalHydra.instance().clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="two small cases (a smoke run)")
    parser.add_argument("--reference-jobs", type=int, default=None, help="jobs hydra.compose is timed on (default 50)")
    args = parser.parse_args()
    sample = args.reference_jobs or (3 if args.quick else 50)

    from align_kit.runs.preflight import sweep_jobs

    os.environ.setdefault("ALIGN_KIT_CACHE", tempfile.mkdtemp(prefix="align_kit_cache_"))
    print(f"load average before: {load()}  ({len(os.sched_getaffinity(0))} cores)")
    # Imports and the first composition are paid once per process, before any case.
    with tempfile.TemporaryDirectory() as scratch:
        preflight_seconds(["seed=0,1", f"hydra.sweep.dir={scratch}/warm"])
        print("ms/job: wall (CPU); hydra.compose: plain Hydra's composition alone, per job, on a sample of the jobs")
        print(f"{'case':16s} {'jobs':>5s} {'wall s':>7s} {'cpu s':>6s} {'ms/job':>13s} {'hydra.compose':>20s} ratio")
        for name, overrides, target in cases(args.quick):
            command = [*overrides, f"hydra.sweep.dir={scratch}/{name.replace(' ', '_')}"]
            wall, cpu, jobs = preflight_seconds(command)
            reference, reference_cpu, timed = hydra_compose_ms(sweep_jobs(command), sample)
            per_job, per_job_cpu = wall / jobs * 1000, cpu / jobs * 1000
            verdict = "" if target is None else f"  target < {target} s: {'met' if wall < target else 'NOT met'}"
            print(
                f"{name:16s} {jobs:5d} {wall:7.2f} {cpu:6.2f} {per_job:6.1f} ({per_job_cpu:4.1f})"
                f" {reference:6.1f} ({reference_cpu:5.1f}) of {timed:3d} {per_job / reference:5.3f}{verdict}"
            )
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
