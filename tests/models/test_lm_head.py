"""The fused LM head on completion rows only (align_kit.models.lm_head.py): on a CPU it projects the kept positions
alone, and the log-probabilities and entropies are those of the full softmax, computed here from the plain logits."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, tie_word_embeddings=True,
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    return model


def fused(model, ids, labels):
    return model(input_ids=ids, labels=labels, fused_lm_head=True)


def test_cpu_head_projects_only_the_completion_rows_and_keeps_their_values(monkeypatch):
    import trl.trainer.utils as fused_module

    from align_kit.models.lm_head import completion_rows_on_cpu

    model = tiny_llama()
    ids = torch.randint(0, 40, (3, 9))
    labels = ids.clone()
    labels[:, :6] = -100  # a 6-token prompt, 3 completion tokens per row
    labels[2, 8] = -100  # one padding position
    projected = []
    original = fused_module._ChunkedLogProbFunction.apply

    def spy(hidden, *args):
        projected.append(hidden.shape[0])
        return original(hidden, *args)

    monkeypatch.setattr(fused_module._ChunkedLogProbFunction, "apply", spy)
    with torch.no_grad():
        full = fused(model, ids, labels)
        with completion_rows_on_cpu():
            compact = fused(model, ids, labels)
        logits = model(input_ids=ids).logits[:, :-1] / 0.7  # the plain forward: every position, then the softmax
    # Shifted by one: 3 x 8 positions in all, of which 3 + 3 + 2 have a kept label.
    assert projected == [24, 8]
    log_softmax = torch.log_softmax(logits.double(), dim=-1)
    kept = labels[:, 1:] != -100
    expected = log_softmax.gather(-1, labels[:, 1:].clamp(min=0).unsqueeze(-1)).squeeze(-1) * kept
    entropy = -(log_softmax.exp() * log_softmax).sum(-1) * kept
    for output in (full, compact):
        torch.testing.assert_close(output.log_probs.double(), expected, rtol=0, atol=1e-5)
        torch.testing.assert_close(output.entropy.double(), entropy, rtol=0, atol=1e-5)
    assert torch.equal(full.log_probs, compact.log_probs)


def test_the_patch_is_undone_when_the_block_ends():
    import trl.trainer.utils as fused_module

    from align_kit.models.lm_head import completion_rows_on_cpu

    original = fused_module._use_triton
    with completion_rows_on_cpu():
        assert fused_module._use_triton(torch.device("cpu")) is True
    assert fused_module._use_triton is original
    assert original(torch.device("cpu")) is False  # TRL's own answer on a CPU: the full projection


def test_gradients_match_the_full_projection():
    from align_kit.models.lm_head import completion_rows_on_cpu

    ids = torch.randint(0, 40, (2, 7))
    labels = ids.clone()
    labels[:, :4] = -100
    grads = []
    for compact in (False, True):
        model = tiny_llama()
        with completion_rows_on_cpu() if compact else torch.enable_grad():
            output = fused(model, ids, labels)
            output.log_probs.sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-5, atol=1e-6)
