"""The progress bar while compare reads runs: on stderr for many runs read at a terminal, quiet for a few or in a
log, never on stdout."""

from __future__ import annotations

import io
import json
import sys

import pytest

from align_kit.compare.command import compare
from align_kit.compare.progress import SHOWN_FROM, progress_bar
from align_kit.compare.wandb_source import load_wandb_group
from tests.compare.sweep_by_hand import FakeApi


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_for_many_runs_at_a_terminal_only(monkeypatch):
    for total, terminal, shown in ((SHOWN_FROM, True, True), (SHOWN_FROM - 1, True, False), (50, False, False)):
        stream = Terminal() if terminal else io.StringIO()
        monkeypatch.setattr(sys, "stderr", stream)
        with progress_bar(total, "run folders") as bar:
            for _ in range(total):
                bar.update()
        written = stream.getvalue()
        assert ("align-kit: reading run folders: 100%" in written and f"{total}/{total}" in written) == shown
        assert shown or written == ""


def test_compare_over_many_folders_shows_the_bar_on_stderr_and_not_on_stdout(tmp_path, monkeypatch, capsys):
    # 2 arms x 10 seeds: 20 folders, the fewest that show a bar. Arm a logs reward a + 0.1 t at steps t = 1, 2, 3:
    # final (all 3 points) a + 0.2 for every seed.
    sweep = tmp_path / "sweep"
    for number in range(SHOWN_FROM):
        arm, seed = divmod(number, SHOWN_FROM // 2)
        folder = sweep / str(number)
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps({"choices": {"clip": f"node{arm}"}, "seed": seed}))
        rows = [{"step": step, "reward": arm + 0.1 * step} for step in (1, 2, 3)]
        (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    result = compare([str(sweep)], out=tmp_path / "out")

    assert [len(arm.runs) for arm in result.arms] == [10, 10]
    assert [summary.final.mean for summary in result.tables["reward"]] == pytest.approx([0.2, 1.2])
    assert "align-kit: reading run folders: 100%" in terminal.getvalue()
    assert f"{SHOWN_FROM}/{SHOWN_FROM}" in terminal.getvalue()
    assert "reading" not in capsys.readouterr().out


def test_a_few_wandb_runs_read_quietly(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    runs = load_wandb_group("team/align_kit/clip-sweep", api=FakeApi(), metrics=["reward"])
    assert len(runs) == 6
    assert terminal.getvalue() == ""
