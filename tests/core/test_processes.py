"""Several processes (torchrun / accelerate launch): what each rank reads from its launcher, how hook metrics
are gathered, and the checks that count processes. The runs themselves are in tests/behaviour/test_multiprocess.py."""

from __future__ import annotations

import math
import os
import time
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from align_kit.core.errors import ConfigError
from align_kit.core.hooks import Summed, Weighted, masked_mean, per_domain
from align_kit.core.processes import process_start_time, require_named_run_folder, wait_for_main_process
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.train import component_choices
from align_kit.trainer import AlignTrainer


def recorded(per_process: list[dict]) -> dict:
    """What AlignTrainer._record logs on process 0 when the processes return these metrics: the gather is
    played by concatenating the other processes' rows, as accelerate's gather does."""
    rows = []
    for metrics in per_process:  # each process's local tensor, captured from a one-process call
        capture = SimpleNamespace(accelerator=SimpleNamespace(device="cpu", gather=lambda t: rows.append(t) or t))
        capture._metrics = {"train": defaultdict(list)}
        AlignTrainer._record(capture, metrics, "train")
    trainer = SimpleNamespace(accelerator=SimpleNamespace(device="cpu", gather=lambda t: torch.cat(rows)))
    trainer._metrics = {"train": defaultdict(list)}
    AlignTrainer._record(trainer, per_process[0], "train")
    return {name: values[0] for name, values in trainer._metrics["train"].items()}


def test_gathered_metrics_weigh_means_add_throughput_and_skip_missing_values():
    logged = recorded(
        [
            {
                "reward/add": Weighted(0.25, 3),
                "reward/sub": Weighted(math.nan, 0),
                "tokens_per_sec": Summed(50.0),
                "adv/mean": 0.4,
                "only_there": math.nan,
            },
            {
                "reward/add": Weighted(1.0, 1),
                "reward/sub": Weighted(0.5, 2),
                "tokens_per_sec": Summed(100.0),
                "adv/mean": 0.2,
                "only_there": 7.0,
            },
        ]
    )
    assert logged["reward/add"] == pytest.approx((0.25 * 3 + 1.0 * 1) / 4)  # 4 rows: 3 here, 1 there
    assert logged["reward/sub"] == pytest.approx(0.5)  # absent on process 0
    assert logged["tokens_per_sec"] == pytest.approx(150.0)
    assert logged["adv/mean"] == pytest.approx(0.3)  # a plain value: the mean over processes, as TRL's own
    assert logged["only_there"] == pytest.approx(7.0)


def test_a_metric_sent_as_different_kinds_is_refused():
    with pytest.raises(RuntimeError, match=r"'kl/add' is Weighted, Summed or plain on different processes"):
        recorded([{"kl/add": math.nan}, {"kl/add": Weighted(0.5, 2)}])


def test_a_metric_no_process_has_is_not_logged():
    logged = recorded([{"kl/add": Weighted(math.nan, 0)}, {"kl/add": Weighted(math.nan, 0)}])
    assert logged == {}


def test_masked_and_per_domain_means_carry_their_counts():
    values = torch.tensor([[1.0, 3.0], [5.0, 7.0], [2.0, 2.0]])
    mask = torch.tensor([[1, 1], [1, 0], [0, 0]])
    mean = masked_mean(values, mask)
    assert mean == pytest.approx(3.0) and mean.weight == 3
    domains = per_domain(values, mask, torch.tensor([0, 1, 1]), ["a", "b"], "x")
    assert domains["x/a"] == pytest.approx(2.0) and domains["x/a"].weight == 2
    assert domains["x/b"] == pytest.approx(5.0) and domains["x/b"].weight == 1


@pytest.fixture
def two_processes(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")


def plan_for(*overrides: str, tmp_path):
    return build_plan(compose(["logger=none", *overrides]), component_choices(), str(tmp_path / "run"))


def test_batch_shape_counts_processes(two_processes, tmp_path):
    # 12 rows per process x 2 processes x 2 steps = 48 completions: 8 divides it, but 5 does not.
    plan_for("trainer.per_device_train_batch_size=12", "trainer.num_generations=8", tmp_path=tmp_path)
    shape = r"generation batch of 48 completions \(trainer.per_device_train_batch_size=12 x 2 processes x "
    with pytest.raises(ConfigError, match=shape):
        plan_for("trainer.per_device_train_batch_size=12", "trainer.num_generations=5", tmp_path=tmp_path)


def test_explicit_generation_batch_must_cover_every_process(two_processes, tmp_path):
    with pytest.raises(ConfigError, match=r"trainer.generation_batch_size=48 is not a multiple of the global batch"):
        plan_for(
            "trainer.per_device_train_batch_size=32",
            "trainer.steps_per_generation=null",
            "trainer.generation_batch_size=48",
            tmp_path=tmp_path,
        )


def test_dynamic_sampling_needs_whole_groups_on_each_process(two_processes, tmp_path):
    # 12 x 2 x 2 = 48 = 6 groups of 8 in all, but each process holds 24 rows: 3 groups, fine; with 4 per device
    # each holds 8 rows = 1 group, fine; with 6 per device each holds 12 rows, a group and a half.
    plan_for("sampling=dynamic", "trainer.per_device_train_batch_size=12", tmp_path=tmp_path)
    with pytest.raises(ConfigError, match=r"sampling=dynamic keeps whole prompt groups per process"):
        plan_for(
            "sampling=dynamic",
            "trainer.per_device_train_batch_size=6",
            "trainer.steps_per_generation=2",
            tmp_path=tmp_path,
        )


def test_a_multi_process_run_names_its_folder(two_processes):
    require_named_run_folder(["hydra.run.dir=outputs/x"])
    with pytest.raises(ConfigError, match=r"2 processes .* hydra.run.dir=<folder>"):
        require_named_run_folder(["hydra.job.chdir=false"])


def test_one_process_needs_no_folder_name(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    require_named_run_folder([])


def test_other_ranks_wait_for_rank_0_to_open_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    marker = tmp_path / ".hydra" / "config.yaml"
    marker.parent.mkdir()
    marker.write_text("old: run\n")
    old = time.time() - 3600
    os.utime(marker, (old, old))  # an earlier run's folder: not rank 0's work
    with pytest.raises(ConfigError, match=r"rank 1: rank 0 did not open the run folder"):
        wait_for_main_process(tmp_path, started=time.time(), timeout_s=0.3)
    marker.write_text("new: run\n")
    wait_for_main_process(tmp_path, started=time.time() - 1, timeout_s=0.3)


def test_process_start_time_is_before_now():
    assert time.time() - 600 < process_start_time() <= time.time()
