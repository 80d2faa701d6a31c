"""Group Arena Reward (the training-stability chapter, 16.6.4): round robin and Swiss on small groups,
with every expected value worked out by hand below; the reward node's groups, cache and metrics."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from align_kit.rewards.arena import Arena, groups, round_robin, swiss, swiss_pairing
from align_kit.rewards.judges import ArithmeticJudge


class TableJudge:
    """P(first beats second) from a table over names; records every call."""

    def __init__(self, table: dict[tuple[str, str], float | None]):
        self.table = table
        self.calls: list[tuple[str, str]] = []

    def __call__(self, prompt, a, b):
        self.calls.append((a, b))
        if (a, b) in self.table:
            return self.table[(a, b)]
        value = self.table[(b, a)]
        return None if value is None else 1.0 - value


def approx(values):
    return pytest.approx(values, abs=1e-12)


# --------------------------------------------------------------------------------- the seed's example


SEED_RESPONSES = [
    "这是一篇关于量子计算的优秀综述...",  # 15 characters + "..." = 18
    "量子计算是一个重要领域...",  # 11 + 3 = 14
    "本文深入探讨了量子计算的核心原理...",  # 16 + 3 = 19
    "量子计算利用量子力学原理进行信息处理...",  # 18 + 3 = 21
]


def seed_mock_judge(prompt, a, b):
    """The seed's mock judge, as printed: the longer response wins with 0.6."""
    return 0.6 if len(a) > len(b) else 0.4


def test_seed_worked_example_follows_the_seed_code_not_its_printed_output():
    """The chapter prints `[0.60 0.33 0.73 0.33]` for its example, but its own code and judge give
    something else: with lengths 18, 14, 19, 21 every match is won by the longer response with 0.6,
    so the longest (21) wins 3 x 0.6 = 1.8, the 19 wins two and loses one (0.6 + 0.6 + 0.4 = 1.6),
    the 18 wins one (0.6 + 0.4 + 0.4 = 1.4), the 14 loses all (1.2); each divided by G - 1 = 3.
    The printed values cannot come from this judge at all (with answers 0.6 / 0.4 every reward lies
    in [0.4, 0.6]). align_kit follows the code's semantics."""
    assert [len(text) for text in SEED_RESPONSES] == [18, 14, 19, 21]
    rewards = round_robin("请写一篇量子计算综述", SEED_RESPONSES, seed_mock_judge)
    assert rewards == approx([1.4 / 3, 1.2 / 3, 1.6 / 3, 1.8 / 3])
    assert rewards != pytest.approx([0.60, 0.33, 0.73, 0.33], abs=0.01)


# ------------------------------------------------------------------------------------------ round robin

THREE = {("x", "y"): 0.7, ("x", "z"): 0.9, ("y", "z"): 0.4}


def test_round_robin_by_hand():
    judge = TableJudge(THREE)
    # x: 0.7 + 0.9 = 1.6 over 2; y: 0.3 + 0.4 = 0.7 over 2; z: 0.1 + 0.6 = 0.7 over 2.
    assert round_robin("p", ["x", "y", "z"], judge) == approx([0.8, 0.35, 0.35])
    assert sorted(judge.calls) == [("x", "y"), ("x", "z"), ("y", "z")]  # G(G-1)/2 = 3 pairs, each once


def test_round_robin_divides_by_the_matches_actually_played():
    judge = TableJudge({**THREE, ("x", "y"): None})  # x-y skipped
    # x: 0.9 over 1; y: 0.4 over 1; z: 0.1 + 0.6 = 0.7 over 2.
    assert round_robin("p", ["x", "y", "z"], judge) == approx([0.9, 0.4, 0.35])


def test_a_completion_without_any_played_match_gets_one_half():
    judge = TableJudge({("x", "y"): None, ("x", "z"): None, ("y", "z"): 1.0})
    assert round_robin("p", ["x", "y", "z"], judge) == approx([0.5, 1.0, 0.0])


