"""Ctrl-C (SIGINT) and SIGTERM during training: finish the current generation's steps, save a checkpoint, stop.

The signal only sets a flag; at the next optimizer step that ends a generation (TRL generates once per
steps_per_generation x num_iterations micro-batches and trains on the buffered completions in between) the callback
asks HF's loop to save (when `trainer.save_strategy` is not `no`) and to stop. A checkpoint in the middle of a
generation's steps would not hold the buffered completions: the resumed run would generate afresh there and its
metrics would part from an uninterrupted run's. The wait is at most steps_per_generation x num_iterations /
gradient_accumulation_steps - 1 optimizer steps. The first signal restores the previous handlers, so a second
Ctrl-C stops at once without saving.

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
        self._previous: dict[int, object] = {}

    @property
    def exit_code(self) -> int:
        return 128 + int(self.received)  # the shell's convention: 130 for SIGINT, 143 for SIGTERM

    def on_train_begin(self, args, state, control, **kwargs):
        if threading.current_thread() is threading.main_thread():  # Python installs handlers only there
            requeue_on = requeue_signal()
            numbers = STOP_SIGNALS if requeue_on is None else (*STOP_SIGNALS, requeue_on)
            self._previous = {number: signal.signal(number, self._handle) for number in numbers}

    def _handle(self, number, frame):
        """Only records the signal. The line goes out with os.write: a handler runs between any two bytecodes, and
        a print to sys.stderr while the interrupted code was inside one raises CPython's "reentrant call" error. A
        second signal that lands before the handlers are restored stops at once, as one after it does."""
        if self.received is not None:
            self._restore()
            raise KeyboardInterrupt
        self.received = signal.Signals(number)
        self._restore()
        line = (
            f"\nalign-kit: {self.received.name} received; stopping when the current generation's steps end "
            "(again to stop at once)\n"
        )
        os.write(2, line.encode())

    def on_step_end(self, args, state, control, **kwargs):
        if self.received is not None and ends_a_generation(args, state.global_step):
            control.should_save = args.save_strategy != "no"
            control.should_training_stop = True

    def on_train_end(self, args, state, control, **kwargs):
        self._restore()

    def _restore(self):
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}
