"""GAR tournaments against a noisy judge: judge calls and rank agreement, round robin vs Swiss.

Each trial draws G true qualities q ~ N(0, 1) and a judge whose answer for (a, b) is
sigmoid(k (q_a - q_b) + e), e ~ N(0, noise) drawn afresh for every call (`soft`: the win
probability itself, as a judge reading log-probs returns it) or a 0/1 verdict drawn from that
probability (`hard`: a judge that only names a winner). Rank agreement is Kendall's tau-b between
the rewards and the true qualities (1 = the true order; ties in the rewards count as in tau-b).
Reported: mean ± standard error over trials of tau and of judge calls per group, for round robin
and for Swiss at several round counts, scored by win rate (win probability / matches played, the
default) and by Colley's schedule-adjusted rating (`reward.arena.swiss_score=colley`).
The goal (issue 13): Swiss within 0.05 tau of round robin at half the calls or fewer.

Run: PYTHONPATH=. python benchmarks/arena_ranking.py [--trials 2000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics

from align_kit.rewards.arena import round_robin, swiss


def kendall_tau_b(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b: (concordant - discordant) / sqrt((pairs - ties in x) (pairs - ties in y))."""
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0:
                ties_x += 1
            if dy == 0:
                ties_y += 1
            if dx * dy > 0:
                concordant += 1
            elif dx * dy < 0:
                discordant += 1
    pairs = len(x) * (len(x) - 1) // 2
    denominator = math.sqrt((pairs - ties_x) * (pairs - ties_y))
    return (concordant - discordant) / denominator if denominator else 0.0


class NoisyJudge:
    """The benchmark's judge over known qualities; counts its calls."""

    def __init__(self, qualities: dict[str, float], rng: random.Random, sharpness: float, noise: float, hard: bool):
        self.qualities, self.rng = qualities, rng
        self.sharpness, self.noise, self.hard = sharpness, noise, hard
        self.calls = 0

    def __call__(self, prompt: str, a: str, b: str) -> float:
        self.calls += 1
        logit = self.sharpness * (self.qualities[a] - self.qualities[b]) + self.rng.gauss(0.0, self.noise)
        probability = 1.0 / (1.0 + math.exp(-logit))
        return float(self.rng.random() < probability) if self.hard else probability


def trial(size: int, arm: tuple[str, int, str], seed: int, sharpness: float, noise: float, hard: bool):
    """(tau, judge calls) of one tournament over `size` completions of known quality."""
    scheme, rounds, score = arm
    rng = random.Random(f"qualities:{seed}:{size}")
    qualities = [rng.gauss(0.0, 1.0) for _ in range(size)]
    names = [f"completion {index}" for index in range(size)]
    judge = NoisyJudge(
        dict(zip(names, qualities, strict=True)),
        random.Random(f"judge:{seed}:{scheme}:{rounds}"),
        sharpness,
        noise,
        hard,
    )
    if scheme == "round_robin":
        rewards = round_robin("prompt", names, judge)
    else:
        rewards = swiss("prompt", names, judge, rounds, seed=seed, score=score)
    return kendall_tau_b(rewards, qualities), judge.calls


def mean_se(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))


def measure(trials: int, sharpness: float, noise: float, hard: bool, swiss_rounds: dict[int, list[int]]) -> list[dict]:
    rows = []
    for size, round_counts in swiss_rounds.items():
        arms = [("round_robin", 0, "win_rate")]
        arms += [("swiss", rounds, score) for score in ("win_rate", "colley") for rounds in round_counts]
        reference = None
        for arm in arms:
            scheme, rounds, score = arm
            outcomes = [trial(size, arm, s, sharpness, noise, hard) for s in range(trials)]
            taus, calls = [o[0] for o in outcomes], [o[1] for o in outcomes]
            tau, tau_se = mean_se(taus)
            row = {"G": size, "scheme": scheme, "rounds": rounds or None, "score": score, "tau": tau, "tau_se": tau_se}
            row["calls"], row["calls_se"] = mean_se([float(c) for c in calls])
            if reference is None:
                reference = row
            row["tau_gap"] = reference["tau"] - tau
            row["call_share"] = row["calls"] / reference["calls"]
            row["meets_goal"] = row["tau_gap"] <= 0.05 and row["call_share"] <= 0.5
            rows.append(row)
    return rows


def table(rows: list[dict], title: str) -> str:
    lines = [
        f"### {title}",
        "",
        "| G | scheme | score | judge calls / group | share of RR calls | Kendall tau | gap to RR | goal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        name = row["scheme"] if row["rounds"] is None else f"swiss, {row['rounds']} rounds"
        goal = "" if row["rounds"] is None else ("met" if row["meets_goal"] else "missed")
        lines.append(
            f"| {row['G']} | {name} | {row['score']} | {row['calls']:.1f} ± {row['calls_se']:.1f} | "
            f"{row['call_share']:.2f} | "
            f"{row['tau']:.3f} ± {row['tau_se']:.3f} | {row['tau_gap']:+.3f} | {goal} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000, help="seeds per arm")
    parser.add_argument("--sharpness", type=float, default=2.0, help="k: logit per unit of quality difference")
    parser.add_argument("--noise", type=float, default=1.0, help="std of the judge's logit noise per call")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    swiss_rounds = {8: [2, 3, 4, 5], 16: [3, 4, 5, 6, 7, 8]}
    results = {}
    for hard in (False, True):
        kind = "hard" if hard else "soft"
        rows = measure(args.trials, args.sharpness, args.noise, hard, swiss_rounds)
        results[kind] = rows
        title = (
            f"{kind} judge (k={args.sharpness:g}, logit noise {args.noise:g}), {args.trials} trials per arm, mean ± SE"
        )
        print(table(rows, title), end="\n\n")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
