"""Arms: runs grouped and named by the config keys and node choices that tell them apart (the seed and what follows
it left out)."""

from __future__ import annotations

import numpy as np

from align_kit.compare.arms import group_into_arms
from align_kit.compare.command import compare
from align_kit.compare.run_record import Run
from align_kit.tracking.metrics_file import Series
from tests.compare.sweep_by_hand import LAST_K, jobs, write_run_folder


def test_arms_are_named_by_config_keys_without_node_choices(tmp_path):
    for number, node, seed in jobs():
        write_run_folder(tmp_path / str(number), node, seed, with_summary=False)
    result = compare([str(tmp_path)], last_k=LAST_K, out=tmp_path / "out")
    assert [arm.name for arm in result.arms] == ["clip.eps_high=0.2", "clip.eps_high=0.28"]


def make_run(label: str, config: dict, node_choices: dict) -> Run:
    return Run(label, config, node_choices, seed=1, series={"reward": Series(np.array([1.0]), np.array([0.0]))})


def test_a_key_the_node_choice_does_not_determine_joins_the_arm_name():
    runs = [
        make_run("a", {"clip.eps_high": 0.2}, {"clip": "symmetric"}),
        make_run("b", {"clip.eps_high": 0.28}, {"clip": "clip_higher"}),
        make_run("c", {"clip.eps_high": 0.32}, {"clip": "clip_higher"}),
        make_run("d", {"clip.eps_high": 0.28, "trainer.output_dir": "/x"}, {"clip": "clip_higher", "sweep": "s"}),
    ]
    arms = group_into_arms(runs)
    assert [arm.name for arm in arms] == [
        "clip=symmetric, clip.eps_high=0.2",
        "clip=clip_higher, clip.eps_high=0.28",
        "clip=clip_higher, clip.eps_high=0.32",
    ]
    assert [[run.label for run in arm.runs] for arm in arms] == [["a"], ["b", "d"], ["c"]]


def test_runs_that_differ_only_by_seed_form_one_arm():
    arms = group_into_arms([make_run("a", {"seed": 1}, {}), make_run("b", {"seed": 2}, {})])
    assert [(arm.name, len(arm.runs)) for arm in arms] == [("all runs", 2)]


def test_a_key_that_follows_the_seed_is_aggregated_with_it():
    def run(label, seed, coin_seed):
        config = {"seed": seed, "reward.coin_flip.seed": coin_seed}
        return Run(label, config, {}, seed=seed, series={"reward": Series(np.array([1.0]), np.array([0.0]))})

    follows = group_into_arms([run("a", 1, 1), run("b", 2, 2), run("c", 3, 3)])
    assert [(arm.name, len(arm.runs)) for arm in follows] == [("all runs", 3)]
    # Pinned in one run: no longer the seed's shadow, so it names arms.
    pinned = group_into_arms([run("a", 1, 1), run("b", 2, 7)])
    assert [arm.name for arm in pinned] == ["reward.coin_flip.seed=1", "reward.coin_flip.seed=7"]
