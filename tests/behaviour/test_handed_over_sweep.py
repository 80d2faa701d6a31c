"""`align-kit sweep --resume` of a sweep folder handed over by someone else: its manifest's overrides are a shared
file's, so what only the command line may give (here the cache folder) is refused until typed again on the resume
line; the account that launched the sweep resumes it as it is. The jobs run a stub (no model loads)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import stubbed_cli_env

SITECUSTOMIZE = """
import json, os
if os.environ.get("STUB_LOG"):
    from pathlib import Path
    import align_kit.train as train

    def stub_run(cfg, choices, run_dir, group=None, name="default"):
        with open(os.environ["STUB_LOG"], "a") as log:
            log.write(json.dumps({"seed": cfg.seed}) + "\\n")
        (Path(run_dir) / "summary.json").write_text("{}")
        return {}

    train.run = stub_run
"""


def align_kit(env: dict, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "align_kit.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.slow  # four processes of 5-15 s each
def test_a_handed_over_manifest_is_a_shared_file_and_the_launchers_own_is_not(cache_dir, tmp_path):
    env, log = stubbed_cli_env(cache_dir, tmp_path, SITECUSTOMIZE)
    sweep, cache = tmp_path / "sweep", f"paths.cache_dir={cache_dir}"
    launched = align_kit(env, "sweep", "clip_higher", "clip.eps_high=0.28", "seed=1", cache, f"hydra.sweep.dir={sweep}")
    assert launched.returncode == 0, launched.stderr[-3000:]

    own = align_kit(env, "sweep", "--resume", str(sweep))
    assert own.returncode == 0, own.stderr[-3000:]
    assert "job 0: finished in an earlier launch; skipped" in own.stderr

    other = dict(env, ALIGN_KIT_CACHE=str(tmp_path / "another_account_cache"))
    refused = align_kit(other, "sweep", "--resume", str(sweep))
    assert refused.returncode == 2
    (line,) = refused.stderr.splitlines()
    assert line.startswith("align-kit: config error: sweep job 0 of 1 (")  # the job's overrides, named
    assert line.endswith(
        f"): {cache} comes from a config file; align_kit loads what the cache holds (warm-started models, converted "
        "GGUF files) as its own, so only you name it: on the command line (paths.cache_dir=<folder>) or with "
        "ALIGN_KIT_CACHE in the environment"
    )

    confirmed = align_kit(other, "sweep", "--resume", str(sweep), cache)
    assert confirmed.returncode == 0, confirmed.stderr[-3000:]
    assert "job 0: finished in an earlier launch; skipped" in confirmed.stderr
    assert log.read_text().count("\n") == 1  # the job ran once, at the launch
