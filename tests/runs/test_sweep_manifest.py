"""The sweep manifest numbers a sweep's jobs as Hydra launches them, with the command's own config folder; its job
log keeps every update of concurrent writers, survives a writer killed mid-line, and reads manifests from before it."""

from __future__ import annotations

import json
import multiprocessing
import re
import subprocess
import sys

import pytest

from align_kit.core.errors import ConfigError
from align_kit.runs import sweep_manifest as manifest_files
from align_kit.runs.sweep_manifest import MANIFEST_FILE, job_overrides
from align_kit.runs.sweep_summary import status_table
from tests.conftest import stubbed_cli_env

# Every process of the sweep runs this: a job records its clip node and ends without training.
SITECUSTOMIZE = """
import json, os
if os.environ.get("STUB_LOG"):
    from pathlib import Path
    import align_kit.train as train

    def stub_run(cfg, choices, run_dir, group=None, name="default"):
        with open(os.environ["STUB_LOG"], "a") as handle:
            handle.write(json.dumps({"clip": choices["clip"]}) + "\\n")
        (Path(run_dir) / "metrics.jsonl").write_text("{}\\n")
        (Path(run_dir) / "summary.json").write_text("{}")
        return {}

    train.run = stub_run
"""


def write_user_clip(tmp_path):
    folder = tmp_path / "my_conf" / "clip"
    folder.mkdir(parents=True)
    (folder / "wide.yaml").write_text("_target_: align_kit.components.clip.TokenClip\neps_low: 0.2\neps_high: 0.35\n")
    return tmp_path / "my_conf"


def test_a_glob_lists_the_config_folders_nodes_too(tmp_path):
    conf = write_user_clip(tmp_path)
    shipped = sorted(job[0] for job in job_overrides(["clip=glob(*)"], {}))
    assert shipped == ["clip=clip_higher", "clip=gspo", "clip=symmetric"]
    with_folder = sorted(job[0] for job in job_overrides(["clip=glob(*)"], {}, str(conf)))
    assert with_folder == ["clip=clip_higher", "clip=gspo", "clip=symmetric", "clip=wide"]


