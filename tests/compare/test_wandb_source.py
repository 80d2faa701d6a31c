"""Runs from W&B: a group through a fake `wandb.Api`, its errors, and offline W&B runs read back, each giving the
same comparison as the run folders."""

from __future__ import annotations

import pytest

from align_kit.compare import CompareError
from align_kit.compare.command import compare
from align_kit.compare.wandb_source import STEP_KEY, load_wandb_group
from tests.compare.sweep_by_hand import (
    LAST_K,
    FakeApi,
    assert_expected_statistics,
    jobs,
    logged_rows,
    wandb_config,
    wandb_rows,
)


def test_wandb_group_through_a_fake_api(monkeypatch, tmp_path):
    import wandb

    api = FakeApi()
    monkeypatch.setattr(wandb, "Api", lambda: api)
    result = compare(["wandb:team/align_kit/clip-sweep"], last_k=LAST_K, out=tmp_path / "out")

    assert api.calls == [("team/align_kit", {"group": "clip-sweep"})]
    assert_expected_statistics(result)
    assert result.arms[0].runs[0].label == "team/align_kit/clip=symmetric,seed=1"
    # Every run logs reward and entropy, so none is read whole: only the keys compare looks for are fetched.
    assert all(keys is not None and keys[0] == STEP_KEY for run in api.listed for keys in run.scans)


def test_a_group_is_read_page_by_page_for_the_compared_keys_only():
    api = FakeApi(per_page=2)
    runs = load_wandb_group("team/align_kit/clip-sweep", api=api, metrics=["reward", "entropy"])

    # One scan per metric (a scan returns only rows holding every key asked for), nothing else of the history.
    for run in api.listed:
        assert run.scans == [[STEP_KEY, "train/reward"], [STEP_KEY, "train/entropy"]]
    # Each page of runs is fetched only when the runs before it have been read: 6 runs, 2 per page.
    names = [run.name for run in api.listed]
    expected = []
    for page in range(3):
        expected.append(("page", page))
        for name in names[2 * page : 2 * page + 2]:
            expected += [("scan", name), ("scan", name)]
    assert api.events == expected
    # What is held per run is the two compared series, with the values logged (entropy at steps 1, 3, 5 only).
    for run, (_, node, seed) in zip(runs, jobs(), strict=True):
        assert set(run.series) == {"reward", "entropy"}
        for metric in ("reward", "entropy"):
            logged = [(row["step"], row[metric]) for row in logged_rows(node, seed) if metric in row]
            assert list(zip(run.series[metric].steps, run.series[metric].values, strict=True)) == logged


def test_a_run_holding_none_of_the_compared_keys_is_read_whole_so_its_metrics_are_named():
    api = FakeApi()
    runs = load_wandb_group("team/align_kit/another-group", api=api, metrics=["routing/flip_rate"])

    (run,) = api.listed
    assert run.scans == [[STEP_KEY, "train/routing/flip_rate"], None]
    assert runs[0].series == {}
    assert runs[0].logged == {"reward", "entropy"}  # what symmetric runs log (sweep_by_hand.logged_rows)


def test_wandb_group_errors_name_the_fix():
    with pytest.raises(CompareError, match="wandb:ENTITY/PROJECT/GROUP"):
        load_wandb_group("team/align_kit", api=FakeApi())
    with pytest.raises(CompareError, match="no runs in group 'missing'"):
        load_wandb_group("team/align_kit/missing", api=FakeApi())


def test_offline_wandb_runs_read_back_give_the_same_comparison(monkeypatch, tmp_path):
    import wandb

    for variable in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(variable, str(tmp_path / "wandb-home"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    sweep = tmp_path / "sweep"
    for number, node, seed in jobs():
        folder = sweep / str(number)  # a run folder with only its offline W&B run, no metrics.jsonl
        folder.mkdir(parents=True)
        run = wandb.init(
            mode="offline",
            dir=str(folder),
            project="align_kit",
            group="clip-sweep",
            name=f"clip={node},seed={seed}",
            config=wandb_config(node, seed),
        )
        for row in wandb_rows(node, seed):
            run.log(row)
        run.finish()
    # finish() can return before W&B's service process has written the last records to disk (seen on a loaded
    # machine: the last run read back short); teardown waits for the service to flush and exit.
    wandb.teardown()

    result = compare([str(sweep)], last_k=LAST_K, out=tmp_path / "out")

    assert_expected_statistics(result)


def test_a_page_that_fails_mid_read_is_the_same_clear_error():
    class BrokenRuns:
        """The first page (two runs) reads; fetching the second fails."""

        def __len__(self):
            return 6

        def __iter__(self):
            api = FakeApi()
            api.runs("team/align_kit", filters={"group": "clip-sweep"})
            yield from api.listed[:2]
            raise ConnectionError("page 2: connection reset")

    class BrokenApi:
        def runs(self, path, filters=None):
            return BrokenRuns()

    with pytest.raises(CompareError, match=r"cannot read W&B project team/align_kit \(ConnectionError: page 2"):
        load_wandb_group("team/align_kit/clip-sweep", api=BrokenApi())
