"""The trainer of a plan: the plan's hooks, the run folder's callbacks and its GRPOConfig, handed to AlignTrainer.

AlignTrainer (align_kit/trainer.py) knows no component; this is where the components meet it. Torch and TRL load
here, when a trainer is built, never when a plan is.
"""

from __future__ import annotations

from pathlib import Path

from align_kit.core.hooks import TrainerHook
from align_kit.core.run_files import METRICS_FILE
from align_kit.experiment.plan import ExperimentPlan, validate_dataset

# Their hooks run first, in this order: rollout's sampler copy of the policy is made before any router hook
# attaches (a deep copy of a hooked model would copy the hooks too), and routing replay puts its hooks on it.
FIRST_GROUPS = ("rollout", "routing_replay")


def trainer_hooks(plan: ExperimentPlan) -> list[TrainerHook]:
    """The hooks the trainer runs, in their order: rollout's and routing_replay's, every other node's in the order of
    the defaults list, and last the built-in health metrics (TrainingMetrics), which read what the others left."""
    from align_kit.components.training_metrics import TrainingMetrics  # imports torch

    first = [plan.components[group] for group in FIRST_GROUPS if group in plan.components]
    others = [node for group, node in plan.components.items() if group not in FIRST_GROUPS]
    return [hook for node in (*first, *others) for hook in node.trainer_hooks()] + [TrainingMetrics()]


def build_trainer(plan: ExperimentPlan, model, tokenizer, extra_callbacks=(), train_dataset=None):
    """An AlignTrainer for `plan` on `model`. `train_dataset`: already loaded and checked by `validate_dataset`
    (else loaded here). The live health monitor's callback is the trainer's `health_monitor`."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig

    from align_kit.monitor.callback import HealthMonitorCallback, QuietProgressCallback
    from align_kit.monitor.rules import HealthMonitor
    from align_kit.monitor.samples import SampleBook, SampleRecorder
    from align_kit.tracking.metrics_file import MetricsFileCallback
    from align_kit.trainer import AlignTrainer

    if train_dataset is None:
        train_dataset = plan.task.dataset("train")
        validate_dataset(plan, train_dataset)
    run_dir = Path(plan.grpo_kwargs["output_dir"])
    eval_dataset = plan.task.dataset("eval") if plan.task.num_eval else None
    monitor = HealthMonitor.from_plan(plan)
    hooks = trainer_hooks(plan)
    samples = None
    if monitor.config.enabled:  # the completions behind each alert (align_kit/monitor/samples.py)
        samples = SampleBook(monitor.config.samples, run_dir)
        hooks.append(SampleRecorder(samples.ring))
    health = HealthMonitorCallback(monitor, run_dir, run_dir / METRICS_FILE, samples)
    trainer = AlignTrainer(
        model=model,
        reward_funcs=[spec.func for spec in plan.rewards],
        args=GRPOConfig(**plan.grpo_kwargs),
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        # The health callback last: its veto of a save with non-finite weights must have the final word.
        callbacks=[MetricsFileCallback(run_dir / METRICS_FILE), *extra_callbacks, health],
        hooks=hooks,
        rollout_func=plan.task.rollout_func(),  # a multi-turn task's episode loop (task=tool_calls), or None
    )
    # The dashboard line replaces HF's raw log dicts on the console.
    trainer.remove_callback(PrinterCallback)
    if trainer.pop_callback(ProgressCallback) is not None:
        trainer.add_callback(QuietProgressCallback)
    trainer.health_monitor = health
    return trainer
