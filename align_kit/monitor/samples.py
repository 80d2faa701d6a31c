"""The completions behind an alert: a bounded ring of the last generation rounds, and the files written from it.

A number says that a run went wrong; the groups the model wrote say how. The trainer keeps the last
`ring_generations` rounds (prompt, completions, each reward, advantage, length, cut at the budget); when an alert
fires, the groups of the steps it read (`Alert.first_step` to `Alert.step`) are written next to `alerts.jsonl`, one
file per alert under `samples/`, and, every `every` steps, a small periodic sample, so the doctor can show what
changed between a healthy and a sick stretch (align_kit/doctor/samples.py reads them).

Bounded on every axis, however long the run: at most `files_per_rule` alert files per rule, at most
`periodic_files` periodic ones (when full, every other one is removed and the period doubles, so the kept ones
still span the run), each file at most `max_bytes`. Written atomically (a temporary file renamed into place); an
existing file is never replaced (a resumed run that meets the same alert again writes `...-2.json`).

Reading the round costs no device-to-host copy: the texts, rewards and advantages are the Python lists TRL keeps
for its own completion logging, the lengths come from the completion ids TRL sampled (kept on the host).

Each completion's mean token entropy comes from the loss's own forward pass: TRL computes per-token entropies there
for its `entropy` metric (GRPOTrainer._compute_loss, compute_entropy=True), and `on_loss` sees them. The recorder
tags each row of TRL's batch with its place in the ring (`sample_row`, a per-row tensor that follows the rows
through TRL's shuffle and split into micro-batches), takes each row's mean over the tokens TRL's metric averages,
and keeps it on the device until a file is written (one transfer then, none on the step's path). The first value
a row gets is kept (with `num_iterations` > 1 a round trains several times): the policy closest to the one that
sampled it. A row whose loss has not run yet when its file is written (a round still being trained on), another
process's row, and every row under the plain-TRL `HealthCallback` have `"entropy": null`: plain TRL keeps the
per-token entropies local to its loss and logs only their mean, so a callback could have them only through a
second forward pass, which the samples do not pay for.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import tempfile
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from align_kit.core.fields import knob
from align_kit.core.hooks import BatchState, TrainerHook

SAMPLES_DIR = "samples"  # in the run folder, beside alerts.jsonl
ALERT_PREFIX = "alert"
PERIODIC_PREFIX = "step"
CUT_MARK = " [...]"
SAMPLE_ROW = "sample_row"  # the per-row key the recorder adds to TRL's batch: each row's place in the ring
FROM_LOSS = "the loss's forward (TRL's per-token entropies)"
NOT_COMPUTED = "not recorded (plain TRL keeps per-token entropies inside its loss)"


@dataclass
class SampleSettings:
    """`monitor.samples.*`: what the run keeps of its completions for the alerts."""

    ring_generations: int = knob(
        16, ge=1, help="Generation rounds kept in memory (the newest): an alert's file is drawn from them."
    )
    groups_per_file: int = knob(4, ge=1, help="Groups written per file (spread over the alert's window).")
    files_per_rule: int = knob(3, ge=0, help="Alert files per rule over the whole run (the first firings).")
    every: int = knob(0, ge=0, help="A periodic sample every `every` training steps; 0 turns it off.")
    periodic_files: int = knob(
        20, ge=2, help="Periodic files kept; when full, every other one goes and the period doubles."
    )
    max_bytes: int = knob(65536, ge=4096, help="The largest file written (texts are cut to fit).")


@dataclass
class Generation:
    """One generation round, every process's rows (in TRL's order: `group_size` completions per prompt)."""

    step: int  # the global step at which it was generated (the steps after it train on it)
    group_size: int
    prompts: list[str]
    completions: list[str]
    rewards: dict[str, list[float]]  # per reward function
    advantages: list[float]
    lengths: list[int] | None = None  # completion tokens
    truncated: list[bool] | None = None  # cut at the length budget (no stop token)
    lengths_source: str = "generated ids"
    weights: dict[str, float] | None = None  # the reward weights in force (the total is their weighted sum)
    first_row: int = 0  # the ring's number for row 0 (set when added): the loss finds its rows by it
    entropies: list[float | None] | None = None  # mean token entropy per completion, where the loss computed it
    entropy_source: str = NOT_COMPUTED
    # Fills what is measured only when a file is written: the reward weights, and for a trainer that keeps no ids
    # (plain TRL) the lengths and truncation.
    measure: Callable[[Generation], None] | None = None

    def ensure_lengths(self) -> None:
        """What the record left to measure until a file needs it (lengths, reward weights)."""
        if self.measure is not None:
            self.measure(self)
            self.measure = None

    def groups(self) -> list[range]:
        rows = len(self.completions)
        return [range(start, min(start + self.group_size, rows)) for start in range(0, rows, self.group_size)]

    def group_record(self, rows: range, max_chars: int) -> dict[str, Any]:
        completions = []
        for row in rows:
            entry: dict[str, Any] = {
                "completion": cut(self.completions[row], max_chars),
                "rewards": {name: values[row] for name, values in self.rewards.items()},
                "reward": sum(
                    (self.weights or {}).get(name, 1.0) * values[row] for name, values in self.rewards.items()
                ),
                "advantage": self.advantages[row],
                "entropy": self.entropies[row] if self.entropies is not None else None,
            }
            if self.lengths is not None:
                entry["length"] = self.lengths[row]
            if self.truncated is not None:
                entry["truncated"] = self.truncated[row]
            completions.append(entry)
        return {"step": self.step, "prompt": cut(self.prompts[rows.start], max_chars), "completions": completions}


def as_text(value: Any) -> str:
    """A prompt or completion as TRL logs it (text, or a list of chat messages) as one text."""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and all(isinstance(item, dict) for item in value):
        return "\n".join(f"{item.get('role', '?')}: {item.get('content', '')}" for item in value)
    return str(value)


def cut(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max(0, max_chars - len(CUT_MARK))] + CUT_MARK


def weights_reader(weights: Any) -> Callable[[Generation], None]:
    """Sets a generation's reward weights from the weights tensor in force when it was scored (a copy per round),
    when its file is written."""

    def measure(generation: Generation) -> None:
        generation.weights = dict(zip(generation.rewards, weights.tolist(), strict=False))

    return measure


def generation_from_log(log: dict[str, Any], step: int, group_size: int) -> Generation:
    """A `Generation` from what `logged_generations` (align_kit/trainer.py) read of TRL's completion log."""
    return Generation(
        step=step,
        group_size=group_size,
        prompts=[as_text(prompt) for prompt in log["prompt"]],
        completions=[as_text(completion) for completion in log["completion"]],
        rewards={name: [float(value) for value in values] for name, values in log["rewards"].items()},
        advantages=[float(value) for value in log["advantages"]],
    )