def test_group_of_eight_has_28_matches_and_mean_one_half():
    judge = TableJudge({(a, b): 0.25 + 0.01 * i for i, (a, b) in enumerate(pairs_of("abcdefgh"))})
    rewards = round_robin("p", list("abcdefgh"), judge)
    assert len(judge.calls) == 28
    # Every played match hands out exactly one point in total, so the mean reward is 28 / (8 x 7) = 0.5.
    assert sum(rewards) / 8 == pytest.approx(0.5)


def pairs_of(names):
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]


def test_a_judge_answer_outside_zero_one_is_refused_by_the_pure_functions():
    with pytest.raises(ValueError, match="win probability"):
        round_robin("p", ["x", "y"], lambda p, a, b: 1.5)


# ------------------------------------------------------------------------------------------------ Swiss

# Qualities A > B > C > D; P(row beats column).
FOUR = {
    ("A", "B"): 0.6, ("A", "C"): 0.7, ("A", "D"): 0.9,
    ("B", "C"): 0.6, ("B", "D"): 0.8,
    ("C", "D"): 0.7,
}  # fmt: skip
# Two Swiss rounds, by hand, for each possible round-1 pairing (round 2 pairs by running reward):
#  {A-B, C-D}: A .6, B .4, C .7, D .3 -> ranking C, A, B, D -> C-A (C .3, A .7), B-D (B .8, D .2)
#              A (.6 + .7) / 2 = .65, B (.4 + .8) / 2 = .6, C (.7 + .3) / 2 = .5, D (.3 + .2) / 2 = .25
#  {A-C, B-D}: A .7, C .3, B .8, D .2 -> ranking B, A, C, D -> B-A (B .4, A .6), C-D (C .7, D .3)
#              A (.7 + .6) / 2 = .65, B (.8 + .4) / 2 = .6, C (.3 + .7) / 2 = .5, D (.2 + .3) / 2 = .25
#  {A-D, B-C}: A .9, D .1, B .6, C .4 -> ranking A, B, C, D -> A-B (A .6, B .4), C-D (C .7, D .3)
#              A (.9 + .6) / 2 = .75, B (.6 + .4) / 2 = .5, C (.4 + .7) / 2 = .55, D (.1 + .3) / 2 = .2
EXPECTED_TWO_ROUNDS = {
    frozenset({frozenset("AB"), frozenset("CD")}): [0.65, 0.6, 0.5, 0.25],
    frozenset({frozenset("AC"), frozenset("BD")}): [0.65, 0.6, 0.5, 0.25],
    frozenset({frozenset("AD"), frozenset("BC")}): [0.75, 0.5, 0.55, 0.2],
}
ROUND_TWO = {
    frozenset({frozenset("AB"), frozenset("CD")}): {frozenset("AC"), frozenset("BD")},
    frozenset({frozenset("AC"), frozenset("BD")}): {frozenset("AB"), frozenset("CD")},
    frozenset({frozenset("AD"), frozenset("BC")}): {frozenset("AB"), frozenset("CD")},
}


@pytest.mark.parametrize("seed", range(6))
def test_swiss_two_rounds_of_four_by_hand(seed):
    judge = TableJudge(FOUR)
    rewards = swiss("p", list("ABCD"), judge, rounds=2, seed=seed)
    assert len(judge.calls) == 4  # 2 rounds x G/2 matches
    first = frozenset(frozenset(call) for call in judge.calls[:2])
    assert rewards == approx(EXPECTED_TWO_ROUNDS[first])
    assert {frozenset(call) for call in judge.calls[2:]} == ROUND_TWO[first]


def test_swiss_round_one_pairing_follows_the_seed():
    def first_round(seed):
        judge = TableJudge(FOUR)
        swiss("p", list("ABCD"), judge, rounds=1, seed=seed)
        return frozenset(frozenset(call) for call in judge.calls)

    assert first_round(7) == first_round(7)
    assert len({first_round(seed) for seed in range(20)}) > 1  # not always the same pairing


