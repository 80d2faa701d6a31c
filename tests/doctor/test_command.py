"""`align-kit doctor` through the real entry (`align_kit.cli.main`, in-process): exit codes by verdict, --json, many
paths, and a table of bad inputs that each exit 2 with exactly one stderr line naming the file or option."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from align_kit import cli


def trainer_state(path: Path, rows: list[dict[str, float]], every: int = 10) -> Path:
    history = [{"step": every * (i + 1), **row} for i, row in enumerate(rows)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"global_step": every * len(rows), "logging_steps": every, "log_history": history}))
    return path


def doctor(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["doctor", *argv])
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


HEALTHY = [{"loss": 0.1, "grad_norm": 0.5, "reward": 0.5, "completions/mean_length": 500.0}] * 3
FAILING = [{"loss": 0.1, "grad_norm": 0.5}, {"loss": math.nan, "grad_norm": 0.5}]


@pytest.mark.parametrize(
    ("rows", "options", "code", "verdict"),
    [
        (HEALTHY, [], 0, "healthy"),
        # Mean length 500 >= (1 - 0.05) x 512 = 486.4: length_near_max (a warning) fires once the budget is known.
        (HEALTHY, ["--max-completion-length", "512"], 1, "warning"),
        (FAILING, [], 3, "failing"),
    ],
)
def test_exit_code_by_verdict(tmp_path, capsys, rows, options, code, verdict):
    path = trainer_state(tmp_path / "trainer_state.json", rows)
    status, out, err = doctor(capsys, str(path), *options)
    assert status == code
    assert out.splitlines()[1].startswith(f"verdict: {verdict}")
    assert err == ""


def test_json_and_the_worst_of_many_paths(tmp_path, capsys):
    healthy = trainer_state(tmp_path / "a" / "trainer_state.json", HEALTHY)
    failing = trainer_state(tmp_path / "b" / "trainer_state.json", FAILING)
    status, out, _ = doctor(capsys, str(healthy), str(failing), "--json")
    document = json.loads(out)
    assert status == 3 and document["exit_code"] == 3 and document["verdict"] == "failing"
    assert [run["verdict"] for run in document["runs"]] == ["healthy", "failing"]
    assert document["runs"][1]["alerts"][0]["rule"] == "non_finite"
    assert document["runs"][1]["alerts"][0]["step"] == 20  # the second row, logging every 10 steps


def test_many_paths_end_with_a_summary_table(tmp_path, capsys):
    healthy = trainer_state(tmp_path / "a" / "trainer_state.json", HEALTHY)
    failing = trainer_state(tmp_path / "b" / "trainer_state.json", FAILING)
    status, out, _ = doctor(capsys, str(healthy), str(failing))
    assert status == 3
    assert "summary of 2 runs:" in out
    assert out.rstrip().splitlines()[-1].split()[3:5] == ["failing", "non_finite"]


def test_figures_only_where_asked(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = trainer_state(tmp_path / "run" / "trainer_state.json", FAILING)
    doctor(capsys, str(path))
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["trainer_state.json"]  # nothing written
    status, out, _ = doctor(capsys, str(path), "--figures", "figs")
    assert status == 3 and (tmp_path / "figs" / "run.png").is_file()
    assert "figure: figs/run.png" in out
    status, _, err = doctor(capsys, str(path), "--figures", "figs")  # kept: exit 2, one line
    assert status == 2 and err.count("\n") == 1 and "figs/run.png: exists" in err


# (argv after `doctor`, files to write first {name: text}, a fragment the one error line must contain)
BAD_INPUTS = [
    (["{dir}/missing.json"], {}, "missing.json: no such file or folder"),
    (["{dir}/empty.json"], {"empty.json": ""}, "empty.json"),
    (["{dir}/corrupt.json"], {"corrupt.json": '{"log_history": [{"step": 1, "loss"'}, "corrupt.json: corrupt JSON"),
    (["{dir}/prose.txt"], {"prose.txt": "hello world\n"}, "prose.txt: no metric rows found"),
    ([], {}, "name at least one PATH"),
    (["--bogus", "x"], {}, "unrecognized arguments: --bogus"),
    (["x", "--map", "reward"], {}, "'reward': expected CONCEPT=COLUMN"),
    (["x", "--logging-steps", "0"], {}, "'0': expected a whole number > 0"),
    (["x", "--idle", "-1"], {}, "'-1': expected a number > 0"),
    (["x", "--reward-max", "nan"], {}, "'nan': expected a finite number"),
    (["x", "--reward-max", "1", "--reward-min", "2"], {}, "--reward-min 2 >= --reward-max 1"),
    (["--follow", "a", "b"], {}, "--follow watches one PATH; got 2"),
]


@pytest.mark.parametrize(("argv", "files", "fragment"), BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, files, fragment):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    status, out, err = doctor(capsys, *(arg.format(dir=tmp_path) for arg in argv))
    assert status == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("align-kit: doctor error: ")
    assert fragment in err
    assert "Traceback" not in err


def test_a_reader_that_closes_the_pipe_gets_no_traceback():
    # `align-kit doctor ... | head -1`: the pipe's read end is closed before the report is written. The process
    # ends with 141 (128 + SIGPIPE, as a shell reports it) and nothing on stderr.
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "align_kit.cli", "doctor", "docs/examples/doctor/trl_run/trainer_state.json"],
            cwd=root,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141
    assert "Traceback" not in done.stderr