class SampleRing:
    """The newest `capacity` generation rounds, and the entropies the loss computed for their rows (on the device
    until a file needs them)."""

    def __init__(self, capacity: int):
        self.rounds: deque[Generation] = deque(maxlen=capacity)
        self.next_row = 0
        # (the newest round's first_row when recorded, ring rows [B], mean entropies [B]), in the order recorded
        self.pending: list[tuple[int, Any, Any]] = []

    def add(self, generation: Generation) -> None:
        generation.first_row, self.next_row = self.next_row, self.next_row + len(generation.completions)
        self.rounds.append(generation)
        # A loss only trains rows generated before it: what was recorded while an evicted round was the newest
        # belongs to evicted rounds, and goes with them (the list stays bounded without reading the rows).
        oldest = self.rounds[0].first_row
        self.pending = [part for part in self.pending if part[0] >= oldest]

    def record_entropies(self, rows, means) -> None:
        """Rows `rows` (ring numbers) had these mean token entropies in a loss (device tensors, read later)."""
        if self.rounds:
            self.pending.append((self.rounds[-1].first_row, rows, means))

    def resolve_entropies(self) -> None:
        """The recorded entropies read in one device-to-host transfer into their rounds (each row keeps the first
        value it got; NaN, a row with no token in the loss, stays None)."""
        if not self.pending:
            return
        import torch

        parts, self.pending = self.pending, []
        flat = torch.cat([t.reshape(-1).double() for _, rows, means in parts for t in (rows, means)]).tolist()
        values, offset = [], 0
        for _, rows, _ in parts:
            count = rows.numel()
            values += zip(flat[offset : offset + count], flat[offset + count : offset + 2 * count], strict=True)
            offset += 2 * count
        by_first = {gen.first_row: gen for gen in self.rounds}
        starts = sorted(by_first)
        for row, value in values:
            index = bisect.bisect_right(starts, int(row)) - 1
            if index < 0 or value != value:  # an evicted round's row, or NaN
                continue
            gen = by_first[starts[index]]
            position = int(row) - gen.first_row
            if position >= len(gen.completions):
                continue
            if gen.entropies is None:
                gen.entropies = [None] * len(gen.completions)
            if gen.entropies[position] is None:
                gen.entropies[position] = value

    def within(self, first_step: int | None, last_step: int) -> list[Generation]:
        """The rounds whose training steps overlap [first_step, last_step] (a round generated at step s trains the
        steps after s), or all kept up to `last_step` when the window is unknown; the newest kept round that
        precedes the window when none falls inside it (the ring may be shorter than the window)."""
        before = [gen for gen in self.rounds if gen.step < last_step or gen.step == last_step == 0]
        if first_step is None:
            return before
        inside = [gen for gen in before if gen.step >= first_step - 1]
        return inside or before[-1:]


