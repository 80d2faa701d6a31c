"""How the readers split and join the runs one file holds, and where a CSV's or JSONL's steps come from: a run column
(`run_id`, `seed`, ...) gives one history per run with its own steps; the step is the first of the known step names
(`update`, `iter`, `train/global_step`, ...), a whole-number epoch as a last resort, else row order (said in the
report); a notebook that displays one run's progress table twice gives one history, a restart two. Every file here is
written by hand."""

from __future__ import annotations

import json

import pytest

from align_kit import cli
from align_kit.doctor.readers import read_runs


def series(history, concept):
    return [(step, values[concept]) for step, values in history.rows if concept in values]


def steps(history):
    return [step for step, _ in history.rows]


# --- several runs told apart by a column -----------------------------------------------------------------------------

TWO_SEEDS_CSV = """\
seed,run_id,update,reward_mean,entropy
42,grpo_seed42_a,1,0.25,0.5
42,grpo_seed42_a,2,0.5,0.45
42,grpo_seed42_a,3,0.75,0.4
123,grpo_seed123_b,1,0.125,0.6
123,grpo_seed123_b,2,0.375,0.55
"""


def test_a_csv_of_two_seeds_is_two_runs_named_by_run_id_each_stepped_by_update(tmp_path):
    path = tmp_path / "two_seeds.csv"
    path.write_text(TWO_SEEDS_CSV)
    first, second = read_runs(str(path))
    # run_id alone tells the two apart, so it names them; seed and run_id are no metrics.
    assert [first.name, second.name] == ["grpo_seed42_a", "grpo_seed123_b"]
    assert series(first, "reward") == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert series(second, "reward") == [(1, 0.125), (2, 0.375)]
    assert series(second, "entropy") == [(1, 0.6), (2, 0.55)]
    for history in (first, second):
        assert not {"seed", "run_id", "update"} & set(history.unmapped)
        assert "2 runs in this file, told apart by the run_id and seed columns" in history.notes


def test_interleaved_jsonl_rows_of_two_runs_split_by_run_name_with_iter_steps(tmp_path):
    rows = [
        {"run_name": "dapo", "iter": 10, "reward": 0.1},
        {"run_name": "grpo", "iter": 10, "reward": 0.2},
        {"run_name": "dapo", "iter": 20, "reward": 0.3},
        {"run_name": "grpo", "iter": 20, "reward": 0.4},
        {"run_name": "dapo", "iter": 30, "reward": 0.5},
    ]
    path = tmp_path / "sweep.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    dapo, grpo = read_runs(str(path))
    assert (dapo.name, grpo.name) == ("dapo", "grpo")
    assert series(dapo, "reward") == [(10, 0.1), (20, 0.3), (30, 0.5)]
    assert series(grpo, "reward") == [(10, 0.2), (20, 0.4)]
    assert "iter" not in dapo.unmapped


def test_a_bare_number_names_its_column_and_two_varying_columns_name_a_run_together(tmp_path):
    path = tmp_path / "seeds.csv"
    path.write_text("seed,step,reward\n1,1,0.25\n1,2,0.5\n2,1,0.75\n2,2,1.0\n")
    assert [history.name for history in read_runs(str(path))] == ["seed=1", "seed=2"]
    # Two arms by two seeds: no one column tells the four runs apart.
    path = tmp_path / "grid.csv"
    lines = ["experiment,seed,step,reward"]
    lines += [f"{arm},{seed},{step},0.{step}" for arm in ("base", "dapo") for seed in (1, 2) for step in (1, 2)]
    path.write_text("\n".join(lines) + "\n")
    runs = read_runs(str(path))
    assert [history.name for history in runs] == ["base seed=1", "base seed=2", "dapo seed=1", "dapo seed=2"]
    assert all(series(history, "reward") == [(1, 0.1), (2, 0.2)] for history in runs)


def test_runs_without_a_step_column_are_stepped_by_their_own_row_order(tmp_path):
    path = tmp_path / "no_steps.csv"
    path.write_text("trial,reward,entropy\na,0.25,0.5\na,0.5,0.5\na,0.75,0.5\nb,0.5,0.25\nb,0.25,0.25\n")
    first, second = read_runs(str(path))
    assert (first.name, second.name) == ("a", "b")
    assert steps(first) == [1, 2, 3] and steps(second) == [1, 2]
    assert series(second, "reward") == [(1, 0.5), (2, 0.25)]
    assert any("read in row order, steps are each run's row numbers" in note for note in first.notes)


def test_a_constant_run_column_keeps_one_run_and_its_rows(tmp_path):
    # A `seed` in every row once marked each row as a printed config: the rows were dropped.
    path = tmp_path / "one_seed.jsonl"
    path.write_text('{"seed": 7, "step": 1, "reward": 0.25}\n{"seed": 7, "step": 2, "reward": 0.5}\n')
    (history,) = read_runs(str(path))
    assert history.name == "one_seed"
    assert series(history, "reward") == [(1, 0.25), (2, 0.5)]


def test_a_seed_per_row_is_no_run_column(tmp_path):
    # Every row its own seed: a split would give runs of one row each, so the file stays one run.
    path = tmp_path / "samples.csv"
    path.write_text("step,seed,reward\n1,11,0.25\n2,12,0.5\n3,13,0.75\n")
    (history,) = read_runs(str(path))
    assert series(history, "reward") == [(1, 0.25), (2, 0.5), (3, 0.75)]


