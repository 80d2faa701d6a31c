"""Each reader on small files written by hand in its format (tests/doctor/data/ and tmp_path), the format told from
the content, and the bad inputs, each one line naming the file and what was expected."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from align_kit.doctor.history import DoctorInputError
from align_kit.doctor.readers import read_runs

DATA = Path(__file__).parent / "data"


def only(path, **kwargs):
    (history,) = read_runs(str(path), **kwargs)
    return history


def series(history, concept):
    return [(step, values[concept]) for step, values in history.rows if concept in values]


# --- align_kit run and sweep folders -------------------------------------------------------------------------------

CONFIG_YAML = """\
seed: 0
trainer:
  max_completion_length: 32
  learning_rate: 2.0e-05
  num_generations: 8
clip:
  _target_: align_kit.components.clip.TokenClip
  eps_low: 0.2
  eps_high: 0.28
kl:
  _target_: align_kit.components.kl.ConstantKL
  beta: 0.0
reward:
  correctness: {weight: 0.8, max_value: 1.0}
  format: {weight: 0.2, max_value: 1.0}
"""


def write_run(folder: Path, rows: list[dict], summary: dict | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "config.yaml").write_text(CONFIG_YAML)
    if summary is not None:
        (folder / "summary.json").write_text(json.dumps(summary))
    return folder


ALIGN_KIT_ROWS = [
    {"step": 1, "loss": 0.1, "reward": 0.25, "entropy": 0.5, "policy_ratio/mean": 1.0, "groups/flat_fraction": 0.5},
    {"step": 2, "loss": None, "reward": 0.5, "entropy": 0.25, "policy_ratio/mean": 1.25, "epoch": 0.1},
    {"step": 2, "train_runtime": 10.0, "train_loss": 0.1},  # HF's end-of-training row: not a step
]


def test_align_kit_run_folder_with_its_setup(tmp_path):
    folder = write_run(
        tmp_path / "run",
        ALIGN_KIT_ROWS,
        {"choices": {"clip": "clip_higher", "kl": "none", "recipe": "None"}, "reward_max": 1.0},
    )
    history = only(folder)

    assert (history.format, history.framework, history.name) == ("align_kit", "align_kit", "run")
    assert series(history, "reward") == [(1, 0.25), (2, 0.5)]
    assert series(history, "policy_ratio/mean") == [(1, 1.0), (2, 1.25)]
    # metrics.jsonl writes NaN as null: read back as NaN, so the non-finite rule sees it.
    assert math.isnan(history.rows[1][1]["loss"])
    assert history.context == {
        "max_completion_length": 32,
        "learning_rate": 2e-05,
        "num_generations": 8,
        "epsilon": 0.2,
        "epsilon_high": 0.28,
        "importance_sampling_level": "token",
        "beta": 0.0,
        "reward_max": 1.0,
        "choices": {"clip": "clip_higher", "kl": "none"},
    }


def test_align_kit_reward_max_from_the_weights_and_choices_from_hydra(tmp_path):
    folder = write_run(tmp_path / "run", ALIGN_KIT_ROWS[:1])
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "hydra.yaml").write_text(
        "hydra:\n  runtime:\n    choices:\n      clip: gspo\n      recipe: null\n      hydra/launcher: basic\n"
    )
    history = only(folder)
    # 0.8 x 1.0 + 0.2 x 1.0 = 1.0 from config.yaml's reward weights; hydra/ groups and unset ones left out.
    assert history.context["reward_max"] == pytest.approx(1.0)
    assert history.context["choices"] == {"clip": "gspo"}


def test_a_run_folders_own_metrics_file_reads_with_its_folder(tmp_path):
    folder = write_run(tmp_path / "run", ALIGN_KIT_ROWS)
    history = only(folder / "metrics.jsonl")
    assert history.format == "align_kit"
    assert history.context["max_completion_length"] == 32


def test_sweep_folder_gives_one_history_per_job_named_by_its_overrides(tmp_path):
    sweep = tmp_path / "sweep"
    for job, reward in ((0, 0.25), (1, 0.75), (10, 0.5)):
        write_run(sweep / str(job), [{"step": 1, "reward": reward}])
    manifest = {
        "jobs": [
            {"job": 0, "overrides": ["clip=symmetric"], "status": "done", "folder": str(sweep / "0")},
            {"job": 1, "overrides": ["clip=clip_higher"], "status": "failed", "folder": str(sweep / "1")},
        ]
    }
    (sweep / "sweep_manifest.json").write_text(json.dumps(manifest))

    histories = read_runs(str(sweep))

    # Natural order: job 10 after job 1; a job the manifest lacks is named by its folder.
    assert [history.name for history in histories] == ["job 0 (clip=symmetric)", "job 1 (clip=clip_higher)", "10"]
    assert [history.rows[0][1]["reward"] for history in histories] == [0.25, 0.75, 0.5]
    assert histories[1].notes[-1] == "the sweep's manifest says this job is failed"


# --- TRL / HF trainer_state.json -----------------------------------------------------------------------------------


def test_trainer_state_json():
    # HF's trainer_state.json layout (keys sorted, log_history entries with step, the end summary last) as in
    # NukumizuKazuhiko/ab-verifier-qwen2.5-0.5b's trainer_state.json; the GRPO keys as TRL 1.x logs them.
    history = only(DATA / "trainer_state.json")

    assert (history.format, history.framework) == ("trl_state", "trl")
    assert series(history, "reward") == [(10, 0.5), (20, 0.75), (30, 0.875)]
    # The eval entry at step 20 joins that step's row; the end-of-training summary is not a step.
    assert series(history, "eval_reward") == [(20, 0.625)]
    # rewards/accuracy/mean is the accuracy component by its name (reward_roles).
    assert series(history, "accuracy") == [(10, 0.5), (20, 0.75), (30, 0.875)]
    assert history.mapping["clip_ratio/region_mean"] == "clip_ratio/region_mean"
    assert {"eval_loss", "clip_ratio/high_max", "rewards/accuracy/std"} <= set(history.unmapped)
    assert "epoch" not in history.unmapped and "step" not in history.unmapped


def _state(steps: list[int], reward: float) -> str:
    data = json.loads((DATA / "trainer_state.json").read_text())
    data["log_history"] = [{"step": step, "reward": reward} for step in steps]
    data["global_step"] = steps[-1]
    return json.dumps(data)


def test_output_folder_the_newest_checkpoint_wins(tmp_path):
    for number, reward in ((10, 0.25), (300, 0.75), (50, 0.5)):
        (tmp_path / f"checkpoint-{number}").mkdir()
        (tmp_path / f"checkpoint-{number}" / "trainer_state.json").write_text(_state([number], reward))
    (tmp_path / "checkpoint-400").mkdir()  # a save cut short: no trainer_state.json

    history = only(tmp_path)
    # checkpoint-300 by number (not checkpoint-50 by text order).
    assert series(history, "reward") == [(300, 0.75)]
    assert history.notes == ["newest of 3 checkpoint(s): checkpoint-300"]

    # The folder's own trainer_state.json (the final save) is newer than its checkpoints.
    (tmp_path / "trainer_state.json").write_text(_state([300, 320], 1.0))
    history = only(tmp_path)
    assert series(history, "reward") == [(300, 1.0), (320, 1.0)]
    assert "newer than its 3 checkpoint(s)" in history.notes[0]

    # A checkpoint folder given itself.
    assert series(only(tmp_path / "checkpoint-50"), "reward") == [(50, 0.5)]


# --- TRL's printed log dicts ---------------------------------------------------------------------------------------


def test_trl_log_lines_older_names_without_steps():
    history = only(DATA / "trl_console_old_names.log")

    assert (history.format, history.framework) == ("trl_log_lines", "trl")
    assert series(history, "completions/mean_length") == [(1, 200.0), (2, 180.0), (3, 160.0)]
    # rewards/format_reward (older TRL, no /mean) is the format component by its name.
    assert series(history, "format") == [(1, 0.5), (2, 0.75), (3, 1.0)]
    # The eval dict belongs to the training point before it; the summary line is no step.
    assert series(history, "eval_reward") == [(2, 0.625)]
    assert math.isnan(history.rows[2][1]["grad_norm"])
    assert any("logged-point indices" in note and "--logging-steps" in note for note in history.notes)
    assert any("summary" in note for note in history.notes)


def test_trl_log_lines_with_logging_steps():
    history = only(DATA / "trl_console_old_names.log", logging_steps=10)
    # step = logged point x 10
    assert series(history, "reward") == [(10, 0.75), (20, 1.0), (30, 1.5)]
    assert any(note.startswith("steps from --logging-steps 10") for note in history.notes)


def test_trl_log_lines_current_names_in_a_slurm_file():
    history = only(DATA / "trl_slurm_current.out")

    assert series(history, "completions/clipped_ratio") == [(1, 0.125), (2, 1.0)]
    assert series(history, "frac_reward_zero_std") == [(1, 0.5), (2, 1.0)]
    assert history.rows[1][1]["entropy"] == math.inf
    assert {"completions/mean_terminated_length", "rewards/correct/std", "clip_ratio/low_mean"} - set(
        history.unmapped
    ) == {"clip_ratio/low_mean"}


def test_a_log_line_that_states_its_step(tmp_path):
    # ms-swift's variant: JSON with double quotes and "global_step/max_steps": "5/3766" (modelscope/ms-swift 5571).
    path = tmp_path / "swift.log"
    path.write_text(
        '{"loss": 0.0, "reward": 0.25, "global_step/max_steps": "5/3766", "percentage": "0.13%"}\n'
        '{"loss": 0.0, "reward": 0.5, "global_step/max_steps": "10/3766", "percentage": "0.27%"}\n'
    )
    history = only(path)
    assert series(history, "reward") == [(5, 0.25), (10, 0.5)]
    assert not any("logged-point" in note for note in history.notes)


def test_python_repr_that_json_refuses_goes_through_literal_eval(tmp_path):
    path = tmp_path / "log.txt"
    path.write_text("{'loss': np.float64(0.5), 'reward': 0.25, 'note': \"it's\", 'flag': True}\n")
    history = only(path)
    assert history.rows == [(1, {"loss": 0.5, "reward": 0.25})]


# --- notebooks and pasted excerpts ---------------------------------------------------------------------------------

TRL_LINES = (DATA / "trl_console_old_names.log").read_text()


def test_notebook_stream_outputs(tmp_path):
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {"cell_type": "code", "source": ["trainer.train()"], "outputs": [
                {"output_type": "stream", "name": "stdout", "text": TRL_LINES.splitlines(keepends=True)},
            ]},
        ],
    }  # fmt: skip
    path = tmp_path / "train.ipynb"
    path.write_text(json.dumps(notebook))
    history = only(path)
    assert series(history, "reward") == [(1, 0.75), (2, 1.0), (3, 1.5)]
    assert "read from a notebook's cell outputs" in history.notes


def test_notebook_progress_table_as_html(tmp_path):
    # HF's NotebookProgressCallback renders the table as HTML; TRL's metric keys appear with " / " around slashes.
    html = (
        "<table border='1' class='dataframe'><thead><tr style='text-align: left;'><th>Step</th>"
        "<th>Training Loss</th><th>reward</th><th>completions / mean_length</th></tr></thead><tbody>"
        "<tr><td>10</td><td>0.010000</td><td>0.250000</td><td>100.500000</td></tr>"
        "<tr><td>20</td><td>0.020000</td><td>0.500000</td><td>90.000000</td></tr></tbody></table>"
    )
    notebook = {"nbformat": 4, "cells": [{"cell_type": "code", "outputs": [
        {"output_type": "display_data", "data": {"text/html": [html], "text/plain": ["<IPython.core.display.HTML>"]}},
    ]}]}  # fmt: skip
    path = tmp_path / "train.ipynb"
    path.write_text(json.dumps(notebook))
    history = only(path)
    assert history.format == "trl_table"
    assert history.rows == [
        (10, {"loss": 0.01, "reward": 0.25, "completions/mean_length": 100.5}),
        (20, {"loss": 0.02, "reward": 0.5, "completions/mean_length": 90.0}),
    ]


def test_notebook_with_verl_lines_and_numpy_scalars(tmp_path):
    # Newer numpy prints scalars as np.float64(...): the value inside is read.
    lines = [
        "(TaskRunner pid=7) step:1 - actor/entropy:np.float64(0.5) - critic/score/mean:np.float64(0.25)\n",
        "(TaskRunner pid=7) step:2 - actor/entropy:np.float64(0.25) - critic/score/mean:np.float64(0.5)\n",
    ]
    notebook = {"nbformat": 4, "cells": [{"cell_type": "code", "outputs": [{"output_type": "stream", "text": lines}]}]}
    path = tmp_path / "verl.ipynb"
    path.write_text(json.dumps(notebook))
    history = only(path)
    assert history.rows == [(1, {"entropy": 0.5, "reward": 0.25}), (2, {"entropy": 0.25, "reward": 0.5})]


def test_markdown_with_pasted_verl_excerpt(tmp_path):
    excerpt = (DATA / "verl_old_main_task.log").read_text()
    path = tmp_path / "issue.md"
    path.write_text(f"My run collapses after step 5:\n\n```\n{excerpt}```\n\nAny idea?\n")
    history = only(path)
    assert history.format == "verl_console"
    assert series(history, "entropy") == [(5, 5.683), (6, 6.5)]


# --- read by evidence: printed configs never count as metric rows ------------------------------------------------


def test_notebook_html_progress_table_beside_printed_configs():
    # vLLM's compilation config (JSON with lists), a dataset row (nested), a printed GRPOConfig-like dict (settings)
    # and the TrainOutput summary print beside the Trainer's HTML table: only the table's 3 rows are metric rows.
    history = only(DATA / "notebook_progress_table.ipynb")
    assert (history.format, history.framework) == ("trl_table", "trl")
    assert [step for step, _ in history.rows] == [1, 2, 3]
    assert series(history, "reward") == [(1, 0.25), (2, 0.5), (3, 1.0)]
    assert series(history, "completions/mean_length") == [(1, 180.5), (2, 160.25), (3, 120.0)]
    # `rewards / correctness_reward_func / mean` read by role.
    assert series(history, "accuracy") == [(1, 0.125), (2, 0.25), (3, 0.5)]
    assert "left out 3 printed config or data dict(s): settings, not metrics" in history.notes
    assert "left out 1 end-of-training summary line(s) (train_runtime, train_loss)" in history.notes


def test_a_notebook_with_an_sft_table_then_a_grpo_table(tmp_path):
    # A warm-up SFT run and then GRPO, each cell with its own progress table: two runs.
    def table(titles, rows):
        head = "".join(f"<th>{title}</th>" for title in titles)
        body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    sft = table(["Step", "Training Loss"], [[1, 1.5], [2, 1.25], [3, 1.0]])
    grpo = table(["Step", "Training Loss", "reward", "kl"], [[1, 0.0, 0.25, 0.0], [2, 0.0, 0.5, 0.001]])
    cells = [
        {"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {"text/html": [html]}}]}
        for html in (sft, grpo)
    ]
    path = tmp_path / "warmup_then_grpo.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "cells": cells}))
    first, second = read_runs(str(path))
    assert first.name == "warmup_then_grpo [run 1 of 2: SFT phase, steps 1-3]"
    assert series(first, "loss") == [(1, 1.5), (2, 1.25), (3, 1.0)]
    assert second.name == "warmup_then_grpo [run 2 of 2: steps 1-2]"
    assert series(second, "reward") == [(1, 0.25), (2, 0.5)]


def test_verl_console_with_its_pretty_printed_hydra_config():
    # The config spans 16 lines, nested dicts opening inside it: one config, no metric row; the 3 step lines win.
    history = only(DATA / "verl_console_with_config.log")
    assert (history.format, history.framework) == ("verl_console", "verl")
    assert series(history, "reward") == [(1, 0.25), (2, 0.375), (3, 0.5)]
    assert "left out 1 printed config or data dict(s): settings, not metrics" in history.notes
    assert not any("left out: trl_log_lines" in note for note in history.notes)


def test_log_dicts_wrapped_by_a_terminal_are_joined():
    # Each dict cut at 100 columns, mid-key (`completions/mean_len` + `gth`); a printed config dict beside them.
    history = only(DATA / "trl_wrapped_dicts.log")
    assert history.format == "trl_log_lines"
    assert series(history, "completions/mean_length") == [(1, 150.5), (2, 140.25)]
    assert series(history, "entropy") == [(1, 0.75), (2, 0.7)]
    assert "joined 2 log dict(s) wrapped over several lines" in history.notes
    assert "left out 1 printed config or data dict(s): settings, not metrics" in history.notes


def test_log_history_printed_as_a_list(tmp_path):
    # print(trainer.state.log_history): one line with every dict, or pretty-printed one key per line.
    rows = [{"loss": 0.5, "reward": 0.25, "step": 1}, {"loss": 0.25, "reward": 0.5, "step": 2}]
    one_line = tmp_path / "one_line.txt"
    one_line.write_text(f"history: {rows!r}\n")
    assert series(only(one_line), "reward") == [(1, 0.25), (2, 0.5)]
    pretty = tmp_path / "pretty.txt"
    pretty.write_text(
        "[{'loss': 0.5,\n  'reward': 0.25,\n  'step': 1},\n {'loss': 0.25,\n  'reward': 0.5,\n  'step': 2}]\n"
    )
    assert series(only(pretty), "reward") == [(1, 0.25), (2, 0.5)]


@pytest.mark.parametrize(
    ("row", "config"),
    [
        ({"loss": 0.1, "reward": 0.5, "epoch": 0.1}, False),
        ({"loss": 0.0, "reward": 0.5, "global_step/max_steps": "5/3766", "percentage": "0.13%"}, False),
        ({"level": 3, "custom_ops": [], "use_inductor": True}, True),  # vLLM's compilation config
        ({"question": "How many?", "answer": "12", "prompt": [{"role": "user"}]}, True),  # a dataset row
        ({"learning_rate": 5e-06, "beta": 0.04, "num_generations": 8}, True),  # names settings
        ({"learning_rate": 1e-06, "output_router_logits": False, "model_type": "llama", "name": "x"}, True),  # words
        ({"lr": 1e-06, "warmup_style": "constant"}, False),  # one known name, one word: not mostly words
        ({"optim": {"lr": 1e-06}}, True),  # nested
    ],
)
def test_what_is_a_printed_config(row, config):
    from align_kit.doctor.readers.evidence import is_config

    assert is_config(row) is config


def test_the_family_with_more_metric_rows_wins(tmp_path):
    # Three verl step lines and one TRL dict: verl wins by rows carrying metric names, and says what it left out.
    path = tmp_path / "mixed.log"
    path.write_text(
        "{'loss': 0.5, 'reward': 0.25}\n"
        + "".join(f"step:{step} - critic/score/mean:0.{step} - actor/entropy:0.5\n" for step in (1, 2, 3))
    )
    history = only(path)
    assert history.format == "verl_console"
    assert "read as verl_console (3 rows with metric names); left out: trl_log_lines (1)" in history.notes


def test_an_html_progress_table_in_a_notebook_exported_to_markdown(tmp_path):
    # nbconvert's markdown keeps the HTML table as it was; "No Log" cells are no value, and the 0 the table writes
    # in a ratio column before its first value is no value either (a probability ratio is never 0).
    path = tmp_path / "exported.md"
    cells = ["Step", "Training Loss", "reward", "sampling / importance_sampling_ratio / mean"]
    rows = [
        ["1", "0.000000", "-2.750000", "0"],
        ["50", "0.000300", "1.954082", "No Log"],
        ["100", "0.0017", "4.84", "1.01"],
    ]
    html = "<table border='1' class='dataframe'><thead><tr>" + "".join(f"<th>{cell}</th>" for cell in cells)
    html += "</tr></thead><tbody>" + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    path.write_text("Training output:\n\n    <div>[100/100]</div>\n    " + html + "</tbody></table><p>\n")
    history = only(path)
    assert history.format == "trl_table"
    assert series(history, "reward") == [(1, -2.75), (50, 1.954082), (100, 4.84)]
    assert series(history, "sampling/importance_sampling_ratio/mean") == [(100, 1.01)]
    assert "1 value(s) of exactly 0 in a probability-ratio column read as not logged" in history.notes


# --- one file, several runs -----------------------------------------------------------------------------------------


def test_sft_then_grpo_then_a_restart_are_three_runs():
    # The SFT dicts (loss, grad_norm, learning_rate, epoch 0.5 and 1.0), then GRPO (epoch 0.01 .. 0.03: the epoch goes
    # back below SFT's first), then GRPO again from epoch 0.01 after a crash.
    runs = read_runs(str(DATA / "sft_then_grpo_restarted.log"))
    assert [history.name for history in runs] == [
        "sft_then_grpo_restarted [run 1 of 3: SFT phase, steps 1-2]",
        "sft_then_grpo_restarted [run 2 of 3: steps 1-3]",
        "sft_then_grpo_restarted [run 3 of 3: steps 1-2]",
    ]
    assert series(runs[0], "loss") == [(1, 1.25), (2, 1.0)]
    assert series(runs[0], "reward") == []
    assert series(runs[1], "reward") == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert series(runs[2], "reward") == [(1, 0.125), (2, 0.25)]
    assert runs[1].notes[0] == "run 2 of 3 in this file; it begins where the epoch goes back from 1 to 0.01"
    assert runs[2].notes[0] == "run 3 of 3 in this file; it begins where the epoch goes back from 0.03 to 0.01"


def test_the_metrics_changing_from_sft_to_rl_split_a_run_with_stated_steps(tmp_path):
    path = tmp_path / "two_phases.jsonl"
    path.write_text(
        '{"step": 1, "loss": 1.0, "grad_norm": 2.0}\n{"step": 2, "loss": 0.5, "grad_norm": 1.0}\n'
        '{"step": 3, "loss": 0.0, "reward": 0.25}\n{"step": 4, "loss": 0.0, "reward": 0.5}\n'
    )
    first, second = read_runs(str(path))
    assert first.name == "two_phases [run 1 of 2: SFT phase, steps 1-2]"
    assert second.name == "two_phases [run 2 of 2: steps 3-4]"
    assert second.notes[0] == "run 2 of 2 in this file; it begins where the logged metrics change from SFT's to RL's"


def test_rows_of_two_kinds_interleaved_are_one_run(tmp_path):
    # A custom log printing its loss apart from its rewards at every step: no phases, one run.
    path = tmp_path / "interleaved.jsonl"
    path.write_text("".join(f'{{"step": {s}, "loss": 0.5}}\n{{"step": {s}, "reward": 0.{s}}}\n' for s in range(1, 5)))
    history = only(path)
    assert series(history, "reward") == [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4)]
    assert series(history, "loss") == [(1, 0.5), (2, 0.5), (3, 0.5), (4, 0.5)]


def test_a_resume_from_a_checkpoint_stays_one_run(tmp_path):
    # verl steps 1-4, then a resume from the step-2 checkpoint redoes 3 and 4: one run, the later values win.
    path = tmp_path / "resumed.log"
    path.write_text(
        "".join(
            f"step:{step} - critic/score/mean:{score}\n" for step, score in ((1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4))
        )
        + "".join(f"step:{step} - critic/score/mean:{score}\n" for step, score in ((3, 0.35), (4, 0.45), (5, 0.5)))
    )
    history = only(path)
    assert series(history, "reward") == [(1, 0.1), (2, 0.2), (3, 0.35), (4, 0.45), (5, 0.5)]
    assert any(note.startswith("the steps go back 1 time(s) to a step after the run's first") for note in history.notes)
    # Back to step 1 (or before): a new run.
    path.write_text(path.read_text() + "step:1 - critic/score/mean:0.0\nstep:2 - critic/score/mean:0.05\n")
    assert [history.name for history in read_runs(str(path))] == [
        "resumed [run 1 of 2: steps 1-5]",
        "resumed [run 2 of 2: steps 1-2]",
    ]


# --- the Trainer's progress table copied out -----------------------------------------------------------------------

PROGRESS = [(10, 0.01, 0.25, 0.5, 100.5), (20, 0.02, 0.5, 0.25, 90.0)]
EXPECTED_TABLE = [
    (10, {"loss": 0.01, "reward": 0.25, "reward_std": 0.5, "completions/mean_length": 100.5}),
    (20, {"loss": 0.02, "reward": 0.5, "reward_std": 0.25, "completions/mean_length": 90.0}),
]
TITLES = ["Step", "Training Loss", "reward", "reward_std", "completions / mean_length"]


def _table(separator: str, pipes: bool = False) -> str:
    lines = [separator.join(TITLES)] + [separator.join(str(value) for value in row) for row in PROGRESS]
    if pipes:
        lines = ["| " + line + " |" for line in lines]
        lines.insert(1, "|" + "---|" * len(TITLES))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("progress.csv", _table(",")),
        ("progress.tsv", _table("\t")),
        ("progress.md", "Training output:\n\n" + _table(" | ", pipes=True) + "\nthen it stopped\n"),
        (
            "progress.txt",
            "Step\tTraining Loss\treward\treward_std\tcompletions / mean_length\n".replace("\t", "   ")
            + "10      0.010000       0.250000    0.500000     100.500000\n"
            + "20      0.020000       0.500000    0.250000     90.000000\n",
        ),
    ],
)
def test_progress_table_in_each_layout(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    history = only(path)
    assert history.format == "trl_table"
    assert history.rows == EXPECTED_TABLE


def test_a_printed_dataframe_with_its_index(tmp_path):
    path = tmp_path / "df.txt"
    path.write_text("   step  loss  reward  kl\n0     1   0.5    0.25  0.0\n1     2   0.4    0.50  0.001\n")
    history = only(path)
    assert history.rows == [
        (1, {"loss": 0.5, "reward": 0.25, "kl": 0.0}),
        (2, {"loss": 0.4, "reward": 0.5, "kl": 0.001}),
    ]


def test_title_cased_columns_map_back(tmp_path):
    path = tmp_path / "table.txt"
    path.write_text("Step,Training Loss,Reward,Reward Std,Validation Loss\n5,0.5,0.25,0.125,No log\n")
    history = only(path)
    assert history.rows == [(5, {"loss": 0.5, "reward": 0.25, "reward_std": 0.125})]


# --- verl console lines and JSONL ----------------------------------------------------------------------------------


def test_verl_console_lines_behind_ray_prefix_and_colours():
    history = only(DATA / "verl_console.log")

    assert (history.format, history.framework) == ("verl_console", "verl")
    # step:0 is the validation before training: only eval_reward.
    assert history.rows[0] == (0, {"eval_reward": 0.5})
    assert series(history, "reward") == [(1, 0.25), (2, 0.5)]
    assert series(history, "kl") == [(1, 0.001), (2, 0.002)]  # actor/kl_loss, not actor/ppo_kl
    assert series(history, "grad_norm") == [(1, 0.25), (2, 0.5)]  # actor/grad_norm, not critic/grad_norm
    assert series(history, "completions/clipped_ratio") == [(1, 0.0625), (2, 0.125)]
    assert {"actor/ppo_kl", "critic/grad_norm", "critic/rewards/mean", "timing_s/gen"} <= set(history.unmapped)


def test_the_setup_a_console_log_states(tmp_path):
    # `set -x` echoes the launch command with its Hydra overrides before verl's lines.
    command = (
        "+ python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.max_response_length=1024 "
        "actor_rollout_ref.actor.clip_ratio_low=0.2 actor_rollout_ref.actor.clip_ratio_high=0.28 "
        "actor_rollout_ref.actor.use_kl_loss=False actor_rollout_ref.actor.kl_loss_coef=0.001 "
        "actor_rollout_ref.rollout.n=8\n"
    )
    path = tmp_path / "verl.out"
    path.write_text(command + (DATA / "verl_console.log").read_text())
    history = only(path)
    # use_kl_loss=False: no KL term, whatever kl_loss_coef says.
    assert history.context == {
        "max_completion_length": 1024,
        "epsilon": 0.2,
        "epsilon_high": 0.28,
        "num_generations": 8,
        "beta": 0.0,
    }
    # A TRL script's command line (TrlParser / ms-swift flags) before the printed dicts.
    path = tmp_path / "trl.out"
    path.write_text(
        "python grpo.py --max_completion_length 256 --beta=0.04 --loss_type dr_grpo\n"
        + (DATA / "trl_slurm_current.out").read_text()
    )
    assert only(path).context == {"max_completion_length": 256, "beta": 0.04, "loss_type": "dr_grpo"}


@pytest.mark.parametrize(
    ("framework", "text", "facts"),
    [
        # TRL: command-line flags, GRPOConfig(...) fields, a printed to_dict()
        (
            "trl",
            "python grpo.py --top_p 0.9 --vllm_importance_sampling_correction true",
            {"top_p": 0.9, "is_correction": True},
        ),
        (
            "trl",
            "GRPOConfig(top_k=50, min_p=0.05, vllm_importance_sampling_correction=False)",
            {"top_k": 50, "min_p": 0.05, "is_correction": False},
        ),
        (
            "trl",
            "{'top_p': 0.95, 'top_k': 0, 'vllm_importance_sampling_correction': True}",
            {"top_p": 0.95, "top_k": 0, "is_correction": True},
        ),
        # vLLM's SamplingParams repr states the sampler's filters too.
        (
            "trl",
            "SamplingParams(n=1, temperature=1.0, top_p=0.8, top_k=-1, min_p=0.0, seed=None)",
            {"top_p": 0.8, "top_k": -1, "min_p": 0.0},
        ),
        # A transformers MoE config: the aux loss only counts with output_router_logits on.
        (
            "trl",
            '{"num_experts": 128, "output_router_logits": true, "router_aux_loss_coef": 0.001}',
            {"router_aux_loss_coef": 0.001},
        ),
        (
            "trl",
            '{"num_experts": 128, "output_router_logits": false, "router_aux_loss_coef": 0.001}',
            {"router_aux_loss_coef": 0.0},
        ),
        ("trl", '{"num_experts": 128, "router_aux_loss_coef": 0.001}', {}),  # logits unstated: unknown
        # verl: Hydra overrides and the pretty-printed config
        (
            "verl",
            "actor_rollout_ref.rollout.top_p=0.7 actor_rollout_ref.rollout.top_k=20 "
            "algorithm.rollout_correction.rollout_is=token",
            {"top_p": 0.7, "top_k": 20, "is_correction": True},
        ),
        ("verl", "algorithm.rollout_is=False", {"is_correction": False}),
        (
            "verl",
            "{'rollout_correction': {'rollout_is': None, 'rollout_rs': None}, 'rollout': {'top_k': -1, 'top_p': 1}}",
            {"top_p": 1.0, "top_k": -1, "is_correction": False},
        ),
        (
            "verl",
            "actor_rollout_ref.actor.megatron.override_transformer_config.moe_aux_loss_coeff=0.01",
            {"router_aux_loss_coef": 0.01},
        ),
    ],
)
def test_the_sampler_correction_and_router_facts_a_log_states(framework, text, facts):
    from align_kit.doctor.readers.stated import stated_context

    context, _ = stated_context(text, framework)
    assert {key: context[key] for key in context if key in FACT_KEYS} == facts


FACT_KEYS = ("top_p", "top_k", "min_p", "is_correction", "router_aux_loss_coef")


def test_the_same_facts_from_a_wandb_config():
    from align_kit.doctor.readers.context import from_trl_config, from_verl_config

    trl = {"top_p": 0.9, "top_k": None, "min_p": None, "vllm_importance_sampling_correction": True,
           "model_init_kwargs": {"output_router_logits": True, "router_aux_loss_coef": 0.002}}  # fmt: skip
    assert {key: value for key, value in from_trl_config(trl).items() if key in FACT_KEYS} == {
        "top_p": 0.9,
        "is_correction": True,
        "router_aux_loss_coef": 0.002,
    }
    verl = {
        "actor_rollout_ref": {
            "rollout": {"top_p": 1.0, "top_k": -1},
            "actor": {"megatron": {"override_transformer_config": {"moe_aux_loss_coeff": 0.01}}},
        },
        "algorithm": {"rollout_correction": {"rollout_is": "sequence"}},
    }
    assert {key: value for key, value in from_verl_config(verl).items() if key in FACT_KEYS} == {
        "top_p": 1.0,
        "top_k": -1,
        "is_correction": True,
        "router_aux_loss_coef": 0.01,
    }
    verl["algorithm"] = {"rollout_correction": {"rollout_is": None}}
    assert from_verl_config(verl)["is_correction"] is False


def test_older_verl_names():
    history = only(DATA / "verl_old_main_task.log")
    assert series(history, "entropy") == [(5, 5.683), (6, 6.5)]
    assert series(history, "eval_reward") == [(5, 0.171)]
    assert series(history, "completions/clipped_ratio") == [(5, 0.521), (6, 0.75)]


def test_verl_file_logger_jsonl():
    # verl's file logger (trainer.logger=[file], VERL_FILE_LOGGER_PATH) writes {"step": N, "data": {...}} per line.
    history = only(DATA / "verl_file_logger.jsonl")
    assert (history.format, history.framework) == ("verl_jsonl", "verl")
    assert series(history, "entropy") == [(1, 0.5), (2, 0.25)]
    assert math.isnan(history.rows[1][1]["sampling/importance_sampling_ratio/mean"])


def test_llamafactory_trainer_log():
    # LLaMA-Factory's LogCallback writes the Trainer's last log renamed: current_steps, loss, reward, lr, ...
    history = only(DATA / "llamafactory_trainer_log.jsonl")
    assert (history.format, history.framework) == ("llamafactory_jsonl", "llamafactory")
    assert history.rows == [
        (5, {"loss": 0.0125, "reward": 0.25, "learning_rate": 1e-06}),
        (10, {"loss": 0.025, "reward": 0.5, "learning_rate": 1e-06}),
        (15, {"loss": 0.0375, "reward": 0.75, "learning_rate": 5e-07}),
    ]
    assert "percentage" in history.unmapped and "current_steps" not in history.unmapped


def _write_events(folder: Path, rows: list[dict[str, float]]) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(folder))
    writer.add_text("args/text_summary", "{'beta': 0.0}")  # HF's callback logs the arguments as text
    for step, row in enumerate(rows, start=1):
        for tag, value in row.items():
            writer.add_scalar(tag, value, step)
    writer.close()


def test_tensorboard_events_as_hf_writes_them(tmp_path):
    # HF's TensorBoardCallback: train/<key> against the global step, under <output_dir>/runs/<date>_<host>/.
    run = tmp_path / "out" / "runs" / "Mar01_10-00-00_host"
    _write_events(run, [{"train/reward": 0.25, "train/entropy": 0.5}, {"train/reward": 0.5, "train/entropy": 0.25}])
    (events,) = list(run.iterdir())

    history = only(events)
    assert (history.format, history.framework, history.name) == ("tensorboard", "trl", "Mar01_10-00-00_host")
    assert history.rows == [(1, {"reward": 0.25, "entropy": 0.5}), (2, {"reward": 0.5, "entropy": 0.25})]
    # The output folder holding runs/: one history per run folder.
    (history,) = read_runs(str(tmp_path / "out"))
    assert history.name == "runs/Mar01_10-00-00_host"
    assert series(history, "reward") == [(1, 0.25), (2, 0.5)]


def test_an_output_folder_whose_events_go_further_than_its_checkpoint(tmp_path):
    # checkpoint-1 saved at step 1; the events run on to step 2: the events are read.
    (tmp_path / "checkpoint-1").mkdir()
    (tmp_path / "checkpoint-1" / "trainer_state.json").write_text(_state([1], 0.25))
    _write_events(tmp_path / "runs" / "Mar01", [{"train/reward": 0.25}, {"train/reward": 0.5}])
    history = only(tmp_path)
    assert history.format == "tensorboard"
    assert series(history, "reward") == [(1, 0.25), (2, 0.5)]
    # The state reaching as far: the state is read.
    (tmp_path / "checkpoint-2").mkdir()
    (tmp_path / "checkpoint-2" / "trainer_state.json").write_text(_state([1, 2], 0.25))
    assert only(tmp_path).format == "trl_state"


def test_a_folder_of_log_files(tmp_path):
    shutil.copy(DATA / "llamafactory_trainer_log.jsonl", tmp_path / "trainer_log.jsonl")
    shutil.copy(DATA / "verl_file_logger.jsonl", tmp_path / "verl.jsonl")
    (tmp_path / "notes.txt").write_text("nothing here\n")
    histories = read_runs(str(tmp_path))
    assert [(history.name, history.format) for history in histories] == [
        ("trainer_log", "llamafactory_jsonl"),
        ("verl", "verl_jsonl"),
    ]


def test_nemo_rl_token_mult_prob_error_is_read_as_its_log(tmp_path):
    # NeMo-RL's token_mult_prob_error is mean exp(|logp gap|), 1.0 when generation and training agree: its log is
    # read as the mean |logp gap| (0.0 at 1.0; log(1.02) = 0.0198...).
    path = tmp_path / "nemo.jsonl"
    path.write_text(
        '{"step": 1, "train/reward": 0.25, "train/token_mult_prob_error": 1.0, "train/gen_kl_error": 0.001}\n'
        '{"step": 2, "train/reward": 0.5, "train/token_mult_prob_error": 1.02, "train/gen_kl_error": 0.002}\n'
    )
    history = only(path)
    assert history.framework == "nemo_rl"
    assert series(history, "mismatch/logp_abs_diff/mean") == [(1, 0.0), (2, pytest.approx(0.0198026, abs=1e-6))]
    assert series(history, "mismatch/kl") == [(1, 0.001), (2, 0.002)]


def test_a_json_object_of_series_per_metric(tmp_path):
    # NeMo-RL's tests dump TensorBoard logs as {metric: {step: value}}; a plain {metric: [values]} reads by position.
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"train/reward": {"1": 0.25, "2": 0.5}, "train/gen_kl_error": {"1": 0.001, "2": 0.002}}))
    history = only(path)
    assert (history.format, history.framework) == ("json_columns", "nemo_rl")
    assert history.rows == [(1, {"reward": 0.25, "mismatch/kl": 0.001}), (2, {"reward": 0.5, "mismatch/kl": 0.002})]
    path.write_text(json.dumps({"reward": [0.25, 0.5], "entropy": [0.5, 0.25]}))
    history = only(path)
    assert history.rows == [(1, {"reward": 0.25, "entropy": 0.5}), (2, {"reward": 0.5, "entropy": 0.25})]
    assert history.notes[0].startswith("a list of values per metric")


def test_trl_ppo_log_lines_advise_in_trl_terms(tmp_path):
    path = tmp_path / "ppo.log"
    path.write_text(
        "{'eps': 3, 'objective/kl': 0.5, 'objective/entropy': 40.0, 'objective/non_score_reward': -0.025, "
        "'objective/rlhf_reward': 0.475, 'objective/scores': 0.5, 'policy/approxkl_avg': 0.001, "
        "'policy/clipfrac_avg': 0.01, 'loss/policy_avg': -0.02, 'policy/entropy_avg': 0.8, 'val/ratio': 1.0, "
        "'lr': 3e-06, 'episode': 64, 'epoch': 0.01}\n"
    )
    history = only(path)
    assert history.framework == "trl"
    assert history.rows == [
        (
            1,
            {
                "kl": 0.5,
                "reward": 0.5,
                "clip_ratio/region_mean": 0.01,
                "loss": -0.02,
                "entropy": 0.8,
                "policy_ratio/mean": 1.0,
                "learning_rate": 3e-06,
            },
        )
    ]


# --- OpenRLHF, W&B, generic ----------------------------------------------------------------------------------------


def test_openrlhf_jsonl():
    # The status keys of openrlhf/trainer/ray/ppo_actor.py (policy_loss, actor_lr, entropy_loss, ppo_clip_ratio, kl,
    # ppo_kl, ...) under train/, as its W&B logger and JSON lines carry them.
    history = only(DATA / "openrlhf_train.jsonl")
    assert history.framework == "openrlhf"
    assert history.rows[0] == (
        1,
        {
            "loss": 0.1,
            "learning_rate": 5e-07,
            "reward": 0.25,
            "completions/mean_length": 400.0,
            "kl": 0.0,
            "clip_ratio/region_mean": 0.01,
            "entropy": 0.7,
        },
    )
    assert {"train/ppo_kl", "train/return", "train/total_length"} <= set(history.unmapped)


def test_wandb_csv_export_one_history_per_run():
    histories = read_runs(str(DATA / "wandb_export.csv"))
    assert [(history.name, history.format, history.framework) for history in histories] == [
        ("grpo-a", "wandb_csv", "trl"),
        ("grpo-b", "wandb_csv", "trl"),
    ]
    assert series(histories[0], "reward") == [(1, 0.25), (2, 0.5), (3, 0.75)]
    # grpo-b logged nothing at step 2 (empty cells); the __MIN/__MAX columns are not metrics.
    assert series(histories[1], "reward") == [(1, 0.5), (3, 0.125)]
    assert histories[1].unmapped == []


class FakeRun:
    name = "grpo-qwen"
    config = {"max_completion_length": 1024, "epsilon_high": 0.28, "beta": 0.0, "loss_type": "dapo", "seed": 1}

    def scan_history(self):
        yield {"train/global_step": 1, "train/reward": 0.25, "train/entropy": 0.5, "_step": 0, "_runtime": 3.0}
        yield {"train/global_step": 2, "train/reward": 0.5, "_step": 1}
        yield {"train/global_step": 2, "train/train_runtime": 9.0, "train/train_loss": 0.1, "_step": 2}


class FakeApi:
    def __init__(self):
        self.asked = []

    def run(self, path):
        self.asked.append(path)
        if path.endswith("missing"):
            raise ValueError(f"Could not find run {path}")
        return FakeRun()


def test_wandb_run_through_the_api():
    api = FakeApi()
    history = only("wandb:team/grpo/abc123", api=api)
    assert api.asked == ["team/grpo/abc123"]
    assert (history.format, history.framework, history.name) == ("wandb", "trl", "grpo-qwen")
    assert history.rows == [(1, {"reward": 0.25, "entropy": 0.5}), (2, {"reward": 0.5})]
    assert history.context == {
        "max_completion_length": 1024,
        "epsilon_high": 0.28,
        "beta": 0.0,
        "loss_type": "dapo",
    }
    # A run page's address works too.
    only("wandb:team/grpo/runs/abc123", api=api)
    assert api.asked[-1] == "team/grpo/abc123"


def test_wandb_offline_run_folder(tmp_path, monkeypatch):
    import wandb

    for variable in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(variable, str(tmp_path / "wandb-home"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = wandb.init(mode="offline", dir=str(tmp_path), project="p", name="verl-run", config={"data": {}})
    # verl logs its own keys against W&B's step.
    for step, score in ((1, 0.25), (2, 0.5)):
        run.log({"critic/score/mean": score, "actor/entropy": 0.5}, step=step)
    run.finish()
    wandb.teardown()

    history = only(tmp_path)  # the folder holding wandb/offline-run-*
    assert (history.format, history.framework, history.name) == ("wandb", "verl", "verl-run")
    assert series(history, "reward") == [(1, 0.25), (2, 0.5)]


def test_generic_csv_with_a_key_map(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("iteration,avg_score,tok_entropy\n1,0.25,0.5\n2,0.5,nan\n")
    history = only(path, key_map={"reward": "avg_score", "entropy": "tok_entropy"})
    assert history.mapping == {"avg_score": "reward", "tok_entropy": "entropy"}
    assert series(history, "reward") == [(1, 0.25), (2, 0.5)]
    assert math.isnan(history.rows[1][1]["entropy"])


def test_generic_jsonl_without_a_step_column(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"acc": 0.25}\n{"acc": 0.5}\n')
    history = only(path, key_map={"reward": "acc"})
    assert series(history, "reward") == [(1, 0.25), (2, 0.5)]
    assert "steps are the line numbers" in history.notes[0]


# --- bad inputs: one line each, naming the file and what was expected ----------------------------------------------

BAD_INPUTS = [
    # (name, file content or None for a missing path, error pattern)
    ("missing.log", None, r"missing\.log: no such file or folder; expected"),
    (
        "notes.txt",
        "nothing to see here\njust words\n",
        r"notes\.txt: no metric rows found \(verl_console: no `step:N - key:value` lines; trl_log_lines: no printed "
        r"log dicts; step_pairs: no step-tagged `key: value` lines; key_value_lines: no lines of `key: value` metric "
        r"pairs; table: no table with a step or metric column\); "
        r"expected metrics\.jsonl, trainer_state\.json, "
        r"TRL log lines, verl step lines, a W&B run, TensorBoard events or a CSV/JSONL with --map",
    ),
    (
        "trainer_state.json",
        '{"global_step": 3, "log_history": []}',
        r"trainer_state\.json: the trl_state input holds no logged rows; expected at least one logged step",
    ),
    (
        "custom.csv",
        "step,acc,tokens\n1,0.5,10\n",
        r"custom\.csv: 1 rows found but no key maps to a metric the rules read \(keys: acc, tokens\); "
        r"pass --map concept=column",
    ),
    (
        "state.json",
        '{"global_step": 3,\n "log_history": [{"step": 1, "loss": 0.5},\n',
        r"state\.json: corrupt JSON \(Expecting .* at line 3, column 1\); expected HF's trainer_state\.json whole",
    ),
    (
        "log.jsonl",
        '{"step": 1, "reward": 0.5',
        r"log\.jsonl: corrupt JSON \(Expecting .* at line 1, column \d+\); expected a JSON or JSON-lines file",
    ),
    ("train.ipynb", "this is not json", r"train\.ipynb: not JSON; expected a Jupyter notebook"),
    (
        "broken.ipynb",
        '{"cells": [{"cell_type": "code",',
        r"broken\.ipynb: not JSON \(Expecting .* at line 1, column \d+\); expected a Jupyter notebook",
    ),
]


@pytest.mark.parametrize(("name", "content", "error"), BAD_INPUTS, ids=[row[0] for row in BAD_INPUTS])
def test_bad_inputs(tmp_path, name, content, error):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(DoctorInputError, match=error) as raised:
        read_runs(str(path))
    assert "\n" not in str(raised.value)


def test_a_file_of_configs_says_what_each_family_found(tmp_path):
    path = tmp_path / "configs.txt"
    path.write_text("{'a': [1], 'b': 'x'}\n{'learning_rate': 1e-6, 'beta': 0.1}\n")
    with pytest.raises(DoctorInputError) as raised:
        read_runs(str(path))
    assert (
        "no metric rows found (jsonl: no JSON object rows; verl_console: no `step:N - key:value` lines; "
        "trl_log_lines: 0 of 0 rows with metric names (2 config dict(s) skipped); step_pairs: no step-tagged "
        "`key: value` lines; key_value_lines: no lines of `key: value` metric pairs; table: no table with a step or "
        "metric column); expected"
    ) in str(raised.value)


def test_bad_folder_and_wandb_path(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DoctorInputError, match=r"empty: no metric rows found; expected"):
        read_runs(str(tmp_path / "empty"))
    with pytest.raises(DoctorInputError, match=r"wandb:team/grpo: names no run; expected wandb:ENTITY/PROJECT/RUN_ID"):
        read_runs("wandb:team/grpo", api=FakeApi())
    with pytest.raises(DoctorInputError, match=r"cannot read the W&B run \(ValueError: Could not find run"):
        read_runs("wandb:team/grpo/missing", api=FakeApi())
    with pytest.raises(DoctorInputError, match=r"--logging-steps 0: expected"):
        read_runs(str(DATA / "trl_console_old_names.log"), logging_steps=0)


def test_an_align_kit_metrics_file_with_no_row(tmp_path):
    write_run(tmp_path / "run", [])
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 1, "rew\n')
    with pytest.raises(DoctorInputError, match=r"metrics\.jsonl: none of its 1 line\(s\) is a JSON row with a step"):
        read_runs(str(tmp_path / "run"))


def test_a_torn_last_line_of_json_lines_is_skipped_and_noted(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"step": 1, "reward": 0.25}\n{"step": 2, "reward": 0.5}\n{"step": 3, "rew')
    history = only(path)
    assert series(history, "reward") == [(1, 0.25), (2, 0.5)]
    assert history.notes[0].startswith("skipped 1 line(s) that are not JSON (first: line 3")


def test_a_copied_folder_reads_the_same(tmp_path):
    # Detection by content: the same trainer_state under another name is read the same.
    shutil.copy(DATA / "trainer_state.json", tmp_path / "renamed.txt")
    assert only(tmp_path / "renamed.txt").rows == only(DATA / "trainer_state.json").rows


# --- 10,000 logged points of each text format, read whole ----------------------------------------------


@pytest.mark.slow
def test_ten_thousand_lines_of_each_text_format_are_read_whole(tmp_path):
    trl = tmp_path / "trl.log"
    trl.write_text(
        "".join(
            f"{{'loss': {step * 1e-4}, 'grad_norm': 0.5, 'learning_rate': 1e-06, 'reward': {step % 7 / 7}, "
            f"'reward_std': 0.25, 'completions/mean_length': 100.0, 'entropy': nan, 'kl': 0.001, "
            f"'clip_ratio/region_mean': 0.0, 'frac_reward_zero_std': 0.5, 'step': {step}, 'epoch': 0.1}}\n"
            for step in range(1, 10_001)
        )
    )
    verl = tmp_path / "verl.log"
    verl.write_text(
        "".join(
            f"(TaskRunner pid=1) step:{step} - actor/entropy:0.5 - actor/kl_loss:0.001 - actor/pg_clipfrac:0.0 - "
            f"actor/grad_norm:0.2 - critic/score/mean:{step % 5 / 5} - response_length/mean:300.0 - "
            f"response_length/clip_ratio:0.0 - timing_s/gen:30.0\n"
            for step in range(1, 10_001)
        )
    )
    # Prose lines that look like table headers (a known metric name, no number) before the one real table.
    prose = tmp_path / "notes.txt"
    prose.write_text(
        "reward went down again\n" * 10_000 + "step,reward\n" + "".join(f"{s},0.5\n" for s in range(1, 10_001))
    )
    # Speed is benchmarks/doctor_speed.py's to measure (a ratio, with the load stated); this checks the content.
    for path in (trl, verl, prose):
        history = only(path)
        assert len(history.rows) == 10_000
        assert history.rows[-1][0] == 10_000


def test_verl_advantages_all_zero_read_as_every_group_flat(tmp_path):
    # verl logs no flat-group share. Advantage range exactly 0 on both rows: every advantage is 0, so every group
    # was flat (share 1.0 on those rows); one row with a non-zero range makes the share unknown: nothing derived.
    line = "step:{step} - critic/score/mean:0.9 - critic/advantages/max:{high} - critic/advantages/min:{low}\n"
    flat = tmp_path / "flat.log"
    flat.write_text(line.format(step=1, high="0.000", low="0.000") + line.format(step=2, high="0.000", low="0.000"))
    history = only(flat)
    assert series(history, "frac_reward_zero_std") == [(1, 1.0), (2, 1.0)]
    assert any("every group was flat" in note for note in history.notes)
    mixed = tmp_path / "mixed.log"
    mixed.write_text(line.format(step=1, high="0.000", low="0.000") + line.format(step=2, high="1.200", low="-0.800"))
    history = only(mixed)
    assert series(history, "frac_reward_zero_std") == []
    assert not any("every group was flat" in note for note in history.notes)


def test_verl_step_line_wrapped_by_a_paste_is_joined(tmp_path):
    # A step line cut mid-key ("response_length/me" + "an:326.2") and continued on two lines; then an unrelated log
    # line (spaces inside its items) that must not be read as a continuation.
    path = tmp_path / "wrapped.log"
    path.write_text(
        "(TaskRunner pid=1) step:80 - critic/score/mean:0.891 - c\n"
        "ritic/advantages/max:1.500 - response_length/me\n"
        "an:326.241 - response_length/clip_ratio:0.008\n"
        "INFO: saving checkpoint - global step 80: done\n"
        "(TaskRunner pid=1) step:81 - critic/score/mean:0.9\n"
    )
    history = only(path)
    assert series(history, "reward") == [(80, 0.891), (81, 0.9)]
    assert series(history, "completions/mean_length") == [(80, 326.241)]
    assert series(history, "completions/clipped_ratio") == [(80, 0.008)]
