"""Per-arm statistics: seeds above the baseline counted per paired seed, and a single seed at the float maximum."""

from __future__ import annotations

import numpy as np

from align_kit.compare.arms import group_into_arms
from align_kit.compare.run_record import Run
from align_kit.compare.statistics import summarise_metric
from align_kit.tracking.metrics_file import Series
from tests.compare.sweep_by_hand import ARMS


def test_seeds_above_the_baseline_are_counted_per_seed():
    def run(node, seed, level):
        return Run(f"{node}-{seed}", {"clip.eps_high": ARMS[node]}, {"clip": node}, seed=seed,
                   series={"entropy": Series(np.array([1.0, 3.0]), np.array([level, level]))})  # fmt: skip

    # Baseline levels 0.5, 0.2, 0.9 for seeds 1-3; the other arm 0.6 (above), 0.1 (below), 1.0 (above), and a
    # seed 4 the baseline lacks, which is not counted.
    runs = [run("symmetric", 1, 0.5), run("symmetric", 2, 0.2), run("symmetric", 3, 0.9)]
    runs += [run("clip_higher", 1, 0.6), run("clip_higher", 2, 0.1), run("clip_higher", 3, 1.0)]
    runs += [run("clip_higher", 4, 5.0)]
    baseline, other = summarise_metric(group_into_arms(runs), "entropy")
    assert baseline.auc_above_baseline is None
    assert other.auc_above_baseline == (2, 3)


def test_a_single_seed_at_the_float_maximum_is_its_value_not_na():
    series = Series(np.array([1.0, 2.0, 3.0]), np.array([1e308, 1e308, 1e308]))
    run = Run("a", {}, {}, 1, {"big": series})
    (summary,) = summarise_metric(group_into_arms([run]), "big")
    assert (summary.final.mean, summary.auc.mean) == (1e308, 1e308)
