"""R3 from vLLM: routed experts requested from the engine TRL builds, captured from its outputs, laid out like
TRL's batch. vLLM's objects are stand-ins with the fields vLLM 0.31 documents (the CPU build cannot return
routed experts)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from align_kit.components.vllm_routing import capture_outputs, returning_routed_experts, routing_from_outputs


def completion(tokens: int, routing):
    return SimpleNamespace(token_ids=list(range(tokens)), routed_experts=routing)


def test_routing_of_each_completion_lands_after_its_left_padded_prompt():
    # Two requests: a 2-token prompt with a 2-token completion, a 1-token prompt with a 3-token completion.
    # vLLM routes every forwarded token: prompt + completion - 1 of them (the last is never forwarded).
    # 1 layer, top-2; each token's experts are (10 * request + token, 0).
    first = np.array([[[10, 0]], [[11, 0]], [[12, 0]]])  # 2 + 2 - 1 tokens
    second = np.array([[[20, 0]], [[21, 0]], [[22, 0]]])  # 1 + 3 - 1 tokens
    outputs = [
        SimpleNamespace(prompt_token_ids=[1, 2], outputs=[completion(2, first)]),
        SimpleNamespace(prompt_token_ids=[3], outputs=[completion(3, second)]),
    ]
    indices, valid = routing_from_outputs(outputs)
    # Batch layout: prompts right-aligned at width 2, completions after them, width 2 + 3 = 5.
    assert indices.shape == (2, 5, 1, 2)
    assert indices[:, :, 0, 0].tolist() == [[10, 11, 12, 0, 0], [0, 20, 21, 22, 0]]
    assert valid.tolist() == [[True, True, True, False, False], [False, True, True, True, False]]


def test_an_engine_without_routed_experts_is_named():
    outputs = [SimpleNamespace(prompt_token_ids=[1], outputs=[completion(2, None)])]
    with pytest.raises(ValueError, match="enable_return_routed_experts"):
        routing_from_outputs(outputs)


def test_generate_calls_are_captured_and_the_engine_restored():
    llm = SimpleNamespace(generate=lambda prompts, params=None: [f"out:{p}" for p in prompts])
    original = llm.generate
    with capture_outputs(llm) as outputs:
        assert llm.generate(["a", "b"]) == ["out:a", "out:b"]
        llm.generate(["c"])
    assert outputs == ["out:a", "out:b", "out:c"]
    assert llm.generate is original


def test_trls_engine_is_built_with_routed_experts(monkeypatch):
    from trl.generation import vllm_generation

    built = []
    monkeypatch.setattr(vllm_generation, "LLM", lambda *args, **kwargs: built.append(kwargs), raising=False)
    engine = vllm_generation.LLM
    with returning_routed_experts():
        vllm_generation.LLM(model="m", seed=0)
    vllm_generation.LLM(model="m")
    assert built == [{"model": "m", "seed": 0, "enable_return_routed_experts": True}, {"model": "m"}]
    assert vllm_generation.LLM is engine


@pytest.mark.parametrize(
    ("mode", "use_vllm", "requested"), [("r3", True, True), ("r2", True, False), ("r3", False, False)]
)
def test_only_r3_with_vllm_asks_trls_engine_for_routed_experts(monkeypatch, mode, use_vllm, requested):
    from trl.generation import vllm_generation

    from align_kit.components.routing_replay import RouteReplay, RoutingReplay

    built = []
    monkeypatch.setattr(vllm_generation, "LLM", lambda *args, **kwargs: built.append(kwargs), raising=False)
    # The hook's context wraps TRL's __init__, where TRL builds its colocated engine.
    with RouteReplay(RoutingReplay(mode=mode)).building(SimpleNamespace(use_vllm=use_vllm)):
        vllm_generation.LLM(model="m")
    assert built == [{"model": "m", "enable_return_routed_experts": True} if requested else {"model": "m"}]
