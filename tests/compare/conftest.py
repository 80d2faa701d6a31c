"""The sweep of tests/compare/sweep_by_hand.py written as run folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compare.sweep_by_hand import jobs, write_run_folder


@pytest.fixture
def sweep(tmp_path) -> Path:
    root = tmp_path / "sweep"
    for number, node, seed in jobs():
        write_run_folder(root / str(number), node, seed)
    (root / "multirun.yaml").write_text("hydra: {}\n")
    return root
