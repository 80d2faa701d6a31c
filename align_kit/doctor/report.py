"""The doctor's report: a text report per run, a summary table when there are several, and the `--json` document.

JSON (`to_json`): one object `{"schema": 1, "verdict": <worst>, "exit_code": <n>, "runs": [...]}`; each run:
`name`, `source`, `format`, `framework`, `rows`, `steps` ([first, last] or null), `verdict`, `summary`, `questions`
(each central question -> whether it was answered),
`alerts` (each `step`, `rule`, `severity`, `action`, `metric`, `first_step`, `points`, `values`, `message`,
`fixes`), `coverage` (each `rule`, `judged`, `fired`, `reason`, `missing`), `advice` (each `fix`, `priority`,
`text`, `rules`), `mapping` (source key -> concept), `unmapped`, `notes`, `artefacts`, `figure` (path or null).
Non-finite numbers are written as the strings "nan", "inf", "-inf" so the document stays strict JSON.
A bad input (exit 2) is `{"schema": 1, "verdict": null, "exit_code": 2, "error": <the one line>, "runs": []}`.

Notes: how the history was read, then each concept holding non-finite values (the rules skip them: a metric that
is all NaN would otherwise read as one nothing fired on), then how the doctor judged it.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from align_kit.doctor.advice import PRIORITY_NAMES
from align_kit.doctor.diagnose import EXIT_CODES, Diagnosis, worst
from align_kit.doctor.samples import RunSamples, changed_lines, shown_lines
from align_kit.monitor.rules import Alert

SCHEMA = 1


# What a name from a file must not carry to a terminal: C0 and C1 controls (ESC starts a terminal's escape sequences),
# DEL, lone surrogates (unencodable: printing one ends in a traceback) and the bidirectional overrides (they reorder
# what is shown). Each is shown as its Python escape, `\x1b`, `\udc80`, `\u202e`.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` safe to print as one line: every control character, lone surrogate and direction override escaped."""
    return _UNPRINTABLE.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _span(diagnosis: Diagnosis) -> tuple[int, int] | None:
    rows = diagnosis.history.rows
    return (rows[0][0], rows[-1][0]) if rows else None


def _read_points(alert: Alert) -> str:
    points, first = alert.points, alert.first_step
    if not points:
        return ""
    where = f"steps {first}-{alert.step}" if first is not None and first != alert.step else f"step {alert.step}"
    return f"read {points} logged point{'s' * (points != 1)}, {where}"


# Concepts a training step computes: NaN/inf there means the step itself broke (16.6: a NaN loss or gradient is
# the end of a run), where a NaN reward or length may be one function's or logger's fault.
COMPUTED = ("loss", "grad_norm", "entropy", "kl", "policy_ratio/mean")


def non_finite_notes(diagnosis: Diagnosis) -> list[str]:
    """One note per concept with NaN/inf values: how many of its logged values, where the first is, and when every
    value is, that no rule could read it."""
    history = diagnosis.history
    concept_key = {concept: key for key, concept in history.mapping.items()}
    logged: dict[str, int] = {}
    bad: dict[str, list[tuple[int, float]]] = {}
    for step, row in history.rows:
        for concept, value in row.items():
            logged[concept] = logged.get(concept, 0) + 1
            if not math.isfinite(value):
                bad.setdefault(concept, []).append((step, value))
    notes = []
    for concept, points in bad.items():
        key = concept_key.get(concept, concept)
        named = concept if key == concept else f"{concept} ({key})"
        counts = Counter(_kind(value) for _, value in points)
        kinds = ", ".join(f"{counts[kind]} {kind}" for kind in ("NaN", "inf", "-inf") if counts[kind])
        if len(points) == logged[concept]:
            what = f"every one of its {logged[concept]} logged values is non-finite ({kinds}): no rule could read it"
        else:
            what = (
                f"{len(points)} of {logged[concept]} logged values are non-finite ({kinds}), "
                f"the first at step {points[0][0]}"
            )
        if concept in COMPUTED:
            what += "; a non-finite value computed by the training step is itself a sign the run broke"
        notes.append(f"{named}: {what}")
    return notes


def _kind(value: float) -> str:
    return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def notes_of(diagnosis: Diagnosis) -> list[str]:
    """The run's notes in the report's order: how it was read, its non-finite values, how it was judged."""
    return [*diagnosis.history.notes, *non_finite_notes(diagnosis), *diagnosis.notes]


