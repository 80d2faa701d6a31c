"""Rows with no reward spread, counted over the whole history: how much of a run had no learning signal at all
(every group flat, `reward_std` 0: no advantage, no policy gradient; 16.6.5), whatever its length."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# A reward spread this small is none (TRL's flat-group test uses 1e-8 on float32 stds).
NO_SPREAD = 1e-8


class SpreadlessRows:
    """Of the rows that log `reward_std` (finite), how many are at most NO_SPREAD."""

    def __init__(self) -> None:
        self.rows = self.spreadless = 0

    def add(self, metrics: Mapping[str, Any]) -> None:
        spread = metrics.get("reward_std")
        if isinstance(spread, int | float) and math.isfinite(spread):
            self.rows += 1
            self.spreadless += spread <= NO_SPREAD

    def most(self, fewest: int) -> bool:
        """More than half of the rows spreadless, and at least `fewest` of them (sustained)."""
        return self.spreadless >= fewest and 2 * self.spreadless > self.rows

    def state_dict(self) -> dict[str, int]:
        return {"rows": self.rows, "spreadless": self.spreadless}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        self.rows, self.spreadless = state["rows"], state["spreadless"]
