"""The progress bar compare shows on stderr while it reads many runs (tqdm, which transformers and huggingface_hub
already depend on). Quiet for a few runs, where reading takes moments, and when stderr is not a terminal, so a log
file or a pipe gets no bar redrawn a thousand times; stdout (the tables) never carries it."""

from __future__ import annotations

import sys
from typing import Any

SHOWN_FROM = 20  # runs: fewer are read in about a second


def progress_bar(total: int, what: str) -> Any:
    """A tqdm bar over `total` runs (use it as a context manager, `.update()` per run read), or one that shows
    nothing when `total` is below SHOWN_FROM or stderr is not a terminal."""
    from tqdm import tqdm

    shown = total >= SHOWN_FROM and sys.stderr.isatty()
    return tqdm(total=total, desc=f"align-kit: reading {what}", unit="run", file=sys.stderr, disable=not shown)
