"""R3 from vLLM (arXiv 2510.11370): the experts vLLM chose while sampling, for routing_replay=r3 rollout=vllm.

vLLM 0.31 returns them when the engine is created with `enable_return_routed_experts=True` (Model Runner V2,
which needs Triton: GPU builds only), as `CompletionOutput.routed_experts`, `[tokens, layers, top_k]` over
the prompt and completion. TRL 1.16 creates the engine itself and drops everything but token ids and
log-probs, so align_kit adds the flag while TRL builds the engine (`returning_routed_experts`) and reads the
outputs of each generate call (`capture_outputs`), laying them out like TRL's batch with `pad_routing`.
"""

from __future__ import annotations

import contextlib
from typing import Any


@contextlib.contextmanager
def returning_routed_experts():
    """While TRL builds its colocated engine: vLLM's LLM with enable_return_routed_experts=True."""
    from trl.generation import vllm_generation

    engine = vllm_generation.LLM

    def with_routed_experts(*args, **kwargs):
        return engine(*args, **{**kwargs, "enable_return_routed_experts": True})

    vllm_generation.LLM = with_routed_experts
    try:
        yield
    finally:
        vllm_generation.LLM = engine


@contextlib.contextmanager
def capture_outputs(llm):
    """The RequestOutputs of every `llm.generate` call inside the block, in call order."""
    outputs: list[Any] = []
    generate = llm.generate

    def generate_and_keep(*args, **kwargs):
        result = generate(*args, **kwargs)
        outputs.extend(result)
        return result

    llm.generate = generate_and_keep
    try:
        yield outputs
    finally:
        llm.generate = generate


def routing_from_outputs(outputs):
    """(indices [B, P + C, layers, top_k], valid [B, P + C]) of every completion, in TRL's order (each request's
    completions in turn); ValueError when the engine returned no routing."""
    from align_kit.components.router_capture import pad_routing

    routing, prompts, completions = [], [], []
    for request in outputs:
        for completion in request.outputs:
            if completion.routed_experts is None:
                raise ValueError(
                    "vLLM returned no routed experts: the engine was not created with enable_return_routed_experts"
                )
            routing.append(completion.routed_experts)
            prompts.append(len(request.prompt_token_ids))
            completions.append(len(completion.token_ids))
    return pad_routing(routing, prompts, completions)
