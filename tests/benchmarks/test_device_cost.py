"""What align_kit would cost a GPU, counted on the CPU (benchmarks/device_cost.py): the counters find what they
count and attribute it to its caller; and on a few steps of each composition that adds metrics, align_kit's own code
synchronises with the device only in the one read of its metrics per logged step, and issues at most a stated number
of operators per step."""

from __future__ import annotations

import pytest
import torch

from align_kit.core.hooks import masked_mean, read_deferred
from benchmarks import device_cost
from benchmarks.device_cost import OpCounter, SyncCounter, source_of

STEPS = 4  # two generations of two steps each, every step logged (trainer.logging_steps=1)
HERE = "other:"  # a frame outside align_kit and the libraries: this file

# Operators align_kit's code issues per step, at most (library code it calls included). Measured on 2026-12-07 over
# 4 steps of the tiny models: default 122, mismatch 142, routing_replay=r3 331 (its router hooks on 4 MoE layers in
# every forward: the replay itself), overlong=filter 122 (before the metrics stayed on the device: 182, 231, 380, 182
# more than TRL). TRL's own step dispatches about 5,000 on the dense model, 6,500 on the MoE.
OPERATOR_BOUNDS = {
    "default": 130,
    "mismatch": 150,
    "routing_replay=r3": 350,
    "overlong=filter probe_every=2 budget=20": 130,
}
# The one read of the hooks' metrics when the trainer logs.
METRICS_READ = "align_kit/core/hooks.py:read_deferred"
# Synchronisations allowed beyond it, per composition: TRL takes the sampler's log-probs as host lists (as vLLM returns
# them), one copy per generation, and transformers' compute_transition_scores (which gives them) selects by boolean
# masks.
ALLOWED_SYNCS = {
    "mismatch": ("align_kit/core/hooks.py:BatchState.completion_logprobs", "GenerationMixin.compute_transition_scores"),
}
# Off the step's path, counted in neither: the overlong probe generates, on probing batches only; a sample file reads
# its round's reward weights (TRL's CPU tensor) and the completions' entropies (one transfer) when an alert or the
# periodic sample writes one.
PERIODIC = (
    "align_kit/components/overlong.py:OverlongEngagement.probe",
    "align_kit/monitor/samples.py:weights_reader",
    "align_kit/monitor/samples.py:SampleRing.resolve_entropies",
)


def test_the_sync_counter_counts_each_kind_once_and_names_the_caller():
    values = torch.tensor([1.0, -2.0, 3.0])
    with SyncCounter() as counter:
        values.sum().item()
        values.tolist()
        float(values[0])
        if (values > 2).any():  # a Python `if` on a tensor
            pass
        values[values > 0]  # a boolean mask: the result's size is read from the data
        torch.nonzero(values)
        values.to("cpu")
        torch.tensor([1.0], device="cpu")
        values[1:]  # none of these synchronise
        values.to(torch.float64)
        torch.tensor([1.0])
    caller = f"{HERE}{test_the_sync_counter_counts_each_kind_once_and_names_the_caller.__qualname__}"
    assert counter.counts == {
        (caller, kind): 1
        for kind in (
            "item",
            "tolist",
            "__float__",
            "__bool__",
            "mask indexing",
            "nonzero",
            "to(cpu)",
            "torch.tensor(device=)",
        )
    }


def test_the_operator_counter_skips_views_and_attributes_align_kits_code():
    values, mask = torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([[1, 0], [1, 1]])
    with OpCounter() as ops, SyncCounter() as syncs:
        mean = masked_mean(values, mask)  # mask.sum(), values * mask, .sum(), the division: 4 operators
        values.view(-1).t()  # views: no kernel
    assert ops.counts == {"align_kit/core/hooks.py:masked_mean": 4}
    assert syncs.counts == {}  # the mean stays on the device
    with SyncCounter() as syncs:
        (read,) = read_deferred([mean])
    assert read == pytest.approx(8 / 3) and read.weight == 3
    assert syncs.counts == {(METRICS_READ, "tolist"): 1}  # value and weight in one transfer


def test_library_code_that_align_kit_calls_is_marked_as_align_kits(monkeypatch):
    """Code compiled under file names inside trl's and align_kit's folders (no file is written): a sync in trl code
    called by an align_kit component is the component's; called from the trainer's plumbing alone it is TRL's."""
    import sys
    from pathlib import Path

    import trl

    def defined(folder: str, name: str, code: str, namespace: dict):
        exec(compile(code, str(Path(folder, f"{name}.py")), "exec"), namespace)  # noqa: S102 - the test's own code
        return namespace[name]

    namespace = {"sys": sys, "source_of": source_of}
    defined(Path(trl.__file__).parent, "library", "def library():\n    return source_of(sys._getframe())\n", namespace)
    defined(device_cost.PACKAGE_DIR, "trainer", "def trainer():\n    return library()\n", namespace)
    component = defined(
        Path(device_cost.PACKAGE_DIR, "components"), "component", "def component():\n    return trainer()\n", namespace
    )
    assert component() == "align_kit/components/component.py:component -> trl:library"
    assert namespace["trainer"]() == "trl:library"
    # A wrapper that calls the library's method in its place (as the sampler's log-prob recording calls generate)
    # does not claim that method's work.
    wrapper = defined(
        Path(device_cost.PACKAGE_DIR, "components"), "wrapper", "def wrapper():\n    return library()\n", namespace
    )
    assert wrapper() == "align_kit/components/wrapper.py:wrapper -> trl:library"
    monkeypatch.setitem(device_cost.STANDS_IN, "wrapper", "library")
    assert wrapper() == "trl:library"


# The default tier counts the default composition; the others (6-58 s each) are counted in the slow tier.
SLOW_COMPOSITIONS = {"routing_replay=r3", "mismatch", "overlong=filter probe_every=2 budget=20"}


@pytest.mark.parametrize(
    "composition",
    [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_COMPOSITIONS else name for name in OPERATOR_BOUNDS],
)
def test_align_kit_reads_the_device_once_per_logged_step_and_bounds_its_operators(composition, overrides_for):
    extra = [o for o in overrides_for() if o.startswith(("paths.", "model.warm_start"))]
    cache_dir = next(o.split("=", 1)[1] for o in extra if o.startswith("paths.cache_dir="))
    overrides = device_cost.arm_overrides(cache_dir, STEPS, [*extra, *device_cost.COMPOSITIONS[composition]])
    counts = device_cost.count_arm(overrides, cache_dir, device_cost.build_align_kit)
    logged = [row for row in counts.log_history if "loss" in row]
    assert len(logged) == STEPS

    def on_the_step(source: str) -> bool:  # align_kit's code, or library code it called, on every step's path
        return "align_kit/" in source and not any(name in source for name in PERIODIC)

    ours = {source: calls for source, calls in counts.syncs_by_source().items() if on_the_step(source)}
    allowed = ALLOWED_SYNCS.get(composition, ())
    hot_path = {source: calls for source, calls in ours.items() if not any(name in source for name in allowed)}
    # The one read per log: every training step logs (the end-of-training row finds nothing left to read).
    assert hot_path == {METRICS_READ: STEPS}
    assert counts.syncs[(METRICS_READ, "tolist")] == STEPS
    operators = sum(calls for source, calls in counts.ops.items() if on_the_step(source)) / STEPS
    assert 0 < operators <= OPERATOR_BOUNDS[composition]
    if "probe_every" in composition:  # the probe ran: its generate is counted, apart
        assert any(source.startswith(PERIODIC) for source in counts.ops)
