"""The replay: verdicts, the timeline, the reward scale and the run's context, on histories built by hand."""

from __future__ import annotations

import math

from align_kit.doctor.diagnose import SCALE_FREE, diagnose, worst
from align_kit.monitor.rules import RunContext
from tests.doctor.histories import history, series

run_context = RunContext.from_stated


def test_a_nan_loss_fails_on_a_single_row():
    diagnosis = diagnose(history([{"loss": math.nan, "grad_norm": 0.5}]))
    assert diagnosis.verdict == "failing" and diagnosis.exit_code == 3
    assert [(a.rule, a.step, a.severity) for a in diagnosis.alerts] == [("non_finite", 1, "failing")]
    # non_finite's fixes (lower_lr, fix_reward) in 18.3.8 order: fix_reward is data (1), lower_lr is KL/lr (3).
    assert [a.fix for a in diagnosis.advice] == ["fix_reward", "lower_lr"]


def test_no_rule_could_judge_is_unjudged_never_healthy_nor_a_warning():
    # Read, but nothing judged: neither a healthy the doctor never established nor a warning nothing raised.
    diagnosis = diagnose(history([{"learning_rate": 1e-6}] * 5))
    assert diagnosis.verdict == "unjudged" and diagnosis.exit_code == 4
    assert "no rule could judge" in diagnosis.summary
    assert not any(item.judged for item in diagnosis.coverage)
    assert diagnosis.alerts == [] and diagnosis.advice == []


def test_healthy_says_how_many_rules_judged():
    # 30 rows: reward rising 0.30 -> 0.59 in steps of 0.01 (never below its best), entropy flat at 1.0, finite loss.
    rows = [{"reward": 0.30 + 0.01 * i, "entropy": 1.0, "loss": 0.1, "grad_norm": 0.5} for i in range(30)]
    diagnosis = diagnose(history(rows))
    judged = sum(item.judged for item in diagnosis.coverage)
    assert diagnosis.verdict == "healthy" and diagnosis.exit_code == 0
    assert judged >= 4  # non_finite, entropy_collapse, entropy_drop, entropy_decline, reward_decline at least
    # Reward (30 points): does it learn; grad_norm: signal; entropy; loss: stable (non_finite); no length logged.
    assert diagnosis.summary == (
        f"healthy: {judged} of {len(diagnosis.coverage)} rules judged, none fired; answered: does it learn, is there "
        "signal, is entropy collapsing, is it stable; not answered: is it truncated"
    )


def test_a_log_action_alert_is_a_note():
    # Entropy 1.0 x 10 then 0.55 x 10: the 10-point mean after j low rows is 1 - 0.045 j, below
    # (1 - 0.4) x 1.0 = 0.6 first at j = 9 (step 19): entropy_decline (action log) fires there; the collapse
    # threshold 0.5 and the drop threshold 0.5 x 1.0 are never crossed (lowest mean 0.55).
    diagnosis = diagnose(history(series("entropy", [1.0] * 10 + [0.55] * 10, loss=0.1)))
    assert [(a.rule, a.step, a.action) for a in diagnosis.alerts] == [("entropy_decline", 19, "log")]
    assert diagnosis.counted == [] and diagnosis.advice == []
    # Nothing counted, but no reward is logged: whether the run learns was not judged, so it is not shown healthy.
    assert diagnosis.verdict == "unjudged" and diagnosis.exit_code == 4
    assert diagnosis.summary.startswith("unjudged: nothing fired (")
    assert "but whether the run learns could not be judged (reward_decline, reward_plateau: lacks reward)" in (
        diagnosis.summary
    )
    assert diagnosis.summary.endswith("not answered: does it learn, is there signal, is it truncated")


def test_clip_higher_already_on_advises_a_higher_eps_high_in_trl_terms():
    # Entropy 1.0 x 10 then 0.3 x 10. Smoothed (10 points) after j low rows: 1 - 0.07 j.
    # entropy_drop: below 0.5 x 1.0 first at j = 8 (step 18); entropy_collapse judges from 20 points: recent 0.3 <
    # 0.5 x early 1.0 at step 20; entropy_decline (log): below 0.6 at j = 6 (step 16).
    rows = series("entropy", [1.0] * 10 + [0.3] * 10, loss=0.1)
    diagnosis = diagnose(history(rows, context={"epsilon": 0.2, "epsilon_high": 0.28, "learning_rate": 1e-6}))
    assert [(a.rule, a.step) for a in diagnosis.alerts] == [
        ("entropy_decline", 16),
        ("entropy_drop", 18),
        ("entropy_collapse", 20),
    ]
    assert diagnosis.verdict == "failing"  # entropy_collapse is failing
    # clip_higher is on (0.28 > 0.2): raise eps_high to max(0.3, 0.28 + 0.05) = 0.33; lr 1e-6 halved = 5e-07.
    assert [(a.fix, a.text, a.rules) for a in diagnosis.advice] == [
        ("raise_eps_high", "epsilon_high=0.33 (now 0.28)", ("entropy_drop", "entropy_collapse")),
        ("lower_lr", "learning_rate=5e-07 (now 1e-06)", ("entropy_drop", "entropy_collapse")),
    ]


