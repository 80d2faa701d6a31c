"""What align_kit would cost a GPU over plain TRL, counted on the CPU: per training step, the calls that would
synchronise the device with the host, and the ATen operators dispatched (each a kernel launch on a GPU).

A CPU profile misses both: a synchronisation (`.item()`, `.tolist()`, `.cpu()`, `bool(tensor)`, a data-dependent
shape) empties a GPU's kernel queue, and every small operator costs a launch of a few microseconds whatever its
arithmetic. Both arms (align_kit and `trl.GRPOTrainer`) train the same plan at a learning rate below float32's
resolution of the weights (1e-12), so they sample the same completions and TRL's own work is the same in both; the
difference is align_kit's.

Counted as synchronisations (`SyncCounter`): Tensor.item / tolist / cpu / numpy / to("cpu") (unless non_blocking);
bool(), float(), int() and index() of a tensor (a Python `if` on `.any()` included); torch.nonzero / argwhere /
masked_select / unique and indexing or assigning with a boolean mask (their output shape depends on the data);
torch.tensor(data, device=...) (a blocking copy from host memory waits for the device's queue). On the CPU every
tensor is on the host, so a call that would find its tensor there on a GPU too is counted all the same (an
over-count, never an under-count).
Counted as operators (`OpCounter`, a TorchDispatchMode): every ATen operator except views (no kernel).

Each event is attributed to the innermost frame outside torch: `align_kit/<file>:<function>` for align_kit's own
code, `<library>:<function>` for TRL's, transformers' or accelerate's; library code that an align_kit function
outside the trainer's plumbing (align_kit/trainer.py) called is marked `<align_kit function> -> <library>:...`: the
work is align_kit's, done by a library (a forward that a hook asks for, the overlong probe's generate), except under
an align_kit function that calls the library's method in its place (`STANDS_IN`). The per-source difference between
the arms is the report; a library source that differs is work align_kit made the library do.

Run: PYTHONPATH=. .venv/bin/python benchmarks/device_cost.py              (every composition, 4 steps)
     PYTHONPATH=. .venv/bin/python benchmarks/device_cost.py --only default --steps 8
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import align_kit
from benchmarks.timing import base_overrides, build_align_kit, build_trl, train_seconds

TORCH_DIR = str(Path(torch.__file__).parent)
PACKAGE_DIR = str(Path(align_kit.__file__).parent)
TRAINER_FILE = str(Path(PACKAGE_DIR, "trainer.py"))
THIS_FILE = __file__
LIBRARIES = ("trl", "transformers", "accelerate")

# The compositions that add metrics, against the TRL arm of the same model (the overrides apply to both arms; the
# TRL arm reads only the model, rewards, task and GRPOConfig fields of the plan).
COMPOSITIONS = {
    "default": [],
    "mismatch": ["rollout.log_mismatch=true"],
    "routing_replay=r3": ["model=tiny_moe", "routing_replay=r3"],
    # A budget inside the tiny policy's 20-22 tokens: most completions are cut, so the filter and the probe act.
    "overlong=filter probe_every=2 budget=20": [
        "overlong=filter",
        "overlong.probe_every=2",
        "trainer.max_completion_length=20",
    ],
}

# align_kit functions that call a library method in its place, by qualname: the work inside that method is the
# library's own (TRL's arm does it too); what else they call is theirs. The sampler's log-prob recording is `generate`
# itself, plus compute_transition_scores (and the scores generate keeps for it, which show in generate's own code);
# routing replay's gradient-checkpoint pinning runs the decoder layer's own recompute.
STANDS_IN = {
    "recording_sampled_logprobs.<locals>.generate_and_record": "GenerationMixin.generate",
    "RouterHooks._pinning.<locals>.checkpointed.<locals>.pinned": "Module._wrapped_call_impl",
    "RouterHooks._pinning.<locals>.checkpointed": "checkpoint",
}

SYNC_METHODS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__")
SHAPE_METHODS = ("nonzero", "argwhere", "masked_select", "unique")  # the output's shape is read from the data


def source_of(frame) -> str:
    """Who issued the call made in `frame` (see the module's docstring)."""
    while frame is not None and (
        frame.f_code.co_filename.startswith(TORCH_DIR) or frame.f_code.co_filename == THIS_FILE
    ):
        frame = frame.f_back
    if frame is None:
        return "(no Python caller)"
    filename = frame.f_code.co_filename
    if filename.startswith(PACKAGE_DIR):
        return _align_kit_name(frame)
    library = next((name for name in LIBRARIES if f"/{name}/" in filename), "other")
    issued = f"{library}:{frame.f_code.co_qualname}"
    called = {frame.f_code.co_qualname}  # what the next frame out called: one function and torch's frames around it
    outer = frame.f_back
    while outer is not None:
        name, qualname = outer.f_code.co_filename, outer.f_code.co_qualname
        if name.startswith(PACKAGE_DIR) and name != TRAINER_FILE and STANDS_IN.get(qualname) not in called:
            return f"{_align_kit_name(outer)} -> {issued}"
        called = called | {qualname} if name.startswith(TORCH_DIR) else {qualname}
        outer = outer.f_back
    return issued


def _align_kit_name(frame) -> str:
    return f"align_kit/{frame.f_code.co_filename[len(PACKAGE_DIR) + 1 :]}:{frame.f_code.co_qualname}"


def is_align_kit(source: str) -> bool:
    return source.startswith("align_kit/")


class SyncCounter:
    """While active (`with counter:`), counts the calls that would synchronise a GPU, by source and kind."""

    def __init__(self):
        self.counts: Counter[tuple[str, str]] = Counter()  # (source, kind)
        self._originals: list[tuple[object, str, object]] = []
        self._inside = threading.local()  # a counted call inside another (torch's own Python code) counts once

    def __enter__(self):
        for name in SYNC_METHODS + SHAPE_METHODS:
            self._wrap(torch.Tensor, name, lambda *args, name=name, **kwargs: name)
        for name in SHAPE_METHODS:
            self._wrap(torch, name, lambda *args, name=name, **kwargs: name)
        self._wrap(torch.Tensor, "to", _to_host)
        self._wrap(torch.Tensor, "__getitem__", lambda tensor, index: _boolean_index(index, "mask indexing"))
        self._wrap(torch.Tensor, "__setitem__", lambda tensor, index, value: _boolean_index(index, "mask assignment"))
        self._wrap(torch, "tensor", _host_to_device)
        return self

    def __exit__(self, *exc):
        for owner, name, original in reversed(self._originals):
            setattr(owner, name, original)
        self._originals.clear()

    def _wrap(self, owner, name: str, kind_of) -> None:
        """Replace `owner.name` by a counting wrapper; `kind_of(*args, **kwargs)` names the sync, or None (none)."""
        original = getattr(owner, name)
        counter = self

        def counted(*args, **kwargs):
            if getattr(counter._inside, "depth", 0) == 0:
                kind = kind_of(*args, **kwargs)
                if kind is not None:
                    counter.counts[(source_of(sys._getframe(1)), kind)] += 1
            counter._inside.depth = getattr(counter._inside, "depth", 0) + 1
            try:
                return original(*args, **kwargs)
            finally:
                counter._inside.depth -= 1

        self._originals.append((owner, name, original))
        setattr(owner, name, counted)


def _to_host(tensor, *args, **kwargs) -> str | None:
    if kwargs.get("non_blocking"):  # a copy that does not wait (to the device from the host, in align_kit's use)
        return None
    target = kwargs.get("device", args[0] if args else None)
    if isinstance(target, str | torch.device) and torch.device(target).type == "cpu":
        return "to(cpu)"
    return None


def _boolean_index(index, kind: str) -> str | None:
    parts = index if isinstance(index, tuple) else (index,)
    return kind if any(torch.is_tensor(part) and part.dtype == torch.bool for part in parts) else None


def _host_to_device(*args, **kwargs) -> str | None:
    return "torch.tensor(device=)" if kwargs.get("device") is not None else None


class OpCounter(TorchDispatchMode):
    """While active, counts the ATen operators dispatched, views excepted, by source."""

    def __init__(self):
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not _is_view(func):
            self.counts[source_of(sys._getframe(1))] += 1
        return func(*args, **(kwargs or {}))


_VIEWS: dict = {}


def _is_view(func) -> bool:
    """An operator whose outputs alias its input without writing to it: a view, no kernel."""
    if func not in _VIEWS:
        returns = func._schema.returns
        _VIEWS[func] = bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)
    return _VIEWS[func]


