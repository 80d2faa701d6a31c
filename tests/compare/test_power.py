"""`align-kit compare --power`: each bar's power against hand computation, the joint power against a separate Monte
Carlo, the seeds needed, and the command on numbers and on a sweep folder."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from align_kit import cli
from align_kit.compare import CompareError
from align_kit.compare.power import (
    needed_agreeing,
    report_power,
    se_bar_power,
    seeds_needed,
    sign_bar_power,
    simulated_power,
)

PHI = NormalDist().cdf
Z80 = NormalDist().inv_cdf(0.8)  # 0.8416


def test_the_sign_bar_counts_seeds_as_the_verdict_does():
    # verdict.judge: agreeing >= 0.8 * paired
    for n in range(1, 40):
        assert needed_agreeing(n) == min(k for k in range(n + 1) if k >= 0.8 * n)
    assert [needed_agreeing(n) for n in (3, 5, 10, 11)] == [3, 4, 8, 9]


def test_sign_bar_power_by_hand():
    # effect = sd: each seed moves the predicted way with p = Phi(1) = 0.8413; 10 seeds need 8, 9 or 10.
    p = PHI(1.0)
    by_hand = sum(math.comb(10, k) * p**k * (1 - p) ** (10 - k) for k in (8, 9, 10))
    assert sign_bar_power(10, 1.0, 1.0) == pytest.approx(by_hand, rel=1e-9)
    assert by_hand == pytest.approx(0.7972, abs=1e-4)
    # 5 seeds need 4: 5 p^4 q + p^5
    assert sign_bar_power(5, -0.5, 0.5) == pytest.approx(5 * p**4 * (1 - p) + p**5, rel=1e-9)  # sign-free


def test_se_bar_power_and_its_closed_form_seed_count():
    # Independent arms: n = ((2 + z_0.8) sd / effect)^2 = 8.07 for effect = sd, so 9 seeds clear 80 %, 8 do not.
    n_star = ((2 + Z80) * 1.0 / 1.0) ** 2
    assert n_star == pytest.approx(8.07, abs=0.01)
    assert se_bar_power(8, 1.0, 1.0) < 0.8 <= se_bar_power(9, 1.0, 1.0)
    assert se_bar_power(9, 1.0, 1.0) == pytest.approx(PHI(3 - 2), rel=1e-9)
    # Correlated arms (sd per arm 0.6, sd of the difference 0.4): the Welch SE uses sigma = sqrt(2) 0.6 = 0.849.
    sigma = math.sqrt(2) * 0.6
    assert se_bar_power(20, 0.5, 0.4, 0.6) == pytest.approx(PHI((math.sqrt(20) * 0.5 - 2 * sigma) / 0.4), rel=1e-9)
    n_star = ((2 * sigma + Z80 * 0.4) / 0.5) ** 2  # (1.697 + 0.337)^2 / 0.25 = 16.5
    assert n_star == pytest.approx(16.54, abs=0.01)
    assert se_bar_power(16, 0.5, 0.4, 0.6) < 0.8 <= se_bar_power(17, 0.5, 0.4, 0.6)


def plain_monte_carlo(n: int, effect: float, sd_arm: float, rho: float, draws: int, seed: int) -> float:
    """A second simulation, written the long way: pairs from a covariance matrix, compare's bars per sweep."""
    rng = np.random.default_rng(seed)
    cov = sd_arm**2 * np.array([[1, rho], [rho, 1]])
    hits = 0
    for _ in range(draws):
        pairs = rng.multivariate_normal([effect, 0.0], cov, size=n)
        arm, base = pairs[:, 0], pairs[:, 1]
        delta = arm.mean() - base.mean()
        stderr = math.sqrt(arm.var(ddof=1) / n + base.var(ddof=1) / n)
        agreeing = int((arm > base).sum())
        hits += delta > 0 and delta >= 2 * stderr and agreeing >= 0.8 * n
    return hits / draws


@pytest.mark.parametrize(("n", "effect", "sd_diff", "sd_arm"), [(10, 1.0, 1.0, None), (12, 0.5, 0.4, 0.6)])
def test_simulated_power_matches_a_separate_monte_carlo(n, effect, sd_diff, sd_arm):
    power = simulated_power(n, effect, sd_diff, sd_arm, draws=20_000, seed=0)
    arm_sd = sd_diff / math.sqrt(2) if sd_arm is None else sd_arm
    rho = 1 - sd_diff**2 / (2 * arm_sd**2)
    other = plain_monte_carlo(n, effect, arm_sd, rho, draws=4000, seed=7)
    assert power == pytest.approx(other, abs=4 * math.sqrt(0.25 / 4000))  # 4 SE of the smaller simulation
    # Both bars together: no likelier than the exact sign bar, no less than the Bonferroni bound.
    sign = sign_bar_power(n, effect, sd_diff)
    assert power <= sign + 0.01
    assert power >= sign + se_bar_power(n, effect, sd_diff, sd_arm) - 1 - 0.05


