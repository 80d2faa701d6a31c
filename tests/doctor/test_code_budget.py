"""The length budget a notebook's code cells set (readers/code_budget.py): a keyword or a variable passed in, its value
followed through the cells' assignments; commented-out or data-computed settings state nothing. The values expected
are read off the cells by hand."""

from __future__ import annotations

import json
from pathlib import Path

from align_kit.doctor.readers import read_runs
from align_kit.doctor.readers.code_budget import code_budget

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "benchmarks" / "doctor_runs" / "published"


def test_a_keyword_in_the_trainer_config():
    cells = [
        "%%capture\n!pip install unsloth",
        "args = GRPOConfig(\n    logging_steps = 1,\n    max_completion_length = 200,\n)",
    ]
    assert code_budget(cells) == (200, "max_completion_length=200 in a code cell")


def test_a_variable_assigned_and_passed_in():
    cells = [
        "max_seq_length = 1024 # Can increase\nmax_prompt_length = 256",
        "args = GRPOConfig(max_completion_length = max_seq_length - max_prompt_length)",
    ]
    budget, statement = code_budget(cells)
    assert budget == 1024 - 256
    assert "max_prompt_length = 256, max_seq_length = 1024" in statement
    # Reassigned before the config is built: the later value is the one passed in, as Python runs it.
    cells = ["comp = 512", "comp = 300", "config = {'max_completion_length': comp}"]
    assert code_budget(cells)[0] == 300


def test_nothing_stated_by_a_comment_a_computed_value_or_unparsable_code():
    assert code_budget(["args = GRPOConfig(\n    # max_completion_length = 200,\n    beta = 0.0,\n)"]) is None
    # Unsloth's later notebooks: the prompt length comes from the data, so the difference is unknown.
    computed = (
        "max_seq_length = 2048\nmax_prompt_length = maximum_length + 1\n"
        "max_completion_length = max_seq_length - max_prompt_length\n"
        "args = GRPOConfig(max_completion_length = max_completion_length)"
    )
    assert code_budget([computed]) is None
    # A name once known, then bound to something else, is unknown from then on.
    assert code_budget(["n = 200\nn = len(data)\nGRPOConfig(max_completion_length=n)"]) is None
    assert code_budget(["GRPOConfig(max_completion_length=200"]) is None  # cut cell: Python cannot parse it
    assert code_budget(["GRPOConfig(max_completion_length=args.max_len)"]) is None


def test_a_notebook_whose_outputs_never_print_the_budget(tmp_path):
    # The budget only in the code cell, the progress table in the outputs: read from the code, said so.
    table = (
        "<table><thead><tr><th>Step</th><th>Training Loss</th><th>reward</th><th>completion_length</th></tr></thead>"
        "<tbody>"
        + "".join(f"<tr><td>{i}</td><td>0.0</td><td>0.{i}</td><td>{190 + i}</td></tr>" for i in range(1, 9))
        + "</tbody></table>"
    )
    notebook = {
        "nbformat": 4,
        "cells": [
            {"cell_type": "code", "source": ["MAX_LEN = 200\n"], "outputs": []},
            {
                "cell_type": "code",
                "source": [
                    "trainer = GRPOTrainer(args=GRPOConfig(max_completion_length=MAX_LEN))\n",
                    "trainer.train()",
                ],
                "outputs": [{"output_type": "display_data", "data": {"text/html": [table]}}],
            },
        ],
    }
    path = tmp_path / "run.ipynb"
    path.write_text(json.dumps(notebook))
    (history,) = read_runs(str(path))
    assert history.context["max_completion_length"] == 200
    assert any("length budget stated in the notebook's code" in note for note in history.notes)


def test_a_budget_the_outputs_print_wins_over_the_code(tmp_path):
    # The cell sets 200, the run's printed config says 256 (what ran): the printed statement is read.
    lines = [f"{{'loss': 0.0, 'reward': 0.{i}, 'completion_length': 190.0}}\n" for i in range(1, 9)]
    notebook = {
        "nbformat": 4,
        "cells": [
            {
                "cell_type": "code",
                "source": ["args = GRPOConfig(max_completion_length=200)\n", "trainer.train()"],
                "outputs": [{"output_type": "stream", "text": ["{'max_completion_length': 256}\n", *lines]}],
            }
        ],
    }
    path = tmp_path / "run.ipynb"
    path.write_text(json.dumps(notebook))
    (history,) = read_runs(str(path))
    assert history.context["max_completion_length"] == 256
    assert not any("notebook's code" in note for note in history.notes)


def test_development_notebooks():
    """Read off each notebook's cells by hand: Unsloth's Llama 3.1 8B notebook sets max_seq_length = 1024 and
    max_prompt_length = 256 and passes their difference; the Qwen3 4B notebook of 2025-05-13 computes the difference
    from the data, then sets max_completion_length = 1024 before the config; a Llama 3.1 8B notebook of 2025-05-05
    has the setting commented out."""
    expected = {
        "unsloth_nb_llama3_1_8b_grpo.ipynb": 768,
        "unsloth_nb_qwen3_4b_grpo_2025_05_13.ipynb": 1024,
        "nb_hasonsk_llama3_1_8b_grpo_2025_05_05_3.ipynb": None,
        "nb_tkg31302_phi_grpo.ipynb": 200,  # hp_max_comp_len = 200, passed in
    }
    for name, budget in expected.items():
        (history, *_) = read_runs(str(PUBLISHED / name))
        assert history.context.get("max_completion_length") == budget, name