@dataclass
class Counts:
    """One arm's counts over a run of `steps` training steps."""

    steps: int
    syncs: Counter = field(default_factory=Counter)  # (source, kind) -> calls
    ops: Counter = field(default_factory=Counter)  # source -> operators
    log_history: list = field(default_factory=list)

    def syncs_by_source(self) -> Counter:
        by_source = Counter()
        for (source, _), calls in self.syncs.items():
            by_source[source] += calls
        return by_source


@contextlib.contextmanager
def counting(counts: Counts):
    syncs, ops = SyncCounter(), OpCounter()
    with syncs, ops:
        yield
    counts.syncs.update(syncs.counts)
    counts.ops.update(ops.counts)


def count_arm(overrides: list[str], cache_dir: str, build) -> Counts:
    """Count one arm's trainer.train() (model load and trainer construction excluded)."""
    steps = int(next(o.split("=", 1)[1] for o in reversed(overrides) if o.startswith("trainer.max_steps=")))
    counts = Counts(steps)
    _, trainer = train_seconds(overrides, cache_dir, build, around=lambda: counting(counts))
    counts.log_history = trainer.state.log_history
    return counts


def arm_overrides(cache_dir: str, steps: int, extra: list[str], learning_rate: float = 1e-12) -> list[str]:
    return [*base_overrides(cache_dir, steps), f"trainer.learning_rate={learning_rate}", *extra]


