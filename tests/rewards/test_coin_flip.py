"""The coin-flip reward: fixed by seed and step, at the asked rate, blind to the completion."""

from __future__ import annotations

from align_kit.rewards.coin_flip import CoinFlip


class _State:
    def __init__(self, global_step: int):
        self.global_step = global_step


def test_coin_flip_is_fixed_by_seed_and_step_and_has_the_asked_rate():
    coin = CoinFlip(seed=3)
    completions = ["anything"] * 4000
    first = coin(completions, trainer_state=_State(7))
    assert first == coin(completions, trainer_state=_State(7))  # a resumed run draws the same coins
    assert first != coin(completions, trainer_state=_State(8))
    assert set(first) == {0.0, 1.0}
    # Binomial(4000, p): the standard error of the mean is sqrt(p(1-p)/4000) <= 0.008; allow 4 of them.
    assert abs(sum(first) / len(first) - 0.5) < 0.032
    skewed = CoinFlip(seed=3, p_one=0.2)(completions, trainer_state=_State(7))
    assert abs(sum(skewed) / len(skewed) - 0.2) < 0.026


def test_coin_flip_ignores_the_completion():
    coin = CoinFlip(seed=0)
    assert coin(["a", "b", "c"], trainer_state=_State(1)) == coin(["x", "y", "z"], trainer_state=_State(1))
