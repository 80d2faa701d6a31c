"""Routing Replay on tiny random MoE models of every supported family (built from config, no download).

Expected numbers are worked out by hand in comments or recomputed by a second, simpler implementation.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

from align_kit.components.router_capture import RouterHooks, UnsupportedModelError, flip_metrics, pad_routing
from align_kit.core.hooks import on_host
from align_kit.models.moe_routers import is_moe_model

VOCAB = 64
COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    num_experts_per_tok=2,
    pad_token_id=0,
)
FAMILIES = {
    "qwen3_moe": lambda: transformers.Qwen3MoeConfig(
        **COMMON, head_dim=8, num_experts=8, moe_intermediate_size=32, norm_topk_prob=True
    ),
    "qwen2_moe": lambda: transformers.Qwen2MoeConfig(
        **COMMON, num_experts=8, moe_intermediate_size=32, shared_expert_intermediate_size=32, norm_topk_prob=False
    ),
    "olmoe": lambda: transformers.OlmoeConfig(**COMMON, num_experts=8, norm_topk_prob=False, eos_token_id=None),
    "mixtral": lambda: transformers.MixtralConfig(**COMMON, num_local_experts=8),
}

RENORMALISES = {"qwen3_moe": True, "qwen2_moe": False, "olmoe": False, "mixtral": True}


def tiny(family: str = "qwen3_moe", seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(FAMILIES[family](), dtype=torch.float32).eval()


def token_logps(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=ids).logits[:, :-1]
    return logits.log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]


def random_ids(batch: int, seq_len: int, seed: int) -> torch.Tensor:
    return torch.randint(1, VOCAB, (batch, seq_len), generator=torch.Generator().manual_seed(seed))


def drift(model: torch.nn.Module, steps: int = 3, lr: float = 1.0) -> None:
    """A few large SGD steps of language modelling on random tokens: enough to move the routers."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for step in range(steps):
        ids = random_ids(8, 12, seed=100 + step)
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def routers(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for m in model.modules() if type(m).__name__.endswith("TopKRouter")]


def experts_inputs(model: torch.nn.Module):
    """Collect, per MoE layer, what the experts module actually receives (a second, independent view): the router's
    input hidden states, the expert indices and the gate weights."""
    seen: dict[tuple[str, int], torch.Tensor] = {}
    experts = [m for m in model.modules() if type(m).__name__.endswith("Experts")]

    def watch(layer: int, what: tuple[str, ...]):
        def hook(module, args):
            for name, value in zip(what, args, strict=False):
                seen[name, layer] = value.detach().clone()

        return hook

    handles = [m.register_forward_pre_hook(watch(i, ("hidden",))) for i, m in enumerate(routers(model))]
    handles += [m.register_forward_pre_hook(watch(i, ("_", "used", "weights"))) for i, m in enumerate(experts)]
    return seen, handles


