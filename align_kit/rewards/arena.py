"""Group Arena Reward (GAR, the training-stability chapter, 16.6.4): rank a prompt's G completions by
pairwise matches instead of scoring each one alone.

A judge `judge(prompt, a, b)` returns the first completion's win probability (0.5 = tie), or None
when it could not decide (the match is skipped). A completion's reward is its total win
probability divided by the matches it actually played, in [0, 1]; one that played none gets 0.5
(no evidence either way). The seed's code divides by G - 1 for every player, which is the same
thing when every match is played.

- `round_robin`: every one of the G(G-1)/2 pairs (28 judge calls at G = 8).
- `swiss`: `rounds` rounds of at most G/2 matches; each round pairs players of similar running
  score and never repeats a pair (the chapter's suggestion for cutting the cost of round robin).
  `score="colley"` ranks the same matches by Colley's rating, which accounts for the opponents met
  (benchmarks/arena_ranking.py measures both against round robin).

`Arena` is the reward node (`reward=[...,arena]`): it splits TRL's flat batch into groups, runs the
chosen tournament through a `Referee` (judges.py: caching, both orders, failures skipped and
counted) and logs `gar/*` through TRL's `log_metric`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal

from align_kit.core.component import Component, RewardSpec
from align_kit.core.errors import ConfigError
from align_kit.core.fields import SEED, knob
from align_kit.rewards.base import RewardNode, completion_text
from align_kit.rewards.judges import Counts, Referee, win_probability

Judge = Callable[[str, str, str], float | None]
SCHEMES = ("round_robin", "swiss")
SWISS_SCORES = ("win_rate", "colley")
NO_EVIDENCE = 0.5  # the reward of a completion whose every match was skipped
# A pairing search explores at most this many partial pairings before settling for a greedy one.
PAIRING_BUDGET = 20_000


def play(prompt: str, completions: Sequence[str], pairs: Sequence[tuple[int, int]], judge: Judge) -> list[float | None]:
    """The first player's win probability in each match (None: skipped). A judge with a `many`
    method (the Referee) gets the whole round at once, so it can judge matches concurrently."""
    texts = [(completions[i], completions[j]) for i, j in pairs]
    many = getattr(judge, "many", None)
    results = many(prompt, texts) if many is not None else [judge(prompt, a, b) for a, b in texts]
    return [None if value is None else win_probability(value) for value in results]


class Standings:
    """Running totals: win probability and matches played per player."""

    def __init__(self, size: int):
        self.points = [0.0] * size
        self.played = [0] * size
        self.matches: list[tuple[int, int]] = []  # the pairs that played

    def record(self, pairs: Sequence[tuple[int, int]], results: Sequence[float | None]) -> None:
        for (i, j), win in zip(pairs, results, strict=True):
            if win is None:
                continue
            self.points[i] += win
            self.points[j] += 1.0 - win
            self.played[i] += 1
            self.played[j] += 1
            self.matches.append((i, j))

    def rewards(self) -> list[float]:
        return [p / n if n else NO_EVIDENCE for p, n in zip(self.points, self.played, strict=True)]

    def colley(self) -> list[float]:
        """Colley's ratings (Colley 2002): solve (2I + C) r = 1 + (W - L) / 2, C the Laplacian of the
        matches played (C_ii = matches of i, C_ij = -matches between i and j), W and L the win
        probability won and lost. A win rate adjusted for the opponents met (a Swiss player who met
        strong opponents is not ranked below one who met weak ones); its mean is 0.5, it is clipped to
        [0, 1], and after a full round robin it orders players exactly as the win rate does."""
        size = len(self.points)
        matrix = [[2.0 * (row == col) for col in range(size)] for row in range(size)]
        target = [1.0 + (p - (n - p)) / 2.0 for p, n in zip(self.points, self.played, strict=True)]
        for i, j in self.matches:
            matrix[i][i] += 1.0
            matrix[j][j] += 1.0
            matrix[i][j] -= 1.0
            matrix[j][i] -= 1.0
        # Gaussian elimination; the matrix is symmetric and strictly diagonally dominant, so no pivoting.
        for col in range(size):
            for row in range(col + 1, size):
                factor = matrix[row][col] / matrix[col][col]
                if factor:
                    for k in range(col, size):
                        matrix[row][k] -= factor * matrix[col][k]
                    target[row] -= factor * target[col]
        ratings = [0.0] * size
        for row in reversed(range(size)):
            rest = sum(matrix[row][k] * ratings[k] for k in range(row + 1, size))
            ratings[row] = (target[row] - rest) / matrix[row][row]
        return [min(1.0, max(0.0, rating)) for rating in ratings]


def round_robin(prompt: str, completions: Sequence[str], judge: Judge) -> list[float]:
    """Every pair plays once; reward = total win probability / matches played."""
    pairs = list(combinations(range(len(completions)), 2))
    standings = Standings(len(completions))
    standings.record(pairs, play(prompt, completions, pairs, judge))
    return standings.rewards()


def swiss(
    prompt: str,
    completions: Sequence[str],
    judge: Judge,
    rounds: int,
    seed: int | str = 0,
    score: str = "win_rate",
) -> list[float]:
    """`rounds` Swiss rounds; reward = total win probability / matches actually played
    (`score="colley"`: Colley's schedule-adjusted rating of the same matches instead, see
    `Standings.colley`).

    Players are ranked by running reward, ties broken by a seeded random order (so round 1 pairs at
    random), and each round pairs neighbours in that ranking without a rematch: a backtracking search
    for the pairing closest to the ranking, with at most one bye (odd G) per round, given to a
    player without one where possible. A skipped match still counts as met. The tournament ends early
    when no new pair is left."""
    size = len(completions)
    if rounds < 1:
        raise ValueError(f"rounds={rounds}: expected at least 1")
    if score not in SWISS_SCORES:
        raise ValueError(f"score={score!r}: expected one of {list(SWISS_SCORES)}")
    order = list(range(size))
    random.Random(seed).shuffle(order)
    tiebreak = {player: position for position, player in enumerate(order)}
    standings = Standings(size)
    met: set[frozenset[int]] = set()
    byes = [0] * size
    for _ in range(rounds):
        current = standings.rewards()
        ranking = sorted(range(size), key=lambda p: (-current[p], tiebreak[p]))
        pairs, bye = swiss_pairing(ranking, met, byes)
        if not pairs:
            break
        if bye is not None:
            byes[bye] += 1
        met.update(frozenset(pair) for pair in pairs)
        standings.record(pairs, play(prompt, completions, pairs, judge))
    return standings.colley() if score == "colley" else standings.rewards()


def swiss_pairing(
    ranking: list[int], met: set[frozenset[int]], byes: list[int]
) -> tuple[list[tuple[int, int]], int | None]:
    """One round's pairs for players listed best first, and the player with the bye (odd count).

    Depth-first: the best unpaired player meets the next-ranked one it has not met; on a dead end
    the search backs up. With an odd count the bye goes to the player with the fewest byes so far,
    the lowest-ranked first, for whom the others pair completely. Without a complete pairing within
    the search budget, a greedy one (some players sit the round out)."""
    budget = [PAIRING_BUDGET]

    def pair_all(rest: list[int]) -> list[tuple[int, int]] | None:
        if not rest:
            return []
        budget[0] -= 1
        if budget[0] < 0:
            return None
        first, others = rest[0], rest[1:]
        for index, opponent in enumerate(others):
            if frozenset((first, opponent)) in met:
                continue
            found = pair_all(others[:index] + others[index + 1 :])
            if found is not None:
                return [(first, opponent), *found]
        return None

    if len(ranking) % 2 == 0:
        found = pair_all(ranking)
        if found is not None:
            return found, None
    else:
        bottom_first = list(reversed(ranking))
        for candidate in sorted(bottom_first, key=lambda player: byes[player]):  # stable: lowest rank first
            found = pair_all([player for player in ranking if player != candidate])
            if found is not None:
                return found, candidate
    return _greedy_pairing(ranking, met), None


def _greedy_pairing(ranking: list[int], met: set[frozenset[int]]) -> list[tuple[int, int]]:
    free, pairs = list(ranking), []
    while free:
        first = free.pop(0)
        opponent = next((other for other in free if frozenset((first, other)) not in met), None)
        if opponent is not None:
            free.remove(opponent)
            pairs.append((first, opponent))
    return pairs


# ----------------------------------------------------------------------------------- reward node


def prompt_text(prompt: Any) -> str:
    """The prompt as the judge reads it: the text, or a conversation as `role: content` lines."""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(f"{m.get('role', 'user')}: {m.get('content', '')}" for m in prompt)


def groups(prompts: Sequence[str], group_size: int | None) -> list[tuple[int, int]]:
    """[start, stop) of each group: TRL lays a prompt's completions out consecutively (its sampler
    repeats each prompt num_generations times), so a group is a run of the same prompt, cut every
    `group_size` rows (two neighbouring groups may share a prompt)."""
    spans, start = [], 0
    for index in range(1, len(prompts) + 1):
        if index == len(prompts) or prompts[index] != prompts[start] or index - start == group_size:
            spans.append((start, index))
            start = index
    return spans


@dataclass
class Arena(RewardNode):
    """The GAR reward node: each group of completions plays a tournament judged by `judge`.

    Groups are formed from the completions this process scores (TRL splits a generation batch over
    processes; with several, keep each process's share a multiple of num_generations so no group is
    split). Swiss pairings are seeded by `seed`, the step and the group's index, so a resumed run
    pairs as an uninterrupted one."""

    scheme: Literal["round_robin", "swiss"] = knob(
        "round_robin",
        help="The tournament: `round_robin` plays all G(G-1)/2 pairs (28 judge calls at G = 8); `swiss` plays "
        "`rounds` rounds between players of similar running score, for fewer calls. round_robin unless the judge "
        "is costly.",
        source="16.6.4",
    )
    rounds: int = knob(
        3,
        help="Swiss rounds, at most G/2 judge calls each (twice that with both_orders); 3 at G = 8 makes 12 calls "
        "against round robin's 28; 5 come within 0.05 Kendall tau of round robin's ranking. Ignored by round_robin.",
        source="16.6.4",
    )
    swiss_score: Literal["win_rate", "colley"] = knob(
        "win_rate",
        help="How scheme=swiss turns its matches into rewards: `win_rate` (win probability over matches played) or "
        "`colley` (Colley's rating, adjusted for the opponents met). colley for a judge that answers probabilities, "
        "win_rate for 0/1 verdicts (benchmarks/arena_ranking.py).",
        source="Colley 2002, Colley's Bias Free College Football Ranking Method §4",
    )
    both_orders: bool = knob(
        False,
        help="Judge every pair as (a, b) and (b, a) and average the two, against the judge's position bias; twice "
        "the judge calls. Turn it on for a model judge; the arithmetic judge has no position bias.",
        source="Zheng et al. 2023 (MT-Bench) §3.3-3.4, arXiv 2306.05685",
    )
    timeout_s: float | None = knob(
        None,
        help="Wall-clock limit in seconds on one judge call, for any judge; a call past it skips its match "
        "(counted in gar/judge_failures). null: no limit.",
    )
    seed: int = knob(
        0,
        within=SEED,
        help="Seeds the Swiss round-1 pairing and tie-breaks, together with the step and the group's index; the "
        "YAML node sets it to the run's seed.",
    )
    judge: Any = knob(
        None,
        help="The judge node that plays each match, judge(prompt, a, b) -> the win probability of a: "
        "reward/judge=arithmetic (the embedded task), hf, http or callable.",
        source="16.6.4",
    )

    def validate(self) -> None:
        super().validate()
        key = f"reward.{self.group}"
        if self.rounds < 1:
            raise ConfigError(f"{key}.rounds={self.rounds}: expected an integer >= 1 (Swiss rounds)")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ConfigError(f"{key}.timeout_s={self.timeout_s}: expected a number of seconds > 0, or null")
        if not callable(self.judge):
            raise ConfigError(
                f"{key}.judge={self.judge!r}: expected a judge node: reward/judge=arithmetic|hf|http, or "
                f"reward/judge=callable {key}.judge.function=my_module.my_judge for a function judge(prompt, a, b)"
            )
        if isinstance(self.judge, Component):
            self.judge.group = f"{key}.judge"
            self.judge.validate()

    def reward_specs(self, trainer_fields: dict[str, Any]) -> list[RewardSpec]:
        self.group_size = trainer_fields.get("num_generations")
        return super().reward_specs(trainer_fields)

    @property
    def referee(self) -> Referee:
        if getattr(self, "_referee", None) is None:
            self._referee = Referee(
                self.judge, both_orders=self.both_orders, timeout_s=self.timeout_s, name=f"reward.{self.group}.judge"
            )
            self._step = None
        return self._referee

    def tournament(self, prompt: str, completions: list[str], seed: str) -> list[float]:
        if self.scheme == "swiss":
            return swiss(prompt, completions, self.referee, self.rounds, seed=seed, score=self.swiss_score)
        return round_robin(prompt, completions, self.referee)

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        if "prompts" not in kwargs:
            raise KeyError(f"reward.{self.group} needs the prompts (TRL passes prompts=...) to form groups")
        referee = self.referee
        state = kwargs.get("trainer_state")
        step = state.global_step if state is not None else None
        if step != self._step:  # the cache lives for one step
            referee.new_step()
            self._step = step
        prompts = [prompt_text(p) for p in kwargs["prompts"]]
        texts = [completion_text(c) for c in completions]
        log_metric = kwargs.get("log_metric")
        rewards: list[float | None] = []
        for index, (start, stop) in enumerate(groups(prompts, getattr(self, "group_size", None))):
            before = referee.totals()
            rewards += self.tournament(prompts[start], texts[start:stop], seed=f"{self.seed}:{step}:{index}")
            if log_metric is not None:
                self.log_group(log_metric, referee.totals().minus(before))
        return rewards

    @staticmethod
    def log_group(log_metric: Callable[[str, float], None], counts: Counts) -> None:
        """Per group (TRL averages the values of a step): judge calls, failed calls, skipped
        matches, cache hits and (HTTP judge) retries."""
        log_metric("gar/judge_calls", float(counts.calls))
        log_metric("gar/judge_failures", float(counts.failures))
        log_metric("gar/skipped_matches", float(counts.skipped))
        log_metric("gar/cache_hits", float(counts.cache_hits))
        log_metric("gar/judge_retries", float(counts.retries))
