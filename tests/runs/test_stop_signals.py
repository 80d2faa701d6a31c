"""Ctrl-C / SIGTERM mid-run: the current step finishes, a checkpoint is saved when checkpointing is on, and the
process exits 130 / 143 with one line giving the resume command (no traceback)."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf
from transformers import TrainerControl, TrainerState

from align_kit.core.errors import TrainingInterrupted
from align_kit.experiment.compose import compose
from align_kit.runs.run_folder import check_resume
from align_kit.runs.stop_signals import StopOnSignal, ends_a_generation
from tests.conftest import ROOT, cli_env

TRAINING = ["logger=none", "trainer.max_steps=500", "trainer.disable_tqdm=true"]


def interrupt_after_step_two(cache_dir: str, args: list[str], run: Path, number: int) -> subprocess.CompletedProcess:
    process = subprocess.Popen(
        [sys.executable, "-m", "align_kit.cli", "train", *args, f"hydra.run.dir={run}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(cli_env(cache_dir), PYTHONPATH=str(ROOT)),
    )
    metrics = run / "metrics.jsonl"
    deadline = time.time() + 600  # a guard against a hang, not a measure: the run is 500 steps long
    while not (metrics.exists() and metrics.read_text().count("\n") >= 2):
        assert process.poll() is None and time.time() < deadline, "training never reached step 2"
        time.sleep(0.1)
    process.send_signal(number)
    stdout, stderr = process.communicate(timeout=600)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def trainer_args(accumulation: int, per_generation: int | None, iterations: int = 1) -> SimpleNamespace:
    return SimpleNamespace(
        gradient_accumulation_steps=accumulation,
        steps_per_generation=per_generation,
        num_iterations=iterations,
        save_strategy="steps",
    )


@pytest.mark.parametrize(
    ("accumulation", "per_generation", "iterations", "ending"),
    [
        (1, 2, 1, {2, 4, 6, 8}),  # the default: a generation feeds two optimizer steps
        (4, 16, 1, {4, 8}),  # 16 micro-batches, 4 per optimizer step
        (1, 2, 2, {4, 8}),  # each buffered micro-batch trained on twice
        (2, None, 1, {1, 2, 3, 4, 5, 6, 7, 8}),  # TRL's default: one generation per optimizer step
        (2, 3, 1, {3, 6}),  # 3 micro-batches per generation, 2 per step: steps 3 and 6 end on a generation
    ],
)
def test_the_steps_that_end_a_generation(accumulation, per_generation, iterations, ending):
    args = trainer_args(accumulation, per_generation, iterations)
    assert {step for step in range(1, 9) if ends_a_generation(args, step)} == ending


def test_a_signal_stops_and_saves_at_the_end_of_the_generation_in_progress():
    stop, args, state = StopOnSignal(), trainer_args(1, 4), TrainerState()
    stop.received = signal.SIGUSR2  # as its handler records it, during step 5
    stopped_at = []
    for state.global_step in range(5, 13):
        control = TrainerControl()
        stop.on_step_end(args, state, control)
        if control.should_training_stop:
            assert control.should_save
            stopped_at.append(state.global_step)
    assert stopped_at[0] == 8  # steps 5-8 train on the generation made at step 5; step 9 would generate again


@pytest.mark.slow  # 10-45 s of real processes: in the slow tier, which CI runs too
def test_sigint_saves_a_checkpoint_and_prints_the_resume_command(overrides_for, cache_dir, tmp_path):
    run = tmp_path / "run"
    args = [*overrides_for(fast_training=False), *TRAINING, "trainer.save_strategy=steps", "trainer.save_steps=1000"]
    result = interrupt_after_step_two(cache_dir, args, run, signal.SIGINT)

    assert result.returncode == 130, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    (checkpoint,) = run.glob("checkpoint-*")  # save_steps=1000: only the save the signal asked for
    step = json.loads((checkpoint / "trainer_state.json").read_text())["global_step"]
    assert checkpoint.name == f"checkpoint-{step}" and step >= 2
    assert step % 2 == 0  # trainer.steps_per_generation=2: the save waits for the generation's second step
    assert max(json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()) == step
    command = shlex.join(["align-kit", "train", *args, f"hydra.run.dir={run}", "train.resume=true"])
    assert result.stderr.strip().splitlines()[-1] == (
        f"align-kit: interrupted by SIGINT at step {step}; saved {checkpoint}; resume with: {command}"
    )
    # The printed command passes the resume pre-check: same config, a complete checkpoint (real HF files).
    resumed = compose([*args, "train.resume=true"])
    assert check_resume(run, OmegaConf.to_container(resumed, resolve=True)) == checkpoint


@pytest.mark.slow  # 10-45 s of real processes: in the slow tier, which CI runs too
def test_sigterm_without_checkpointing_exits_143_and_says_so(overrides_for, cache_dir, tmp_path):
    run = tmp_path / "run"
    args = [*overrides_for(fast_training=False), *TRAINING, "trainer.save_strategy=no"]
    result = interrupt_after_step_two(cache_dir, args, run, signal.SIGTERM)

    assert result.returncode == 143, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert not list(run.glob("checkpoint-*"))
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("align-kit: interrupted by SIGTERM at step ")
    assert last.endswith(
        "; no checkpoint saved (trainer.save_strategy=no); "
        "start a new run (or train.overwrite=true to reuse this folder)"
    )


def signalled_at(monkeypatch, step: int, number: signal.Signals) -> None:
    """The run's own process raises `number` at the end of optimizer step `step`, just before the stop callback
    looks at it: when the signal arrives is fixed by construction, whatever the machine's load."""
    original = StopOnSignal.on_step_end

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == step:
            assert threading.current_thread() is threading.main_thread()  # where the callback's handler is
            signal.raise_signal(number)  # its Python handler runs before the next line
        return original(self, args, state, control, **kwargs)

    monkeypatch.setattr(StopOnSignal, "on_step_end", on_step_end)


