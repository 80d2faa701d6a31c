"""Ctrl-C (SIGINT) and SIGTERM during training: finish the current step, save a checkpoint, stop cleanly.

The signal only sets a flag; at the next optimizer-step boundary the callback asks HF's loop to save (when
`trainer.save_strategy` is not `no`) and to stop, so the checkpoint is as complete as a scheduled one. The first
signal restores the previous handlers, so a second Ctrl-C stops at once without saving.
"""

from __future__ import annotations

import signal
import sys
import threading

from transformers import TrainerCallback

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopOnSignal(TrainerCallback):
    def __init__(self):
        self.received: signal.Signals | None = None
        self._previous: dict[int, object] = {}

    @property
    def exit_code(self) -> int:
        return 128 + int(self.received)  # the shell's convention: 130 for SIGINT, 143 for SIGTERM

    def on_train_begin(self, args, state, control, **kwargs):
        if threading.current_thread() is threading.main_thread():  # Python installs handlers only there
            self._previous = {number: signal.signal(number, self._handle) for number in STOP_SIGNALS}

    def _handle(self, number, frame):
        self.received = signal.Signals(number)
        self._restore()
        print(
            f"\nalign-kit: {self.received.name} received; stopping after this step (again to stop at once)",
            file=sys.stderr,
        )

    def on_step_end(self, args, state, control, **kwargs):
        if self.received is not None:
            control.should_save = args.save_strategy != "no"
            control.should_training_stop = True

    def on_train_end(self, args, state, control, **kwargs):
        self._restore()

    def _restore(self):
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}