def test_swiss_with_a_strict_judge_ranks_four_the_same_whatever_round_one():
    """Strict judge (the better one always wins): after round 1 the two winners meet and the two
    losers meet, so A (2 wins) = 1, the best of the rest wins once = .5 ... for every pairing:
    {A-B, C-D} -> A-C, B-D; {A-C, B-D} -> A-B, C-D; {A-D, B-C} -> A-B, D-C: A 1, B .5, C .5, D 0."""
    strict = {pair: 1.0 for pair in FOUR}
    for seed in range(6):
        assert swiss("p", list("ABCD"), TableJudge(strict), rounds=2, seed=seed) == approx([1.0, 0.5, 0.5, 0.0])


def test_swiss_on_three_players_with_byes_becomes_the_round_robin():
    """G = 3: each round has one match and one bye; no rematch, so 3 rounds play every pair once
    and the rewards equal round robin's (0.8, 0.35, 0.35 above); a 4th round finds no new pair."""
    for seed in range(4):
        judge = TableJudge(THREE)
        assert swiss("p", ["x", "y", "z"], judge, rounds=5, seed=seed) == approx([0.8, 0.35, 0.35])
        assert len(judge.calls) == 3
        assert {frozenset(call) for call in judge.calls} == {frozenset("xy"), frozenset("xz"), frozenset("yz")}


def test_swiss_normalises_by_matches_played_and_a_bye_is_no_match():
    judge = TableJudge(THREE)
    rewards = dict(zip("xyz", swiss("p", ["x", "y", "z"], judge, rounds=1, seed=3), strict=True))
    (a, b), = judge.calls  # fmt: skip
    bye = ({"x", "y", "z"} - {a, b}).pop()
    assert rewards[bye] == 0.5  # no match played
    expected = THREE.get((a, b), None)
    expected = expected if expected is not None else 1.0 - THREE[(b, a)]
    assert rewards[a] == pytest.approx(expected) and rewards[b] == pytest.approx(1.0 - expected)


def test_swiss_of_eight_pairs_equal_records_and_never_repeats_a_pair():
    """A strict judge over qualities 0..7: round 2 pairs the four winners among themselves (and the
    losers), round 3 the 2-0 players together, the 0-2 together, and 1-1 with 1-1."""
    quality = {name: q for q, name in enumerate("abcdefgh")}
    calls = []

    def judge(prompt, a, b):
        calls.append((a, b))
        return 1.0 if quality[a] > quality[b] else 0.0

    rewards = swiss("p", list("abcdefgh"), judge, rounds=3, seed=11)
    assert len(calls) == 12 and len({frozenset(c) for c in calls}) == 12
    wins = dict.fromkeys("abcdefgh", 0)
    for number, start in enumerate((0, 4, 8)):
        round_calls = calls[start : start + 4]
        assert sorted(n for c in round_calls for n in c) == sorted("abcdefgh")  # everyone plays
        for a, b in round_calls:
            assert wins[a] == wins[b], f"round {number + 1} paired {a} ({wins[a]} wins) with {b} ({wins[b]})"
        for a, b in round_calls:
            wins[a if quality[a] > quality[b] else b] += 1
    assert rewards == approx([wins[name] / 3 for name in "abcdefgh"])
    assert rewards[7] == 1.0  # the best never loses


def test_swiss_pairing_backs_up_rather_than_leave_a_rematch():
    """Ranked 0, 1, 2, 3 where 2-3 already met: 0-1 would leave the rematch 2-3, so the search backs
    up to 0-2, 1-3. Where 0-1, 0-2 and 1-3 met, the only complete pairing is 0-3, 1-2."""
    assert swiss_pairing([0, 1, 2, 3], {frozenset((2, 3))}, [0] * 4) == ([(0, 2), (1, 3)], None)
    met = {frozenset((0, 1)), frozenset((0, 2)), frozenset((1, 3))}
    assert swiss_pairing([0, 1, 2, 3], met, [0] * 4) == ([(0, 3), (1, 2)], None)
    # Odd: the bye goes to the lowest-ranked player without one (4 had one: 3 sits out, 2 meets 4).
    assert swiss_pairing([0, 1, 2, 3, 4], set(), [0, 0, 0, 0, 1]) == ([(0, 1), (2, 4)], 3)


