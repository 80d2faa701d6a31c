"""task=two_style: the two answer styles, the warm-start mix, its settings and cache key, and the hook it attaches."""

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


def test_both_styles_pass_the_format_reward_and_only_correctness_tells_the_guess():
    problem = SumProblem((25, 17))
    completions = [problem.careful(), problem.direct(), problem.direct(41)]
    assert ThinkFormat()(completions) == [1.0, 1.0, 1.0]
    assert Correctness()(completions, answer=["42"] * 3) == [1.0, 1.0, 0.0]
    assert CarefulStyle()(completions) == [1.0, 0.0, 0.0]


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


def test_two_style_task_attaches_the_style_decision_hook():
    from align_kit.tasks.style_decision import StyleDecision

    (hook,) = TwoStyleTask().trainer_hooks()
    assert isinstance(hook, StyleDecision)
