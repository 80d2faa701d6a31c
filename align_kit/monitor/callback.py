"""The monitor inside a training run: the dashboard on generation steps, alerts to `alerts.jsonl`,
W&B alerts for `warn`, and for `halt` a checkpoint, the reason in `halt.json`, and a clean stop.

Every checkpoint also holds the monitor's state (`align_kit_monitor.json`, bounded by the rules' windows), so a
resume continues judging where the checkpoint left off without re-reading the run's history.

A non-finite halt saves nothing: the weights it would save are already broken. Every checkpoint
this callback lets through holds finite weights (checked when a save is due), so the newest
`checkpoint-*` is the last finite one; `halt.json` names it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

from align_kit.core.disk_space import writing
from align_kit.core.run_files import latest_checkpoint
from align_kit.monitor.dashboard import Dashboard, alert_line
from align_kit.monitor.rules import Alert, HealthMonitor
from align_kit.monitor.samples import SampleBook
from align_kit.tracking.metrics_file import read_metrics

ALERTS_FILE = "alerts.jsonl"
HALT_FILE = "halt.json"
MONITOR_STATE_FILE = "align_kit_monitor.json"  # in each checkpoint-N/
NON_FINITE = "non_finite"


def _echo(text: str) -> None:
    from tqdm.auto import tqdm

    tqdm.write(text)  # above the progress bar, not through it


class QuietProgressCallback(ProgressCallback):
    """HF's progress bar without its raw log dicts: the dashboard replaces them."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        return None


def weights_are_finite(model) -> bool:
    import torch

    # One read-back for every parameter: a bool() per tensor would make a GPU wait once per parameter.
    checks = [torch.isfinite(param).all() for param in model.parameters()]
    return bool(torch.stack(checks).all()) if checks else True


