"""The `rollout` node's trainer code for HF generation (rollout.py holds the node and the pure
functions): sampling on a low-precision copy of the policy, the sampler/trainer log-prob gap
(`mismatch/*`) and its importance-sampling correction (seed 000, 16.6.1)."""

from __future__ import annotations

import contextlib

from align_kit.components.hooks import LossTerms, TrainerHook
from align_kit.components.rollout import LowPrecisionSampler, importance_ratio, mismatch_metrics


class SamplerMismatch(TrainerHook):
    def __init__(self, node):
        self.node = node
        self.sampler: LowPrecisionSampler | None = None

    def attach(self, trainer) -> None:
        # Before any router hooks attach (routing_replay comes later): a deep copy of a hooked model
        # would copy the hooks too.
        if self.node.dtype != "float32":
            self.sampler = LowPrecisionSampler(trainer.model, self.node.dtype, **trainer.fused_head())

    def generation(self, trainer, state):
        if self.sampler is None:
            return contextlib.nullcontext()
        self.sampler.sync(trainer.model, trainer.state.global_step)
        return trainer.generating_with(self.sampler.model)

    def on_scored_batch(self, trainer, state, batch):
        if not self.node.measures_mismatch:
            return None
        train_logps = batch.get("old_per_token_logps")
        if train_logps is None:
            train_logps = trainer.token_logps(trainer.model, batch)
        sampler_logps = trainer.token_logps(trainer.model if self.sampler is None else self.sampler.model, batch)
        sampler_logps = sampler_logps.float()
        mask = batch["completion_mask"]
        node = self.node
        if node.is_correction != "none":
            batch["rollout_is_ratio"] = importance_ratio(
                train_logps, sampler_logps, mask, node.is_correction, node.is_cap_min, node.is_cap_max
            )
        return mismatch_metrics(train_logps, sampler_logps, mask)

    def loss_terms(self, trainer, loss):
        ratio = loss.inputs.get("rollout_is_ratio")
        return None if ratio is None else LossTerms(advantage_weights=ratio)
