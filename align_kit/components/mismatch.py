"""The sampler/trainer log-prob gap on the `rollout=hf` path (the training-stability chapter, 16.6.1): sampling on a
low-precision copy of the policy, the sampler's log-probs recorded as it samples, the gap (`mismatch/*`) and its
importance-sampling correction; `SamplerMismatch` is the trainer hook the `rollout` node attaches for them."""

from __future__ import annotations

import contextlib
import math

from align_kit.core.hooks import BatchKey, Deferred, LossTerms, TrainerHook


def importance_ratio(train_logps, sampler_logps, mask, mode: str, cap_min: float | None, cap_max: float | None):
    """pi_train / pi_sampler per completion token, [B, T] (sequence modes repeat one value per row).

    token_*    : ratio of each token;  sequence_* : exp of the summed log-ratio over the sequence.
    *_truncate : clamp into [cap_min, cap_max] (truncated IS);  *_mask : zero outside the caps."""
    import torch

    log_ratio = (train_logps - sampler_logps) * mask
    if mode.startswith("sequence"):
        log_ratio = log_ratio.sum(-1, keepdim=True).expand_as(train_logps)
    ratio = torch.exp(log_ratio)
    low = -math.inf if cap_min is None else cap_min
    high = math.inf if cap_max is None else cap_max
    if mode.endswith("truncate"):
        return ratio.clamp(min=low, max=high)
    return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)


def mismatch_metrics(train_logps, sampler_logps, mask, prefix: str = "mismatch/") -> dict:
    """Per-token gap between trainer and sampler log-probs of the sampled tokens, on the device (`Deferred`): 0 for
    all three when no token counts.

    <prefix>kl is KL(sampler || trainer) by the k3 estimator exp(d) - d - 1, d = log p_train -
    log p_sampler, unbiased for tokens drawn from the sampler and never negative."""
    import torch

    from align_kit.components.kl import k3

    selected = mask.bool()
    count = selected.sum()
    gap = torch.where(selected, train_logps - sampler_logps, 0.0)  # no boolean selection: its size is data
    distance = gap.abs()

    def mean_over_selected(values):
        return torch.where(count > 0, values.sum() / count, 0.0)

    return {
        f"{prefix}logp_abs_diff/mean": Deferred(mean_over_selected(distance)),
        f"{prefix}logp_abs_diff/max": Deferred(distance.max()),  # |gap| >= 0, and 0 where not selected
        f"{prefix}kl": Deferred(mean_over_selected(k3(gap))),  # k3(0) = 0 at the positions not selected
    }


@contextlib.contextmanager
def recording_sampled_logprobs(model):
    """While open, `model.generate` also keeps the log-probability of each token it samples under the
    distribution it drew it from: the processed scores (temperature, top-k, top-p applied), what vLLM
    returns with logprobs_mode=processed_logprobs. Yields a list that gets one [B, new tokens] tensor
    per generate call. generate holds every step's [B, vocab] float32 scores until it returns (tiny on the
    embedded model; with a large vocabulary it grows with max_completion_length)."""
    import copy

    records = []
    generate, own = model.generate, vars(model).get("generate")

    def generate_and_record(*args, generation_config=None, **kwargs):
        config = copy.deepcopy(generation_config or model.generation_config)
        config.output_scores = config.return_dict_in_generate = True
        output = generate(*args, generation_config=config, **kwargs)
        records.append(model.compute_transition_scores(output.sequences, output.scores, normalize_logits=True))
        return output.sequences

    model.generate = generate_and_record
    try:
        yield records
    finally:
        if own is None:
            del model.generate  # the class's generate again
        else:
            model.generate = own


class LowPrecisionSampler:
    """A reduced-precision copy of the policy for generation, re-synced when the policy changed.

    `quantizer`: a `quantize.WeightQuantizer` setting, (format, scale, quantize_router), or None; its weights are
    re-quantized from the policy's at every sync.
    `fused_head`: the arguments TRL's trainer gave `add_fused_lm_head` for the policy (temperature, outputs,
    cast_lm_head_to_fp32); the copy gets its own fused LM head with them, so it can score as the policy does."""

    def __init__(self, model, dtype: str, quantizer: tuple[str, str, bool] | None = None, **fused_head):
        from trl.trainer.utils import add_fused_lm_head

        from align_kit.components.quantize import WeightQuantizer

        self.model = independent_copy(model, dtype)
        self.quantizer = WeightQuantizer(self.model, *quantizer) if quantizer else None
        add_fused_lm_head(self.model, **fused_head)
        self._synced_step: int | None = None

    def sync(self, model, step: int) -> None:
        if self._synced_step == step:
            return
        self.model.load_state_dict(model.state_dict())  # load_state_dict casts to the copy's dtype
        if self.quantizer is not None:
            self.quantizer.apply(self.model, model)
        self._synced_step = step


def independent_copy(model, dtype: str):
    """`model` deep-copied, cast to `dtype`, in eval mode, running its class's own forward.

    TRL's trainer replaces the policy's `forward` with a fused-LM-head wrapper that closes over the policy's
    bound forward (trl.trainer.utils.add_fused_lm_head). deepcopy binds the wrapper to the copy but keeps that
    closure, so a plain copy's forward computes with the fp32 policy: inside training (train mode, gradient
    checkpointing on) that forward drops the KV cache while `generate` feeds one new token per step, and the
    "bf16 sampler" samples from a policy that sees one token of context (issue 16)."""
    import copy

    import torch

    patched = vars(model).pop("forward", None)  # copy the model without the policy-bound wrapper
    try:
        clone = copy.deepcopy(model)
    finally:
        if patched is not None:
            model.forward = patched
    return clone.to(getattr(torch, dtype)).eval()


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
            trainer.sampler_model = self.sampler.model  # the model that samples, for the hooks that attach later

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
