"""With every component at its TRL-native node, align_kit trains step for step as plain TRL's GRPOTrainer does."""

from __future__ import annotations

from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.train import component_choices

PARITY_KEYS = (
    "loss",
    "reward",
    "reward_std",
    "entropy",
    "grad_norm",
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
    "frac_reward_zero_std",
    "rewards/correctness/mean",
    "rewards/format/mean",
    "completions/mean_length",
)


def test_align_kit_matches_plain_trl_step_for_step(overrides_for, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from align_kit.experiment.build_trainer import build_trainer

    overrides = overrides_for(
        "advantage=grpo", "clip=symmetric", "kl=none", "overlong=none", "logger=none",
        "trainer.max_steps=6", "trainer.steps_per_generation=2", "trainer.num_iterations=2",
        "trainer.learning_rate=1e-3",
    )  # fmt: skip
    plan = build_plan(compose(overrides), component_choices(), str(tmp_path / "align_kit"))
    assert plan.effective("steps_per_generation") > plan.effective("gradient_accumulation_steps")

    policy = plan.model.load(plan.task, plan_cache(overrides))
    ours = build_trainer(plan, policy.model, policy.tokenizer)
    ours.train()

    fresh = plan.model.load(plan.task, plan_cache(overrides))
    plain = GRPOTrainer(
        model=fresh.model,
        reward_funcs=[spec.func for spec in plan.rewards],
        args=GRPOConfig(**{**plan.grpo_kwargs, "output_dir": str(tmp_path / "plain")}),
        train_dataset=plan.task.dataset("train"),
        processing_class=fresh.tokenizer,
    )
    plain.train()

    ours_rows = [row for row in ours.state.log_history if "loss" in row]
    plain_rows = [row for row in plain.state.log_history if "loss" in row]
    assert len(ours_rows) == len(plain_rows) == 6
    for mine, theirs in zip(ours_rows, plain_rows, strict=True):
        assert {k: mine.get(k) for k in PARITY_KEYS} == {k: theirs.get(k) for k in PARITY_KEYS}
    # The policy moved and clipping acted at some step, so the comparison covers the clipped path.
    assert any(row["clip_ratio/region_mean"] > 0 for row in ours_rows)
    assert ours_rows[0]["grad_norm"] > 0


def plan_cache(overrides: list[str]) -> str:
    return next(o.split("=", 1)[1] for o in overrides if o.startswith("paths.cache_dir="))
