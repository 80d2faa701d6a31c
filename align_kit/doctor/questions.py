"""The central questions a diagnosis answers (does it learn, is there signal, is it truncated, is entropy
collapsing, is it stable) and the rules that answer each: a question is answered when one of its rules judged the
history. `healthy` needs the first one answered: a run whose learning nobody judged is not shown healthy."""

from __future__ import annotations

from collections.abc import Iterable

from align_kit.monitor.rules import RuleCoverage

LEARNS = "does it learn"
# Question -> the rules that answer it. Does it learn: the reward's trend (flat, falling) on the run's own noise or
# its stated range; the other four as the chapters group their signs (16.6, 18.3).
QUESTIONS: dict[str, tuple[str, ...]] = {
    LEARNS: ("reward_plateau", "reward_decline"),
    "is there signal": ("no_signal", "zero_std_groups", "zero_advantage", "grad_norm_vanishing"),
    "is it truncated": ("length_near_max", "length_pinned", "all_truncated"),
    "is entropy collapsing": ("entropy_collapse", "entropy_drop", "entropy_decline", "entropy_exploding"),
    "is it stable": (
        "non_finite",
        "kl_rising",
        "kl_rising_flat_reward",
        "policy_ratio_drift",
        "policy_ratio_noise",
        "clip_ratio_rising",
        "logp_mismatch",
        "sampler_gap_drift",
    ),
}


def answered(coverage: Iterable[RuleCoverage]) -> dict[str, bool]:
    """Question -> whether one of its rules judged."""
    judged = {item.rule for item in coverage if item.judged}
    return {question: any(rule in judged for rule in rules) for question, rules in QUESTIONS.items()}


def why_unanswered(question: str, coverage: Iterable[RuleCoverage]) -> str:
    """The reasons its rules gave for not judging, one per distinct reason: `reward_plateau: needs ...`."""
    reasons: dict[str, list[str]] = {}
    for item in coverage:
        if item.rule in QUESTIONS[question] and not item.judged:
            reasons.setdefault(item.reason, []).append(item.rule)
    return "; ".join(f"{', '.join(rules)}: {reason}" for reason, rules in reasons.items())


def questions_line(answers: dict[str, bool]) -> str:
    """`answered: does it learn, is there signal; not answered: is it truncated, ...` for the verdict line."""
    yes = [question for question, done in answers.items() if done]
    no = [question for question, done in answers.items() if not done]
    parts = [f"answered: {', '.join(yes)}" if yes else "answered: none"]
    if no:
        parts.append(f"not answered: {', '.join(no)}")
    return "; ".join(parts)
