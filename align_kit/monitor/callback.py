"""The monitor inside a training run: the dashboard every logging step, alerts to `alerts.jsonl`,
W&B alerts for `warn`, and for `halt` a checkpoint, the reason in `halt.json`, and a clean stop."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

from align_kit.monitor.dashboard import dashboard_line
from align_kit.monitor.rules import Alert, HealthMonitor
from align_kit.tracking.metrics_file import read_metrics

ALERTS_FILE = "alerts.jsonl"
HALT_FILE = "halt.json"


def _echo(text: str) -> None:
    from tqdm.auto import tqdm

    tqdm.write(text)  # above the progress bar, not through it


class QuietProgressCallback(ProgressCallback):
    """HF's progress bar without its raw log dicts: the dashboard line replaces them."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        return None


class HealthMonitorCallback(TrainerCallback):
    def __init__(self, monitor: HealthMonitor, run_dir: str | Path, metrics_file: str | Path):
        self.monitor = monitor
        self.run_dir = Path(run_dir)
        self.metrics_file = Path(metrics_file)
        self.halted: Alert | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        # On resume the history is rebuilt from what was logged; alerts raised then are not repeated.
        if state.global_step > 0 and self.metrics_file.exists():
            for row in read_metrics(self.metrics_file):
                if row.get("step", 0) <= state.global_step:
                    self.monitor.update(row["step"], row)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or not state.is_world_process_zero:
            return
        alerts = self.monitor.update(state.global_step, logs)
        if "loss" in logs:  # a training step (not eval, not the end-of-run summary)
            _echo(dashboard_line(state.global_step, state.max_steps, logs, alerts))
        elif alerts:
            _echo("\n".join(f"ALERT {a.rule} ({a.action}): {a.message}; advice: {a.advice}" for a in alerts))
        for alert in alerts:
            with (self.run_dir / ALERTS_FILE).open("a") as handle:
                handle.write(alert.to_json() + "\n")
            if alert.action == "warn":
                _wandb_alert(alert)
            if alert.action == "halt" and self.halted is None:
                self.halted = alert
                (self.run_dir / HALT_FILE).write_text(json.dumps(json.loads(alert.to_json()), indent=2))
                control.should_save = True  # HF saves right after the log callbacks
                control.should_training_stop = True


def _wandb_alert(alert: Alert) -> None:
    import sys

    wandb = sys.modules.get("wandb")  # only when this run already uses W&B
    if wandb is None or wandb.run is None:
        return
    try:
        wandb.alert(title=f"align_kit: {alert.rule}", text=f"{alert.message}\n{alert.advice}", level="WARN")
    except Exception as error:  # an alert must never take the run down
        _echo(f"align-kit: W&B alert not sent ({error})")