def test_seeds_needed_is_the_first_n_reaching_80_percent():
    answer = seeds_needed(0.5, 0.4)
    n = answer.seeds
    assert answer.power >= 0.8
    assert sign_bar_power(n, 0.5, 0.4) >= 0.8
    assert all(simulated_power(m, 0.5, 0.4) < 0.8 for m in range(2, n))
    assert simulated_power(n, 0.5, 0.4) == answer.power  # fixed seed: the same draws


def test_an_effect_whose_seeds_agree_less_than_80_percent_never_reaches_the_sign_bar():
    # Clip-Higher's tuning numbers (+0.045, sd 0.06): p = Phi(0.75) = 0.77 < 0.8.
    answer = seeds_needed(0.045, 0.06)
    assert answer.seeds is None
    assert sign_bar_power(100, 0.045, 0.06) < sign_bar_power(10, 0.045, 0.06) < 0.8
    assert answer.power < 0.8
    assert "p = 0.77 < 0.8" in answer.line()


def test_power_on_numbers_through_the_cli(capsys):
    cli.main(["compare", "--power", "0.5:0.4"])
    out = capsys.readouterr().out
    assert f"{seeds_needed(0.5, 0.4).seeds} paired seeds for" in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--power", "0.5:abc"], "--power '0.5:abc': write EFFECT:SD"),
        (["--power", "1:2:3:4"], "--power '1:2:3:4'"),
        (["--power", "0:0.4"], "effect 0.0"),
        (["--power", "0.5:-1"], "sd -1.0"),
        (["--power", "0.5:nan"], "sd nan"),
        (["--power", "0.5:1:0.2"], "sd per arm 0.2"),
        (["--power", "reward"], "name the runs"),
    ],
)
def test_bad_power_inputs_are_one_line(argv, fragment, capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(["compare", *argv])
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0]


def test_power_from_a_sweep_folder(sweep):
    # reward AUC/span (tests/compare/sweep_by_hand.py): symmetric 0.2, 0.3, 0.4; clip_higher 0.4, 0.6, 0.8 for seeds 1-3
    # paired differences 0.2, 0.3, 0.4: mean 0.3, sd 0.1; the arms' sds 0.1 and 0.2, pooled sqrt(0.025) = 0.158.
    [line, _] = report_power("reward", [str(sweep)])
    assert "effect +0.3, sd of paired difference 0.1, sd per arm 0.158" in line
    assert line.endswith(seeds_needed(0.3, 0.1, math.sqrt(0.025)).line())
    with pytest.raises(CompareError, match="takes numbers, not runs"):
        report_power("0.3:0.1", [str(sweep)])
    with pytest.raises(CompareError, match="not logged by every run"):
        report_power("kl", [str(sweep)])


def test_huge_or_tiny_numbers_answer_by_their_ratio_or_are_refused_in_one_line():
    from align_kit.compare import CompareError
    from align_kit.compare.power import seeds_needed

    # only the ratios matter: 0.05:0.03 and the same scaled by 1e300 need the same seeds
    small, huge = seeds_needed(0.05, 0.03, draws=2000), seeds_needed(0.05e300, 0.03e300, draws=2000)
    assert (small.seeds, small.power) == (huge.seeds, huge.power)
    assert huge.line().startswith("effect +5e+298, sd of paired difference 3e+298")
    # an effect millions of times its sd (seeds that differ by a near-constant amount): 2 seeds, with certainty
    for effect, sd in ((1e308, 1), (1, 1e-300), (-1e308, 1e-308)):
        answer = seeds_needed(effect, sd, draws=100)
        assert (answer.seeds, answer.power) == (2, 1.0)
    for effect, sd, arm in ((1e-300, 1, None), (1, 1, 1e200)):
        with pytest.raises(CompareError, match=r"is \S+, outside \[1e-06, 1e\+06\]"):
            seeds_needed(effect, sd, arm, draws=100)


def test_an_effect_past_the_cap_is_shown_as_stated_and_said_to_be_computed_at_the_cap():
    from align_kit.compare.power import seeds_needed

    line = seeds_needed(5e6, 1.0).line()
    assert line.startswith(
        "effect +5e+06, sd of paired difference 1 (arms taken as independent) [effect / sd = 5e+06, beyond 1e+06: "
        "computed at effect / sd = 1e+06, where the answer no longer changes]: 2 paired seeds"
    )
