"""The SLURM launcher up to the scheduler: `align-kit sweep ... hydra/launcher=slurm` through hydra-submitit-launcher,
with `sbatch`, `srun` and `sacct` replaced by a stand-in that runs the array's tasks on this machine.

No cluster is reachable from here. What this exercises: the sbatch file submitit writes from conf/hydra/launcher/
slurm.yaml and the command line (partition, GPUs, time limit, array parallelism), the job array running each sweep
job through submitit's own entry point with SLURM's environment, the sweep's manifest and exit status, and a resume.
A real scheduler's queueing, time limits, cancellations, pre-emption signals and requeueing are exercised by the
slurm tier instead (tests/slurm/, on a single-node SLURM that tests/slurm/cluster.sh brings up).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import stubbed_cli_env

FIRST_JOB_ID = 4242

# sbatch FILE: keeps a copy of FILE, answers as sbatch does with a new job id, and leaves a runner that (once
# submitit has put each task's pickle in place, as it does after sbatch answers) runs every task of the array
# (--array=0-N%P) one after another with the variables SLURM sets. srun: runs its command with --output/--error
# as files. sacct: each task's state as the runner recorded it (PENDING before it starts).
SBATCH = f"""#!{sys.executable}
import os, subprocess, sys
with open(os.environ["FAKE_SLURM_LOG"], "a") as log:
    log.write(open(sys.argv[1]).read() + "\\n#----\\n")