SIX_STEPS = ["logger=none", "trainer.max_steps=6", "trainer.save_strategy=no", "trainer.disable_tqdm=true"]


# trainer.steps_per_generation=2: generations begin at steps 1, 3 and 5, so a stop waits for step 2, 4 or 6.
@pytest.mark.parametrize(("signalled", "stopped"), [(3, 4), (4, 4)])
def test_a_signal_before_the_last_generation_stops_at_its_boundary(
    train_once, monkeypatch, tmp_path, signalled, stopped
):
    signalled_at(monkeypatch, signalled, signal.SIGTERM)
    with pytest.raises(TrainingInterrupted) as stop:
        train_once(tmp_path / "run", *SIX_STEPS, fast_training=False)
    assert (
        str(stop.value) == f"interrupted by SIGTERM at step {stopped}; no checkpoint saved (trainer.save_strategy=no)"
    )
    assert stop.value.exit_code == 143
    steps = [json.loads(line)["step"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert max(steps) == stopped


@pytest.mark.slow
@pytest.mark.parametrize("signalled", [5, 6])
def test_a_signal_during_the_last_generation_lets_the_run_finish_and_says_so(
    train_once, monkeypatch, tmp_path, capsys, signalled
):
    signalled_at(monkeypatch, signalled, signal.SIGTERM)
    summary = train_once(tmp_path / "run", *SIX_STEPS, fast_training=False)
    assert summary["steps"] == 6
    assert (
        "align-kit: SIGTERM received during the last generation's steps; the run finished them (step 6 of 6) instead "
        "of stopping: nothing to resume"
    ) in capsys.readouterr().err


def signalled_twice_at_once(stop: StopOnSignal, number: signal.Signals) -> None:
    """Two `number` signals delivered before the main thread runs Python again, as two Ctrl-C a few ms apart during
    one long tensor operation are: the main thread blocks them while another thread takes both deliveries, and it is
    joined (so both have happened) before the main thread runs a line; CPython then calls the handler once."""

    def deliver_twice():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        signal.raise_signal(number)  # to this thread: delivered before the call returns
        signal.raise_signal(number)

    signal.pthread_sigmask(signal.SIG_BLOCK, {number})
    try:
        helper = threading.Thread(target=deliver_twice)
        helper.start()
        helper.join()  # the handler runs on the main thread once this returns
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})


def test_two_signals_the_handler_is_called_once_for_still_stop_at_once():
    stop = StopOnSignal()
    previous = signal.getsignal(signal.SIGINT)
    stop.on_train_begin(None, None, None)
    try:
        with pytest.raises(KeyboardInterrupt):
            signalled_twice_at_once(stop, signal.SIGINT)
        assert stop.forced
    finally:
        stop.release()
    assert signal.getsignal(signal.SIGINT) == previous


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped interrupt, as meant
def test_a_second_signal_whose_interrupt_a_finalizer_swallows_still_ends_the_run_interrupted(
    train_once, monkeypatch, tmp_path
):
    """The first SIGINT lands during the last generation (the run would finish it, exit 0); the second lands while
    the main thread runs an object's finalizer, where Python prints and drops any exception: the run must still end
    as interrupted at once (KeyboardInterrupt: exit 130 from the command), not return a finished run."""

    class SignalsWhenCollected:
        def __del__(self):
            signal.raise_signal(signal.SIGINT)  # its handler runs before this call returns, inside the finalizer

    original = StopOnSignal.on_step_end

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 5:
            signal.raise_signal(signal.SIGINT)
        if state.global_step == 6:
            SignalsWhenCollected()  # collected at once: the finalizer runs here
        return original(self, args, state, control, **kwargs)

    monkeypatch.setattr(StopOnSignal, "on_step_end", on_step_end)
    previous = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        train_once(tmp_path / "run", *SIX_STEPS, fast_training=False)
    assert signal.getsignal(signal.SIGINT) is previous  # the handlers are given back