# ----------------------------------------------------------------------------------------- the node


def test_groups_are_runs_of_one_prompt_cut_at_the_group_size():
    assert groups(["a", "a", "b", "b", "b"], None) == [(0, 2), (2, 5)]
    assert groups(["a"] * 6, 3) == [(0, 3), (3, 6)]
    assert groups(["a", "a", "b", "b", "a", "a"], 2) == [(0, 2), (2, 4), (4, 6)]


def arena_node(**kwargs) -> Arena:
    node = Arena(judge=kwargs.pop("judge", ArithmeticJudge()), **kwargs)
    node.group = "arena"
    node.validate()
    return node


def test_arena_node_rewards_and_metrics_per_group():
    """Group 1 ("1+1=", truth 2): answers 2, 3, x -> distances 0, 1, inf: the first wins both
    (1.0), the second beats the third (0.5), the third loses both (0.0); 3 judge calls.
    Group 2 ("5-2=", truth 3): 3, 3, 4 -> the identical pair ties without a call (0.5), both beat
    the 4: (0.5 + 1) / 2 = 0.75 each, 0 for the 4; one judge call (the two matches against the 4
    are the same texts)."""
    node = arena_node()
    logged = []
    rewards = node(
        prompts=["1+1="] * 3 + ["5-2="] * 3,
        completions=["<think>1+1=2</think>2", "3", "x", "<think>.</think>3", "<think>.</think>3", "4"],
        trainer_state=SimpleNamespace(global_step=0),
        log_metric=lambda name, value: logged.append((name, value)),
    )
    assert rewards == approx([1.0, 0.5, 0.0, 0.75, 0.75, 0.0])
    calls = [value for name, value in logged if name == "gar/judge_calls"]
    assert calls == [3.0, 1.0]
    assert [value for name, value in logged if name == "gar/judge_failures"] == [0.0, 0.0]


def test_arena_cache_lives_for_one_step():
    node = arena_node()
    logged = []

    def score(step):
        logged.clear()
        node(
            prompts=["1+1="] * 3,
            completions=["2", "3", "4"],
            trainer_state=SimpleNamespace(global_step=step),
            log_metric=lambda name, value: logged.append((name, value)),
        )
        return dict(logged)

    assert score(0)["gar/judge_calls"] == 3.0
    again = score(0)  # the same step: every pair is cached
    assert again["gar/judge_calls"] == 0.0 and again["gar/cache_hits"] == 3.0
    assert score(1)["gar/judge_calls"] == 3.0  # a new step judges afresh


def test_arena_judge_failures_are_skipped_and_logged():
    def flaky(prompt, a, b):
        if "bad" in (a, b):
            raise RuntimeError("judge down")
        return 1.0 if a < b else 0.0

    node = arena_node(judge=flaky)
    logged = []
    rewards = node(
        prompts=["p"] * 3,
        completions=["a", "b", "bad"],
        log_metric=lambda name, value: logged.append((name, value)),
    )
    # a-b played (a wins, 1.0 / 0.0); both matches of "bad" failed: it played none (0.5).
    assert rewards == approx([1.0, 0.0, 0.5])
    assert dict(logged) == {
        "gar/judge_calls": 3.0,
        "gar/judge_failures": 2.0,
        "gar/skipped_matches": 2.0,
        "gar/cache_hits": 0.0,
        "gar/judge_retries": 0.0,
    }


def test_arena_swiss_node_makes_fewer_calls_and_is_seeded():
    rng = random.Random(0)
    completions = [str(rng.randint(0, 20)) for _ in range(8)]

    def run(seed):
        node = arena_node(scheme="swiss", rounds=3, seed=seed)
        logged = []
        rewards = node(
            prompts=["9+1="] * 8,
            completions=completions,
            trainer_state=SimpleNamespace(global_step=5),
            log_metric=lambda name, value: logged.append((name, value)),
        )
        return rewards, dict(logged)["gar/judge_calls"]

    rewards, calls = run(0)
    assert calls <= 12  # 3 rounds x 4 matches (identical answers tie without a call)
    assert run(0) == (rewards, calls)
    assert all(0.0 <= r <= 1.0 for r in rewards)