@pytest.mark.slow
def test_the_manifest_of_a_sweep_with_a_config_folder_lists_the_jobs_hydra_ran(cache_dir, tmp_path):
    conf = write_user_clip(tmp_path)
    env, log = stubbed_cli_env(cache_dir, tmp_path, SITECUSTOMIZE)
    sweep = tmp_path / "sweep"
    command = [sys.executable, "-m", "align_kit.cli", "train", "-m", "--config-dir", str(conf), "clip=glob(*)"]
    done = subprocess.run([*command, f"hydra.sweep.dir={sweep}"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ran = [json.loads(line)["clip"] for line in log.read_text().splitlines()]
    manifest = json.loads((sweep / MANIFEST_FILE).read_text())
    listed = [job["overrides"] for job in manifest["jobs"]]
    assert sorted(ran) == ["clip_higher", "gspo", "symmetric", "wide"]
    assert [overrides[0] for overrides in listed] == [f"clip={clip}" for clip in ran]
    assert all(job["status"] == "done" for job in manifest["jobs"])


def write_sweep(folder, jobs: int) -> None:
    """A new sweep's manifest of `jobs` jobs (seed=0, seed=1, ...), as a first launch writes it."""
    manifest_files.write(folder, manifest_files.new_manifest(["seed=range"], [], [[f"seed={n}"] for n in range(jobs)]))


def statuses(folder) -> list[tuple]:
    return [(job["status"], job.get("error")) for job in manifest_files.read(folder)["jobs"]]


def log_lines(folder) -> list[str]:
    return (folder / manifest_files.JOB_LOG).read_text().splitlines()


def update_own_jobs(folder, writer: int, start) -> None:
    """Writer `writer` of four: 50 updates to its own ten jobs (writer*10 ... writer*10+9), in turn."""
    start.wait()  # all four at once
    for update in range(50):
        status = "running" if update % 2 else "done"
        manifest_files.update_job(folder, writer * 10 + update % 10, status=status, error=f"w{writer}u{update}")


def test_concurrent_writers_never_lose_an_update(tmp_path):
    write_sweep(tmp_path, 40)
    context = multiprocessing.get_context("fork")
    start = context.Event()
    writers = [context.Process(target=update_own_jobs, args=(tmp_path, w, start)) for w in range(4)]
    for writer in writers:
        writer.start()
    start.set()
    for writer in writers:
        writer.join(timeout=60)
    assert [writer.exitcode for writer in writers] == [0] * 4
    # Job w*10+k's last update is update 40+k of writer w: done when k is even, running when odd.
    expected = [("running" if k % 2 else "done", f"w{w}u{40 + k}") for w in range(4) for k in range(10)]
    assert statuses(tmp_path) == expected
    lines = log_lines(tmp_path)
    assert len(lines) == 200 and all(json.loads(line)["error"].startswith("w") for line in lines)  # none interleaved


def test_a_line_cut_short_by_a_killed_writer_is_named_and_loses_nothing_else(tmp_path, capsys):
    write_sweep(tmp_path, 3)
    manifest_files.update_job(tmp_path, 0, status="running")
    manifest_files.update_job(tmp_path, 1, status="done", outcome="ok")
    with open(tmp_path / manifest_files.JOB_LOG, "ab") as log:
        log.write(b'{"job": 2, "status": "do')  # the writer of job 2 killed mid-line
    assert statuses(tmp_path) == [("running", None), ("done", None), ("pending", None)]
    assert manifest_files.read(tmp_path)[manifest_files.TORN] == [3]

    manifest_files.update_job(tmp_path, 2, status="failed", error="RuntimeError: boom")  # a later update
    assert log_lines(tmp_path)[2:] == ['{"job": 2, "status": "do', log_lines(tmp_path)[3]]  # the cut line kept
    assert statuses(tmp_path) == [("running", None), ("done", None), ("failed", "RuntimeError: boom")]
    note = f"{tmp_path / manifest_files.JOB_LOG} line 3 was cut short (a process was killed while writing)"
    assert note in status_table(tmp_path, manifest_files.read(tmp_path))

    manifest_files.fold(tmp_path)  # the end of the launch: one file again, the cut line named once more
    assert not (tmp_path / manifest_files.JOB_LOG).exists()
    assert note in capsys.readouterr().err
    saved = json.loads((tmp_path / manifest_files.MANIFEST_FILE).read_text())
    assert [(job["status"], job["error"]) for job in saved["jobs"]] == statuses(tmp_path)
    assert manifest_files.TORN not in saved


def test_a_last_line_whose_newline_was_lost_still_counts(tmp_path):
    write_sweep(tmp_path, 2)
    assert manifest_files.job_entry(tmp_path, 1)["status"] == "pending"  # this process has folded the files once
    (tmp_path / manifest_files.JOB_LOG).write_bytes(b'{"job": 1, "status": "done", "outcome": "ok"}')
    assert manifest_files.job_entry(tmp_path, 1)["status"] == "done"
    manifest_files.update_job(tmp_path, 0, status="running")
    assert [json.loads(line)["job"] for line in log_lines(tmp_path)] == [1, 0]
    assert statuses(tmp_path) == [("running", None), ("done", None)]


def test_a_job_start_sees_what_other_processes_wrote_since_its_last_read(tmp_path):
    write_sweep(tmp_path, 2)
    manifest_files.update_job(tmp_path, 0, status="running")
    assert manifest_files.job_entry(tmp_path, 0)["status"] == "running"
    with open(tmp_path / manifest_files.JOB_LOG, "a") as log:  # another process's update
        log.write(json.dumps({"job": 0, "status": "failed", "error": "x"}) + "\n")
    assert manifest_files.job_entry(tmp_path, 0)["status"] == "failed"
    # Another process folds the log into a rewritten manifest (job 1 done) and removes the log.
    manifest = json.loads((tmp_path / manifest_files.MANIFEST_FILE).read_text())
    manifest["jobs"][1].update(status="done", outcome="ok")
    (tmp_path / manifest_files.MANIFEST_FILE).write_text(json.dumps(manifest))
    (tmp_path / manifest_files.JOB_LOG).unlink()
    assert [manifest_files.job_entry(tmp_path, n)["status"] for n in (0, 1)] == ["pending", "done"]
    assert manifest_files.job_entry(tmp_path, 2) is None


def test_a_manifest_from_before_the_job_log_reads_and_takes_updates(tmp_path):
    old = {
        "task_overrides": ["seed=1,2"],
        "hydra_overrides": [],
        "launcher_pid": 1,
        "launches": 1,
        "jobs": [
            {"job": 0, "overrides": ["seed=1"], "status": "done", "outcome": "ok", "error": None, "folder": "/s/0"},
            {"job": 1, "overrides": ["seed=2"], "status": "failed", "outcome": "failed", "error": "E", "folder": None},
        ],
    }
    (tmp_path / manifest_files.MANIFEST_FILE).write_text(json.dumps(old, indent=2))
    assert manifest_files.read(tmp_path) == old
    manifest_files.update_job(tmp_path, 1, status="done", outcome="ok", error=None)
    assert statuses(tmp_path) == [("done", None), ("done", None)]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"job": 5, "status": "done"}', "line 2 is not a job update: job=5 is none of the sweep's 2 jobs"),
        ('{"job": 1, "status": "finished"}', "line 2 is not a job update: job 1.status='finished' is none of"),
        ('{"job": 1, "error": 3}', "line 2 is not a job update: job 1.error is not text"),
        ("[1]", "line 2 is not a job update: it holds a JSON list, not an object"),
    ],
)
def test_a_job_log_line_that_is_no_update_is_refused_naming_it(tmp_path, line, problem):
    write_sweep(tmp_path, 2)
    manifest_files.update_job(tmp_path, 0, status="running")
    with open(tmp_path / manifest_files.JOB_LOG, "a") as log:
        log.write(line + "\n")
    with pytest.raises(ConfigError, match=re.escape(f"{tmp_path / manifest_files.JOB_LOG} {problem}")):
        manifest_files.read(tmp_path)


