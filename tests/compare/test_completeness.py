"""compare leaves out a run that did not finish (no summary and short of its planned steps, halted, stopped early)
and names it; rows an earlier attempt logged past the checkpoint a run resumed from give way to the resumed run's."""

from __future__ import annotations

import json

import pytest

from align_kit.compare import CompareError
from align_kit.compare.command import compare
from align_kit.compare.completeness import drop_replaced_rows, unfinished
from align_kit.compare.power import report_power

CONFIG = {"trainer": {"max_steps": 6}}


def write_run(folder, eps_high: float, seed: int, rewards: list[float], summary: dict | None = None) -> None:
    folder.mkdir(parents=True)
    config = {"seed": seed, "clip": {"eps_high": eps_high}, "trainer": {"max_steps": 6}}
    (folder / "config.yaml").write_text(json.dumps(config))
    rows = [{"step": step, "reward": reward} for step, reward in enumerate(rewards, start=1)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    if summary is not None:
        (folder / "summary.json").write_text(json.dumps({"seed": seed, "steps": len(rewards), **summary}))


@pytest.mark.parametrize(
    ("summary", "steps", "reason"),
    [
        (None, [1, 2], "no summary.json and last step logged 2, short of trainer.max_steps=6: it did not finish"),
        (None, [], "no summary.json and no step logged, short of trainer.max_steps=6"),
        ({"halted": {"step": 3}}, [1, 2, 3], "halted by the health monitor at step 3 (last step logged 3)"),
        ({"steps": 4}, [1, 2, 3, 4], "stopped at step 4 of trainer.max_steps=6"),
        ({"steps": 6}, [1, 2], "its metrics end at step 2, before the 6 steps summary.json records (rows lost)"),
    ],
)
def test_a_run_that_did_not_finish_says_why(summary, steps, reason):
    assert unfinished(CONFIG, summary, [(float(s), {"step": s, "reward": 0.1}) for s in steps]).startswith(reason)


@pytest.mark.parametrize(
    ("config", "summary", "steps"),
    [
        (CONFIG, {"steps": 6, "halted": None}, [1, 2, 3, 4, 5, 6]),
        (CONFIG, None, [2, 4, 6]),  # every planned step logged (logging_steps=2): only the summary is missing
        ({}, None, [1, 2]),  # metrics from elsewhere: no plan to judge by
    ],
)
def test_a_finished_run_or_one_with_nothing_to_judge_it_by_is_kept(config, summary, steps):
    assert unfinished(config, summary, [(float(s), {"step": s, "reward": 0.1}) for s in steps]) is None


def test_an_unfinished_run_is_left_out_of_its_arm_and_named(tmp_path, capsys):
    for seed in (1, 2, 3):
        write_run(tmp_path / f"a{seed}", 0.2, seed, [0.1] * 6, summary={})
    write_run(tmp_path / "b1", 0.28, 1, [0.5] * 6, summary={})
    write_run(tmp_path / "b2", 0.28, 2, [0.7] * 6, summary={})
    write_run(tmp_path / "b3", 0.28, 3, [0.9, 0.9], summary=None)  # crashed after 2 of 6 steps
    result = compare([str(tmp_path)], last_k=2, out=tmp_path / "out")
    arms = {arm.name: arm for arm in result.arms}
    assert [run.seed for run in arms["clip.eps_high=0.28"].runs] == [1, 2]
    reward = result.tables["reward"]  # one summary per arm, the baseline (eps 0.2) first
    assert reward[1].final.mean == pytest.approx((0.5 + 0.7) / 2)  # the crashed run's 0.9 is not averaged in
    left_out = (
        f"left out {tmp_path / 'b3'}, not a finished run: no summary.json and last step logged 2, short of "
        "trainer.max_steps=6: it did not finish (crashed, killed, stopped, or still running)"
    )
    assert left_out in result.notes
    assert f"align-kit: note: {left_out}" in capsys.readouterr().err


def test_power_pairs_finished_runs_only_and_says_what_it_left_out(tmp_path, capsys):
    rewards = {(0.2, 1): 0.1, (0.2, 2): 0.2, (0.2, 3): 0.3, (0.28, 1): 0.3, (0.28, 2): 0.5, (0.28, 3): 0.6}
    for (eps, seed), reward in rewards.items():
        write_run(tmp_path / f"{eps}_{seed}", eps, seed, [reward] * 6, summary={})
    write_run(tmp_path / "0.28_4", 0.28, 4, [9.0, 9.0], summary=None)
    write_run(tmp_path / "0.2_4", 0.2, 4, [0.0] * 6, summary={})
    lines = report_power("reward", [str(tmp_path)])
    # paired AUC/span differences over seeds 1-3 only (seed 4's arm run is unfinished): 0.2, 0.3, 0.3
    assert lines[0].startswith("clip.eps_high=0.28 vs clip.eps_high=0.2, reward AUC/span: effect +0.267, sd of ")
    assert "0.28_4, not a finished run" in capsys.readouterr().err


def test_only_unfinished_runs_is_a_clear_error(tmp_path):
    write_run(tmp_path / "a", 0.2, 1, [0.1, 0.1], summary=None)
    with pytest.raises(CompareError, match=r"^no finished run in .*: .*/a: no summary.json and last step logged 2"):
        compare([str(tmp_path)], out=tmp_path / "out")


def rows_of(*steps_and_keys) -> list[tuple[float, dict]]:
    return [(float(step), {"step": step, **dict.fromkeys(keys, 0.0)}) for step, keys in steps_and_keys]


def test_a_resume_replaces_every_row_the_earlier_attempt_logged_from_its_step_on():
    rows = rows_of(*((s, ["reward"]) for s in (1, 2, 3, 4, 5, 6)), *((s, ["reward"]) for s in (3, 4)))
    kept, resumes = drop_replaced_rows(rows)
    # the abandoned attempt's steps 3-6 go, even 5 and 6, which the resumed run has not reached yet
    assert [step for step, _ in kept] == [1, 2, 3, 4]
    assert kept[2][1] is rows[6][1] and kept[3][1] is rows[7][1]
    assert resumes == [
        "resumed at step 3: 4 row(s) the earlier attempt logged for steps 3-6 replaced by the resumed run's"
    ]


def test_the_same_step_logging_a_metric_again_is_a_resume_and_other_metrics_are_not():
    kept, resumes = drop_replaced_rows(rows_of((1, ["reward"]), (2, ["reward"]), (2, ["eval_reward"])))
    assert len(kept) == 3 and resumes == []  # TRL logs eval rows at a training row's step
    kept, resumes = drop_replaced_rows(rows_of((1, ["reward"]), (2, ["reward"]), (2, ["reward"])))
    assert [step for step, _ in kept] == [1, 2] and len(resumes) == 1
    end = rows_of((1, ["reward"]), (2, ["reward"]), (2, ["train_runtime"]))  # HF's end-of-training row
    assert drop_replaced_rows(end) == (end, [])


class ApiRun:
    """Shaped like wandb.apis.public.Run: a name, a config, a state and a history scan."""

    def __init__(self, state: str):
        self.name, self.config, self.state = "r", {"seed": 1, "trainer": {"max_steps": 6}}, state

    def scan_history(self, keys=None):
        return [{"train/global_step": step, "train/reward": 0.5} for step in (1, 2)]


@pytest.mark.parametrize(("state", "reason"), [("crashed", "its W&B state is crashed"), ("finished", None)])
def test_a_wandb_run_is_unfinished_when_its_state_says_so(state, reason):
    from align_kit.compare.wandb_source import run_from_wandb

    assert run_from_wandb(ApiRun(state)).unfinished == reason
