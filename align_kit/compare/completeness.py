"""Whether a run folder holds a finished run, and which of its logged rows a resume replaced.

An unfinished run (crashed, killed, stopped by a signal, halted by the monitor, still running) has fewer steps than
its arm's other seeds: averaged in, it drags the arm's final value and AUC towards its early steps, and `--power`
pairs it as if it were whole. compare leaves such a run out of its arm and names it with the reason, as it leaves out
a sweep job its manifest records as not ok. Evidence of a finished run: `summary.json` (align-kit train writes it
last), not halted and at its planned `trainer.max_steps`; without it, a logged step at `trainer.max_steps` (HF's
end-of-training row carries the last step: a run stopped by a signal ends its loop short of it). A folder with
neither a summary nor a config stating `trainer.max_steps` (metrics written elsewhere) is compared as it is.

A run resumed from a checkpoint logs again the steps after that checkpoint. The resumed run's rows are the run: the
rows the earlier attempt logged from the resumed step on are dropped (all of them, even past the last step the
resumed run reached: they belong to a trajectory the run abandoned), and a note says so.
"""

from __future__ import annotations

import json
from pathlib import Path

from align_kit.core.run_files import SUMMARY_FILE
from align_kit.tracking.metrics_file import SUMMARY_ROW_KEY


def unfinished(config: dict, summary: dict | None, rows: list[tuple[float, dict]]) -> str | None:
    """Why the run is not a finished run (None when it is). `config` is its config.yaml as read (nested), `summary`
    its summary.json (None when absent), `rows` its logged rows."""
    trainer = config.get("trainer") if isinstance(config.get("trainer"), dict) else {}
    planned = trainer.get("max_steps")
    planned = planned if isinstance(planned, int) and not isinstance(planned, bool) and planned > 0 else None
    steps = [step for step, _ in rows]
    last = max((step for step, row in rows if SUMMARY_ROW_KEY not in row), default=None)
    logged = f"last step logged {last:g}" if last is not None else "no step logged"
    if summary is not None:
        halted = summary.get("halted")
        if halted:
            where = f" at step {halted.get('step')}" if isinstance(halted, dict) and "step" in halted else ""
            return f"halted by the health monitor{where} ({logged})"
        done = summary.get("steps")
        if not isinstance(done, int) or isinstance(done, bool):
            return None
        if planned is not None and done < planned:
            return f"stopped at step {done} of trainer.max_steps={planned}"
        if rows and max(steps) < done:  # HF's end-of-training row carries the last step: rows after it were lost
            return f"its metrics end at step {max(steps):g}, before the {done} steps {SUMMARY_FILE} records (rows lost)"
        return None
    if planned is not None:
        if not steps or max(steps) < planned:
            return (
                f"no {SUMMARY_FILE} and {logged}, short of trainer.max_steps={planned}: it did not finish (crashed, "
                "killed, stopped, or still running)"
            )
        return None  # every planned step logged: only the summary is missing (being written, or lost)
    return None  # no summary and no planned step count (metrics from elsewhere): nothing to judge it by


def drop_replaced_rows(rows: list[tuple[float, dict]]) -> tuple[list[tuple[float, dict]], list[str]]:
    """`rows` (in the order logged) with the rows each resume replaced dropped, and one phrase per resume. A resume
    shows as a step lower than the last one logged, or the same step logging a metric again."""
    kept: list[tuple[float, dict]] = []
    resumes: list[str] = []
    last_step, keys_at_last = None, set()
    for step, row in rows:
        if SUMMARY_ROW_KEY in row:  # HF's end-of-training row repeats the last step; it resumes nothing
            kept.append((step, row))
            continue
        again = last_step is not None and (
            step < last_step or (step == last_step and keys_at_last & row.keys() - {"step", "epoch"})
        )
        if again:
            replaced = [s for s, r in kept if s >= step and SUMMARY_ROW_KEY not in r]
            kept = [(s, r) for s, r in kept if s < step]
            resumes.append(
                f"resumed at step {step:g}: {len(replaced)} row(s) the earlier attempt logged for steps "
                f"{min(replaced):g}-{max(replaced):g} replaced by the resumed run's"
            )
            keys_at_last = set()
        if step != last_step:
            keys_at_last = set()
        keys_at_last |= row.keys()
        last_step = step
        kept.append((step, row))
    return kept, resumes


def read_summary_file(path: Path) -> dict:
    """summary.json as a mapping ({} when it is not a JSON object: then it cannot say the run stopped early)."""
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}