def test_a_job_log_without_its_manifest_is_refused(tmp_path):
    (tmp_path / manifest_files.JOB_LOG).write_text('{"job": 0, "status": "done"}\n')
    with pytest.raises(ConfigError, match="holds job updates, but .*sweep_manifest.json is missing"):
        manifest_files.read(tmp_path)


def test_a_job_outside_the_manifest_records_nothing(tmp_path):
    manifest_files.update_job(tmp_path, 0, status="running")  # no manifest
    write_sweep(tmp_path, 1)
    manifest_files.update_job(tmp_path, 3, status="running")  # no such job
    assert not (tmp_path / manifest_files.JOB_LOG).exists()


# A job records what it would train (its seed and clip.eps_high) and ends without training.
SITE_RECORDING_VALUES = """
import json, os
if os.environ.get("STUB_LOG"):
    from pathlib import Path
    import align_kit.train as train

    def stub_run(cfg, choices, run_dir, group=None, name="default"):
        with open(os.environ["STUB_LOG"], "a") as handle:
            handle.write(json.dumps({"seed": cfg.seed, "eps_high": cfg.clip.eps_high}) + "\\n")
        (Path(run_dir) / "metrics.jsonl").write_text("{}\\n")
        (Path(run_dir) / "summary.json").write_text("{}")
        return {}

    train.run = stub_run
"""


@pytest.mark.slow  # a sweep, its --status relaunch, refused and replanned resumes: over a minute
def test_a_resume_whose_jobs_compose_differently_is_refused_naming_the_keys_unless_replanned(cache_dir, tmp_path):
    conf = tmp_path / "conf"
    (conf / "sweep").mkdir(parents=True)
    sweep_file = conf / "sweep" / "mine.yaml"
    sweep_file.write_text(
        "# @package _global_\nhydra:\n  sweeper:\n    params:\n      seed: 1,2\nclip:\n  eps_high: 0.25\n"
    )
    env, log = stubbed_cli_env(cache_dir, tmp_path, SITE_RECORDING_VALUES)
    sweep = tmp_path / "sweep"

    def align_kit(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "align_kit.cli", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)

    def ran() -> list[dict]:
        return [json.loads(line) for line in log.read_text().splitlines()]

    first = align_kit("sweep", "mine", "logger=none", "--config-dir", str(conf), f"hydra.sweep.dir={sweep}")
    assert first.returncode == 0, first.stderr[-3000:]
    assert ran() == [{"seed": 1, "eps_high": 0.25}, {"seed": 2, "eps_high": 0.25}]
    manifest = json.loads((sweep / MANIFEST_FILE).read_text())
    assert manifest["config_dir"] == str(conf.resolve())
    assert manifest["config_base"]["clip.eps_high"] == 0.25 and manifest["config_base"]["seed"] == 1
    assert [job["config"]["set"] for job in manifest["jobs"]] == [{}, {"seed": 2}]

    # --status prints a command that works as printed: here it relaunches the finished sweep, which skips both jobs
    status = align_kit("sweep", "--status", str(sweep))
    printed = status.stdout.splitlines()[-1].split("(= ", 1)[1].rstrip(")").split()
    assert printed[:5] == ["align-kit", "train", "-m", "--config-dir", str(conf.resolve())]
    again = align_kit(*printed[1:])
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(ran()) == 2

    # job 1 stopped before it finished; then the sweep file changed
    (sweep / "1" / "summary.json").unlink()
    sweep_file.write_text(sweep_file.read_text().replace("0.25", "0.3"))
    refused = align_kit("sweep", "--resume", str(sweep))
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"align-kit: config error: hydra.sweep.dir={sweep}: 2 of its 2 jobs would now compose differently from the "
        f"sweep's first launch (its config files: --config-dir {conf.resolve()}), at clip.eps_high (job 0: "
        "clip.eps_high (0.25 -> 0.3)); a resume runs what the sweep started: restore those files, or run the changed "
        f"jobs again under the new config: align-kit sweep --resume {sweep} --replan"
    ]
    assert len(ran()) == 2  # nothing ran

    replanned = align_kit("sweep", "--resume", str(sweep), "--replan")
    assert replanned.returncode == 0, replanned.stderr[-3000:]
    assert ran()[2:] == [{"seed": 1, "eps_high": 0.3}, {"seed": 2, "eps_high": 0.3}]  # both again, none mixed
    assert (sweep / ".attempts").is_dir()  # the first attempts' files are kept
    assert align_kit("sweep", "--resume", str(sweep)).returncode == 0  # now the record matches: nothing left to run
    assert len(ran()) == 4
