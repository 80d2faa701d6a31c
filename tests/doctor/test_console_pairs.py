"""Console lines of step-tagged metric pairs and launcher prefixes (`readers.step_pairs`, `readers.prefixes`). The
expected values are read by hand off the fixtures in data/."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from align_kit.doctor.readers import read_runs
from align_kit.doctor.readers.prefixes import strip_prefix
from align_kit.doctor.readers.step_pairs import normalise, pairs

DATA = Path(__file__).parent / "data"


def _one(name: str):
    (history,) = read_runs(str(DATA / name))
    return history


def test_pipe_separated_trainer_lines_behind_torchrun_prefixes():
    history = _one("step_pairs_trainer.log")
    assert history.format == "step_pairs"
    # `Step 3 of the warm-up took 12 seconds` has a step but no metric pair: no row.
    assert [step for step, _ in history.rows] == [1, 2, 3]
    assert history.rows[1][1] == {
        "loss": 0.008,
        "entropy": 0.39,
        "mismatch/kl": 0.002,
        "grad_norm": 0.2,
        "learning_rate": 1e-6,
    }
    assert history.framework == "generic"


def test_iter_lines_with_space_separated_names_and_a_val_line_at_the_same_step():
    history = _one("step_pairs_iter.log")
    assert [step for step, _ in history.rows] == [1, 2, 3]  # the `...` line between steps 2 and 3 is skipped
    first = history.rows[0][1]
    assert first["eval_reward"] == 0.2 and first["reward"] == 0.25 and first["loss"] == 0.05
    assert [values["reward_std"] for _, values in history.rows] == [0.4, 0.35, 0.3]
    assert [values["kl"] for _, values in history.rows] == [0.001, 0.003, 0.006]
    # mlx-lm prints each reward function's mean as `<name> mean`: a component, here the accuracy role.
    assert first["rewards/r1_accuracy_reward_func/mean"] == 0.125 and first["accuracy"] == 0.125
    assert history.roles == {"accuracy": "r1_accuracy_reward_func_mean"}


def test_bracketed_step_with_equals_pairs():
    history = _one("step_pairs_equals.log")
    # The rank0: line names a step but holds no metric pair.
    assert history.rows == [
        (1, {"reward": 0.3, "entropy": 1.2, "learning_rate": 2e-6}),
        (2, {"reward": 0.35, "entropy": 1.1, "learning_rate": 2e-6}),
    ]


def test_a_stepless_line_under_a_step_line_joins_its_row_and_inf_is_kept():
    history = _one("step_pairs_dschat.log")
    assert [step for step, _ in history.rows] == [3, 4]
    assert history.rows[0][1] == {"loss": 0.25, "reward": 0.45}
    assert math.isinf(history.rows[1][1]["loss"]) and history.rows[1][1]["reward"] == 0.5


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("Step 12 took 3 s on 8 GPUs", 0),  # one number after a word: prose
        ("Step 12 | reward: 0.41 | kl: 0.002", 2),
        ("Step 12 | reward: 0.41", 1),  # a single name is not enough
    ],
)
def test_a_step_line_needs_two_recognised_names(tmp_path, line, names):
    path = tmp_path / "run.log"
    path.write_text(f"{line}\n{line.replace('12', '13')}\n")
    if names >= 2:
        assert len(read_runs(str(path))[0].rows) == 2
    else:
        with pytest.raises(Exception, match="no metric rows found"):
            read_runs(str(path))


def test_pairs_and_names():
    assert normalise(" Grad. Norm ") == "grad_norm"
    assert normalise("Peak Mem.") == "peak_mem"
    assert pairs("Loss: 0.5 | Throughput: 3964 tokens/s | MFU: 5.4%") == {
        "loss": "0.5",
        "throughput": "3964",
        "mfu": "5.4",
    }
    assert pairs("a reward=0.3 entropy=1.2 x") == {"reward": "0.3", "entropy": "1.2"}


@pytest.mark.parametrize(
    ("line", "rest"),
    [
        ("[default0]:15:41:30 SUCCESS Step 9 | Loss: 0.0", "Step 9 | Loss: 0.0"),
        ("(TaskRunner pid=123) step:1 - a:2", "step:1 - a:2"),
        ("\x1b[36m(main_task pid=9)\x1b[0m step:3 - x:1", "step:3 - x:1"),
        ("rank0: {'loss': 1}", "{'loss': 1}"),
        (" [2025-11-25 07:19:22] iteration 7/ 2174 |", "iteration 7/ 2174 |"),
        ('2025-01-02 10:00:00,123 - INFO - {"a": 1}', '{"a": 1}'),
        ("[step 5] reward=0.3", "[step 5] reward=0.3"),  # a step tag is no prefix
        ("{'loss': 1}", "{'loss': 1}"),
    ],
)
def test_strip_prefix(line, rest):
    assert strip_prefix(line) == rest


def test_prefixed_dicts_json_and_a_dict_without_its_opening_brace():
    history = _one("prefixed_dicts.log")
    assert [step for step, _ in history.rows] == [1, 2, 3, 4, 5]
    assert [values["reward"] for _, values in history.rows] == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert math.isnan(history.rows[2][1]["kl"])  # `'kl': NaN` kept as a non-finite number


def test_a_file_of_prefixed_json_lines_is_not_corrupt_json():
    history = _one("prefixed_json_first.log")
    assert history.rows == [
        (1, {"loss": 0.5, "reward": 0.1, "kl": 0.01}),
        (2, {"loss": 0.4, "reward": 0.2, "kl": 0.02}),
    ]
