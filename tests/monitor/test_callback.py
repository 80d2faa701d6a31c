"""The health monitor inside a real run: new metrics, dashboard, alerts, halting with a checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from align_kit.core.errors import TrainingHalted
from align_kit.tracking.metrics_file import read_metrics
from tests.conftest import cli_env

# A learning rate far too high with mini-steps: after one update the policy has moved so far that
# the second mini-step's ratio pi/pi_old is nowhere near 1 (the policy-optimization chapter, 18.3.4: |mean - 1| > 0.5).
COLLAPSING = ["logger=none", "trainer.learning_rate=0.05", "trainer.max_steps=8"]


def test_health_metrics_are_logged(train_once, tmp_path):
    train_once(tmp_path, "logger=none", "monitor=off")
    rows = read_metrics(tmp_path / "metrics.jsonl")
    generation = [row for row in rows if "reward" in row]
    steps = [row for row in rows if "loss" in row]
    for name in ("adv/mean", "adv/std", "adv/zero_std_fraction", "reward/addition", "reward/subtraction",
                 "completions/mean_length/addition"):  # fmt: skip
        assert all(name in row for row in generation), name
    for name in ("policy_ratio/mean", "tokens_per_sec", "entropy/addition", "entropy/subtraction"):
        assert all(name in row for row in steps), name
    # The first mini-step of every generation is on-policy: the ratio is exactly 1 there.
    assert steps[0]["policy_ratio/mean"] == 1.0 and steps[0]["policy_ratio/abs_dev"] == 0.0
    # Off-policy mini-steps move the ratio; mean |r - 1| >= |mean(r) - 1| for any token set (triangle inequality).
    off_policy = [row for row in steps if row["policy_ratio/mean"] != 1.0]
    assert off_policy and all(row["policy_ratio/abs_dev"] > 0 for row in off_policy)
    assert all(row["policy_ratio/abs_dev"] >= abs(row["policy_ratio/mean"] - 1) - 1e-7 for row in steps)
    assert all(0.0 <= row["adv/zero_std_fraction"] <= 1.0 for row in generation)
    assert not (tmp_path / "alerts.jsonl").exists()


@pytest.mark.slow
def test_a_collapsing_run_warns_and_records_the_alert(train_once, tmp_path):
    summary = train_once(tmp_path, *COLLAPSING, "monitor.policy_ratio_drift.action=warn")
    assert summary["steps"] == 8
    alerts = [json.loads(line) for line in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    drift = [a for a in alerts if a["rule"] == "policy_ratio_drift"]
    assert drift and drift[0]["action"] == "warn" and "learning_rate" in drift[0]["advice"]
    logged = {row["step"]: row for row in read_metrics(tmp_path / "metrics.jsonl") if "loss" in row}
    assert abs(logged[drift[0]["step"]]["policy_ratio/mean"] - 1.0) > 0.5  # the rule's threshold, by hand


def test_halt_saves_a_checkpoint_and_stops(train_once, tmp_path):
    with pytest.raises(TrainingHalted) as caught:
        train_once(tmp_path, *COLLAPSING, "monitor.policy_ratio_drift.action=halt")
    step = caught.value.alert.step
    assert step < 8
    assert (tmp_path / f"checkpoint-{step}" / "trainer_state.json").exists()
    assert json.loads((tmp_path / "halt.json").read_text())["rule"] == "policy_ratio_drift"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"] == step and summary["halted"]["rule"] == "policy_ratio_drift"


@pytest.mark.slow
def test_halted_run_exits_non_zero_from_the_cli(overrides_for, cache_dir, tmp_path):
    args = [*overrides_for(*COLLAPSING, "monitor.policy_ratio_drift.action=halt"), f"hydra.run.dir={tmp_path}"]
    result = subprocess.run(
        [sys.executable, "-m", "align_kit.train", *args], capture_output=True, text=True, env=cli_env(cache_dir)
    )
    assert result.returncode == 3
    assert "align-kit: training halted: halted at step" in result.stderr
    output = result.stdout + result.stderr
    assert "[Step 1/8] loss=" in output  # the dashboard block of the first generation
    # 2 mini-steps per generation: the even steps only train and print no block (no lines of "-").
    assert "[Step 2/8]" not in output and "reward_avg=-" not in output
    assert "ALERT policy_ratio_drift (halt)" in output


@pytest.mark.slow
def test_non_finite_training_halts_keeping_the_last_finite_checkpoint(overrides_for, cache_dir, tmp_path):
    # lr 1e30: Adam's first update moves every weight by about 1e30 (finite, so checkpoint-1 is saved);
    # the second mini-step's backward overflows and the grad norm is NaN while the logged loss is not.
    run = ["logger=none", "trainer.learning_rate=1e30", "trainer.max_steps=6", "trainer.save_steps=1"]
    overrides = overrides_for(*run, fast_training=False)
    result = subprocess.run(
        [sys.executable, "-m", "align_kit.train", *overrides, "trainer.disable_tqdm=true", f"hydra.run.dir={tmp_path}"],
        capture_output=True,
        text=True,
        env=cli_env(cache_dir),
    )
    assert result.returncode == 3, result.stderr[-2000:]
    halt = json.loads((tmp_path / "halt.json").read_text())
    rows = {row["step"]: row for row in read_metrics(tmp_path / "metrics.jsonl") if "loss" in row}  # training steps
    step = halt["step"]
    # The first non-finite metric, read independently from metrics.jsonl (non-finite values are stored
    # as null): every earlier row finite, and at the halting step the named metric is the first null.
    assert all(rows[s]["loss"] is not None and rows[s]["grad_norm"] is not None for s in rows if s < step)
    first_null = next(name for name in ("loss", "grad_norm") if rows[step][name] is None)
    assert (halt["rule"], halt["action"], halt["metric"]) == ("non_finite", "halt", first_null)
    assert halt["message"].startswith(f"{first_null} is nan")
    assert f"align-kit: training halted: halted at step {step} by non_finite: {first_null} is nan" in result.stderr
    # No checkpoint of the broken weights; the last one is named and holds finite weights.
    checkpoints = sorted(int(path.name.split("-")[1]) for path in tmp_path.glob("checkpoint-*"))
    assert checkpoints and max(checkpoints) < step
    last = tmp_path / f"checkpoint-{max(checkpoints)}"
    assert f"the last finite checkpoint is {last}" in halt["advice"]
    from safetensors.torch import load_file

    weights = load_file(last / "model.safetensors")
    assert all(bool(tensor.isfinite().all()) for tensor in weights.values())


def test_a_due_save_of_non_finite_weights_is_refused(tmp_path):
    import torch
    from transformers import TrainerControl, TrainerState

    from align_kit.monitor import HealthMonitor, HealthMonitorConfig
    from align_kit.monitor.callback import HealthMonitorCallback

    model = torch.nn.Linear(2, 2)
    callback = HealthMonitorCallback(HealthMonitor(HealthMonitorConfig()), tmp_path, tmp_path / "metrics.jsonl")
    state = TrainerState(global_step=4)
    # Finite weights: the save goes ahead.
    control = TrainerControl(should_save=True, should_log=False)
    callback.on_step_end(None, state, control, model=model)
    assert control.should_save and callback.halted is None
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
    # A NaN weight on a step that logs: no save; the logged metrics will name what went non-finite.
    control = TrainerControl(should_save=True, should_log=True)
    callback.on_step_end(None, state, control, model=model)
    assert not control.should_save and callback.halted is None
    # A step that logs nothing: no save, and the halt names the weights.
    control = TrainerControl(should_save=True, should_log=False)
    callback.on_step_end(None, state, control, model=model)
    assert not control.should_save and control.should_training_stop
    assert (callback.halted.rule, callback.halted.metric, callback.halted.step) == ("non_finite", "weights", 4)
    assert json.loads((tmp_path / "halt.json").read_text())["advice"].endswith(
        "no checkpoint was saved before this step (trainer.save_steps)"
    )


def test_a_resume_loads_the_monitor_state_of_its_checkpoint_not_the_history(tmp_path):
    from types import SimpleNamespace

    from transformers import TrainerState

    from align_kit.monitor import HealthMonitor, HealthMonitorConfig
    from align_kit.monitor.callback import MONITOR_STATE_FILE, HealthMonitorCallback

    args = SimpleNamespace(output_dir=str(tmp_path))
    ran = HealthMonitorCallback(HealthMonitor(HealthMonitorConfig()), tmp_path, tmp_path / "metrics.jsonl")
    fired = [
        (alert.step, alert.rule)
        for step in range(1, 31)
        for alert in ran.monitor.update(step, {"entropy": 1.0 if step <= 20 else 0.25})
    ]
    # The last 10 average (3 x 1.0 + 7 x 0.25) / 10 = 0.475 < 0.5 x the first 10's 1.0 first at step 27.
    assert (27, "entropy_collapse") in fired
    (tmp_path / "checkpoint-30").mkdir()
    ran.on_save(args, TrainerState(global_step=30), None)
    assert (tmp_path / "checkpoint-30" / MONITOR_STATE_FILE).is_file()

    # No metrics.jsonl at all: what the resumed monitor knows comes from the checkpoint alone.
    resumed = HealthMonitorCallback(HealthMonitor(HealthMonitorConfig()), tmp_path, tmp_path / "metrics.jsonl")
    resumed.on_train_begin(args, TrainerState(global_step=30), None)
    assert resumed.monitor.history["entropy"].count == 30
    # The collapse episode opened before the checkpoint stays open: step 31 raises nothing again.
    assert resumed.monitor.update(31, {"entropy": 0.25}) == []
    assert "entropy_collapse" in resumed.monitor.state_dict()["in_episode"]


def test_the_end_of_training_judges_short_runs_and_names_the_rules_that_could_not(tmp_path, capsys):
    from transformers import TrainerState

    from align_kit.monitor import HealthMonitor, HealthMonitorConfig
    from align_kit.monitor.callback import ALERTS_FILE, HealthMonitorCallback

    callback = HealthMonitorCallback(HealthMonitor(HealthMonitorConfig()), tmp_path, tmp_path / "metrics.jsonl")
    # Two logged rows, every reward 0 and every group flat: fewer than no_signal's span of 10, judged at the end.
    for step in (1, 2):
        callback.monitor.update(step, {"reward": 0.0, "frac_reward_zero_std": 1.0})
    callback.on_train_end(None, TrainerState(global_step=2), None)
    written = [json.loads(line)["rule"] for line in (tmp_path / ALERTS_FILE).read_text().splitlines()]
    assert written == ["zero_std_groups", "no_signal"]
    out = capsys.readouterr()
    assert "rules could not judge this run" in out.out + out.err
