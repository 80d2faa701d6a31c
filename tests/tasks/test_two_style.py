"""task=two_style: the two answer styles, the warm-start mix, and the careful-style probe reward."""

import pytest

from align_kit.core.errors import ConfigError
from align_kit.rewards.correctness import Correctness
from align_kit.rewards.format import ThinkFormat
from align_kit.rewards.style import CarefulStyle, is_careful
from align_kit.tasks.two_style import SumProblem, TwoStyleTask


def test_careful_answer_adds_tens_then_units_of_each_later_term():
    problem = SumProblem((12, 34, 56))
    assert problem.prompt == "12+34+56="
    assert problem.answer == "102"
    assert problem.domain == "terms_3"
    assert problem.careful() == "<think>12+30=42,42+4=46,46+50=96,96+6=102</think>102"
    assert problem.direct() == "<think></think>102"
    assert problem.direct(99) == "<think></think>99"


@pytest.mark.parametrize(
    ("text", "careful"),
    [
        ("<think>12+30=42,42+4=46</think>46", True),
        ("<think></think>46", False),
        ("<think> </think>46", False),
        ("46", False),
        ("<think>12+30=42,42+4", True),  # truncated mid-reasoning still reasons in steps
        ("</think><think>1+2=3", True),
    ],
)
def test_is_careful(text, careful):
    assert is_careful(text) is careful


def test_both_styles_pass_the_format_reward_and_only_correctness_tells_the_guess():
    problem = SumProblem((25, 17))
    completions = [problem.careful(), problem.direct(), problem.direct(41)]
    assert ThinkFormat()(completions) == [1.0, 1.0, 1.0]
    assert Correctness()(completions, answer=["42"] * 3) == [1.0, 1.0, 0.0]
    assert CarefulStyle()(completions) == [1.0, 0.0, 0.0]


def test_careful_style_probe_weighs_nothing_by_default():
    from omegaconf import OmegaConf

    from align_kit.experiment.compose import CONF_DIR

    node = OmegaConf.load(CONF_DIR / "reward" / "careful_style.yaml")["careful_style"]
    assert node["weight"] == 0.0


def test_warm_start_mix_follows_careful_share_and_guess_accuracy():
    task = TwoStyleTask(num_train=4000, careful_share=0.1, guess_accuracy=0.25, terms=[2, 3])
    pairs = task.demonstrations()
    answers = {p.prompt: p.answer for p in task.problems("sft")}
    careful = [c for _, c in pairs if is_careful(c)]
    direct = [(prompt, c) for prompt, c in pairs if not is_careful(c)]
    assert len(careful) / len(pairs) == pytest.approx(0.1, abs=0.015)  # 4000 draws: SE 0.005
    right = [c.rsplit("</think>", 1)[1] == answers[prompt] for prompt, c in direct]
    assert sum(right) / len(right) == pytest.approx(0.25, abs=0.025)  # ~3600 draws: SE 0.007
    wrong_by = [
        abs(int(c.rsplit("</think>", 1)[1]) - int(answers[prompt]))
        for (prompt, c), ok in zip(direct, right, strict=True)
        if not ok
    ]
    assert set(wrong_by) == set(range(1, 10))
    for prompt, completion in pairs:
        if is_careful(completion):
            terms = tuple(int(t) for t in prompt[:-1].split("+"))
            assert completion == SumProblem(terms).careful()


def test_terms_are_drawn_from_the_list_and_splits_differ():
    task = TwoStyleTask(num_train=600, terms=[2, 4], min_operand=10, max_operand=20)
    problems = task.problems("train")
    counts = {k: sum(len(p.terms) == k for p in problems) for k in (2, 3, 4)}
    assert counts[3] == 0 and counts[2] > 200 and counts[4] > 200
    assert all(10 <= t <= 20 for p in problems for t in p.terms)
    assert task.problems("train", 5) != task.problems("eval", 5)
    assert task.dataset()["domain"][:3] == [p.domain for p in problems[:3]]


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"terms": [1]}, "task.terms"),
        ({"terms": []}, "task.terms"),
        ({"careful_share": 1.5}, "task.careful_share"),
        ({"guess_accuracy": -0.1}, "task.guess_accuracy"),
        ({"min_operand": 0}, "task.min_operand"),
    ],
)
def test_bad_settings_name_the_key(overrides, key):
    with pytest.raises(ConfigError, match=key):
        TwoStyleTask(**overrides).validate()


def test_cache_key_changes_with_the_mix():
    assert TwoStyleTask(careful_share=0.05).cache_key() != TwoStyleTask(careful_share=0.5).cache_key()


# --- Clip engagement at the style decision (align_kit/tasks/style_decision.py) --------------------------------------


def style_decision_metrics(old_logps: bool = True, epsilon_high: float = 0.2):
    from types import SimpleNamespace

    import torch

    from align_kit.core.hooks import LossState
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
    return StyleDecision().on_loss(trainer, state)


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


def test_two_style_task_attaches_the_style_decision_hook():
    from align_kit.tasks.style_decision import StyleDecision

    (hook,) = TwoStyleTask().trainer_hooks()
    assert isinstance(hook, StyleDecision)
