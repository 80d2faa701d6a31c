"""AlignTrainer's metric gathering over processes (its `_record` and `flush_metrics`, played without a training run):
weighted means, summed throughput, values missing on a process, values left on the device; and the order it calls its
hooks in as it is built."""

from __future__ import annotations

import contextlib
import math
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from align_kit.core.hooks import Deferred, Summed, TrainerHook, Weighted
from align_kit.trainer import AlignTrainer


def recorded(per_process: list[dict]) -> dict:
    """What AlignTrainer logs on process 0 when the processes return these metrics: the gather is played by
    concatenating the other processes' rows, as accelerate's gather does."""
    rows = []
    for metrics in per_process:  # each process's local tensor, captured from a two-process flush
        capture = fake_trainer(gather=lambda t: rows.append(t) or t)
        AlignTrainer._record(capture, metrics, "train")
        AlignTrainer.flush_metrics(capture)
    trainer = fake_trainer(gather=lambda t: torch.cat(rows))
    AlignTrainer._record(trainer, per_process[0], "train")
    AlignTrainer.flush_metrics(trainer)
    return {name: values[0] for name, values in trainer._metrics["train"].items()}


def fake_trainer(gather) -> SimpleNamespace:
    accelerator = SimpleNamespace(device="cpu", num_processes=2, gather=gather)
    return SimpleNamespace(accelerator=accelerator, _metrics={"train": defaultdict(list)}, _hook_metrics=[])


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


def test_metrics_left_on_the_device_are_logged_as_the_same_numbers_at_the_next_flush():
    """A `Deferred` value gathers as the float, `Weighted` or `Summed` it stands for; nothing reaches TRL's lists
    before the flush (the log), and the values of several calls keep their order."""
    values = torch.tensor([0.25, 1.0])
    host = [{"m/mean": Weighted(0.25, 3), "m/plain": 0.5, "m/sum": Summed(7.0)}, {"m/plain": 1.5}]
    device = [
        {"m/mean": Deferred(values[0], torch.tensor(3)), "m/plain": Deferred(torch.tensor(0.5)),
         "m/sum": Deferred(torch.tensor(7.0), summed=True)},
        {"m/plain": Deferred(torch.tensor(1.5, dtype=torch.float64))},
    ]  # fmt: skip
    logged = []
    for calls in (host, device):
        trainer = fake_trainer(gather=lambda t: t)
        trainer.accelerator.num_processes = 1
        for metrics in calls:
            AlignTrainer._record(trainer, metrics, "train")
        assert trainer._metrics["train"] == {}
        AlignTrainer.flush_metrics(trainer)
        logged.append(dict(trainer._metrics["train"]))
    assert logged[0] == logged[1] == {"m/mean": [0.25], "m/plain": [0.5, 1.5], "m/sum": [7.0]}


def test_a_metric_sent_as_different_kinds_is_refused():
    with pytest.raises(RuntimeError, match=r"'kl/add' is Weighted, Summed or plain on different processes"):
        recorded([{"kl/add": math.nan}, {"kl/add": Weighted(0.5, 2)}])


def test_a_metric_no_process_has_is_not_logged():
    logged = recorded([{"kl/add": Weighted(math.nan, 0)}, {"kl/add": Weighted(math.nan, 0)}])
    assert logged == {}


def test_building_contexts_wrap_trls_own_init_and_every_hook_attaches_after_it_in_order(monkeypatch):
    from trl import GRPOTrainer

    events = []

    class Recorder(TrainerHook):
        def __init__(self, label):
            self.label = label

        @contextlib.contextmanager
        def building(self, args):
            events.append(f"{self.label} enters with {args}")
            yield
            events.append(f"{self.label} exits")

        def attach(self, trainer):
            events.append(f"{self.label} attaches, sampler_model {trainer.sampler_model}")
            trainer.sampler_model = self.label  # what the next hook to attach sees

    def trl_init(trainer, *args, **kwargs):  # TRL's own __init__, without a model: only what AlignTrainer reads
        events.append("TRL builds")
        trainer.train_dataset = SimpleNamespace(column_names=["prompt"])

    monkeypatch.setattr(GRPOTrainer, "__init__", trl_init)
    trainer = AlignTrainer(args="config", hooks=[Recorder("first"), Recorder("second")])
    assert events == [
        "first enters with config",
        "second enters with config",
        "TRL builds",
        "second exits",
        "first exits",
        "first attaches, sampler_model None",
        "second attaches, sampler_model first",
    ]
    assert trainer.domains == []
