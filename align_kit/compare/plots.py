"""PNG figures laid out like the seeds' figures: one line per arm (the mean over its seeds) with a band of
mean ± sample std across seeds (no band for a single seed).

Seeds are put on a common step grid (the steps any of them logged, inside the range all of them cover) by linear
interpolation. Smoothing (`--smooth`) applies to each run before that, and only to figures, never to the tables:
an integer w >= 2 is a trailing moving average over w logged points (shorter at the start); a value a in (0, 1) is
an exponential moving average s_t = a * s_(t-1) + (1 - a) * x_t starting at s_0 = x_0; 0 or 1 is off.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from align_kit.compare.arms import Arm
from align_kit.compare.statistics import HUGE
from align_kit.tracking.metrics_file import Series


@dataclass(frozen=True)
class Panel:
    label: str
    candidates: tuple[str, ...]  # the first of these metrics that is compared is drawn


@dataclass(frozen=True)
class Layout:
    stem: str
    title: str
    panels: tuple[Panel, ...]


ACCURACY = Panel("accuracy", ("rewards/correctness/mean", "reward"))
ENTROPY = Panel("entropy", ("entropy",))
LAYOUTS = (
    Layout(
        "accuracy_entropy",
        "Accuracy and entropy (as figs 16-11, 18-5: Clip-Higher; 16-12, 18-8: overlong)",
        (ACCURACY, ENTROPY),
    ),
    Layout("reward", "Training reward (as fig 16-10: routing replay)", (Panel("reward", ("reward",)),)),
    Layout(
        "clip_ratio",
        "Share of tokens clipped",
        tuple(Panel(name, (f"clip_ratio/{name}",)) for name in ("high_mean", "low_mean", "region_mean")),
    ),
    Layout(
        "response_length",
        "Response length and truncation",
        (Panel("mean length", ("completions/mean_length",)), Panel("truncated share", ("completions/clipped_ratio",))),
    ),
    Layout(
        "routing_flip_rate", "Routing flips between rollout and training", (Panel("flip rate", ("routing/flip_rate",)),)
    ),
    Layout(
        "policy_ratio",
        "Importance ratio pi_theta / pi_old: its mean and its noise",
        (Panel("mean ratio", ("policy_ratio/mean",)), Panel("mean |ratio - 1|", ("policy_ratio/abs_dev",))),
    ),
)
# Without --metrics, the tables and figures cover those of these metrics that every run logged.
LAYOUT_METRICS = tuple(
    dict.fromkeys(metric for layout in LAYOUTS for panel in layout.panels for metric in panel.candidates)
)


@dataclass(frozen=True)
class FigureFile:
    path: Path
    title: str


def smooth(values: np.ndarray, smoothing: float) -> np.ndarray:
    if 0 < smoothing < 1:
        smoothed = np.empty_like(values)
        smoothed[0] = values[0]
        for index in range(1, len(values)):
            smoothed[index] = smoothing * smoothed[index - 1] + (1 - smoothing) * values[index]
        return smoothed
    window = int(smoothing)
    if window < 2:
        return values
    totals = np.concatenate([[0.0], np.cumsum(values)])
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - window, 0)
    return (totals[ends] - totals[starts]) / (ends - starts)


def describe_smoothing(smoothing: float) -> str:
    if 0 < smoothing < 1:
        return f"EMA with factor {smoothing:g}"
    if smoothing >= 2:
        return f"trailing moving average over {int(smoothing)} points"
    return "none"


def seed_band(series: list[Series], smoothing: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, mean, std) across seeds on a common grid; std is zero for a single seed."""
    start = max(s.steps[0] for s in series)
    end = min(s.steps[-1] for s in series)
    grid = np.unique(np.concatenate([s.steps for s in series]))
    grid = grid[(grid >= start) & (grid <= end)]
    curves = np.array([np.interp(grid, s.steps, smooth(s.values, smoothing)) for s in series])
    spread = curves.std(axis=0, ddof=1) if len(series) > 1 else np.zeros(len(grid))
    return grid, curves.mean(axis=0), spread


def planned_figures(metrics: list[str]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(file stem, title, [(panel label, metric)]) for each layout with a compared metric, then one figure per
    compared metric no layout placed."""
    chosen, placed, figures = set(metrics), set(), []
    for layout in LAYOUTS:
        panels = []
        for panel in layout.panels:
            metric = next((m for m in panel.candidates if m in chosen), None)
            if metric is not None:
                panels.append((panel.label if panel.label == metric else f"{panel.label}: {metric}", metric))
                placed.add(metric)
        if panels:
            figures.append((layout.stem, layout.title, panels))
    for metric in metrics:
        if metric not in placed:
            figures.append((f"metric_{re.sub(r'[^A-Za-z0-9_.-]+', '_', metric)}", metric, [(metric, metric)]))
    return figures


def axis_unit(series: list[Series]) -> float:
    """A power of ten the curves are drawn in when they are huge (matplotlib's axis range overflows near 1e308)."""
    peak = max(float(np.max(np.abs(s.values))) for s in series)
    return 10.0 ** math.floor(math.log10(peak)) if peak > HUGE else 1.0


def write_figures(arms: list[Arm], metrics: list[str], out_dir: Path, smoothing: float = 0) -> list[FigureFile]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    written = []
    for stem, title, panels in planned_figures(metrics):
        figure = Figure(figsize=(5.5 * len(panels), 4.0 + 0.25 * len(arms)), layout="constrained")
        FigureCanvasAgg(figure)
        for axes, (label, metric) in zip(figure.subplots(1, len(panels), squeeze=False)[0], panels, strict=True):
            unit = axis_unit([run.series[metric] for arm in arms for run in arm.runs])
            for index, arm in enumerate(arms):
                scaled = [Series(run.series[metric].steps, run.series[metric].values / unit) for run in arm.runs]
                steps, mean, std = seed_band(scaled, smoothing)
                color = f"C{index % 10}"  # an arm keeps its colour across figures
                axes.plot(steps, mean, color=color, label=f"{arm.name} (n={len(arm.runs)})")
                axes.fill_between(steps, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
            axes.set_title(label if unit == 1.0 else f"{label} (x {unit:.0e})")
            axes.set_xlabel("step")
            axes.grid(alpha=0.3)
        # One legend below the panels: arm names can be long, and each arm has the same colour in every panel.
        handles, labels = figure.axes[0].get_legend_handles_labels()
        figure.legend(handles, labels, loc="outside lower center", fontsize="small")
        figure.suptitle(title)
        path = out_dir / f"{stem}.png"
        figure.savefig(path, dpi=100)
        written.append(FigureFile(path, title))
    return written