def test_the_same_run_in_verl_terms():
    rows = series("entropy", [1.0] * 10 + [0.3] * 10, loss=0.1)
    diagnosis = diagnose(history(rows, framework="verl"))
    assert diagnosis.advice[0].text.startswith("actor_rollout_ref.actor.clip_ratio_low=0.2 ")
    assert diagnosis.advice[0].text.endswith("actor_rollout_ref.actor.clip_ratio_high=0.28")


def _falling(high: float, low: float) -> list[dict[str, float]]:
    return series("reward", [high] * 20 + [low] * 20, loss=0.1)


def test_rewards_without_a_stated_scale_are_judged_against_their_own_spread_in_0_1_or_not():
    # No range stated, none assumed from the values: reward_decline reads the run's own noise. 4.0 x 20 then
    # 1.0 x 20: after j low rows the latest 20 points (mean 4 - 0.15 j, variance j (20 - j) 9 / 380) lie below the
    # first 20 (all 4.0) by 0.15 j / sqrt(j (20 - j) 9 / 7600) standard errors: 2.85 at j = 6, 3.20 at j = 7 (step
    # 27), past FALL_T = 3. The same run on [0, 1] (0.8 then 0.2, i.e. x / 5): the same t, the same step.
    for high, low in ((4.0, 1.0), (0.8, 0.2)):
        diagnosis = diagnose(history(_falling(high, low)))
        assert [(a.rule, a.step, a.words["basis"]) for a in diagnosis.alerts] == [("reward_decline", 27, "spread")]
        coverage = {item.rule: item for item in diagnosis.coverage}
        assert coverage["reward_plateau"].judged and coverage["reward_decline"].judged  # on the run's own noise
        assert SCALE_FREE in diagnosis.notes


def test_a_stated_scale_judges_them():
    # reward_max 5: threshold best 4.0 - 0.1 x 5 = 3.5; 20-point mean 4 - 0.15 j < 3.5 first at j = 4 (step 24).
    diagnosis = diagnose(history(_falling(4.0, 1.0)), reward_max=5.0)
    assert [(a.rule, a.step) for a in diagnosis.alerts] == [("reward_decline", 24)]
    assert diagnosis.verdict == "failing"
    same = diagnose(history(_falling(4.0, 1.0), context={"reward_max": 5.0}))
    assert [(a.rule, a.step) for a in same.alerts] == [("reward_decline", 24)]
    assert SCALE_FREE not in same.notes