# --- which column is the step -----------------------------------------------------------------------------------------


def test_the_trainers_step_wins_over_wandbs_log_counter(tmp_path):
    # W&B's _step counts log calls (0, 1, 2); HF's train/global_step is the optimizer step.
    path = tmp_path / "history.csv"
    path.write_text("_step,train/global_step,train/reward\n0,10,0.25\n1,20,0.5\n2,30,0.75\n")
    (history,) = read_runs(str(path))
    assert series(history, "reward") == [(10, 0.25), (20, 0.5), (30, 0.75)]


STEP_TITLES = ["update", "Update", "iteration", "Iteration", "iter", "training_iteration", "global_step", "Global Step"]


@pytest.mark.parametrize("title", STEP_TITLES)
def test_each_step_title_is_read_as_the_step(tmp_path, title):
    path = tmp_path / "log.csv"
    path.write_text(f"{title},reward\n5,0.25\n10,0.5\n")
    (history,) = read_runs(str(path))
    assert series(history, "reward") == [(5, 0.25), (10, 0.5)]


def test_whole_number_epochs_are_the_step_as_a_last_resort(tmp_path):
    path = tmp_path / "epochs.csv"
    path.write_text("epoch,reward\n1,0.25\n2,0.5\n3,0.75\n")
    (history,) = read_runs(str(path))
    assert series(history, "reward") == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert any("the whole-number epoch column is the step" in note for note in history.notes)
    jsonl = tmp_path / "epochs.jsonl"
    jsonl.write_text('{"epoch": 2, "reward": 0.25}\n{"epoch": 4, "reward": 0.5}\n')
    (history,) = read_runs(str(jsonl))
    assert series(history, "reward") == [(2, 0.25), (4, 0.5)]


def test_fractional_or_repeated_epochs_leave_row_order(tmp_path):
    # HF's epochs (0.01, 0.02) or two rows per epoch would merge different steps: row order instead.
    path = tmp_path / "fractional.csv"
    path.write_text("epoch,reward\n0.01,0.25\n0.02,0.5\n0.03,0.75\n")
    assert series(read_runs(str(path))[0], "reward") == [(1, 0.25), (2, 0.5), (3, 0.75)]
    path = tmp_path / "repeated.jsonl"
    path.write_text('{"epoch": 1, "reward": 0.25}\n{"epoch": 1, "reward": 0.5}\n{"epoch": 2, "reward": 0.75}\n')
    assert series(read_runs(str(path))[0], "reward") == [(1, 0.25), (2, 0.5), (3, 0.75)]


def test_the_report_says_row_order_was_used_when_no_column_is_the_step(tmp_path, capsys):
    path = tmp_path / "rewards.csv"
    path.write_text("reward,entropy\n0.25,0.5\n0.5,0.5\n")
    with pytest.raises(SystemExit):
        cli.main(["doctor", str(path)])
    out = capsys.readouterr().out
    assert "2 row(s) without a step column" in out
    assert "read in row order, steps are the row numbers 1, 2, ..." in out


# --- a notebook's progress table displayed more than once -----------------------------------------------------------


def _table(rows):
    head = "".join(f"<th>{title}</th>" for title in ("Step", "Training Loss", "reward", "kl"))
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _notebook(path, *tables):
    cells = [
        {"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {"text/html": [html]}}]}
        for html in tables
    ]
    path.write_text(json.dumps({"nbformat": 4, "cells": cells}))
    return path


GRPO_ROWS = [(1, "0.000000", "0.250000", "0.000000"), (2, "0.000000", "0.500000", "0.001000")]
GRPO_MORE = [(3, "0.000100", "0.750000", "0.002000"), (4, "0.000100", "1.000000", "0.003000")]


def test_a_later_display_repeating_the_earlier_rows_is_one_run(tmp_path):
    # Displayed at step 2, then again at step 4 with steps 1-2 repeated: the same run, continued.
    path = _notebook(tmp_path / "shown_twice.ipynb", _table(GRPO_ROWS), _table(GRPO_ROWS + GRPO_MORE))
    (history,) = read_runs(str(path))
    assert history.name == "shown_twice"
    assert series(history, "reward") == [(1, 0.25), (2, 0.5), (3, 0.75), (4, 1.0)]
    assert any(note.startswith("the progress table displayed 2 times") for note in history.notes)


def test_a_restart_with_other_values_stays_two_runs(tmp_path):
    restarted = [(1, "0.000000", "0.125000", "0.000000"), (2, "0.000000", "0.375000", "0.002000"), *GRPO_MORE]
    path = _notebook(tmp_path / "restarted.ipynb", _table(GRPO_ROWS), _table(restarted))
    first, second = read_runs(str(path))
    assert (first.name, second.name) == ("restarted [run 1 of 2: steps 1-2]", "restarted [run 2 of 2: steps 1-4]")
    assert series(first, "reward") == [(1, 0.25), (2, 0.5)]
    assert series(second, "reward") == [(1, 0.125), (2, 0.375), (3, 0.75), (4, 1.0)]
