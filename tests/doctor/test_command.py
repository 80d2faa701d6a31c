"""`align-kit doctor` through the real entry (`align_kit.cli.main`, in-process): exit codes by verdict, --json, many
paths, and a table of bad inputs that each exit 2 with exactly one stderr line naming the file or option."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from align_kit import cli
from tests.read_only import unwritable_folder


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


# 10 rows, the reward rising 0.30 -> 0.57 by 0.03: its trend is judged (does it learn), nothing fires.
HEALTHY = [
    {"loss": 0.1, "grad_norm": 0.5, "reward": 0.30 + 0.03 * i, "completions/mean_length": 480.0 + 2 * i}
    for i in range(10)
]
# 3 rows flat at 0.5: too few points to judge whether the run learns; nothing fires, yet it is not shown healthy.
TOO_SHORT = [{"loss": 0.1, "grad_norm": 0.5, "reward": 0.5, "completions/mean_length": 500.0}] * 3
FAILING = [{"loss": 0.1, "grad_norm": 0.5}, {"loss": math.nan, "grad_norm": 0.5}]


@pytest.mark.parametrize(
    ("rows", "options", "code", "verdict"),
    [
        (HEALTHY, [], 0, "healthy"),
        # Mean length 500 >= (1 - 0.05) x 512 = 486.4: length_near_max (a warning) fires once the budget is known.
        (HEALTHY, ["--max-completion-length", "512"], 1, "warning"),
        (FAILING, [], 3, "failing"),
        (TOO_SHORT, [], 4, "unjudged: nothing fired (2 of 29 rules judged), but whether the run learns could not"),
        # Only the learning rate logged: read, but no rule reads it.
        ([{"learning_rate": 1e-6}] * 3, [], 4, "unjudged"),
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


# A rising reward: 0.1, 0.2, ..., 0.6 at steps 10, ..., 60; a second column "score" holding the same numbers.
RISING = [{"loss": 0.1, "grad_norm": 0.5, "reward": r / 10, "score": r / 10} for r in range(1, 7)]
STATE = json.dumps({"global_step": 60, "log_history": [{"step": 10 * (i + 1), **row} for i, row in enumerate(RISING)]})

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
    (["{dir}/blank.jsonl"], {"blank.jsonl": ""}, "blank.jsonl: is empty (0 bytes)"),
    ([""], {}, "PATH '' is empty; expected a run's log file or folder"),
    (["https://example.org/trainer_state.json"], {}, "is a URL, not fetched; expected a local file"),
    (["{dir}/deep.json"], {"deep.json": "[" * 100_000 + "]" * 100_000}, "deep.json: JSON nested deeper than"),
    (["/dev/zero"], {}, "/dev/zero: is a character device, not a regular file"),
    # --map: a misspelled concept, one column read as two concepts, one concept read from two columns.
    (["{dir}/s.json", "--map", "rewrad=score"], {"s.json": STATE}, "'rewrad' is no concept a rule reads; did you mean"),
    (
        ["{dir}/s.json", "--map", "reward=score", "--map", "eval_reward=score"],
        {"s.json": STATE},
        "column 'score' mapped to two concepts (reward, eval_reward)",
    ),
    (
        ["{dir}/s.json", "--map", "reward=score", "--map", "reward=loss"],
        {"s.json": STATE},
        "--map reward=score and --map reward=loss: one concept read from two columns",
    ),
    # A stated reward scale the logged rewards (0.1 at step 10 up to 0.6 at step 60) contradict.
    (
        ["{dir}/s.json", "--reward-min", "0.8"],
        {"s.json": STATE},
        "--reward-min 0.8: {dir}/s.json logs a mean reward of 0.1 at step 10, below the stated minimum",
    ),
    # --reward-min alone at or above the default maximum, 1.0 (the rewards, 0.1-0.6, would also be below it).
    (
        ["{dir}/s.json", "--reward-min", "1"],
        {"s.json": STATE},
        "--reward-min 1: not below the highest total reward of {dir}/s.json, 1 (default); expected min < max",
    ),
    (
        ["{dir}/s.json", "--reward-max", "0.5", "--reward-min", "0"],
        {"s.json": STATE},
        "--reward-max 0.5: {dir}/s.json logs a mean reward of 0.6 at step 60, above the stated maximum",
    ),
]


@pytest.mark.parametrize(("argv", "files", "fragment"), BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, files, fragment):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    before = sorted(p.name for p in tmp_path.iterdir())
    status, out, err = doctor(capsys, *(arg.format(dir=tmp_path) for arg in argv))
    assert status == 2
    assert out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    assert err.count("\n") == 1 and err.startswith("align-kit: doctor error: ")
    assert fragment.format(dir=tmp_path) in err
    assert "Traceback" not in err


@pytest.mark.parametrize("scale", [["--reward-min", "0.1"], ["--reward-max", "0.6"], ["--reward-min", "-1"]])
def test_a_stated_scale_the_rewards_lie_within_is_taken(tmp_path, capsys, scale):
    # The rewards run 0.1-0.6: a minimum of 0.1 or lower, a maximum of 0.6 or higher, are consistent with them.
    (tmp_path / "s.json").write_text(STATE)
    status, out, err = doctor(capsys, str(tmp_path / "s.json"), *scale)
    assert status in (0, 1) and err == "" and out.startswith("== ")


def test_follow_refuses_a_scale_its_rows_contradict(tmp_path, capsys):
    (tmp_path / "s.json").write_text(STATE)
    status, out, err = doctor(capsys, "--follow", str(tmp_path / "s.json"), "--reward-max", "0.5", "--idle", "0.1")
    assert status == 2 and err.count("\n") == 1 and "--reward-max 0.5: " in err
    assert out.startswith("following ")  # the follow's first line, then the refusal


def test_follow_with_json_keeps_stdout_to_the_document(tmp_path, capsys):
    (tmp_path / "s.json").write_text(STATE)
    status, out, err = doctor(capsys, "--follow", str(tmp_path / "s.json"), "--json", "--idle", "0.1")
    assert json.loads(out)["runs"][0]["rows"] == 6
    assert err.startswith(f"following {tmp_path / 's.json'}: ") and "has not grown for 0.1 s" in err


def test_json_on_a_bad_input_prints_an_error_object(tmp_path, capsys):
    # `align-kit doctor ... --json | jq .error`: the one line on stderr, and the same line as JSON on stdout.
    status, out, err = doctor(capsys, str(tmp_path / "missing.json"), "--json")
    assert status == 2 and err.count("\n") == 1
    document = json.loads(out)
    assert document["exit_code"] == 2 and document["runs"] == [] and document["verdict"] is None
    assert (
        document["error"] == f"{tmp_path / 'missing.json'}: no such file or folder; expected a run's log file or folder"
    )
    assert err == f"align-kit: doctor error: {document['error']}\n"
    # A bad option too (parsed before --json is known), and argparse's prefix of --json.
    status, out, _ = doctor(capsys, "x", "--idle", "0", "--js")
    assert status == 2 and "'0': expected a number > 0" in json.loads(out)["error"]


def test_a_fifo_is_refused_before_it_is_opened(tmp_path, capsys):
    # Opening a FIFO with no writer blocks forever: refused by its kind, never opened.
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    status, _, err = doctor(capsys, str(fifo))
    assert (
        status == 2
        and err
        == f"align-kit: doctor error: {fifo}: is a named pipe (FIFO), not a regular file; "
        "expected a run's log file or folder\n"
    )


def test_a_file_over_the_read_cap_is_refused_naming_the_cap(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ALIGN_KIT_DOCTOR_MAX_MB", "1")
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"x" * (1024 * 1024 + 1))  # one byte over 1 MiB
    status, _, err = doctor(capsys, str(big))
    assert status == 2 and "larger than the doctor's read cap of 1 MiB" in err
    assert "set ALIGN_KIT_DOCTOR_MAX_MB=2 to raise the cap" in err
    big.write_bytes(b"x" * (1024 * 1024))  # exactly 1 MiB: read (and found to hold no rows)
    status, _, err = doctor(capsys, str(big))
    assert status == 2 and "no metric rows found" in err
    monkeypatch.setenv("ALIGN_KIT_DOCTOR_MAX_MB", "lots")
    status, _, err = doctor(capsys, str(big))
    assert status == 2 and "ALIGN_KIT_DOCTOR_MAX_MB='lots': expected a whole number of MiB >= 1" in err


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="Linux's /proc")
def test_a_file_that_fails_to_read_is_one_line(capsys):
    # /proc/self/mem is a regular file of size 0 whose first page is unmapped: reading it fails with EIO.
    status, _, err = doctor(capsys, "/proc/self/mem")
    assert (
        status == 2
        and err
        == "align-kit: doctor error: /proc/self/mem: cannot be read (Input/output error); expected a readable run log "
        "(check the disk it is on, or leave it out)\n"
    )


def test_figures_into_a_folder_that_cannot_be_written(tmp_path, capsys):
    path = trainer_state(tmp_path / "run" / "trainer_state.json", HEALTHY)
    folder = unwritable_folder(tmp_path)
    for target in (folder, folder / "figs"):
        status, out, err = doctor(capsys, str(path), "--figures", str(target))
        assert status == 2 and out == "" and err.count("\n") == 1
        # A folder refusing a new file, or sysfs (where root's test finds one), named as the train command names it.
        assert err.startswith(f"align-kit: doctor error: --figures={target} ")
        assert "is not writable" in err or "is under /sys, the kernel's own file system" in err


def test_figures_on_a_full_disk_leave_nothing(tmp_path, capsys, monkeypatch):
    # The disk fills while the second of two sheets is written: one line, and neither sheet nor folder is left.
    import errno

    import matplotlib.figure

    real_savefig, saved = matplotlib.figure.Figure.savefig, []

    def fill_up(self, target, **options):
        if saved:
            target.write(b"\x89PNG half")
            raise OSError(errno.ENOSPC, "No space left on device")
        saved.append(target)
        return real_savefig(self, target, **options)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", fill_up)
    a = trainer_state(tmp_path / "a" / "trainer_state.json", HEALTHY)
    b = trainer_state(tmp_path / "b" / "trainer_state.json", HEALTHY)
    status, out, err = doctor(capsys, str(a), str(b), "--figures", str(tmp_path / "figs" / "new"))
    assert status == 2 and out == ""
    assert (
        err == f"align-kit: doctor error: --figures {tmp_path / 'figs' / 'new'}: cannot write a sheet (No space "
        "left on device); expected a writable folder with free space (nothing was written)\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_forced_figures_that_fail_keep_the_old_sheet(tmp_path, capsys, monkeypatch):
    import errno

    import matplotlib.figure

    def fail(self, target, **options):
        raise OSError(errno.ENOSPC, "No space left on device")

    path = trainer_state(tmp_path / "run" / "trainer_state.json", HEALTHY)
    (tmp_path / "figs").mkdir()
    (tmp_path / "figs" / "run.png").write_bytes(b"old sheet")
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", fail)
    status, _, _ = doctor(capsys, str(path), "--figures", str(tmp_path / "figs"), "--force")
    assert status == 2
    assert [p.name for p in (tmp_path / "figs").iterdir()] == ["run.png"]  # no temporary file left either
    assert (tmp_path / "figs" / "run.png").read_bytes() == b"old sheet"


def test_non_finite_columns_are_reported_per_concept(tmp_path, capsys):
    # Entropy NaN on all 3 rows, grad_norm inf on the 2nd of 3 (step 20): each named in a note, not left silent.
    rows = [{"loss": 0.1, "grad_norm": value, "reward": 0.5, "entropy": math.nan} for value in (0.5, math.inf, 0.5)]
    path = trainer_state(tmp_path / "run" / "trainer_state.json", rows)
    _, out, _ = doctor(capsys, str(path), "--json")
    notes = json.loads(out)["runs"][0]["notes"]
    assert (
        "entropy: every one of its 3 logged values is non-finite (3 NaN): no rule could read it; a non-finite "
        "value computed by the training step is itself a sign the run broke"
    ) in notes
    assert any(
        note.startswith("grad_norm: 1 of 3 logged values are non-finite (1 inf), the first at step 20")
        for note in notes
    )
    assert not any(note.startswith(("loss:", "reward:")) for note in notes)


def test_steps_logged_twice_are_named_with_the_copy_used(tmp_path, capsys):
    # Steps 20 and 30 each logged twice in a row (reward 0.2 then 0.9 at both): read from the later copy, and said.
    history = [
        {"step": 10, "loss": 0.1, "reward": 0.1},
        {"step": 20, "loss": 0.1, "reward": 0.2},
        {"step": 20, "loss": 0.1, "reward": 0.9},
        {"step": 30, "loss": 0.1, "reward": 0.2},
        {"step": 30, "loss": 0.1, "reward": 0.9},
    ]
    path = tmp_path / "run" / "trainer_state.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"global_step": 30, "log_history": history}))
    _, out, _ = doctor(capsys, str(path), "--json")
    notes = json.loads(out)["runs"][0]["notes"]
    assert (
        "2 step(s) logged more than once (20, 30): each is read from its later copy in the file, as a resumed run "
        "redoes steps"
    ) in notes


def test_train_and_eval_rows_of_one_step_are_not_a_repeat(tmp_path, capsys):
    # HF logs a step's train metrics and its eval metrics as two entries: merged, with nothing said.
    history = [{"step": 10, "loss": 0.1, "reward": 0.5}, {"step": 10, "eval_reward": 0.4}]
    path = tmp_path / "run" / "trainer_state.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"global_step": 10, "log_history": history}))
    _, out, _ = doctor(capsys, str(path), "--json")
    assert not any("more than once" in note for note in json.loads(out)["runs"][0]["notes"])


def test_ctrl_c_while_reading_is_one_line(tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("align_kit.doctor.readers.read_runs", interrupted)
    (tmp_path / "s.json").write_text(STATE)
    status, out, err = doctor(capsys, str(tmp_path / "s.json"))
    assert status == 130 and out == ""
    assert err == "align-kit: doctor interrupted (Ctrl-C); nothing was reported\n"


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
            timeout=600,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141
    assert "Traceback" not in done.stderr
