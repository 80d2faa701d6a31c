"""AlignTrainer: the one place that touches TRL internals.

With every component at its TRL-native node it behaves exactly as `trl.GRPOTrainer` (the parity
test holds it to that); align_kit's own outputs arrive as callbacks. Components that TRL lacks
hook TRL's extension points here, never by copying its methods.
"""

from __future__ import annotations

from pathlib import Path

from trl import GRPOConfig, GRPOTrainer

from align_kit.plan import ExperimentPlan
from align_kit.tracking.metrics_file import MetricsFileCallback

METRICS_FILE = "metrics.jsonl"


class AlignTrainer(GRPOTrainer):
    """GRPOTrainer built from an ExperimentPlan."""

    @classmethod
    def from_plan(cls, plan: ExperimentPlan, model, tokenizer, extra_callbacks=()) -> AlignTrainer:
        run_dir = Path(plan.grpo_kwargs["output_dir"])
        eval_dataset = plan.task.dataset("eval") if getattr(plan.task, "num_eval", 0) else None
        return cls(
            model=model,
            reward_funcs=[spec.func for spec in plan.rewards],
            args=GRPOConfig(**plan.grpo_kwargs),
            train_dataset=plan.task.dataset("train"),
            eval_dataset=eval_dataset,
            processing_class=tokenizer,
            callbacks=[MetricsFileCallback(run_dir / METRICS_FILE), *extra_callbacks],
        )
