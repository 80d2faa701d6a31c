"""The gradient family on short histories: 1-2 logged points are read only when the norm is exactly 0."""

from __future__ import annotations

from tests.monitor.rules.helpers import fired, replay


def test_one_or_two_exact_zero_grad_norms_are_vanishing_at_the_end():
    # One row, grad_norm 0.0 with the loss -0.0 (no update at all): judged at the end on that row.
    assert fired(replay([{"grad_norm": 0.0, "loss": -0.0}])[1], "grad_norm_vanishing") == [(1, "grad_norm_vanishing")]
    # Two rows, both exactly 0.0 (a trainer printing "Grad. Norm: 0.0000").
    rows = [{"grad_norm": 0.0, "loss": 0.0}] * 2
    assert fired(replay(rows)[1], "grad_norm_vanishing") == [(2, "grad_norm_vanishing")]


def test_short_small_but_nonzero_grad_norms_are_not_read_as_vanishing():
    # 5e-5 is below the floor 1e-4, but on 1-2 points only an exact 0 counts: a small norm is no trend yet.
    assert fired(replay([{"grad_norm": 5e-5}] * 2)[1], "grad_norm_vanishing") == []
    # From 3 points the floor is read as over a full window: 3 points of 5e-5 < 1e-4 fire.
    assert fired(replay([{"grad_norm": 5e-5}] * 3)[1], "grad_norm_vanishing") == [(3, "grad_norm_vanishing")]


def test_one_zero_row_with_loss_and_reward_spread_stays_a_logging_artefact():
    # grad_norm 0.0 while the loss (0.02) and reward_std (0.4) are non-zero: GradNormZeros calls it an artefact,
    # so the rule does not judge it, however short the history.
    monitor, alerts = replay([{"grad_norm": 0.0, "loss": 0.02, "reward_std": 0.4}])
    assert fired(alerts, "grad_norm_vanishing") == []
    assert not {item.rule: item for item in monitor.coverage()}["grad_norm_vanishing"].judged