def recorded(hooks: RouterHooks, model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad(), hooks.record():
        model(input_ids=ids)
    return hooks.take()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_replay_without_update_reproduces_logps_exactly(family):
    model = tiny(family)
    hooks = RouterHooks(model)
    ids = random_ids(3, 10, seed=1)
    with torch.no_grad(), hooks.record():
        logps_recorded = token_logps(model, ids)
    routing = hooks.take()
    # 2 MoE layers x top-2, 8 experts fit uint8: 2 * 2 * 1 byte per token.
    assert routing.shape == (3, 10, 2, 2) and routing.dtype == torch.uint8 and hooks.bytes_per_token == 4
    with torch.no_grad(), hooks.replay(routing):
        logps_replayed = token_logps(model, ids)
    assert torch.equal(logps_replayed, logps_recorded)
    assert on_host(hooks.pop_metrics()) == {
        "routing/flip_rate": 0.0,
        "routing/tokens_any_flip": 0.0,
        "routing/replayed_fraction": 1.0,
    }


def set_flip_metrics(current: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """A plain-Python second implementation over all tokens: (flip_rate, tokens_any_flip)."""
    pairs = flipped_pairs = flipped_tokens = tokens = 0
    for b in range(current.shape[0]):
        for s in range(current.shape[1]):
            flips = [
                set(current[b, s, layer].tolist()) != set(reference[b, s, layer].tolist())
                for layer in range(current.shape[2])
            ]
            pairs, flipped_pairs = pairs + len(flips), flipped_pairs + sum(flips)
            tokens, flipped_tokens = tokens + 1, flipped_tokens + any(flips)
    return flipped_pairs / pairs, flipped_tokens / tokens


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_after_updates_routing_flips_and_replay_forces_the_recorded_experts(family):
    model = tiny(family)
    hooks = RouterHooks(model)
    ids = random_ids(4, 8, seed=2)
    old = recorded(hooks, model, ids)
    drift(model)
    new = recorded(hooks, model, ids)

    with torch.no_grad(), hooks.observe(old):
        model(input_ids=ids)
    observed = on_host(hooks.pop_metrics())
    flip_rate, tokens_any_flip = set_flip_metrics(new, old)
    assert flip_rate > 0 and "routing/replayed_fraction" not in observed
    assert observed["routing/flip_rate"] == pytest.approx(flip_rate)
    assert observed["routing/tokens_any_flip"] == pytest.approx(tokens_any_flip)

    # Replay everywhere except the last position (as after generation): the experts module receives the recorded
    # selection at valid positions and the router's own choice at the last one.
    valid = torch.ones(4, 8, dtype=torch.bool)
    valid[:, -1] = False
    seen, handles = experts_inputs(model)
    with torch.no_grad(), hooks.replay(old, valid=valid):
        model(input_ids=ids)
    for handle in handles:
        handle.remove()
    for layer, router in enumerate(routers(model)):
        used = seen["used", layer].view(4, 8, 2)
        assert torch.equal(used[:, :-1], old[:, :-1, layer].long())
        assert torch.equal(used[:, -1], new[:, -1, layer].long())
        # Gate weights: the current softmax over all experts, at the experts used, renormalised where the family does.
        probs = torch.softmax(seen["hidden", layer].reshape(-1, 32) @ router.weight.T, dim=-1)
        expected = probs.gather(-1, seen["used", layer])
        if RENORMALISES[family]:
            expected = expected / expected.sum(-1, keepdim=True)
        torch.testing.assert_close(seen["weights", layer].float(), expected)
    # 4 x 8 tokens, all masked in, 4 x 7 replayed: 28 / 32.
    assert on_host(hooks.pop_metrics())["routing/replayed_fraction"] == 0.875


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_router_weights_get_gradients_under_replay(family):
    model = tiny(family)
    hooks = RouterHooks(model)
    ids = random_ids(4, 8, seed=3)
    old = recorded(hooks, model, ids)
    drift(model)
    with hooks.replay(old):
        loss = -token_logps(model, ids).mean()
    loss.backward()
    for router in routers(model):
        assert router.weight.grad is not None and router.weight.grad.abs().sum() > 0


def test_replay_survives_gradient_checkpointing_recompute():
    """The checkpointed layers re-run in backward, after the replay block exited: the gradients must equal those of
    the same replay without checkpointing."""
    grads = {}
    for checkpointing in (False, True):
        model = tiny()
        hooks = RouterHooks(model)
        ids = random_ids(4, 8, seed=4)
        old = recorded(hooks, model, ids)
        drift(model)
        model.train()
        if checkpointing:
            model.gradient_checkpointing_enable()
        with hooks.replay(old):
            loss = -token_logps(model, ids).mean()
        loss.backward()  # outside the block, as Trainer.training_step does
        grads[checkpointing] = [p.grad.clone() for p in model.parameters()]
    for plain, recomputed in zip(grads[False], grads[True], strict=True):
        torch.testing.assert_close(recomputed, plain, rtol=0, atol=1e-6)


def test_routing_travels_with_its_sample():
    model = tiny()
    hooks = RouterHooks(model)
    ids = random_ids(6, 9, seed=5)
    old = recorded(hooks, model, ids)
    drift(model)
    with torch.no_grad():
        own = token_logps(model, ids)
        with hooks.replay(old):
            reference = token_logps(model, ids)
    assert not torch.allclose(own, reference)  # replay changes the forward, so misplaced routing would show

    perm = torch.tensor([4, 0, 5, 2, 1, 3])
    with torch.no_grad():
        with hooks.replay(old[perm]):
            permuted = token_logps(model, ids[perm])
        parts = []
        for rows in (perm[:2], perm[2:]):
            with hooks.replay(old[rows]):
                parts.append(token_logps(model, ids[rows]))
        with hooks.replay(old[perm]):  # TRL's chunked forwards: consecutive rows of one routing tensor
            chunks = [token_logps(model, ids[perm][i : i + 2]) for i in range(0, 6, 2)]
    for result in (permuted, torch.cat(parts), torch.cat(chunks)):
        torch.testing.assert_close(result, reference[perm], rtol=0, atol=1e-5)


def test_generate_recording_matches_a_full_forward_position_by_position():
    model = tiny()
    hooks = RouterHooks(model)
    lengths = [3, 5, 7]
    prompt_ids = torch.zeros(3, 7, dtype=torch.long)  # left-padded with pad id 0
    prompt_mask = torch.zeros(3, 7, dtype=torch.long)
    for row, length in enumerate(lengths):
        prompt_ids[row, 7 - length :] = random_ids(1, length, seed=10 + row)
        prompt_mask[row, 7 - length :] = 1
    with torch.no_grad(), hooks.record():
        out = model.generate(
            input_ids=prompt_ids, attention_mask=prompt_mask, max_new_tokens=5, do_sample=False, eos_token_id=None
        )
    routing, valid = hooks.take_generated()
    assert out.shape == (3, 12) and routing.shape == (3, 12, 2, 2)
    assert valid[:, :-1].all() and not valid[:, -1].any()  # the last generated token is never forwarded

    # One forward over prompt + completion, with the positions generate uses for left-padded rows.
    mask = torch.cat([prompt_mask, torch.ones(3, 5, dtype=torch.long)], 1)
    with torch.no_grad(), hooks.record():
        model(input_ids=out, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0))
    full = hooks.take()
    compared = mask.bool() & valid
    assert torch.equal(routing[compared], full[compared])

    # The same routing as unpadded per-sequence arrays (vLLM's shape: p_i + c_i - 1 tokens) maps back in place.
    per_sequence = [routing[row, 7 - length : 11] for row, length in enumerate(lengths)]
    padded, padded_valid = pad_routing(per_sequence, lengths, [5, 5, 5])
    assert torch.equal(padded_valid, mask.bool() & valid)
    assert torch.equal(padded[padded_valid], routing[padded_valid])


def test_pad_routing_places_each_token_by_hand():
    # Token t of sequence i holds 10 * (i + 1) + t in every (layer, k) slot. Prompt lengths (2, 4), completion
    # lengths (3, 1), so P = 4, C = 3, width 7; each array leaves out its last token (p + c - 1 rows).
    per_sequence = [np.full((4, 2, 2), 10, dtype=np.int32), np.full((4, 2, 2), 20, dtype=np.int32)]
    for array in per_sequence:
        array += np.arange(4, dtype=np.int32)[:, None, None]
    indices, valid = pad_routing(per_sequence, [2, 4], [3, 1])
    # seq 0: pads at 0-1, prompt tokens 0-1 at 2-3, completion tokens 2-3 at 4-5, token 4 (never forwarded) at 6.
    # seq 1: prompt tokens 0-3 at 0-3, completion token 4 (never forwarded) at 4, pads at 5-6.
    assert indices[..., 0, 0].tolist() == [[0, 0, 10, 11, 12, 13, 0], [20, 21, 22, 23, 0, 0, 0]]
    assert valid.int().tolist() == [[0, 0, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0, 0]]
    assert indices.dtype == torch.int32 and indices.shape == (2, 7, 2, 2)
    with pytest.raises(ValueError, match="expected 4 or 5"):
        pad_routing([np.zeros((3, 2, 2))], [2], [3])


def test_dense_model_is_rejected_naming_the_supported_routers():
    config = transformers.Qwen3Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8,
    )  # fmt: skip
    dense = transformers.AutoModelForCausalLM.from_config(config)
    with pytest.raises(UnsupportedModelError) as error:
        RouterHooks(dense)
    assert isinstance(error.value, ValueError)
    for name in ("Qwen3MoeTopKRouter", "Qwen2MoeTopKRouter", "OlmoeTopKRouter", "MixtralTopKRouter"):
        assert name in str(error.value)
    assert not is_moe_model(dense) and not is_moe_model(config)
    assert all(is_moe_model(make()) for make in FAMILIES.values()) and is_moe_model(tiny("mixtral"))


