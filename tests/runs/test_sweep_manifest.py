"""The sweep manifest numbers a sweep's jobs as Hydra launches them, with the command's own config folder."""

from __future__ import annotations

import json
import subprocess
import sys

from align_kit.runs.sweep_manifest import MANIFEST_FILE, job_overrides
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
