"""Advice: every FIX id written in every framework's terms, merged across rules, in 18.3.8's order."""

from __future__ import annotations

import pytest

from align_kit.doctor.advice import FRAMEWORKS, PRIORITY, advise, resolve, text
from align_kit.monitor.rules import RunContext as Setup


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("fix", sorted(PRIORITY))
def test_every_fix_has_words_in_every_framework(fix, framework):
    assert text(fix, framework, Setup()).strip()


def test_the_vocabulary_and_its_priorities():
    # 18.3.8: data 1, clipping 2, KL and learning rate 3, sampling 4; 10 + 3 + 4 + 8 ids in the design's vocabulary
    # (sampling: the two setup fixes, an unfiltered sampler under the IS correction and the router loss off).
    counts = {level: sum(1 for p in PRIORITY.values() if p == level) for level in (1, 2, 3, 4)}
    assert counts == {1: 10, 2: 3, 3: 4, 4: 8}
    assert PRIORITY["unfiltered_sampler"] == PRIORITY["router_aux_off"] == 4
    assert PRIORITY["dynamic_sampling"] == 1 and PRIORITY["clip_higher"] == 2
    assert PRIORITY["lower_lr"] == 3 and PRIORITY["match_sampler_precision"] == 4


def test_the_setup_fixes_in_each_framework_s_terms():
    assert text("unfiltered_sampler", "trl", Setup()).startswith("top_p=1.0, top_k=0, min_p=None")
    assert "actor_rollout_ref.rollout.top_p=1.0" in text("unfiltered_sampler", "verl", Setup())
    assert text("unfiltered_sampler", "align_kit", Setup()).startswith("rollout.top_p=1.0")
    assert '"output_router_logits": False' in text("router_aux_off", "trl", Setup())
    assert text("router_aux_off", "openrlhf", Setup()) == "--aux_loss_coef 0"


def test_the_framework_terms_the_issue_names():
    assert "epsilon_high=0.28" in text("clip_higher", "trl", Setup())
    assert text("overlong_filter", "trl", Setup()) == "mask_truncated_completions=True"
    assert "actor_rollout_ref.actor.clip_ratio_high=0.28" in text("clip_higher", "verl", Setup())
    assert "algorithm.filter_groups.enable=True" in text("dynamic_sampling", "verl", Setup())
    assert text("clip_higher", "align_kit", Setup()).startswith("clip=clip_higher")
    assert "sampling=dynamic" in text("dynamic_sampling", "align_kit", Setup())
    assert "overlong=filter" in text("overlong_filter", "align_kit", Setup())
    assert "--eps_clip_low_high 0.2 0.28" in text("clip_higher", "openrlhf", Setup())
    # A framework without the knob says so in words.
    assert "no dynamic sampling" in text("dynamic_sampling", "trl", Setup())
    assert "no routing replay" in text("routing_replay", "trl", Setup())
    # An unknown framework falls back to plain words.
    assert text("clip_higher", "somewhere", Setup()) == text("clip_higher", "generic", Setup())


def test_ordered_by_priority_then_merged_across_rules():
    fired = [
        ("entropy_collapse", ("clip_higher", "lower_lr")),  # clipping 2, KL/lr 3
        ("zero_std_groups", ("dynamic_sampling", "easier_data")),  # data 1, data 1
        ("entropy_drop", ("clip_higher",)),
        ("logp_mismatch", ("match_sampler_precision",)),  # sampling 4
    ]
    advice = advise(fired, "trl", Setup())
    assert [a.fix for a in advice] == [
        "dynamic_sampling",
        "easier_data",
        "clip_higher",
        "lower_lr",
        "match_sampler_precision",
    ]
    assert [a.priority for a in advice] == [1, 1, 2, 3, 4]
    # clip_higher answers both entropy rules, once.
    assert advice[2].rules == ("entropy_collapse", "entropy_drop")


def test_what_is_on_is_skipped_or_stepped_up():
    on = Setup(clip_higher=True, eps_high=0.28, kl_on=True, beta=0.04, overlong_filter=True, learning_rate=1e-5)
    assert resolve("clip_higher", on) == "raise_eps_high"
    assert resolve("add_kl", on) == "raise_kl"
    assert resolve("overlong_filter", on) is None
    advice = advise([("r", ("clip_higher", "add_kl", "overlong_filter", "lower_lr"))], "trl", on)
    assert [a.fix for a in advice] == ["raise_eps_high", "raise_kl", "lower_lr"]
    # eps_high 0.28 -> max(0.3, 0.28 + 0.05) = 0.33; beta 0.04 -> 2 x 0.04 = 0.08; lr 1e-5 -> half = 5e-06.
    assert [a.text for a in advice] == [
        "epsilon_high=0.33 (now 0.28)",
        "beta=0.08 (now 0.04)",
        "learning_rate=5e-06 (now 1e-05)",
    ]
    # Below DAPO's 0.28 the next step is 0.28 itself.
    assert text("raise_eps_high", "verl", Setup(clip_higher=True, eps_high=0.25)).startswith(
        "actor_rollout_ref.actor.clip_ratio_high=0.28"
    )


def test_the_length_budget_is_doubled_in_the_runs_terms():
    # 512 x 2 = 1024
    assert text("raise_max_length", "verl", Setup(max_completion_length=512)) == "data.max_response_length=1024"
    assert text("raise_max_length", "trl", Setup(max_completion_length=512)) == "max_completion_length=1024"


def test_nothing_fired_no_advice():
    assert advise([], "trl", Setup()) == []


def test_raise_eps_high_without_clip_higher_is_clip_higher_first():
    # ENTROPY_FIXES name both; with symmetric clipping the first step is Clip-Higher itself, once.
    advice = advise([("entropy_collapse", ("clip_higher", "raise_eps_high", "lower_lr"))], "trl", Setup())
    assert [a.fix for a in advice] == ["clip_higher", "lower_lr"]
