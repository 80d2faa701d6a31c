"""The hooks a plan hands the trainer, and their order (built without a model: nothing heavy loads)."""

from __future__ import annotations

from align_kit.experiment.build_trainer import trainer_hooks
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.train import component_choices


def test_rollout_and_routing_replay_hooks_run_first_then_the_defaults_order_then_the_health_metrics(tmp_path):
    plan = build_plan(
        compose(["logger=none", "kl=reweighted", "rollout.dtype=bfloat16"]), component_choices(), str(tmp_path)
    )
    # rollout: the bf16 sampler copy and the re-tokenization check; routing_replay=off still measures drift; then
    # clip (symmetric: its engagement metrics), kl (reweighted), overlong (none: its engagement metric), in the
    # defaults list's order, while model, task, advantage=grpo, step_mask, sampling and format_schedule add none.
    assert [type(hook).__name__ for hook in trainer_hooks(plan)] == [
        "SamplerMismatch",
        "RetokenizeCheck",
        "RouteReplay",
        "ClipEngagement",
        "EntropyWeightedBeta",
        "OverlongEngagement",
        "TrainingMetrics",
    ]