def render(diagnosis: Diagnosis, figure: str | None = None, samples: RunSamples | None = None) -> str:
    """The text report of one run; `samples`: the completions behind its alerts (align_kit.doctor.samples)."""
    history = diagnosis.history
    span = _span(diagnosis)
    lines = [f"== {history.name or history.source}", f"verdict: {diagnosis.summary}"]
    steps = f", steps {span[0]}-{span[1]}" if span else ""
    lines.append(
        f"read: {history.source} as {history.format} (advice in {history.framework} terms), "
        f"{len(history.rows)} logged rows{steps}"
    )
    notes = notes_of(diagnosis)
    if notes:
        lines.append("notes:")
        lines += [f"  - {note}" for note in notes]
    lines.append("metrics found (source key -> concept):")
    width = max((len(key) for key in history.mapping), default=0)
    lines += [f"  {key.ljust(width)} -> {concept}" for key, concept in sorted(history.mapping.items())]
    if history.unmapped:
        lines.append(f"  not mapped (no rule reads them): {', '.join(history.unmapped)}")
    lines.append("timeline:" if diagnosis.alerts else "timeline: nothing fired")
    for index, alert in enumerate(diagnosis.alerts):
        kind = "note" if alert.action == "log" else alert.severity
        lines.append(f"  step {alert.step:>6}  {kind:<7}  {alert.rule}: {alert.message}")
        detail = [_read_points(alert)]
        if alert.values:
            detail.append(", ".join(f"{key}={_num(value)}" for key, value in alert.values.items()))
        detail = [part for part in detail if part]
        if detail:
            lines.append(f"  {'':>11}  {'':<7}  ({'; '.join(detail)})")
        if samples is not None and index in samples.by_alert:
            lines += [f"  {'':>11}  {line}" for line in shown_lines(samples.by_alert[index])]
    if samples is not None and samples.folder is None:
        lines.append(samples.missing_line())
    if samples is not None:
        lines += changed_lines(samples)
    if diagnosis.artefacts:
        lines.append("artefacts (not counted as failures):")
        lines += [f"  - {artefact}" for artefact in diagnosis.artefacts]
    unjudged = [item for item in diagnosis.coverage if not item.judged]
    judged = len(diagnosis.coverage) - len(unjudged)
    lines.append(f"rules: {judged} of {len(diagnosis.coverage)} judged")
    if unjudged:
        lines.append("could not judge:")
        lines += [f"  {item.rule}: {item.reason}" for item in unjudged]
    if diagnosis.advice:
        lines.append("advice, in the tuning order of 18.3.8 (data > clipping > KL and learning rate > sampling):")
        for number, advice in enumerate(diagnosis.advice, 1):
            lines.append(
                f"  {number}. [{PRIORITY_NAMES[advice.priority]}] {advice.text}  (answers {', '.join(advice.rules)})"
            )
    if figure:
        lines.append(f"figure: {figure}")
    return "\n".join(map(printable, lines))  # each line one line: a newline in a name is shown, not obeyed


def summary_table(diagnoses: Sequence[Diagnosis]) -> str:
    """One line per run: name, format, rows, verdict, what fired, rules judged."""
    header = ("run", "format", "rows", "verdict", "fired", "judged")
    rows = []
    for diagnosis in diagnoses:
        fired = sorted({alert.rule for alert in diagnosis.counted})
        judged = sum(item.judged for item in diagnosis.coverage)
        rows.append(
            (
                diagnosis.history.name or diagnosis.history.source,
                diagnosis.history.format,
                str(len(diagnosis.history.rows)),
                diagnosis.verdict,
                ", ".join(fired) or "-",
                f"{judged}/{len(diagnosis.coverage)}",
            )
        )
    rows = [tuple(map(printable, row)) for row in rows]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    out = ["  ".join(cell.ljust(width) for cell, width in zip(header, widths, strict=True)).rstrip()]
    out.append("  ".join("-" * width for width in widths))
    out += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(out)


def _safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, Mapping):
        return {str(key): _safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_safe(item) for item in value]
    return value


def run_dict(diagnosis: Diagnosis, figure: str | None = None) -> dict[str, Any]:
    history = diagnosis.history
    span = _span(diagnosis)
    return _safe(
        {
            "name": history.name,
            "source": history.source,
            "format": history.format,
            "framework": history.framework,
            "rows": len(history.rows),
            "steps": list(span) if span else None,
            "verdict": diagnosis.verdict,
            "summary": diagnosis.summary,
            "questions": dict(diagnosis.questions),
            "alerts": [
                {
                    "step": alert.step,
                    "rule": alert.rule,
                    "severity": alert.severity,
                    "action": alert.action,
                    "metric": alert.metric,
                    "first_step": alert.first_step,
                    "points": alert.points,
                    "values": dict(alert.values),
                    "message": alert.message,
                    "fixes": list(alert.fixes),
                }
                for alert in diagnosis.alerts
            ],
            "coverage": [
                {
                    "rule": item.rule,
                    "judged": item.judged,
                    "fired": item.fired,
                    "reason": item.reason,
                    "missing": list(item.missing),
                }
                for item in diagnosis.coverage
            ],
            "advice": [advice.to_dict() for advice in diagnosis.advice],
            "mapping": dict(history.mapping),
            "unmapped": list(history.unmapped),
            "notes": notes_of(diagnosis),
            "artefacts": list(diagnosis.artefacts),
            "figure": figure,
        }
    )


def to_json(
    diagnoses: Sequence[Diagnosis],
    figures: Mapping[int, str] | None = None,
    samples: Mapping[int, RunSamples | None] | None = None,
) -> str:
    figures, samples = figures or {}, samples or {}
    verdict = worst(d.verdict for d in diagnoses)
    document = {
        "schema": SCHEMA,
        "verdict": verdict,
        "exit_code": EXIT_CODES[verdict],
        "runs": [_with_samples(run_dict(d, figures.get(i)), samples.get(i)) for i, d in enumerate(diagnoses)],
    }
    return json.dumps(document, indent=2, allow_nan=False)


def _with_samples(run: dict, samples: RunSamples | None) -> dict:
    """`run` (one run's --json object) with the completions behind each alert: `samples` is null when the run was
    not read from a run folder, else {"folder": its samples/ or null, "alerts": [{alert index, rule, step, file,
    shown}], "changed": the periodic samples before and inside the worst alert's window, or null}."""
    if samples is None:
        return {**run, "samples": None}
    alerts = [{"alert": index, **found.to_dict()} for index, found in sorted(samples.by_alert.items())]
    changed = samples.changed.to_dict() if samples.changed else None
    folder = str(samples.folder) if samples.folder else None
    return {**run, "samples": {"folder": folder, "alerts": alerts, "changed": changed}}


def error_json(message: str) -> str:
    """The --json document of a bad input (exit 2): the one line as `error`, no runs."""
    return json.dumps({"schema": SCHEMA, "verdict": None, "exit_code": 2, "error": message, "runs": []})