# ------------------------------------------------------------------------------ config and training


def preflight_error(*overrides: str) -> str:
    """The one line `align-kit train <overrides>` would answer with (its pre-flight)."""
    from align_kit.core.errors import ConfigError
    from align_kit.runs.preflight import check_command

    with pytest.raises(ConfigError) as error:
        check_command(list(overrides), multirun=False)
    return str(error.value)


@pytest.mark.parametrize(
    ("overrides", "start"),
    [
        (["reward.arena.scheme=elimination"], "reward.arena.scheme=elimination: expected one of [round_robin, swiss]"),
        (["reward.arena.rounds=0"], "reward.arena.rounds=0: expected an integer >= 1"),
        (["reward.arena.swiss_score=elo"], "reward.arena.swiss_score=elo: expected one of [win_rate, colley]"),
        (["reward.arena.rounds=-2"], "reward.arena.rounds=-2"),
        (["reward.arena.both_orders=maybe"], "reward.arena.both_orders=maybe"),
        (["reward.arena.timeout_s=0"], "reward.arena.timeout_s=0"),
        (["reward/judge=http", "reward.arena.judge.base_url=localhost"], "reward.arena.judge.base_url=localhost"),
        (["reward/judge=http", "reward.arena.judge.retries=abc"], "reward.arena.judge.retries=abc"),
        (["reward/judge=http", "reward.arena.judge.endpoint=embeddings"], "reward.arena.judge.endpoint=embeddings"),
        (["reward/judge=http", "reward.arena.judge.template='{a} vs {b}'"], "reward.arena.judge.template"),
        (["reward/judge=callable"], "reward.arena.judge.function is not set"),
        (["reward/judge=hf"], "reward.arena.judge.name_or_path is not set"),
        (["reward.arena.judge={_target_: os.system}"], "reward.arena.judge._target_=os.system is outside align_kit"),
    ],
)
def test_bad_arena_values_get_one_line_naming_the_key(overrides, start, overrides_for):
    message = preflight_error(*overrides_for("reward=[correctness,arena]", *overrides, fast_training=False))
    assert message.startswith(start) and "\n" not in message


def prefer_shorter(prompt, a, b):
    """A user's judge function (reward/judge=callable names it)."""
    return 0.5 if len(a) == len(b) else float(len(a) < len(b))


def test_judge_nodes_compose_and_build(overrides_for, tmp_path):
    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan
    from align_kit.rewards.judges import HttpJudge
    from align_kit.train import component_choices

    def arena(*extra):
        cfg = compose(overrides_for("reward=[correctness,arena]", *extra))
        plan = build_plan(cfg, component_choices(), str(tmp_path / "run"))
        return plan.rewards[1].func

    node = arena("reward/judge=http", "reward.arena.judge.max_concurrency=3", "reward.arena.scheme=swiss")
    assert isinstance(node.judge, HttpJudge) and node.judge.max_concurrency == 3 and node.group_size == 8
    assert node.referee.workers == 3
    custom = arena(
        "train.allowed_targets=[tests]",
        "reward/judge=callable",
        "reward.arena.judge.function=tests.rewards.test_arena.prefer_shorter",
    )
    assert custom.judge("p", "ab", "abc") == 1.0


