"""The figures' numbers: moving-average and EMA smoothing, and the seed band on the common steps, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from align_kit.compare.plots import seed_band, smooth
from align_kit.tracking.metrics_file import Series


def test_moving_average_and_ema_smoothing():
    values = np.array([1.0, 2.0, 3.0, 4.0])
    # Window 2, trailing, shorter at the start: 1, (1+2)/2, (2+3)/2, (3+4)/2.
    assert smooth(values, 2) == pytest.approx([1.0, 1.5, 2.5, 3.5])
    # EMA 0.5: 1, 0.5*1 + 0.5*2 = 1.5, 0.5*1.5 + 0.5*3 = 2.25, 0.5*2.25 + 0.5*4 = 3.125.
    assert smooth(values, 0.5) == pytest.approx([1.0, 1.5, 2.25, 3.125])
    assert smooth(values, 0) is values


def test_seed_band_interpolates_onto_the_common_steps():
    # a: 0 at step 0, 2 at step 2 (1 at step 1 by interpolation); b: 2 everywhere.
    steps, mean, std = seed_band(
        [Series(np.array([0.0, 2.0]), np.array([0.0, 2.0])), Series(np.array([0.0, 1.0, 2.0]), np.array([2.0] * 3))], 0
    )
    assert steps == pytest.approx([0, 1, 2])
    assert mean == pytest.approx([1.0, 1.5, 2.0])
    # Sample std of two values x, y is |x - y| / sqrt(2).
    assert std == pytest.approx([2 / math.sqrt(2), 1 / math.sqrt(2), 0.0])
