"""The sweep the compare tests read, from run folders, from a fake `wandb.Api` and from offline W&B runs: two arms
(clip=symmetric with eps_high 0.2, clip=clip_higher with eps_high 0.28) x seeds 1, 2, 3, five steps each,
compared with --last-k 2. Every expected number below is worked out by hand from these formulas.

reward at steps t = 1..5:
  symmetric:   0.1 t + c_s, c = -0.1, 0, +0.1 for seeds 1, 2, 3
  clip_higher: 0.2 t + d_s, d = -0.2, 0, +0.2
  final (mean of t = 4, 5): symmetric 0.45 + c = 0.35, 0.45, 0.55 -> mean 0.45, sample std sqrt((0.01+0+0.01)/2) = 0.1
                            clip_higher 0.9 + d = 0.7, 0.9, 1.1   -> mean 0.9,  std 0.2
  AUC/span of a line over [1, 5] is its value at t = 3: symmetric 0.3 + c -> mean 0.3, std 0.1;
                                                         clip_higher 0.6 + d -> mean 0.6, std 0.2
  difference: final 0.9 - 0.45 = 0.45, AUC 0.6 - 0.3 = 0.3, both with SE sqrt(0.1^2/3 + 0.2^2/3) = sqrt(0.05/3)

entropy is logged at steps 1, 3, 5 only (rows 2 and 4 lack it), plus e_s = 0, 0.1, 0.2 for seeds 1, 2, 3:
  symmetric (1.0, 0.2, 0.0) + e;  clip_higher (1.0, 0.8, 0.6) + e
  trapezoid over steps 1, 3, 5 = (v1 + v2) + (v2 + v3) = v1 + 2 v2 + v3; span 4
  AUC/span: symmetric (1.0 + 0.4 + 0.0)/4 + e = 0.35 + e -> mean 0.45, std 0.1
            clip_higher (1.0 + 1.6 + 0.6)/4 + e = 0.8 + e -> mean 0.9, std 0.1
  final (steps 3, 5): symmetric 0.1 + e -> mean 0.2, std 0.1; clip_higher 0.7 + e -> mean 0.8, std 0.1
  difference: final 0.6, AUC 0.45, both with SE sqrt(0.01/3 + 0.01/3) = sqrt(0.02/3)

kl is logged by the clip_higher runs only, so it is not a common metric and is left out.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.image
import pytest

SEEDS = (1, 2, 3)
ARMS = {"symmetric": 0.2, "clip_higher": 0.28}  # node -> clip.eps_high
LAST_K = 2
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

REWARD_SLOPE = {"symmetric": 0.1, "clip_higher": 0.2}
REWARD_OFFSET = {"symmetric": {1: -0.1, 2: 0.0, 3: 0.1}, "clip_higher": {1: -0.2, 2: 0.0, 3: 0.2}}
ENTROPY = {"symmetric": {1: 1.0, 3: 0.2, 5: 0.0}, "clip_higher": {1: 1.0, 3: 0.8, 5: 0.6}}
ENTROPY_OFFSET = {1: 0.0, 2: 0.1, 3: 0.2}

# (mean, std) over seeds, from the module docstring.
EXPECTED = {
    ("reward", "symmetric"): {"final": (0.45, 0.1), "auc": (0.3, 0.1)},
    ("reward", "clip_higher"): {"final": (0.9, 0.2), "auc": (0.6, 0.2)},
    ("entropy", "symmetric"): {"final": (0.2, 0.1), "auc": (0.45, 0.1)},
    ("entropy", "clip_higher"): {"final": (0.8, 0.1), "auc": (0.9, 0.1)},
}
# clip_higher - symmetric: (delta final, delta AUC, standard error of both).
EXPECTED_DIFFERENCE = {
    "reward": (0.45, 0.3, math.sqrt(0.05 / 3)),
    "entropy": (0.6, 0.45, math.sqrt(0.02 / 3)),
}


def logged_rows(node: str, seed: int) -> list[dict]:
    """What one run logs per step, keyed as in metrics.jsonl."""
    rows = []
    for step in range(1, 6):
        row = {"step": step, "reward": REWARD_SLOPE[node] * step + REWARD_OFFSET[node][seed], "epoch": step / 5}
        if step in ENTROPY[node]:
            row["entropy"] = ENTROPY[node][step] + ENTROPY_OFFSET[seed]
        if node == "clip_higher":
            row["kl"] = 0.01 * step
        rows.append(row)
    return rows


def run_config(node: str, seed: int) -> dict:
    return {
        "seed": seed,
        "paths": {"output_root": f"/tmp/outputs-{seed}"},  # differs per run, but is not an arm key
        "clip": {"_target_": "align_kit.components.clip.TokenClip", "eps_low": 0.2, "eps_high": ARMS[node]},
        "trainer": {"learning_rate": 1e-3, "num_iterations": 2},
    }


def choices(node: str, seed: int) -> dict:
    # The logger differs between seeds: it says where a run was logged, not what it trained.
    return {"clip": node, "advantage": "grpo", "logger": "none" if seed == 1 else "wandb_offline"}


def jobs():
    """(job number, node, seed) in the order of `align-kit train -m clip=symmetric,clip_higher seed=1,2,3`."""
    return [(number, node, seed) for number, (node, seed) in enumerate((n, s) for n in ARMS for s in SEEDS)]


def write_run_folder(folder: Path, node: str, seed: int, with_summary: bool = True) -> None:
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(json.dumps(run_config(node, seed)))  # JSON is valid YAML
    if with_summary:
        (folder / "summary.json").write_text(json.dumps({"choices": choices(node, seed), "seed": seed}))
    # HF's end-of-training summary row closes metrics.jsonl; it is not a training step.
    summary_row = {"step": 5, "train_runtime": 1.5, "train_loss": 0.25, "epoch": 1.0}
    lines = [json.dumps(row) for row in [*logged_rows(node, seed), summary_row]]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def assert_expected_statistics(result) -> None:
    assert [arm.name for arm in result.arms] == ["clip=symmetric", "clip=clip_higher"]
    assert [arm.seeds for arm in result.arms] == [list(SEEDS), list(SEEDS)]
    assert list(result.tables) == ["reward", "entropy"]  # kl is not logged by every run
    for metric, summaries in result.tables.items():
        for summary, node in zip(summaries, ARMS, strict=True):
            expected = EXPECTED[(metric, node)]
            assert (summary.final.mean, summary.final.std) == pytest.approx(expected["final"])
            assert (summary.auc.mean, summary.auc.std) == pytest.approx(expected["auc"])
            assert summary.final.n == summary.auc.n == 3
        baseline, other = summaries
        assert baseline.final_vs_baseline is None and baseline.auc_vs_baseline is None
        delta_final, delta_auc, stderr = EXPECTED_DIFFERENCE[metric]
        assert (other.final_vs_baseline.delta, other.final_vs_baseline.stderr) == pytest.approx((delta_final, stderr))
        assert (other.auc_vs_baseline.delta, other.auc_vs_baseline.stderr) == pytest.approx((delta_auc, stderr))


def assert_valid_png(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    pixels = matplotlib.image.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100


def wandb_config(node: str, seed: int) -> dict:
    # As align_kit.train.run_identity: the resolved config plus choice/<group> keys.
    return {**run_config(node, seed), **{f"choice/{group}": value for group, value in choices(node, seed).items()}}


def wandb_rows(node: str, seed: int) -> list[dict]:
    """What HF's W&B callback logs: `train/<metric>` against `train/global_step`."""
    return [
        {f"train/{key}": value for key, value in row.items() if key != "step"} | {"train/global_step": row["step"]}
        for row in logged_rows(node, seed)
    ]


