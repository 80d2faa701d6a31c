"""Every command ends in one line, never a traceback, when its reader goes away (`| head`) or the user presses
Ctrl-C before training's own handler is in place; a signal landing while another is handled ends in one line too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from align_kit import cli
from align_kit.runs import sweep_manifest as manifest_files
from align_kit.runs.stop_signals import StopOnSignal
from tests.conftest import ROOT, cli_env


def run_into_closed_pipe(argv: list[str], cache_dir: str, cwd) -> subprocess.CompletedProcess:
    """`align-kit <argv>` whose stdout is a pipe nobody reads any more (its reading end closed before it starts), as
    after `| head` has taken its lines: every write fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "align_kit.cli", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env=dict(cli_env(cache_dir), PYTHONPATH=str(ROOT)),
            timeout=120,
        )
    finally:
        os.close(write_end)


def closed_pipe_cases(folder) -> list[list[str]]:
    manifest_files.write(folder, manifest_files.new_manifest(["seed=1,2"], [], [["seed=1"], ["seed=2"]]))
    (folder / "trainer_state.json").write_text(
        '{"global_step": 20, "log_history": [{"step": 10, "reward": 0.1}, {"step": 20, "reward": 0.2}]}'
    )
    return [
        ["--help"],
        ["train", "--cfg", "job"],
        ["sweep", "--status", str(folder)],
        ["compare", "--help"],
        ["doctor", str(folder / "trainer_state.json")],
    ]


def test_a_reader_gone_ends_every_printing_command_quietly_with_the_sigpipe_status(cache_dir, tmp_path):
    for argv in closed_pipe_cases(tmp_path):
        result = run_into_closed_pipe(argv, cache_dir, tmp_path)
        assert (result.returncode, result.stderr) == (141, ""), (argv, result.stderr)  # 128 + SIGPIPE (13)


@pytest.mark.parametrize(
    ("command", "target"),
    [
        (["train", "seed=1"], "align_kit.runs.preflight.run_preflight"),
        (["sweep", "clip_higher"], "align_kit.sweep.main"),
        (["compare", "somewhere"], "align_kit.compare.command.main"),
        (["train", "seed=1"], "align_kit.train.main"),  # after the pre-flight, while Hydra starts the job
    ],
)
def test_ctrl_c_during_start_up_is_one_line_and_130(command, target, monkeypatch, capsys, tmp_path):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("align_kit.runs.preflight.run_preflight", lambda argv: None)
    monkeypatch.setattr(target, interrupted)
    previous = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as stopped:
            cli.main(command)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stopped.value.code == 130
    assert capsys.readouterr().err.splitlines() == [f"align-kit {command[0]}: interrupted (Ctrl-C); stopped at once"]


def test_a_stop_signal_is_recorded_without_touching_sys_stderr(monkeypatch, capfd):
    """The handler can run while the interrupted code is inside a write to sys.stderr, where a second write raises
    CPython's "reentrant call" RuntimeError: it must write its line past sys.stderr."""

    class MidWrite:
        def write(self, text):
            raise RuntimeError("reentrant call inside <_io.BufferedWriter name='<stderr>'>")

        def flush(self):
            raise RuntimeError("reentrant call inside <_io.BufferedWriter name='<stderr>'>")

    stop = StopOnSignal()
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    stop.on_train_begin(None, None, None)
    assert signal.getsignal(signal.SIGINT) == stop._handle
    monkeypatch.setattr(sys, "stderr", MidWrite())
    stop._handle(signal.SIGINT, None)
    monkeypatch.undo()
    assert stop.received == signal.SIGINT
    assert signal.getsignal(signal.SIGINT) == stop._handle  # kept: a second one stops at once, however it lands
    stop.release()
    assert {number: signal.getsignal(number) for number in previous} == previous
    assert "SIGINT received; stopping when the current generation's steps end" in capfd.readouterr().err


def test_a_second_signal_landing_inside_the_first_ones_handling_stops_at_once():
    stop = StopOnSignal()
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    stop.on_train_begin(None, None, None)
    stop.received = signal.SIGINT  # the first handler has recorded SIGINT, not yet restored the handlers
    with pytest.raises(KeyboardInterrupt):  # train.py's job turns it into "stopped at once", exit 130
        stop._handle(signal.SIGTERM, None)
    assert {number: signal.getsignal(number) for number in previous} == previous
