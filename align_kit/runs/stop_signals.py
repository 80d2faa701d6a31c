"""Ctrl-C (SIGINT) and SIGTERM during training: finish the current generation's steps, save a checkpoint, stop.

The signal only sets a flag; at the next optimizer step that ends a generation (TRL generates once per
steps_per_generation x num_iterations micro-batches and trains on the buffered completions in between) the callback
asks HF's loop to save (when `trainer.save_strategy` is not `no`) and to stop. A checkpoint in the middle of a
generation's steps would not hold the buffered completions: the resumed run would generate afresh there and its
metrics would part from an uninterrupted run's. The wait is at most steps_per_generation x num_iterations /
gradient_accumulation_steps - 1 optimizer steps. A second signal stops at once without saving (KeyboardInterrupt,
exit 130), however it lands: CPython calls a handler once for several deliveries that come before the main thread
runs Python again (two Ctrl-C a few ms apart during one long tensor operation), so the deliveries are also counted
from the wakeup pipe, where CPython writes a byte for each; and an interrupt raised while the main thread runs a
finalizer (`__del__`) is printed and dropped by Python, so the second signal is recorded (`forced`) and train.py stops
the run once the trainer returns. The handlers stay until training ends (`release`).

Inside a SLURM job started by submitit (`hydra/launcher=slurm`) the signal submitit asks SLURM to send before the time
limit (SIGUSR2, or SUBMITIT_PREEMPT_SIGNAL) is caught the same way: the job saves when the generation's steps end,
and only then `requeue` hands the signal to submitit's own handler, which pickles the job again and requeues it with
`scontrol requeue`; the requeued job resumes from that checkpoint. Left to submitit alone, the signal would requeue
the job in the middle of a step, losing the steps since the last scheduled checkpoint.
"""

from __future__ import annotations

import os
import signal
import threading

from transformers import TrainerCallback

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def ends_a_generation(args, global_step: int) -> bool:
    """Whether the optimizer step `global_step` consumed the last micro-batch of a generation's buffer, so the next
    step generates: a checkpoint here resumes exactly as the run would have gone on."""
    accumulation = args.gradient_accumulation_steps
    per_generation = (getattr(args, "steps_per_generation", None) or accumulation) * getattr(args, "num_iterations", 1)
    return global_step * accumulation % per_generation == 0


def requeue_signal() -> signal.Signals | None:
    """The signal that asks this job to checkpoint and requeue: submitit's, inside a submitit job on SLURM."""
    if not (os.environ.get("SUBMITIT_FOLDER") and os.environ.get("SLURM_JOB_ID")):
        return None
    return signal.Signals[f"SIG{os.environ.get('SUBMITIT_PREEMPT_SIGNAL', 'USR2')}"]


def requeue(number: int) -> str | None:
    """After training stopped on `number`: submitit's handler for it (restored by then) requeues the job and exits
    the process; returned instead is the reason it will not (e.g. `timed-out too many times`), or that no submitit
    handler is installed."""
    handler = signal.getsignal(number)
    if not callable(handler) or getattr(handler, "__name__", "") != "checkpoint_and_try_requeue":
        return "no submitit handler for the signal"
    from submitit.core.utils import UncompletedJobError

    try:
        handler(number, None)
    except UncompletedJobError as refused:
        return str(refused)
    return None  # not reached: the handler exits once the job is requeued


class StopOnSignal(TrainerCallback):
    def __init__(self):
        self.received: signal.Signals | None = None
        self.forced = False  # a second signal came: stop at once, even where its KeyboardInterrupt was dropped
        self._previous: dict[int, object] = {}
        # The handler's calls and the deliveries read from the wakeup pipe, appended to rather than counted up: a
        # call landing between two bytecodes of another loses no count.
        self._calls: list[int] = []
        self._delivered: list[int] = []
        self._pipe: tuple[int, int] | None = None
        self._previous_wakeup = -1

    @property
    def exit_code(self) -> int:
        return 128 + int(self.received)  # the shell's convention: 130 for SIGINT, 143 for SIGTERM

    def on_train_begin(self, args, state, control, **kwargs):
        if threading.current_thread() is threading.main_thread():  # Python installs handlers only there
            requeue_on = requeue_signal()
            numbers = STOP_SIGNALS if requeue_on is None else (*STOP_SIGNALS, requeue_on)
            self._pipe = os.pipe()
            for end in self._pipe:
                os.set_blocking(end, False)
            self._previous_wakeup = signal.set_wakeup_fd(self._pipe[1], warn_on_full_buffer=False)
            self._previous = {number: signal.signal(number, self._handle) for number in numbers}

    def _handle(self, number, frame):
        """Records the signal; a second one (counted by the handler's calls or by the wakeup pipe's deliveries)
        raises KeyboardInterrupt. The line goes out with os.write: a handler runs between any two bytecodes, and a
        print to sys.stderr while the interrupted code was inside one raises CPython's "reentrant call" error."""
        self._calls.append(number)
        self._delivered.extend(self._read_deliveries())
        if self.received is not None or max(len(self._calls), len(self._delivered)) > 1:
            self.forced = True
            self.release()
            raise KeyboardInterrupt
        self.received = signal.Signals(number)
        line = (
            f"\nalign-kit: {self.received.name} received; stopping when the current generation's steps end "
            "(again to stop at once)\n"
        )
        os.write(2, line.encode())

    def _read_deliveries(self) -> list[int]:
        """The numbers of our signals CPython wrote to the wakeup pipe since the last read (a byte per delivery)."""
        found: list[int] = []
        while self._pipe is not None:
            try:
                data = os.read(self._pipe[0], 4096)
            except BlockingIOError:
                break
            if not data:
                break
            found += [byte for byte in data if byte in self._previous]
        return found

    def on_step_end(self, args, state, control, **kwargs):
        if self.received is not None and ends_a_generation(args, state.global_step):
            control.should_save = args.save_strategy != "no"
            control.should_training_stop = True

    def on_train_end(self, args, state, control, **kwargs):
        self.release()

    def release(self):
        """Give back the handlers and the wakeup pipe found at on_train_begin (a second call does nothing)."""
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}
        if self._pipe is not None:
            signal.set_wakeup_fd(self._previous_wakeup)
            for end in self._pipe:
                os.close(end)
            self._pipe = None