def spread(groups: list[Any], count: int) -> list[Any]:
    """`count` items of `groups`, evenly spread from the first to the last (all when there are fewer)."""
    if len(groups) <= count:
        return list(groups)
    if count == 1:
        return [groups[-1]]
    return [groups[round(index * (len(groups) - 1) / (count - 1))] for index in range(count)]


def sample_document(generations: list[Generation], settings: SampleSettings, about: dict[str, Any]) -> dict:
    """The JSON document of one file: `about` (what it was written for) and up to `groups_per_file` groups spread
    over `generations`, their texts cut so that the file (`encoded`) stays under `max_bytes`; when even texts of 16
    characters do not fit (groups of many completions), fewer groups, down to one."""
    chosen = spread([(gen, rows) for gen in generations for rows in gen.groups()], settings.groups_per_file)
    for gen in {id(gen): gen for gen, _ in chosen}.values():
        gen.ensure_lengths()
    sources = sorted({gen.lengths_source for gen, _ in chosen})
    entropy_sources = sorted({gen.entropy_source for gen, _ in chosen})
    document: dict[str, Any] = {**about, "lengths_from": sources, "entropy_from": entropy_sources, "groups": []}
    max_chars = 4000
    while True:
        document["groups"] = [gen.group_record(rows, max_chars) for gen, rows in chosen]
        if len(encoded(document).encode()) <= settings.max_bytes:
            return document
        if max_chars > 16:
            max_chars //= 2
        elif len(chosen) > 1:
            chosen = spread(chosen, len(chosen) // 2)
        else:
            return document  # one group's numbers alone exceed max_bytes: written whole rather than not at all


def encoded(document: dict) -> str:
    """A sample file's text, as written and as measured against `max_bytes`."""
    return json.dumps(document, indent=1)


def write_new(path: Path, document: dict) -> Path:
    """`document` as JSON at `path`, or at `path`'s stem plus -2, -3, ... when that exists; atomically."""
    target, number = path, 1
    while target.exists():
        number += 1
        target = path.with_name(f"{path.stem}-{number}{path.suffix}")
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(encoded(document))
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def safe_rule(rule: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", rule)


class SampleBook:
    """The ring and the files written from it, for one run folder (the rank that writes)."""

    def __init__(self, settings: SampleSettings, run_dir: Path, wandb_log: Callable[[str, dict], None] | None = None):
        self.settings = settings
        self.ring = SampleRing(settings.ring_generations)
        self.run_dir = Path(run_dir)
        self.period = settings.every
        self._wandb_log = wandb_log if wandb_log is not None else log_to_wandb
        self._per_rule: dict[str, int] = {}
        self._last_periodic = -1
        self.refresh()

    @property
    def folder(self) -> Path:
        return self.run_dir / SAMPLES_DIR

    def refresh(self) -> None:
        """Count what an earlier part of this run (before a resume) wrote: the caps hold over the whole run."""
        self._per_rule = {}
        if self.folder.is_dir():
            for path in self.folder.glob(f"{ALERT_PREFIX}-*.json"):
                document = _read(path)
                if document is not None and isinstance(document.get("rule"), str):
                    self._per_rule[document["rule"]] = self._per_rule.get(document["rule"], 0) + 1

    def on_alert(self, alert: Any) -> Path | None:
        """Write the groups behind `alert` (an `Alert`); None when the rule's files are used up or nothing was
        generated yet."""
        written = self._per_rule.get(alert.rule, 0)
        if written >= self.settings.files_per_rule:
            return None
        generations = self.ring.within(alert.first_step, alert.step)
        if not generations:
            return None
        about = {
            "kind": "alert",
            "rule": alert.rule,
            "step": alert.step,
            "first_step": alert.first_step,
            "severity": alert.severity,
            "message": alert.message,
        }
        path = self._write(f"{ALERT_PREFIX}-{alert.step:08d}-{safe_rule(alert.rule)}.json", generations, about)
        self._per_rule[alert.rule] = written + 1
        return path

    def on_step(self, step: int) -> Path | None:
        """The periodic sample, when one is due at `step`."""
        if not self.period or step % self.period or step == self._last_periodic or not self.ring.rounds:
            return None
        self._last_periodic = step
        newest = [self.ring.rounds[-1]]
        path = self._write(f"{PERIODIC_PREFIX}-{step:08d}.json", newest, {"kind": "periodic", "step": step})
        self._thin()
        return path

    def _write(self, name: str, generations: list[Generation], about: dict) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.ring.resolve_entropies()
        document = sample_document(generations, self.settings, about)
        path = write_new(self.folder / name, document)
        self._wandb_log(path.stem, document)
        return path

    def _thin(self) -> None:
        """At `periodic_files`, remove every other periodic file (the first and the newest stay) and double the
        period: the kept ones still cover the run, and their number stays bounded."""
        kept = sorted(self.folder.glob(f"{PERIODIC_PREFIX}-*.json"))
        if len(kept) < self.settings.periodic_files:
            return
        for index, path in enumerate(kept[:-1]):
            if index % 2 == 1:
                path.unlink(missing_ok=True)
        self.period *= 2


def _read(path: Path) -> dict | None:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def table_rows(document: dict) -> list[list[Any]]:
    """A sample file's completions as rows: step, prompt, completion, reward, advantage, length, truncated,
    entropy."""
    return [
        [
            group["step"],
            group["prompt"],
            entry["completion"],
            entry["reward"],
            entry["advantage"],
            entry.get("length"),
            entry.get("truncated"),
            entry.get("entropy"),
        ]
        for group in document["groups"]
        for entry in group["completions"]
    ]


TABLE_COLUMNS = ["step", "prompt", "completion", "reward", "advantage", "length", "truncated", "entropy"]


def log_to_wandb(name: str, document: dict) -> None:
    """The same samples as a W&B table, when this run already logs to W&B."""
    import sys

    wandb = sys.modules.get("wandb")
    if wandb is None or getattr(wandb, "run", None) is None:
        return
    try:
        wandb.run.log({f"samples/{name}": wandb.Table(columns=TABLE_COLUMNS, data=table_rows(document))}, commit=False)
    except Exception as error:  # samples must never take the run down
        print(f"align-kit: W&B samples table not sent ({error})")


@dataclass
class SampleRecorder(TrainerHook):
    """Adds each training round to the ring at no device-to-host cost (align_kit/trainer.py: `logged_generations`),
    and each row's mean token entropy from the loss's forward (left on the device until a file is written)."""

    ring: SampleRing = field(default_factory=lambda: SampleRing(1))

    @property
    def name(self) -> str:
        return "samples"

    def on_scored_batch(self, trainer, state: BatchState, batch) -> None:
        if state.mode != "train":
            return None
        import torch

        from align_kit.trainer import logged_generations, stop_token_ids

        rows = len(state.inputs) * trainer.accelerator.num_processes  # TRL logs the rows of every process
        generation = generation_from_log(logged_generations(trainer, rows), trainer.state.global_step, state.group_size)
        weights = state.reward_weights if state.reward_weights is not None else trainer.reward_weights
        generation.measure = weights_reader(weights)  # read when a file is written, never on the training path
        ids = state.sampled_ids[1] if state.sampled_ids is not None else None
        if ids is not None and len(ids) == len(generation.completions):  # one process: the ids are every row
            stops = set(stop_token_ids(trainer))
            generation.lengths = [len(row) for row in ids]
            generation.truncated = [bool(row) and row[-1] not in stops for row in ids]
        else:
            generation.lengths_source = "not recorded (several processes)"
        generation.entropy_source = FROM_LOSS
        self.ring.add(generation)
        # This process's rows, numbered as the ring numbers them (TRL logs every process's rows, this one's from
        # state.start): the number follows each row through TRL's shuffle and split into micro-batches.
        first = generation.first_row + state.start
        batch[SAMPLE_ROW] = torch.arange(first, first + len(state.inputs), device=batch["completion_ids"].device)
        return None

    def on_loss(self, trainer, loss) -> None:
        rows = loss.inputs.get(SAMPLE_ROW)
        if loss.mode != "train" or rows is None or loss.forward is None or loss.forward[1] is None:
            return None
        inputs = loss.inputs
        # The tokens TRL's own `entropy` metric averages (the completion, less tool output where a tool_mask says so).
        mask = (
            inputs["completion_mask"] if "tool_mask" not in inputs else inputs["completion_mask"] * inputs["tool_mask"]
        )
        entropies = loss.forward[1].detach()
        # Four operators, no read: a row with no token gives 0/0 = NaN, which resolve_entropies leaves as None.
        self.ring.record_entropies(rows, (entropies * mask).sum(dim=1) / mask.sum(dim=1))
        return None