job_id = {FIRST_JOB_ID} + open(os.environ["FAKE_SLURM_LOG"]).read().count("#----") - 1
subprocess.Popen([sys.executable, os.environ["FAKE_SLURM_RUNNER"], sys.argv[1], str(job_id)],
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(f"Submitted batch job {{job_id}}")
"""
RUNNER = """
import os, re, subprocess, sys, time
from pathlib import Path
script = open(sys.argv[1]).read()
array = re.search(r"^#SBATCH --array=0-(\\d+)", script, re.M)  # submitit submits a single job without one
last = int(array.group(1)) if array else 0
folder = re.search(r"submitit.core._submit (\\S+)", script).group(1)
states = Path(os.environ["FAKE_SLURM_STATES"])
for task in range(last + 1):
    job = sys.argv[2] + "_" + str(task) if array else sys.argv[2]
    pickle = Path(folder.replace("%j", job)) / (job + "_submitted.pkl")
    deadline = time.time() + 300
    while not pickle.exists() and time.time() < deadline:
        time.sleep(0.05)
    (states / job).write_text("RUNNING")
    env = dict(os.environ, SLURM_JOB_ID=str(int(sys.argv[2]) * 100 + task), SLURM_NTASKS="1",
               SLURM_JOB_NUM_NODES="1", SLURM_NODEID="0", SLURM_JOB_NODELIST="localhost", SLURM_PROCID="0",
               SLURM_LOCALID="0")
    env.update(SLURM_ARRAY_JOB_ID=sys.argv[2], SLURM_ARRAY_TASK_ID=str(task)) if array else env.update(
        SLURM_JOB_ID=sys.argv[2])
    code = subprocess.run(["bash", sys.argv[1]], env=env).returncode
    (states / job).write_text("COMPLETED" if code == 0 else "FAILED")
"""
SRUN = f"""#!{sys.executable}
import os, subprocess, sys
args = sys.argv[1:]
files = {{}}
while args and args[0].startswith("--"):
    flag = args.pop(0)
    if flag in ("--output", "--error"):
        path = args.pop(0)
        for pattern, value in (("%A", "SLURM_ARRAY_JOB_ID"), ("%a", "SLURM_ARRAY_TASK_ID"), ("%j", "SLURM_JOB_ID")):
            path = path.replace(pattern, os.environ.get(value, ""))
        files[flag] = path.replace("%t", "0")
os.makedirs(os.path.dirname(files["--output"]), exist_ok=True)
with open(files["--output"], "a") as out, open(files.get("--error", files["--output"]), "a") as err:
    sys.exit(subprocess.run(" ".join(args), shell=True, stdout=out, stderr=err).returncode)
"""
SACCT = f"""#!{sys.executable}
import os, sys
from pathlib import Path
states = Path(os.environ["FAKE_SLURM_STATES"])
print("JobID|State|NodeList")
args = sys.argv[1:]
for job in [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "-j"]:
    for task in range(64):
        state = states / f"{{job}}_{{task}}"
        print(f"{{job}}_{{task}}|{{state.read_text() if state.exists() else 'PENDING'}}|localhost")
"""

SITECUSTOMIZE = """
import json, os
if os.environ.get("STUB_LOG"):
    import align_kit.train as train

    def stub_run(cfg, choices, run_dir, group=None, name="default"):
        from pathlib import Path
        with open(os.environ["STUB_LOG"], "a") as log:
            log.write(json.dumps({"seed": cfg.seed, "pid": os.getpid(), "task": os.environ.get("SLURM_ARRAY_TASK_ID"),
                                  "resume": bool(cfg.train.resume)}) + "\\n")
        if cfg.seed == 2 and not os.environ.get("ALIGN_KIT_STUB_CALM"):
            raise RuntimeError("out of memory on the node")
        Path(run_dir, "summary.json").write_text("{}")
        return {}

    train.run = stub_run
"""


@pytest.fixture
def fake_slurm(cache_dir, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", SBATCH), ("srun", SRUN), ("sacct", SACCT)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (bin_dir / "runner.py").write_text(RUNNER)
    (tmp_path / "states").mkdir()
    env, _ = stubbed_cli_env(cache_dir, tmp_path, SITECUSTOMIZE)
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env['PATH']}",
        FAKE_SLURM_LOG=str(tmp_path / "sbatch.log"),
        FAKE_SLURM_RUNNER=str(bin_dir / "runner.py"),
        FAKE_SLURM_STATES=str(tmp_path / "states"),
    )
    return env, tmp_path


def sweep(env: dict, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "align_kit.cli", "sweep", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow  # 10-45 s of real processes: in the slow tier, which CI runs too
def test_a_sweep_on_slurm_submits_one_array_and_resumes(fake_slurm):
    env, tmp_path = fake_slurm
    folder = tmp_path / "sweep"
    launch = [
        "clip_higher",
        "clip.eps_high=0.28",
        "seed=1,2,3",
        f"hydra.sweep.dir={folder}",
        "hydra/launcher=slurm",
        "hydra.launcher.partition=gpu",
        "hydra.launcher.gpus_per_node=2",
        "hydra.launcher.array_parallelism=2",
    ]
    result = sweep(env, *launch)
    assert result.returncode == 1, result.stderr[-3000:]  # seed 2 failed on its node: the sweep says so
    assert "align-kit: 3 jobs through hydra/launcher=slurm" in result.stderr

    (script,) = [part for part in (tmp_path / "sbatch.log").read_text().split("#----") if part.strip()]
    flags = dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)$", script, re.M))
    # The values of conf/hydra/launcher/slurm.yaml and the command line, as sbatch reads them.
    assert flags["partition"] == "gpu" and flags["gpus-per-node"] == "2"
    assert (flags["array"], flags["time"], flags["cpus-per-task"], flags["mem"]) == ("0-2%2", "240", "8", "64GB")
    assert flags["signal"] == "USR2@120" and flags["ntasks-per-node"] == "1"
    assert re.search(r"^srun --unbuffered --output \S+ --error \S+ \S+ -u -m submitit.core._submit ", script, re.M)

    calls = [json.loads(line) for line in Path(env["STUB_LOG"]).read_text().splitlines()]
    assert [(call["seed"], call["task"]) for call in calls] == [(1, "0"), (2, "1"), (3, "2")]
    assert len({call["pid"] for call in calls}) == 3  # each array task in its own process
    manifest = json.loads((folder / "sweep_manifest.json").read_text())
    assert [(job["status"], job["outcome"]) for job in manifest["jobs"]] == [
        ("done", "ok"),
        ("failed", "failed"),
        ("done", "ok"),
    ]
    assert manifest["jobs"][1]["error"] == "RuntimeError: out of memory on the node"

    # The resume replays the SLURM settings and submits only the failed job (one job: submitit submits no array).
    resumed = sweep(dict(env, ALIGN_KIT_STUB_CALM="1"), "--resume", str(folder))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    scripts = [part for part in (tmp_path / "sbatch.log").read_text().split("#----") if part.strip()]
    assert len(scripts) == 2 and "#SBATCH --partition=gpu" in scripts[1] and "--array" not in scripts[1]
    assert "2 of 3 jobs finished in an earlier launch; the array holds the other 1" in resumed.stderr
    calls = [json.loads(line) for line in Path(env["STUB_LOG"]).read_text().splitlines()]
    assert [(call["seed"], call["resume"]) for call in calls[3:]] == [(2, False)]
    manifest = json.loads((folder / "sweep_manifest.json").read_text())
    assert [job["outcome"] for job in manifest["jobs"]] == ["ok"] * 3
    ids = [f"{FIRST_JOB_ID}_0", f"{FIRST_JOB_ID + 1}", f"{FIRST_JOB_ID}_2"]  # job 1 from the resume's own job
    assert [job["slurm_job"] for job in manifest["jobs"]] == ids