class HealthMonitorCallback(TrainerCallback):
    def __init__(
        self, monitor: HealthMonitor, run_dir: str | Path, metrics_file: str | Path, samples: SampleBook | None = None
    ):
        """`samples`: the completions kept for the alerts (align_kit/monitor/samples.py), filled by the trainer's
        SampleRecorder hook; None writes none."""
        self.monitor = monitor
        self.run_dir = Path(run_dir)
        self.metrics_file = Path(metrics_file)
        self.dashboard = Dashboard()
        self.halted: Alert | None = None
        self.samples = samples

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            repaired = end_cut_line(self.run_dir / ALERTS_FILE)
            if repaired:
                _echo(f"align-kit monitor: {repaired}")
            if self.samples is not None:
                self.samples.run_dir = self.run_dir
                self.samples.refresh()  # the files an earlier part of this run wrote count against the caps
        if state.global_step == 0:
            return
        saved = Path(args.output_dir, f"checkpoint-{state.global_step}", MONITOR_STATE_FILE)
        if saved.is_file() and self._load_saved_state(saved):
            return
        # A checkpoint without the state (or kept for other rule settings): the history is rebuilt from what was
        # logged, reading the whole file; alerts raised then are not repeated.
        if self.metrics_file.exists():
            for row in read_metrics(self.metrics_file):
                if row.get("step", 0) <= state.global_step:
                    self.monitor.update(row["step"], row)

    def _load_saved_state(self, saved: Path) -> bool:
        """Continue from the checkpoint's monitor state. A state cut short (the process died while the checkpoint
        was written) or not the monitor's is said in one line and left: the history is rebuilt from the logged rows
        instead, so the resumed run trains on rather than ending in a JSON error. Loaded into a copy, so a state
        that fails half-way leaves the monitor as it was."""
        try:
            data = json.loads(saved.read_text())
            candidate = copy.deepcopy(self.monitor)
            if not isinstance(data, dict):
                raise TypeError(f"a JSON {type(data).__name__}, not an object")
            loaded = candidate.load_state_dict(data)
        except (ValueError, TypeError, KeyError, AttributeError) as error:  # JSONDecodeError is a ValueError
            _echo(
                f"align-kit monitor: {saved} is not a readable monitor state ({type(error).__name__}: {error}); "
                "the monitor's history is rebuilt from the run's logged history instead"
            )
            return False
        if loaded:
            self.monitor = candidate
        return loaded

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.monitor.config.enabled:
            folder = Path(args.output_dir, f"checkpoint-{state.global_step}")
            with writing(folder, MONITOR_STATE_FILE):
                (folder / MONITOR_STATE_FILE).write_text(json.dumps(self.monitor.state_dict()))

    def on_step_end(self, args, state, control, model=None, **kwargs):
        # A save is due: never write non-finite weights (the halt itself comes from the logged metrics,
        # or here when this step logs nothing the non_finite rule could read).
        if not (control.should_save and self.monitor.config.enabled and model is not None):
            return
        if weights_are_finite(model):
            return
        control.should_save = False
        if not control.should_log and self.halted is None:
            settings = self.monitor.config.non_finite
            alert = Alert(
                step=state.global_step,
                rule=NON_FINITE,
                action=settings.action,
                values={},
                message="the model's weights hold NaN/inf values (no logged metric at this step)",
                advice="lower trainer.learning_rate or check the rewards and the data for NaN/inf values",
                metric="weights",
            )
            self._act([alert], state, control)

    def on_log(self, args, state, control, logs=None, **kwargs):
        # Every rank judges the same gathered metrics, so a halt stops all of them at the same step; rank 0
        # alone prints and writes.
        if not logs:
            return
        alerts = self.monitor.update(state.global_step, logs)
        if "loss" in logs:  # a training step (not eval, not the end-of-run summary)
            text = self.dashboard.update(state.global_step, state.max_steps, logs, alerts)
        else:
            text = "\n".join(alert_line(alert) for alert in alerts)
        if text and state.is_world_process_zero:
            _echo(text)
        self._act(alerts, state, control)
        if "loss" in logs and self.samples is not None and state.is_world_process_zero:
            self.samples.on_step(state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        # The end of the run: level rules that never had `span` points judge on the points there are (their alerts
        # are recorded and shown; nothing is left to halt), then one line names the rules that could not judge.
        if not self.monitor.config.enabled:
            return
        alerts = self.monitor.finish()
        if not state.is_world_process_zero:
            return
        for alert in alerts:
            with (self.run_dir / ALERTS_FILE).open("a") as handle:
                handle.write(alert.to_json() + "\n")
            if self.samples is not None:
                self.samples.on_alert(alert)
        lines = [alert_line(alert) for alert in alerts]
        unjudged = [entry.rule for entry in self.monitor.coverage() if not entry.judged]
        if unjudged:
            lines.append(
                f"align-kit monitor: {len(unjudged)} of {len(self.monitor.coverage())} rules could not judge this "
                f"run (a metric not logged, or fewer points than their window): {', '.join(unjudged)}"
            )
        lines += [f"align-kit monitor: {line}" for line in self.monitor.artefacts()]
        if lines:
            _echo("\n".join(lines))

    def _act(self, alerts: list[Alert], state, control) -> None:
        writes = state.is_world_process_zero
        for alert in alerts:
            if alert.rule == NON_FINITE:
                alert = self._with_last_checkpoint(alert)
            if writes:
                with (self.run_dir / ALERTS_FILE).open("a") as handle:
                    handle.write(alert.to_json() + "\n")
                if self.samples is not None:
                    self.samples.on_alert(alert)
            if alert.action == "warn" and writes:
                _wandb_alert(alert)
            if alert.action == "halt" and self.halted is None:
                self.halted = alert
                if writes:
                    (self.run_dir / HALT_FILE).write_text(json.dumps(json.loads(alert.to_json()), indent=2))
                # HF saves right after the log callbacks; broken weights are not worth a checkpoint.
                control.should_save = alert.rule != NON_FINITE
                control.should_training_stop = True

    def _with_last_checkpoint(self, alert: Alert) -> Alert:
        checkpoint = latest_checkpoint(self.run_dir, complete=True)
        where = (
            f"the last finite checkpoint is {checkpoint} (train.resume=true continues from it)"
            if checkpoint
            else "no checkpoint was saved before this step (trainer.save_steps)"
        )
        return dataclasses.replace(alert, advice=f"{alert.advice}; {where}")


def end_cut_line(path: Path) -> str:
    """End a JSON-lines file whose last line was cut (the process died mid-write) with a newline, so the next line
    appended starts on its own line instead of being glued to the cut one and lost with it to every reader; what
    was done, in words ("" when nothing was)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            if handle.tell() == 0:
                return ""
            handle.seek(-1, 2)
            if handle.read(1) == b"\n":
                return ""
    except FileNotFoundError:
        return ""
    with path.open("a") as handle:
        handle.write("\n")
    return (
        f"{path} ended in a cut line (a run stopped while writing it): that line is left as it is (not valid JSON), "
        "and the next alert starts on a new line"
    )


def _wandb_alert(alert: Alert) -> None:
    import sys

    wandb = sys.modules.get("wandb")  # only when this run already uses W&B
    if wandb is None or wandb.run is None:
        return
    try:
        wandb.alert(title=f"align_kit: {alert.rule}", text=f"{alert.message}\n{alert.advice}", level="WARN")
    except Exception as error:  # an alert must never take the run down
        _echo(f"align-kit: W&B alert not sent ({error})")
