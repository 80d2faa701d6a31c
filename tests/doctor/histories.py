"""RunHistory objects built by hand for the doctor's tests."""

from __future__ import annotations

from typing import Any

from align_kit.doctor.history import RunHistory


def history(
    rows: list[dict[str, float]],
    framework: str = "trl",
    context: dict[str, Any] | None = None,
    start: int = 1,
    every: int = 1,
    name: str = "run",
) -> RunHistory:
    """Rows logged at steps start, start + every, ...; each key maps to itself."""
    keys = list(dict.fromkeys(key for row in rows for key in row))
    return RunHistory(
        source=f"{name}/trainer_state.json",
        format="trl_state",
        framework=framework,
        rows=[(start + index * every, dict(row)) for index, row in enumerate(rows)],
        mapping={key: key for key in keys},
        context=dict(context or {}),
        name=name,
    )


def series(name: str, values: list[float], **constant: float) -> list[dict[str, float]]:
    return [{name: value, **constant} for value in values]
