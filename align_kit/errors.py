"""Errors a user can fix from the command line."""


class ConfigError(ValueError):
    """A bad configuration, found before any model loads. The message names the keys and the fix."""


class TrainingHalted(RuntimeError):
    """A health-monitor rule with action `halt` stopped the run (after saving a checkpoint)."""

    def __init__(self, alert):
        super().__init__(f"halted at step {alert.step} by {alert.rule}: {alert.message}; advice: {alert.advice}")
        self.alert = alert