def difference(ours: Counter, theirs: Counter) -> dict:
    """Per key, ours - theirs, for the keys where they differ."""
    return {
        key: ours[key] - theirs[key] for key in sorted(set(ours) | set(theirs), key=str) if ours[key] != theirs[key]
    }


def report(name: str, ours: Counts, theirs: Counts) -> str:
    steps = ours.steps
    lines = [f"== {name}: {steps} steps, per step (align_kit - TRL), by source"]
    for title, mine, plain in (
        ("synchronisations", ours.syncs_by_source(), theirs.syncs_by_source()),
        ("operators (no views)", ours.ops, theirs.ops),
    ):
        extra = difference(mine, plain)
        total_mine, total_plain = sum(mine.values()), sum(plain.values())
        lines.append(
            f"{title}: align_kit {total_mine / steps:.1f}, TRL {total_plain / steps:.1f}, "
            f"extra {(total_mine - total_plain) / steps:+.2f}"
        )
        for source, delta in sorted(extra.items(), key=lambda item: -abs(item[1])):
            kinds = ""
            if title == "synchronisations":
                kinds = ", ".join(
                    f"{kind} {calls / steps:g}"
                    for (where, kind), calls in sorted(ours.syncs.items())
                    if where == source
                )
                kinds = f"  [{kinds}]" if kinds else ""
            lines.append(f"  {delta / steps:+9.2f}  {source}{kinds}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4, help="training steps per arm (even: 2 steps per generation)")
    parser.add_argument("--only", default=None, help=f"comma-separated compositions of {list(COMPOSITIONS)}")
    parser.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "align_kit"))
    parser.add_argument("--override", action="append", default=[], help="extra Hydra override for both arms")
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = args.only.split(",") if args.only else list(COMPOSITIONS)
    unknown = [name for name in names if name not in COMPOSITIONS]
    if unknown:
        parser.error(f"--only: no composition {', '.join(unknown)}; choose from {', '.join(COMPOSITIONS)}")
    for name in names:
        overrides = arm_overrides(args.cache_dir, args.steps, [*COMPOSITIONS[name], *args.override])
        ours = count_arm(overrides, args.cache_dir, build_align_kit)
        theirs = count_arm(overrides, args.cache_dir, build_trl)
        print(report(name, ours, theirs), flush=True)


if __name__ == "__main__":
    main()
