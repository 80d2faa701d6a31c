"""What the doctor reads and what it cannot, said every time: a folder past a cap, an unreadable or special
file, a damaged record, a ragged row, a repeated column or key, steps past a float's precision, and names that would
drive the terminal. Each either refuses in one line (exit 2) or is read with a note; the expected values are worked
out by hand in each test."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import struct
from pathlib import Path

import pytest

from align_kit import cli
from align_kit.doctor.history import DoctorInputError
from align_kit.doctor.readers import read_runs
from tests.tracking.test_wandb_offline import run_file


@pytest.fixture(autouse=True)
def no_hang():
    """A read that blocks (a pipe opened for reading) fails the test after 30 s instead of hanging the suite."""

    def hung(*_):
        raise AssertionError("the doctor blocked reading")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def doctor(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["doctor", *argv])
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def only(path, **kwargs):
    (history,) = read_runs(str(path), **kwargs)
    return history


def series(history, concept):
    return [(step, row[concept]) for step, row in history.rows if concept in row]


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


HEALTHY = [{"step": s, "reward": 0.5, "loss": 0.1} for s in (1, 2, 3)]
# A NaN loss at step 2: failing (a non-finite value computed by the training step).
FAILING = [{"step": 1, "reward": 0.5, "loss": 0.1}, {"step": 2, "reward": 0.5, "loss": math.nan}]


# -- caps -------------------------------------------------------------------------------------------------------------


def test_a_folder_past_the_log_file_cap_is_refused_not_cut_short(tmp_path, capsys, monkeypatch):
    # Three logs, the failing one last in name order, under a cap of 2: the old reader read a.jsonl and b.jsonl and
    # called the folder healthy (exit 0). Now: exit 2, naming 3 files against the cap of 2 and the fix.
    for name in ("a", "b"):
        jsonl(tmp_path / f"{name}.jsonl", HEALTHY)
    jsonl(tmp_path / "c.jsonl", FAILING)
    monkeypatch.setenv("ALIGN_KIT_DOCTOR_MAX_RUNS", "2")
    status, out, err = doctor(capsys, str(tmp_path))
    assert (status, out) == (2, "")
    assert err == (
        f"align-kit: doctor error: {tmp_path}: holds 3 log files, more than the 2 the doctor reads from one folder; "
        "expected at most 2 (set ALIGN_KIT_DOCTOR_MAX_RUNS=3 to read them all, or name the ones to read)\n"
    )
    # Raised to 3: all three are read and the failing one decides.
    monkeypatch.setenv("ALIGN_KIT_DOCTOR_MAX_RUNS", "3")
    status, out, _ = doctor(capsys, str(tmp_path), "--json")
    assert status == 3
    # The two short healthy logs are unjudged (too few points to say whether the run learns), the failing one fails.
    assert [run["verdict"] for run in json.loads(out)["runs"]] == ["unjudged", "unjudged", "failing"]


def test_the_default_cap_reads_a_folder_of_60_logs_whole(tmp_path, capsys):
    # The old cap of 50 dropped the last ten without a word, the failing run59 among them: healthy, exit 0.
    for number in range(59):
        jsonl(tmp_path / f"run{number:02d}.jsonl", HEALTHY)
    jsonl(tmp_path / "run59.jsonl", FAILING)
    status, out, _ = doctor(capsys, str(tmp_path), "--json")
    runs = json.loads(out)["runs"]
    assert (status, len(runs), runs[-1]["name"], runs[-1]["verdict"]) == (3, 60, "run59", "failing")


def _events(folder: Path, values: list[float]) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(folder))
    for step, value in enumerate(values, start=1):
        writer.add_scalar("train/reward", value, step)
    writer.close()
    (path,) = folder.iterdir()
    return path


def test_a_folder_past_the_tensorboard_run_cap_is_refused(tmp_path, monkeypatch):
    for name in ("a", "b", "c"):
        _events(tmp_path / "runs" / name, [0.25, 0.5])
    monkeypatch.setenv("ALIGN_KIT_DOCTOR_MAX_RUNS", "2")
    with pytest.raises(DoctorInputError, match=r"holds 3 TensorBoard run folders, more than the 2 .*=3 to read them"):
        read_runs(str(tmp_path))
    monkeypatch.setenv("ALIGN_KIT_DOCTOR_MAX_RUNS", "3")
    assert [history.name for history in read_runs(str(tmp_path))] == ["runs/a", "runs/b", "runs/c"]


def test_a_cap_that_is_no_whole_number_is_named(tmp_path, monkeypatch):
    jsonl(tmp_path / "a.jsonl", HEALTHY)
    monkeypatch.setenv("ALIGN_KIT_DOCTOR_MAX_RUNS", "many")
    with pytest.raises(DoctorInputError, match=r"^ALIGN_KIT_DOCTOR_MAX_RUNS='many': expected a whole number"):
        read_runs(str(tmp_path))


# -- unreadable and special files -------------------------------------------------------------------------------------


def test_a_file_in_a_folder_that_fails_to_read_ends_the_reading(tmp_path):
    # /proc/self/mem reads as an I/O error even for root (permission bits do not stop root).
    if not Path("/proc/self/mem").exists():
        pytest.skip("Linux's /proc")
    jsonl(tmp_path / "a.jsonl", HEALTHY)
    (tmp_path / "b.log").symlink_to("/proc/self/mem")
    with pytest.raises(DoctorInputError) as error:
        read_runs(str(tmp_path))
    assert str(error.value) == (
        f"{tmp_path / 'b.log'}: cannot be read (Input/output error); expected a readable run log (check the disk it "
        "is on, or leave it out)"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="permission bits do not stop root")
def test_a_file_without_read_permission_in_a_folder_is_named_with_the_fix(tmp_path):
    jsonl(tmp_path / "a.jsonl", HEALTHY)
    locked = jsonl(tmp_path / "b.jsonl", FAILING)
    locked.chmod(0)
    with pytest.raises(DoctorInputError, match=rf"b.jsonl: cannot be read \(Permission denied\).*chmod u\+r {locked}"):
        read_runs(str(tmp_path))


def test_a_broken_link_in_a_folder_is_named(tmp_path):
    jsonl(tmp_path / "a.jsonl", HEALTHY)
    (tmp_path / "b.jsonl").symlink_to(tmp_path / "gone.jsonl")
    with pytest.raises(DoctorInputError, match=r"b.jsonl: cannot be read \(No such file or directory\).*broken link"):
        read_runs(str(tmp_path))


def test_a_pipe_or_a_socket_among_the_logs_is_refused_without_blocking(tmp_path):
    jsonl(tmp_path / "a.jsonl", HEALTHY)
    os.mkfifo(tmp_path / "b.log")
    with pytest.raises(DoctorInputError, match=r"b.log: is a named pipe \(FIFO\), not a regular file"):
        read_runs(str(tmp_path))
    (tmp_path / "b.log").unlink()
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "c.log"))
        with pytest.raises(DoctorInputError, match=r"c.log: is a socket, not a regular file"):
            read_runs(str(tmp_path))


def test_files_holding_no_run_are_named_in_a_note(tmp_path):
    jsonl(tmp_path / "a.jsonl", HEALTHY)
    (tmp_path / "notes.txt").write_text("nothing here\n")
    (tmp_path / "empty.log").write_text("")
    (tmp_path / "old.jsonl").mkdir()
    history = only(tmp_path)
    assert history.notes[-1] == (
        f"left out 3 of the 4 log file(s) in {tmp_path.name}, holding no run: empty.log (is empty); "
        "notes.txt (no metric rows found); old.jsonl (a folder)"
    )


def test_a_sweep_manifest_that_is_a_pipe_is_refused_and_a_corrupt_one_noted(tmp_path):
    for number in (0, 1):
        (tmp_path / str(number)).mkdir()
        jsonl(tmp_path / str(number) / "metrics.jsonl", HEALTHY)
    os.mkfifo(tmp_path / "sweep_manifest.json")
    with pytest.raises(DoctorInputError, match=r"sweep_manifest.json: is a named pipe \(FIFO\), not a regular file"):
        read_runs(str(tmp_path))
    (tmp_path / "sweep_manifest.json").unlink()
    (tmp_path / "sweep_manifest.json").write_text('{"jobs": [')
    histories = read_runs(str(tmp_path))
    assert [history.name for history in histories] == ["0", "1"]
    assert all("sweep_manifest.json is not valid JSON" in history.notes[-1] for history in histories)


def test_follow_refuses_a_pipe_at_once(tmp_path, capsys):
    os.mkfifo(tmp_path / "live.log")
    status, _, err = doctor(capsys, str(tmp_path / "live.log"), "--follow", "--idle", "600")
    assert status == 2
    assert "live.log: is a named pipe (FIFO), not a regular file; expected a run's log file or folder to follow" in err


# -- damaged records --------------------------------------------------------------------------------------------------


def _record_offsets(data: bytes) -> list[int]:
    offsets, position = [], 0
    while position < len(data):
        offsets.append(position)
        position += 16 + struct.unpack_from("<Q", data, position)[0]
    return offsets


def test_a_damaged_tensorboard_record_is_skipped_and_the_rest_read(tmp_path):
    path = _events(tmp_path / "run", [0.25, 0.5, 0.75, 1.0])
    data = bytearray(path.read_bytes())
    offsets = _record_offsets(bytes(data))  # record 0 is the file-version event, 1-4 the steps 1-4
    data[offsets[2] + 12] ^= 0xFF  # a flipped byte in step 2's payload: its checksum fails
    path.write_bytes(bytes(data) + b"\x07\x00\x00")  # and a cut record of 3 bytes at the end
    history = only(tmp_path / "run")
    # TensorBoard's own loader stopped at step 2 and read step 1 alone.
    assert series(history, "reward") == [(1, 0.25), (3, 0.75), (4, 1.0)]
    assert history.notes[0] == (
        f"damaged TensorBoard events: {path.name}: 1 record(s) failed their checksum and were skipped (first at byte "
        f"{offsets[2]}); a cut record at byte {len(data)}: the 3 byte(s) after it were not read"
    )


def test_a_damaged_record_length_ends_the_file_with_the_bytes_counted(tmp_path):
    path = _events(tmp_path / "run", [0.25, 0.5, 0.75])
    data = bytearray(path.read_bytes())
    offsets = _record_offsets(bytes(data))
    data[offsets[3]] ^= 0x01  # step 3's length no longer matches its checksum: nothing after it can be framed
    path.write_bytes(bytes(data))
    history = only(tmp_path / "run")
    assert series(history, "reward") == [(1, 0.25), (2, 0.5)]
    assert history.notes[0].endswith(
        f"a damaged record length at byte {offsets[3]}: the {len(data) - offsets[3]} byte(s) after it were not read"
    )


def _wandb_row(**items) -> bytes:
    from wandb.proto import wandb_internal_pb2

    record = wandb_internal_pb2.Record()
    for key, value in items.items():
        item = record.history.item.add()
        item.key, item.value_json = key.replace("__", "/"), json.dumps(value)
    return record.SerializeToString()


def test_an_offline_wandb_run_cut_mid_chunk_says_what_was_not_read(tmp_path):
    folder = tmp_path / "offline-run-1"
    folder.mkdir()
    rows = [_wandb_row(train__global_step=step, train__reward=step / 4) for step in (1, 2)]
    run_file(folder, *rows)
    whole = (folder / "run-x.wandb").stat().st_size
    with (folder / "run-x.wandb").open("ab") as handle:
        handle.write(struct.pack("<IHB", 12345, 40, 1) + b"cut")  # a 7-byte chunk header and 3 of its 40 bytes
    history = only(folder)
    assert series(history, "reward") == [(1, 0.25), (2, 0.5)]
    assert history.notes[0].startswith(
        f"the run file ends in a cut or damaged chunk at byte {whole}: the 10 byte(s) after it were not read"
    )


def test_a_ragged_csv_row_is_skipped_and_the_rows_after_it_read(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("step,reward,loss\n1,0.25,0.1\n2,0.5\n3,0.75,0.1\n4,0.8,0.1,9\n5,1.0,0.1\n")
    history = only(path)
    # Lines 3 (2 cells) and 5 (4 cells) skipped; the old reader stopped at line 3 and read step 1 alone.
    assert series(history, "reward") == [(1, 0.25), (3, 0.75), (5, 1.0)]
    assert history.notes[0] == (
        "skipped 2 row(s) whose number of cells differs from the header's 3 (first: line 3, 2 cells); the rows "
        "around them are read"
    )


@pytest.mark.parametrize(
    "text",
    [
        "step\treward\tloss\n1\t0.25\t0.1\n2\t0.5\n3\t0.75\t0.1\n",
        "| step | reward | loss |\n|---|---|---|\n| 1 | 0.25 | 0.1 |\n| 2 | 0.5 |\n| 3 | 0.75 | 0.1 |\n",
        "step  reward  loss\n1  0.25  0.1\n2  0.5\n3  0.75  0.1\n",
    ],
    ids=["tsv", "markdown", "aligned"],
)
def test_a_ragged_row_in_every_table_kind(tmp_path, text):
    path = tmp_path / "log.txt"
    path.write_text(text)
    history = only(path)
    assert series(history, "reward") == [(1, 0.25), (3, 0.75)]
    line = text.splitlines().index(next(row for row in text.splitlines() if "0.5" in row)) + 1
    assert (
        f"skipped 1 row(s) whose number of cells differs from the header's 3 (first: line {line}, 2 cells)"
        in (history.notes[0])
    )


# -- repeated names ---------------------------------------------------------------------------------------------------


def test_a_repeated_column_is_read_from_the_first_and_said(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("step,reward,loss,reward\n1,0.25,0.1,0.25\n2,0.5,0.1,0.9\n3,0.75,0.1,0.2\n")
    history = only(path)
    assert series(history, "reward") == [(1, 0.25), (2, 0.5), (3, 0.75)]  # the old reader read 0.25, 0.9, 0.2
    assert history.notes[0] == (
        "column 4 ('reward') repeats column 2 ('reward'), both read as 'reward': column 2 is read, column 4 left out; "
        "they differ on 2 row(s), the first on line 3"
    )
    path.write_text("step,Training Loss,loss\n1,0.1,0.1\n2,0.2,0.2\n")
    assert (
        only(path)
        .notes[0]
        .endswith("both read as 'loss': column 2 is read, column 3 left out; they agree on every row")
    )


def test_a_key_named_twice_in_a_json_object_is_said(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"step": 1, "reward": 0.25}\n{"step": 2, "reward": 0.1, "reward": 0.5}\n')
    history = only(path)
    assert series(history, "reward") == [(1, 0.25), (2, 0.5)]  # the later, as every JSON parser reads it
    assert history.notes[0] == (
        "key(s) named twice in one JSON object, the first on line 2: 'reward' (1x); the later value of each is read, "
        "as JSON parsers do"
    )
    state = tmp_path / "trainer_state.json"
    state.write_text('{"log_history": [{"step": 1, "reward": 0.1, "loss": 0.1, "loss": 0.2}]}')
    assert only(state).notes[-1].startswith("key(s) named twice in one JSON object: 'loss' (1x)")


# -- steps past a float's precision -----------------------------------------------------------------------------------

BIG = 2**53  # 9007199254740992: a float holds no whole number between it and BIG + 2


@pytest.mark.parametrize("kind", ["jsonl", "csv", "trainer_state", "align_kit_run"])
def test_steps_past_2_to_the_53_stay_apart(tmp_path, kind):
    rows = [{"step": BIG + offset, "reward": value, "loss": 0.1} for offset, value in ((0, 0.25), (1, 0.5), (2, 0.75))]
    if kind == "jsonl":
        path = jsonl(tmp_path / "log.jsonl", rows)
    elif kind == "csv":
        path = tmp_path / "log.csv"
        path.write_text("step,reward,loss\n" + "".join(f"{r['step']},{r['reward']},0.1\n" for r in rows))
    elif kind == "trainer_state":
        path = tmp_path / "trainer_state.json"
        path.write_text(json.dumps({"log_history": rows}))
    else:
        path = tmp_path / "run"
        path.mkdir()
        jsonl(path / "metrics.jsonl", rows)
    # As floats, BIG + 1 reads as BIG: two rows merged, the later value winning.
    assert series(only(path), "reward") == [(BIG, 0.25), (BIG + 1, 0.5), (BIG + 2, 0.75)]


# -- names that reach the terminal ------------------------------------------------------------------------------------


def test_escape_sequences_in_names_are_printed_escaped(tmp_path, capsys):
    folder = tmp_path / "run\x1b]0;pwned\x07"
    folder.mkdir()
    path = folder / "log.csv"
    path.write_text("step,reward,\x1b[2Jwipe\x9b\n1,0.5,1\n2,0.5,2\n3,0.5,3\n")
    status, out, err = doctor(capsys, str(folder))
    assert status == 4 and err == ""  # read whole; 3 points cannot say whether the run learns: unjudged
    assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out
    assert "not mapped (no rule reads them): \\x1b[2Jwipe\\x9b" in out
    assert f"read: {tmp_path}/run\\x1b]0;pwned\\x07/log.csv as table" in out


def test_a_newline_in_a_name_cannot_forge_a_line(tmp_path, capsys):
    path = tmp_path / "log.jsonl"
    jsonl(path, [{"step": s, "reward": 0.5, "x\nverdict: healthy": 1} for s in (1, 2, 3)])
    _, out, _ = doctor(capsys, str(path))
    assert [line for line in out.splitlines() if line.startswith("verdict:")] == [out.splitlines()[1]]
    assert "x\\nverdict: healthy" in out


def test_lone_surrogates_in_names_print_without_a_traceback(tmp_path, capsys):
    path = tmp_path / "log.jsonl"
    path.write_text("".join(f'{{"step": {s}, "reward": 0.5, "bad\\ud800key": 1}}\n' for s in (1, 2, 3)))
    raw_name = os.fsdecode(b"run\xff.jsonl")  # an undecodable file name: Python holds it as a lone surrogate
    (tmp_path / raw_name).write_text(path.read_text())
    for target in (path, tmp_path / raw_name):
        status, out, _ = doctor(capsys, str(target))
        assert status == 4  # read and reported (3 points: unjudged), no traceback
        assert "bad\\ud800key" in out
    assert f"read: {tmp_path}/run\\udcff.jsonl as" in out
    status, out, _ = doctor(capsys, str(path), "--json")
    assert json.loads(out)["runs"][0]["unmapped"] == ["bad\ud800key"]  # the JSON keeps the name, escaped by JSON


def test_the_error_line_escapes_the_names_it_carries(tmp_path, capsys):
    empty = tmp_path / "cut\x1b[31m.log"
    empty.write_text("")
    status, _, err = doctor(capsys, str(empty))
    assert status == 2
    assert (
        err == f"align-kit: doctor error: {tmp_path}/cut\\x1b[31m.log: is empty (0 bytes); expected a run's log "
        "with at least one logged step\n"
    )


def test_a_line_of_words_or_a_blank_line_inside_a_csv_does_not_end_it(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("step,reward,loss\n1,0.25,0.1\n# resumed here\n2,0.5,0.1\n\n3,0.75,0.1\n")
    history = only(path)
    # The old reader ended the table at line 3 and read step 1 alone; the blank line 5 is passed over unnoted.
    assert series(history, "reward") == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert history.notes[0].startswith(
        "skipped 1 row(s) whose number of cells differs from the header's 3 (first: line 3, 1 cells)"
    )


def test_a_second_header_starts_a_second_table_not_a_ragged_row(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("step,reward,loss\n1,0.25,0.1\nstep,loss,reward\n2,0.1,0.5\n3,0.1,0.75\n")
    history = only(path)
    # The second table (two rows) wins over the first (one row); its columns are read by its own header.
    assert series(history, "reward") == [(2, 0.5), (3, 0.75)]
    assert not any(note.startswith("skipped") for note in history.notes)


def test_a_cut_printed_log_dict_is_counted(tmp_path):
    path = tmp_path / "train.log"
    path.write_text(
        "{'step': 1, 'reward': 0.25, 'loss': 0.1}\n"
        "{'step': 2, 'reward': 0.5, 'lo\n"
        "{'step': 3, 'reward': 0.75, 'loss': 0.1}\n"
    )
    history = only(path)
    assert series(history, "reward") == [(1, 0.25), (3, 0.75)]
    assert history.notes[0] == "left out 1 printed dict(s) that do not parse (cut or damaged lines)"


@pytest.mark.parametrize("layout", ["sweep", "tensorboard"])
def test_a_subfolder_that_cannot_be_listed_is_refused_not_passed_over(tmp_path, monkeypatch, layout):
    # Permission bits do not stop root: the listing of one folder fails as it would for a user without access.
    for name in ("a", "b"):
        if layout == "sweep":
            (tmp_path / name).mkdir()
            jsonl(tmp_path / name / "metrics.jsonl", HEALTHY)
        else:
            _events(tmp_path / name, [0.25, 0.5])
    locked = tmp_path / "c"
    locked.mkdir()
    scandir = os.scandir

    def refusing(path="."):
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(locked))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    with pytest.raises(DoctorInputError) as error:
        read_runs(str(tmp_path))
    assert str(error.value) == (
        f"{locked}: cannot be read (Permission denied); expected a readable run log (check its permissions (chmod "
        f"u+rx {locked}), or leave it out)"
    )


def test_a_ragged_row_of_a_notebooks_progress_table_is_counted(tmp_path):
    html = (
        "<table><tr><th>Step</th><th>Training Loss</th><th>reward</th></tr>"
        "<tr><td>1</td><td>0.1</td><td>0.25</td></tr><tr><td>2</td><td>0.1</td></tr>"
        "<tr><td>3</td><td>0.1</td><td>0.75</td></tr></table>"
    )
    cell = {"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {"text/html": html}}]}
    path = tmp_path / "train.ipynb"
    path.write_text(json.dumps({"cells": [cell], "nbformat": 4}))
    history = only(path)
    assert series(history, "reward") == [(1, 0.25), (3, 0.75)]
    assert any(
        note.startswith("skipped 1 row(s) whose number of cells differs from the header's 3 (first: row 3 of the HTML")
        for note in history.notes
    )


def test_a_surrogate_in_a_run_name_draws_its_figure(tmp_path, capsys):
    # matplotlib refuses a lone surrogate in a title: the sheet's title is the escaped name.
    path = tmp_path / os.fsdecode(b"run\xff.jsonl")
    jsonl(path, HEALTHY)
    status, out, _ = doctor(capsys, str(path), "--figures", str(tmp_path / "figures"))
    assert status == 4  # 3 points: unjudged; the sheet is drawn all the same
    assert f"figure: {tmp_path}/figures/run.png" in out
    assert (tmp_path / "figures" / "run.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_follow_ends_at_once_on_a_folder_holding_a_pipe(tmp_path, capsys):
    # Read again every 2 s for 600 s before: no later read of a pipe can do better.
    jsonl(tmp_path / "a.jsonl", HEALTHY)
    os.mkfifo(tmp_path / "b.log")
    status, _, err = doctor(capsys, str(tmp_path), "--follow", "--idle", "600")
    assert status == 2
    assert f"{tmp_path / 'b.log'}: is a named pipe (FIFO), not a regular file" in err


def test_a_log_in_a_folder_over_256_mib_is_refused_by_name(tmp_path):
    jsonl(tmp_path / "a.jsonl", HEALTHY)
    with (tmp_path / "dump.jsonl").open("wb") as handle:
        handle.truncate(256 * 2**20 + 1)  # sparse: one byte past 256 MiB, nothing written
    with pytest.raises(DoctorInputError) as error:
        read_runs(str(tmp_path))
    assert str(error.value) == (
        f"{tmp_path / 'dump.jsonl'}: over 256 MiB, the most the doctor reads of a file in a folder; expected the "
        f"folder's run logs (name the file to read it alone, or move it out of {tmp_path})"
    )


@pytest.mark.parametrize("name", ["config.yaml", "summary.json", ".hydra/config.yaml", ".hydra/hydra.yaml"])
def test_a_pipe_among_a_run_folders_files_is_refused(tmp_path, name):
    jsonl(tmp_path / "metrics.jsonl", HEALTHY)
    (tmp_path / name).parent.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / name)
    with pytest.raises(DoctorInputError) as error:
        read_runs(str(tmp_path))
    assert str(error.value) == (
        f"{tmp_path / name}: is a named pipe (FIFO), not a regular file; expected a file of align_kit's run folder"
    )


# -- values that are no number ----------------------------------------------------------------------------------------


def test_a_metric_value_that_is_no_number_is_left_out_with_a_note(tmp_path):
    # a JSONL row logging text as the reward, and a CSV cell holding a NUL byte: both left out, and said
    rows = [{"step": 1, "reward": 0.5}, {"step": 2, "reward": "abc"}, {"step": 3, "reward": "n/a"}]
    history = only(jsonl(tmp_path / "t.jsonl", rows))
    assert series(history, "reward") == [(1, 0.5)]
    assert "2 value(s) of the metrics read are not numbers, left out: reward='abc' at step 2 and 1 more" in (
        history.notes
    )
    (tmp_path / "nul.csv").write_bytes(b"step,reward\n1,0.5\n2,0\x006\n3,0.7\n")
    history = only(tmp_path / "nul.csv")
    assert series(history, "reward") == [(1, 0.5), (3, 0.7)]
    assert "1 value(s) of the metrics read are not numbers, left out: reward='0\\x006' at step 2" in history.notes
