"""A full disk stops the run with one line naming the folder and the free space, and a half-written checkpoint is
moved aside. The failures are injected (OSError ENOSPC where Python writes; the save itself for a checkpoint), plus
one real full file system (a 64 KiB tmpfs) where this machine lets the test mount one."""

from __future__ import annotations

import errno
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from align_kit.core.disk_space import DiskFull, writing
from align_kit.core.run_files import latest_checkpoint
from align_kit.tracking.metrics_file import MetricsFileCallback
from tests.conftest import stubbed_cli_env


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


# "(<free> free of <total>)", as shutil.disk_usage gives them.
FREE = re.compile(r"\(\d+(\.\d)? (bytes|KiB|MiB|GiB) free of \d+(\.\d)? (bytes|KiB|MiB|GiB)\)")


def test_a_metrics_row_that_finds_no_space_is_one_line_naming_the_folder(tmp_path, monkeypatch):
    callback = MetricsFileCallback(tmp_path / "metrics.jsonl")
    monkeypatch.setattr(Path, "open", no_space)
    state = SimpleNamespace(is_world_process_zero=True, global_step=3)
    with pytest.raises(DiskFull) as caught:
        callback.on_log(None, state, None, logs={"loss": 0.5})
    assert caught.value.strerror.startswith(f"no space left writing metrics.jsonl in {tmp_path} (")
    assert FREE.search(caught.value.strerror)


def test_a_checkpoint_save_that_finds_no_space_moves_the_half_written_folder_aside(tmp_path, monkeypatch):
    from trl import GRPOTrainer

    from align_kit.trainer import AlignTrainer

    def save_weights_then_fail(self, model, trial):
        checkpoint = tmp_path / f"checkpoint-{self.state.global_step}"
        checkpoint.mkdir()
        (checkpoint / "model.safetensors").write_bytes(b"half")
        no_space()

    monkeypatch.setattr(GRPOTrainer, "_save_checkpoint", save_weights_then_fail)
    trainer = object.__new__(AlignTrainer)  # only what _save_checkpoint reads: no model needed
    trainer.args = SimpleNamespace(should_save=True)
    trainer.state = SimpleNamespace(global_step=4)
    trainer._get_output_dir = lambda trial: str(tmp_path)
    (tmp_path / "checkpoint-2").mkdir()
    (tmp_path / "checkpoint-2" / "trainer_state.json").write_text("{}")

    with pytest.raises(DiskFull) as caught:
        trainer._save_checkpoint(None, None)
    assert caught.value.strerror.startswith(f"no space left writing checkpoint-4 in {tmp_path} (")
    assert "; the half-written checkpoint-4 was moved to checkpoint-4.incomplete;" in caught.value.strerror
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-2", "checkpoint-4.incomplete"]
    assert (tmp_path / "checkpoint-4.incomplete" / "model.safetensors").read_bytes() == b"half"  # kept, not deleted
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-2"  # what a resume loads


def test_another_failure_while_writing_is_itself(tmp_path):
    with pytest.raises(PermissionError), writing(tmp_path, "summary.json"):
        raise PermissionError(errno.EACCES, "Permission denied")


STUB = """
import errno, os
if os.environ.get("STUB_LOG"):
    from pathlib import Path
    import align_kit.train as train
    from align_kit.core.disk_space import writing

    def stub_run(cfg, choices, run_dir, group=None, name="default"):
        with writing(Path(run_dir), "summary.json"):
            raise OSError(errno.ENOSPC, "No space left on device")

    train.run = stub_run
"""


@pytest.mark.slow
def test_the_command_ends_with_one_line_and_a_nonzero_status(cache_dir, tmp_path):
    env, _ = stubbed_cli_env(cache_dir, tmp_path, STUB)
    run = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "align_kit.cli", "train", "logger=none", f"hydra.run.dir={run}"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        f"align-kit: disk full: no space left writing summary.json in {run} ("
    )


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs, where the test may mount one (root, a mount namespace that allows it); else skipped."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_real_full_disk_is_named_with_its_free_space(tiny_disk):
    import torch

    with pytest.raises(DiskFull) as caught, writing(tiny_disk, "metrics.jsonl"):
        (tiny_disk / "metrics.jsonl").write_text(json.dumps({"pad": "x" * 200_000}))
    assert caught.value.strerror.startswith(f"no space left writing metrics.jsonl in {tiny_disk} (0 bytes free of 64.0")
    (tiny_disk / "metrics.jsonl").unlink()
    # torch.save's C++ writer gives no errno ("unexpected pos ..."): the file system's free space tells.
    checkpoint = tiny_disk / "checkpoint-1"
    checkpoint.mkdir()
    with pytest.raises(DiskFull), writing(tiny_disk, "checkpoint-1", partial=checkpoint):
        torch.save({"w": torch.zeros(100_000)}, checkpoint / "optimizer.pt")
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["checkpoint-1.incomplete"]