class FakeWandbRun:
    def __init__(self, node: str, seed: int, group: str, events: list | None = None):
        self.name = f"clip={node},seed={seed}"
        self.group = group
        self.tags = [f"clip={node}", f"seed={seed}"]
        self.config = wandb_config(node, seed)
        self._rows = [row | {"_step": index, "_runtime": 0.1} for index, row in enumerate(wandb_rows(node, seed))]
        self.scans = []  # the keys of each scan_history call; None for the whole history
        self._events = events if events is not None else []

    def scan_history(self, keys=None, page_size=1000):
        self.scans.append(keys)
        self._events.append(("scan", self.name))
        if keys is None:
            return iter(self._rows)
        # As the W&B API: only the rows that hold every key asked for, with those keys.
        return iter([{key: row[key] for key in keys} for row in self._rows if all(key in row for key in keys)])


class FakeRuns:
    """Stands in for `wandb.apis.public.Runs`: its length from a count, its runs fetched a page at a time as it is
    iterated (each page fetch is logged in `events`)."""

    def __init__(self, runs: list[FakeWandbRun], per_page: int, events: list):
        self._runs, self._per_page, self._events = runs, per_page, events

    def __len__(self):
        return len(self._runs)

    def __iter__(self):
        for start in range(0, len(self._runs), self._per_page):
            self._events.append(("page", start // self._per_page))
            yield from self._runs[start : start + self._per_page]


class FakeApi:
    """Stands in for `wandb.Api()`: `.runs(path, filters=...)` over a project holding two groups, in pages of
    `per_page` runs; `listed` holds the runs it handed out, `events` the page fetches and history scans in order."""

    def __init__(self, per_page: int = 50):
        self.calls = []
        self.listed = []
        self.events = []
        self._per_page = per_page

    def runs(self, path, filters=None):
        self.calls.append((path, filters))
        everything = [FakeWandbRun(node, seed, "clip-sweep", self.events) for _, node, seed in jobs()]
        everything.append(FakeWandbRun("symmetric", 1, "another-group", self.events))
        self.listed = [run for run in everything if run.group == filters["group"]]
        return FakeRuns(self.listed, self._per_page, self.events)
