"""Clip engagement at the style decision of task=two_style (the token after <think>), worked out by hand."""

import pytest


def style_decision_metrics(old_logps: bool = True, epsilon_high: float = 0.2):
    from types import SimpleNamespace

    import torch

    from align_kit.core.hooks import LossState, on_host
    from align_kit.tasks.style_decision import StyleDecision

    OPEN, CLOSE, DIGIT, PAD = 5, 6, 20, 0
    tokenizer = SimpleNamespace(
        convert_tokens_to_ids=lambda tokens: [{"<think>": OPEN, "</think>": CLOSE}[t] for t in tokens]
    )
    trainer = SimpleNamespace(processing_class=tokenizer, epsilon_high=epsilon_high)
    # Rows: careful (A>0), careful (A>0), careful (A<0), direct (A>0), no <think> at all (A>0), <think> as the last
    # token (no decision in range, A>0). The decision is at index 1 in the first four rows.
    ids = torch.tensor(
        [
            [OPEN, DIGIT, DIGIT, CLOSE],
            [OPEN, DIGIT, CLOSE, DIGIT],
            [OPEN, DIGIT, CLOSE, PAD],
            [OPEN, CLOSE, DIGIT, PAD],
            [DIGIT, DIGIT, DIGIT, DIGIT],
            [DIGIT, DIGIT, DIGIT, OPEN],
        ]
    )
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1]])
    old = torch.full(ids.shape, 0.5)
    new = torch.full(ids.shape, 0.5)
    old[:3, 1] = torch.tensor([0.05, 0.2, 0.02])  # the three careful decisions
    new[:3, 1] = torch.tensor([0.065, 0.22, 0.03])  # ratios 1.3, 1.1, 1.5
    inputs = {"completion_ids": ids, "completion_mask": mask, "advantages": torch.tensor([1.0, 0.5, -1, 1, 1, 1])}
    if old_logps:
        inputs["old_per_token_logps"] = old.log()
    state = LossState(inputs=inputs, mode="train", forward=(new.log(), torch.zeros(ids.shape), None))
    return on_host(StyleDecision().on_loss(trainer, state))  # the hook defers its values to the logged step


@pytest.mark.parametrize(("epsilon_high", "stopped"), [(0.2, 0.5), (0.28, 0.5), (0.35, 0.0)])
def test_style_decision_metrics_by_hand(epsilon_high, stopped):
    metrics = style_decision_metrics(epsilon_high=epsilon_high)
    # Careful decisions: old probabilities 0.05, 0.2, 0.02 (mean 0.09; two of three below 0.1). Positive advantage:
    # the first two, ratios 1.3 and 1.1: the bound 1.2 or 1.28 stops one of them, 1.35 neither.
    assert metrics["style/careful_decision_prob"] == pytest.approx(0.09)
    assert metrics["style/careful_decision_low_prob"] == pytest.approx(2 / 3)
    assert metrics["style/careful_decision_upper_bound"] == pytest.approx(stopped)


def test_style_decision_on_policy_reaches_no_bound():
    metrics = style_decision_metrics(old_logps=False)
    assert metrics["style/careful_decision_upper_bound"] == 0.0
    assert metrics["style/careful_decision_prob"] == pytest.approx((0.065 + 0.22 + 0.03) / 3)
