"""Errors a user can fix from the command line."""


class ConfigError(ValueError):
    """A bad configuration, found before any model loads. The message names the keys and the fix."""


class TrainingHalted(RuntimeError):
    """A health-monitor rule with action `halt` stopped the run (after saving a checkpoint)."""

    def __init__(self, alert):
        super().__init__(f"halted at step {alert.step} by {alert.rule}: {alert.message}; advice: {alert.advice}")
        self.alert = alert


class TrainingInterrupted(RuntimeError):
    """SIGINT or SIGTERM (or, in a SLURM job, submitit's requeue signal) stopped training at a step boundary (after
    saving a checkpoint when checkpointing is on)."""

    def __init__(self, signal_name: str, exit_code: int, step: int, checkpoint: str | None):
        saved = f"saved {checkpoint}" if checkpoint else "no checkpoint saved (trainer.save_strategy=no)"
        super().__init__(f"interrupted by {signal_name} at step {step}; {saved}")
        self.signal_name = signal_name
        self.exit_code = exit_code
        self.checkpoint = checkpoint