def test_run_context_from_what_the_log_states():
    context = run_context({"epsilon": 0.2, "epsilon_high": 0.28, "beta": 0.04, "max_completion_length": 512})
    assert context.clip_higher and not context.sequence_clip and context.eps_high == 0.28
    assert context.kl_on and context.max_completion_length == 512
    gspo = run_context({"importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4, "beta": 0.0})
    assert gspo.sequence_clip and not gspo.clip_higher and not gspo.kl_on
    nodes = run_context({"choices": {"clip": "clip_higher", "sampling": "dynamic", "kl": "none", "advantage": "ngrpo"}})
    assert nodes.clip_higher and nodes.dynamic_sampling and not nodes.kl_on and nodes.advantage == "ngrpo"
    # The caller's value wins over the log's.
    assert run_context({"max_completion_length": 512}, max_completion_length=256).max_completion_length == 256


def test_the_worst_verdict_decides():
    assert worst(["healthy", "failing", "warning"]) == "failing"
    assert worst(["healthy", "warning"]) == "warning"
    assert worst(["healthy"]) == "healthy"
    # A run nothing judged keeps a set from being called healthy; any warning outranks it.
    assert worst(["healthy", "unjudged"]) == "unjudged"
    assert worst(["unjudged", "warning"]) == "warning"


def test_one_row_at_the_reward_minimum_with_every_group_flat_fails():
    # A pasted excerpt of one row: reward 0.0, the minimum of the stated [0, 1], and every group flat (1.0).
    row = {"reward": 0.0, "frac_reward_zero_std": 1.0, "loss": 0.0}
    diagnosis = diagnose(history([row], context={"reward_max": 1.0, "reward_min": 0.0}))
    assert diagnosis.verdict == "failing"
    assert "no_signal" in {alert.rule for alert in diagnosis.counted}
    assert diagnosis.advice[0].priority == 1  # a data fix first (18.3.8)
    # With no range stated, 0.0 is no known minimum: every group flat on one batch, not yet sustained, a warning.
    (alert,) = [alert for alert in diagnose(history([row])).counted if alert.rule == "no_signal"]
    assert (alert.severity, alert.words["basis"]) == ("warning", "spread")


def test_a_converging_run_is_healthy_with_a_note():
    # Score 0.1 -> 0.6 while entropy falls by three quarters (1.0 -> 0.25): entropy_converging, a note.
    rows = [{"entropy": 1.0 if i < 10 else 0.25, "reward": 0.1 if i < 10 else 0.6} for i in range(20)]
    diagnosis = diagnose(history(rows))
    assert diagnosis.verdict == "healthy" and diagnosis.counted == []
    assert [(a.rule, a.action) for a in diagnosis.alerts if a.rule.startswith("entropy_c")] == [
        ("entropy_converging", "log")
    ]


def test_an_alert_the_rest_of_the_run_reversed_is_a_recovered_note():
    # Entropy 1.0 x 10, 0.25 x 10, 1.0 x 10 (no reward): entropy_drop fires at step 17 and entropy_collapse at 20,
    # both false again at step 24 (tests/monitor/rules/test_entropy.py works the numbers): notes, verdict healthy.
    rows = [{"entropy": value} for value in [1.0] * 10 + [0.25] * 10 + [1.0] * 10]
    diagnosis = diagnose(history(rows))
    assert diagnosis.counted == [] and diagnosis.verdict == "unjudged"  # no reward: learning not judged
    drop = next(alert for alert in diagnosis.alerts if alert.rule == "entropy_drop")
    assert drop.action == "log" and drop.message.endswith(
        "[recovered: an episode from step 17 to 24, which the rest of the run reversed]"
    )


def test_no_reward_spread_fails_without_a_reward_scale():
    # Rewards 3.0 and no scale stated: reward_std 0 on two rows is no signal whatever the scale.
    rows = [{"reward": 3.0, "reward_std": 0.0, "frac_reward_zero_std": 1.0, "loss": 0.0, "grad_norm": 0.0}] * 2
    diagnosis = diagnose(history(rows))
    assert diagnosis.verdict == "failing" and "no_signal" in diagnosis.summary
    assert SCALE_FREE in diagnosis.notes


def test_format_outpacing_an_accuracy_that_rose_over_the_whole_run_is_a_note_not_failing():
    # A converging run: in rows 1-20 the format jumps 0.2 -> 0.5 while the accuracy waits at 0.2 (reward_collapse
    # fires at step 20), then the accuracy climbs to 0.6 for rows 21-60 (+0.4 over the run > 0.1).
    rows = [{"format": 0.2 if i < 10 else 0.5, "accuracy": 0.2 if i < 20 else 0.6} for i in range(60)]
    diagnosis = diagnose(history(rows))
    (alert,) = [a for a in diagnosis.alerts if a.rule == "reward_collapse"]
    assert alert.action == "log" and "[recovered: an episode from step 20 to 60" in alert.message
    assert diagnosis.counted == [] and diagnosis.verdict == "unjudged"  # no total reward logged


def test_saturation_is_a_note_and_the_run_is_judged_on_the_rest():
    # Rising 0.1 -> 0.955 with spread, then flat at 1.0 with reward_std 0 (every group solved): no_signal's saturated
    # state is a note; the reward rose, so no plateau; nothing counted, the run learns: healthy.
    rows = [{"reward": 0.1 + 0.045 * i, "reward_std": 0.3, "loss": 0.1} for i in range(20)]
    rows += [{"reward": 1.0, "reward_std": 0.0, "loss": 0.0}] * 20
    diagnosis = diagnose(history(rows))
    (alert,) = [a for a in diagnosis.alerts if a.rule == "no_signal"]
    assert alert.action == "log" and alert.message.endswith("[saturated: a state of a run that learned, a note]")
    assert diagnosis.counted == [] and diagnosis.verdict == "healthy"