def test_flip_metrics_by_hand():
    # 2 sequences x 3 tokens, 2 layers, top-2. Reference and current selection per token, [layer 0, layer 1]:
    reference = torch.tensor(
        [
            [[[0, 1], [2, 3]], [[1, 2], [3, 4]], [[0, 1], [6, 7]]],
            [[[4, 5], [0, 7]], [[2, 6], [1, 3]], [[0, 1], [0, 1]]],
        ]
    )
    current = torch.tensor(
        [
            [[[5, 6], [4, 5]], [[2, 1], [4, 3]], [[0, 5], [7, 6]]],  # (0,0) both flip; (0,1) reordered only; (0,2) l0
            [[[4, 3], [0, 6]], [[6, 2], [3, 1]], [[2, 3], [2, 3]]],  # (1,0) both flip; (1,1) reordered; (1,2) both
        ]
    )
    mask = torch.tensor([[0, 1, 1], [1, 1, 0]])
    # Masked-in tokens (0,1) (0,2) (1,0) (1,1): 8 (token, layer) pairs, flips at (0,2,l0) (1,0,l0) (1,0,l1) = 3/8;
    # tokens with a flip: (0,2) and (1,0) = 2/4.
    assert on_host(flip_metrics(current, reference, mask)) == {
        "routing/flip_rate": 0.375,
        "routing/tokens_any_flip": 0.5,
    }
    # Without (1,1) (no reference there): 6 pairs, 3 flips = 1/2; 2 of 3 tokens flip.
    valid = torch.tensor([[1, 1, 1], [1, 0, 1]], dtype=torch.bool)
    metrics = on_host(flip_metrics(current, reference, mask, valid))
    assert metrics == {"routing/flip_rate": 0.5, "routing/tokens_any_flip": pytest.approx(2 / 3)}
    # No mask: all 6 tokens, 12 pairs; flips (0,0)x2 (0,2)x1 (1,0)x2 (1,2)x2 = 7/12; tokens 4/6.
    assert on_host(flip_metrics(current, reference)) == {
        "routing/flip_rate": pytest.approx(7 / 12),
        "routing/tokens_any_flip": pytest.approx(4 / 6),
    }


def test_misuse_is_reported():
    model = tiny()
    hooks = RouterHooks(model)
    routing = recorded(hooks, model, random_ids(2, 6, seed=6))
    with pytest.raises(ValueError, match="does not fit"), torch.no_grad(), hooks.replay(routing):
        model(input_ids=random_ids(2, 7, seed=6))
    ids = random_ids(2, 6, seed=6)
    with torch.no_grad(), hooks.replay(routing):
        with pytest.raises(RuntimeError, match="one mode at a time"), hooks.observe(routing):
            pass
        model(input_ids=ids)  # the outer block still replays its own routing
    assert on_host(hooks.pop_metrics())["routing/replayed_fraction"] == 1.0
    with pytest.raises(ValueError, match=r"routing must be \[batch, seq_len, 2, 2\]"), hooks.replay(routing[:, :, :1]):
        pass
    hooks.close()
    with torch.no_grad(), hooks.record():
        model(input_ids=ids)
    with pytest.raises(RuntimeError, match="no routing recorded"):
        hooks.take()
