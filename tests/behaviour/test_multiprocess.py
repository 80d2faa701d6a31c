"""Two processes on CPU (torchrun --nproc_per_node 2, gloo): one run folder, gathered metrics that match a
one-process run of the same global batch, checkpoint and resume, dynamic sampling, MoE routing replay, a halt
that stops every rank. Its own tier: `make test-multiprocess` (pytest -m multiprocess), about 4 minutes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from align_kit.tracking.metrics_file import read_metrics
from tests.conftest import FAST_POLICY, cli_env

pytestmark = pytest.mark.multiprocess

QUIET = ["trainer.disable_tqdm=true", "logger=none"]
# Greedy decoding (top_k=1) makes generation independent of how rows are split over processes, so a one- and a
# two-process run of the same global batch draw the same completions and must agree on every per-batch metric.
GREEDY = ["trainer.top_k=1", "trainer.max_steps=3", "trainer.save_strategy=no", *QUIET]
# Metrics of the whole generation batch: gathered, they must equal the one-process run's.
PER_BATCH = (
    "reward",
    "reward_std",
    "rewards/correctness/mean",
    "rewards/format/mean",
    "frac_reward_zero_std",
    "completions/mean_length",
    "completions/clipped_ratio",
    "adv/mean",
    "adv/std",
    "adv/zero_std_fraction",
    "groups/flat_fraction",
    "reward/addition",
    "reward/subtraction",
    "completions/mean_length/addition",
    "completions/mean_length/subtraction",
)


def train(folder, *overrides: str, processes: int, cache_dir: str, expect: int = 0) -> subprocess.CompletedProcess:
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
    command = [*(launcher if processes > 1 else [sys.executable]), "-m", "align_kit.train"]
    result = subprocess.run(
        [*command, *FAST_POLICY, f"hydra.run.dir={folder}", *overrides],
        capture_output=True,
        text=True,
        env=dict(cli_env(cache_dir), OMP_NUM_THREADS="1"),
        timeout=600,
    )
    assert result.returncode == expect, result.stderr[-3000:]
    return result


def steps(folder) -> list[dict]:
    return [row for row in read_metrics(folder / "metrics.jsonl") if "loss" in row]


def test_two_processes_match_one_process_on_the_same_global_batch(tmp_path, cache_dir):
    alerts = ["monitor.length_near_max.margin=0.5"]  # ~20-token answers of 32 allowed: fires every step
    one, two = tmp_path / "one", tmp_path / "two"
    train(one, *GREEDY, *alerts, "trainer.per_device_train_batch_size=32", processes=1, cache_dir=cache_dir)
    result = train(two, *GREEDY, *alerts, "trainer.per_device_train_batch_size=16", processes=2, cache_dir=cache_dir)

    single, double = steps(one), steps(two)
    assert [row["step"] for row in double] == [1, 2, 3]
    for a, b in zip(single, double, strict=True):
        assert [name for name in PER_BATCH if name in a] == [name for name in PER_BATCH if name in b]
        for name in (name for name in PER_BATCH if name in a):  # logged at each generation (every 2nd step)
            assert b[name] == pytest.approx(a[name], rel=1e-6, abs=1e-6), (a["step"], name)
    assert sum("reward/subtraction" in row for row in single) == 2
    # One run folder: rank 0 wrote every file once; the alerts are the one-process run's, not one per rank.
    assert sorted(p.name for p in two.iterdir() if not p.name.startswith(".")) == sorted(
        p.name for p in one.iterdir() if not p.name.startswith(".")
    )
    assert (two / "alerts.jsonl").read_text() == (one / "alerts.jsonl").read_text() != ""
    assert result.stdout.count("run finished") == 1


def test_checkpoint_and_resume_with_two_processes(tmp_path, cache_dir):
    run = tmp_path / "run"
    settings = [*QUIET, "trainer.save_strategy=steps", "trainer.save_steps=2", "trainer.per_device_train_batch_size=16"]
    train(run, *settings, "trainer.max_steps=2", processes=2, cache_dir=cache_dir)
    checkpoint = run / "checkpoint-2"
    assert (checkpoint / "rng_state_0.pth").exists() and (checkpoint / "rng_state_1.pth").exists()
    train(run, *settings, "trainer.max_steps=4", "train.resume=true", processes=2, cache_dir=cache_dir)
    assert [row["step"] for row in steps(run)] == [1, 2, 3, 4]
    assert json.loads((run / "summary.json").read_text())["steps"] == 4


def test_dynamic_sampling_keeps_only_groups_with_signal_on_every_process(tmp_path, cache_dir):
    run = tmp_path / "run"
    train(
        run,
        *QUIET,
        "sampling=dynamic",
        "trainer.max_steps=3",
        "trainer.save_strategy=no",
        "trainer.per_device_train_batch_size=16",
        processes=2,
        cache_dir=cache_dir,
    )
    rows = [row for row in steps(run) if "sampling/gen_batches" in row]  # once per generation: steps 1 and 3
    assert len(rows) == 2
    for row in rows:
        assert 1 <= row["sampling/gen_batches"] <= 4
        if row["sampling/filled_groups"] == 0:  # the batch is full of groups with signal on both processes
            assert row["groups/flat_fraction"] == 0.0


def test_moe_routing_replay_with_two_processes(tmp_path, cache_dir):
    run = tmp_path / "run"
    train(
        run,
        *QUIET,
        "model=tiny_moe",
        "routing_replay=r2",
        "trainer.max_steps=2",
        "trainer.steps_per_generation=4",
        "trainer.per_device_train_batch_size=8",
        "trainer.save_strategy=no",
        processes=2,
        cache_dir=cache_dir,
    )
    rows = steps(run)
    assert all(0.0 <= row["routing/flip_rate"] <= 1.0 for row in rows)


def test_a_halt_stops_every_rank(tmp_path, cache_dir):
    run = tmp_path / "run"
    result = train(
        run,
        *QUIET,
        "monitor.length_near_max.margin=0.5",
        "monitor.length_near_max.action=halt",
        "trainer.max_steps=5",
        "trainer.save_strategy=no",
        "trainer.per_device_train_batch_size=16",
        processes=2,
        cache_dir=cache_dir,
        expect=1,  # torchrun's own exit code when a rank exits non-zero (the ranks exit 3: training halted)
    )
    assert "training halted" in result.stderr
    assert [row["step"] for row in steps(run)] == [1]
    assert json.loads((run / "halt.json").read_text())["rule"] == "length_near_max"


def test_accelerate_launch_starts_two_processes_on_cpu(tmp_path, cache_dir):
    # `accelerate launch --cpu` runs one process (its simple launcher); --multi_gpu with trainer.use_cpu=true is
    # accelerate's torchrun path, and the processes join with gloo.
    run = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
         "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
         "-m", "align_kit.train", *FAST_POLICY, *QUIET, "trainer.max_steps=2", "trainer.save_steps=2",
         "trainer.per_device_train_batch_size=16", f"hydra.run.dir={run}"],
        capture_output=True, text=True, env=dict(cli_env(cache_dir), OMP_NUM_THREADS="1"), timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    states = sorted(p.name for p in (run / "checkpoint-2").glob("rng_state_*.pth"))
    assert states == ["rng_state_0.pth", "rng_state_1.pth"]
    assert [row["step"] for row in steps(run)] == [1, 2]


def test_two_processes_make_one_wandb_run(tmp_path, cache_dir):
    run = tmp_path / "run"
    train(
        run,
        "trainer.disable_tqdm=true",
        "logger=wandb_offline",
        "trainer.max_steps=1",
        "trainer.save_strategy=no",
        "trainer.per_device_train_batch_size=16",
        processes=2,
        cache_dir=cache_dir,
    )
    assert len(list((run / "wandb").glob("offline-run-*"))) == 1