@pytest.mark.slow
def test_short_training_with_correctness_and_arena(train_once, tmp_path):
    """Four steps on the embedded default with reward=[correctness,arena] and the arithmetic judge.
    With every match played, a group's rewards hand out one point per match over G - 1 matches
    per player, so the arena reward's batch mean is exactly 0.5; at most 28 judge calls per group of
    8 (identical completions tie without a call), none failed."""
    import json

    run_dir = tmp_path / "run"
    train_once(run_dir, "logger=none", "reward=[correctness,arena]", "reward.arena.weight=0.5")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    judged = [row for row in rows if "gar/judge_calls" in row]
    assert len(judged) >= 2  # one per generation batch (2 steps each)
    for row in judged:
        assert 0 < row["gar/judge_calls"] <= 28
        assert row["gar/judge_failures"] == 0 and row["gar/skipped_matches"] == 0
        assert row["rewards/arena/mean"] == pytest.approx(0.5, abs=1e-6)


# Colley's ratings after two strict Swiss rounds of four (the better one always wins), by hand.
# Solve (2I + C) r = 1 + (W - L) / 2 with C the Laplacian of the 4 matches (each player played 2):
#  round 1 {A-D, B-C} -> A-B, C-D: B beat C and lost to A, C lost to B and beat D. Equations
#  4a - b - d = 2, 4b - a - c = 1, 4c - b - d = 1, 4d - a - c = 0 give d = 7/24, b = d + 1/4 = 13/24,
#  c = (5/4 + 2d) / 4 = 11/24, a = 4d - c = 17/24 (sum 2 = G/2): B above C, where the win rate ties them.
#  rounds {A-B, C-D} -> A-C, B-D and {A-C, B-D} -> A-B, C-D: B and C each met A and D, so b = c;
#  4a - 2b = 2, 4b - a - d = 1, 4d - 2b = 0 give b = 1/2, a = 3/4, d = 1/4.
COLLEY_TWO_ROUNDS = {
    frozenset({frozenset("AD"), frozenset("BC")}): [17 / 24, 13 / 24, 11 / 24, 7 / 24],
    frozenset({frozenset("AB"), frozenset("CD")}): [0.75, 0.5, 0.5, 0.25],
    frozenset({frozenset("AC"), frozenset("BD")}): [0.75, 0.5, 0.5, 0.25],
}


@pytest.mark.parametrize("seed", range(6))
def test_swiss_colley_score_by_hand(seed):
    judge = TableJudge({pair: 1.0 for pair in FOUR})
    rewards = swiss("p", list("ABCD"), judge, rounds=2, seed=seed, score="colley")
    first = frozenset(frozenset(call) for call in judge.calls[:2])
    assert rewards == approx(COLLEY_TWO_ROUNDS[first])


def test_colley_of_one_match_and_of_a_round_robin():
    """One match won outright: 3 r1 - r2 = 1.5, -r1 + 3 r2 = 0.5 -> 5/8 and 3/8. After a full round
    robin of G players every row reads (G + 1) r_i - (G/2 - r_i) = 1 + (W_i - L_i) / 2, so
    r_i = (1 + G/2 + (W_i - L_i) / 2) / (G + 2): for THREE (W x 1.6, y 0.7, z 0.7; L = 2 - W),
    x = (2.5 + 0.6) / 5 = 0.62, y = z = (2.5 - 0.3) / 5 = 0.44."""
    assert swiss("p", ["x", "y"], TableJudge({("x", "y"): 1.0}), rounds=1, score="colley") == approx([5 / 8, 3 / 8])
    assert swiss("p", ["x", "y", "z"], TableJudge(THREE), rounds=5, score="colley") == approx([0.62, 0.44, 0.44])


def test_benchmark_kendall_tau_b_by_hand():
    from benchmarks.arena_ranking import kendall_tau_b

    assert kendall_tau_b([1, 2, 3], [10, 20, 30]) == 1.0
    assert kendall_tau_b([3, 2, 1], [10, 20, 30]) == -1.0
    assert kendall_tau_b([1, 3, 2], [10, 20, 30]) == pytest.approx(1 / 3)  # 2 concordant, 1 discordant
    # A tie in x: 2 concordant, 0 discordant over sqrt((3 - 1) x (3 - 0)) = sqrt(6).
    assert kendall_tau_b([1, 1, 2], [10, 20, 30]) == pytest.approx(2 / 6**0.5)
