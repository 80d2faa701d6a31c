"""The `rollout` node's trainer code for HF generation (rollout.py holds the node and the pure
functions): sampling on a low-precision copy of the policy, the sampler/trainer log-prob gap
(`mismatch/*`) and its importance-sampling correction (the training-stability chapter, 16.6.1)."""

from __future__ import annotations

import contextlib

from align_kit.components.rollout import (
    LowPrecisionSampler,
    importance_ratio,
    mismatch_metrics,
    recording_sampled_logprobs,
)
from align_kit.core.hooks import BatchKey, LossTerms, TrainerHook


class SamplerMismatch(TrainerHook):
    """Attached when the mismatch is measured (rollout.dtype other than float32, or log_mismatch)."""

    batch_keys = (BatchKey("rollout_is_ratio", "completion", pad=1.0),)  # the IS weights, with is_correction

    def __init__(self, node):
        self.node = node
        self.sampler: LowPrecisionSampler | None = None

    def attach(self, trainer) -> None:
        # Before any router hooks attach (routing_replay comes later): a deep copy of a hooked model
        # would copy the hooks too.
        node = self.node
        if node.dtype != "float32":
            quantizer = None
            if node.quantization != "none":
                quantizer = (node.quantization, node.quant_scale, node.quantize_router)
            self.sampler = LowPrecisionSampler(trainer.model, node.dtype, quantizer, **trainer.fused_head())

    @contextlib.contextmanager
    def generation(self, trainer, state):
        """Sample on the copy (if any) and record the sampler's log-probs of the tokens it draws; the
        trainer hands them to TRL as `sampling_per_token_logps`, as the vLLM path does."""
        with contextlib.ExitStack() as stack:
            model = trainer.model_wrapped
            if self.sampler is not None:
                self.sampler.sync(trainer.model, trainer.state.global_step)
                model = self.sampler.model
                stack.enter_context(trainer.generating_with(model))
            state.sampling_logprobs = stack.enter_context(
                recording_sampled_logprobs(trainer.accelerator.unwrap_model(model))
            )
            yield

    def on_scored_batch(self, trainer, state, batch):
        """The trainer's log-probs of the sampled tokens against the sampler's, recorded as it sampled them
        (mismatch/*: what the IS correction corrects), and, with a low-precision copy, against the copy's
        full forward over the same tokens (mismatch/rescore_*: the precision gap alone, without the
        generation path: KV cache, sampling settings)."""
        mask = batch["completion_mask"]
        if "tool_mask" in batch:  # tool output tokens were not sampled (TRL records 0.0 for them)
            mask = mask * batch["tool_mask"]
        sampler_logps = batch["sampling_per_token_logps"]
        train_logps = batch.get("old_per_token_logps")
        if train_logps is None:
            train_logps = trainer.token_logps(trainer.model, batch)
        gaps = mismatch_metrics(train_logps, sampler_logps, mask)
        if self.sampler is not None:
            rescored = trainer.token_logps(self.sampler.model, batch).float()
            gaps.update(mismatch_metrics(train_logps, rescored, mask, "mismatch/rescore_"))
        node = self.node
        if node.is_correction != "none":
            batch["rollout_is_ratio"] = importance_ratio(
                train_logps, sampler_logps, mask, node.is_correction, node.is_cap_min, node.is_cap_max
            )
        return gaps

    def loss_terms(self, trainer, loss):
        ratio = loss.inputs.get("rollout_is_ratio")
        return None if ratio is None else LossTerms(advantage_weights=ratio)
