"""Doctor calibration: `align-kit doctor` and third-party run diagnosers over the labelled set.

Reads benchmarks/doctor_runs/labels.csv (run, path, format, label, failure, fitting_rules, source,
how_labelled), runs each diagnoser on every run's file and reports, per rule and overall: runs
read, correct verdicts, false alarms on healthy runs, failures missed. A markdown table goes to
stdout and to --out.

Verdicts (healthy | warning | failing):

- doctor: `align-kit doctor --json PATH`; its JSON has runs[] with `verdict` and `alerts` (each with
  `rule`); several runs (a sweep folder) count as the worst of them. Exit 2 is a bad input: not read.
- rldoctor 0.2.0: `rl-doctor diagnose RUN.jsonl -f json` on the history converted to JSONL
  (doctor_runs/convert.py jsonl). worst_severity CRITICAL -> failing, WARNING -> warning, INFO or
  none -> healthy; the detectors of findings at WARNING or above are its "rules".
- rlprobe 0.1.0: `rlprobe doctor RUN_DIR --json` on a run directory written with rlprobe's own
  writer (convert.py rlprobe). A critical finding -> failing, warn -> warning, none or info ->
  healthy (rlprobe says nothing, rather than "cannot judge", on runs shorter than its 30 steps).
- rlvr-audit 0.1.0: `rlvr-audit inspect --file RUN.jsonl --format json`. It audits per-prompt
  group rewards (a `rewards` list per prompt); a history of batch means has none, so it reads a run
  only where its CLI returns a report (then any verdict other than HEALTHY -> failing).

Scoring (only runs labelled healthy or failing are scored; unlabelled ones count in "read"):

- a healthy run is correct only when its verdict is healthy; warning or failing is a false alarm;
- a failing run is correct, for the doctor, when its verdict is failing or warning AND an alert of a
  rule in its fitting_rules fired (the advice fits the failure); flagged only by other rules counts
  as "flagged, rule does not fit"; for a third-party tool, when its verdict is failing or warning
  at all (its detectors have other names and advice);
- a run the doctor read but no rule could judge (verdict `unjudged`) is read-not-judged: neither correct nor a
  false alarm, and a failing one is a failure missed;
- a run the diagnoser cannot read is never correct: a failing one is a failure missed, a healthy
  one counts as not read (neither a false alarm nor correct).

Run: python benchmarks/doctor_calibration.py --align-kit-runs outputs/alert_calibration \
       --out benchmarks/doctor_runs/RESULTS.md [--tools doctor rldoctor rlprobe rlvr-audit]
Runs named in doctor_runs/heldback.txt (--heldback) were held back from the rules' development: the
report scores them apart from the rest (in-sample) as well as together.
Tests may pass --doctor-command (any command taking `--json PATH`).
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LABELS = ROOT / "benchmarks" / "doctor_runs" / "labels.csv"
CONVERT = ROOT / "benchmarks" / "doctor_runs" / "convert.py"
HELDBACK = ROOT / "benchmarks" / "doctor_runs" / "heldback.txt"
ALIGN_KIT_PREFIX = "outputs/alert_calibration/"
TOOLS = ("doctor", "rldoctor", "rlprobe", "rlvr-audit")
RANK = {"healthy": 0, "unjudged": 1, "warning": 2, "failing": 3}


@dataclass(frozen=True)
class LabelledRun:
    run: str
    path: str
    format: str
    label: str  # healthy | failing | unlabelled...
    fitting_rules: tuple[str, ...]


@dataclass
class Outcome:
    """One diagnoser on one run: verdict None when it could not read the run."""

    verdict: str | None
    rules: tuple[str, ...] = ()
    note: str = ""


@dataclass
class Score:
    read: int = 0
    not_read: int = 0
    not_judged: int = 0  # read, but no rule could judge it (the doctor's `unjudged`)
    healthy: int = 0
    failing: int = 0
    correct: int = 0
    false_alarms: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    wrong_rule: list[str] = field(default_factory=list)


def load_labels(path: Path) -> list[LabelledRun]:
    runs = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            name = (row.get("run") or "").strip()
            if not name or name.startswith("#"):
                continue
            rules = tuple(r.strip() for r in (row.get("fitting_rules") or "").split(";") if r.strip())
            runs.append(LabelledRun(name, row["path"].strip(), row.get("format", ""), row["label"].strip(), rules))
    return runs


def load_heldback(path: Path) -> frozenset[str]:
    """Run names held back from the rules' development (one a line, `#` comments); none if absent."""
    if not path.exists():
        return frozenset()
    lines = (line.strip() for line in path.read_text().splitlines())
    return frozenset(line for line in lines if line and not line.startswith("#"))


def resolve(run: LabelledRun, align_kit_runs: Path | None) -> Path:
    if align_kit_runs is not None and run.path.startswith(ALIGN_KIT_PREFIX):
        return align_kit_runs / run.path[len(ALIGN_KIT_PREFIX) :]
    return ROOT / run.path


def _run(command: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def doctor_outcome(command: list[str], path: Path) -> Outcome:
    result = _run([*command, "--json", str(path)])
    if result.returncode == 2:
        note = (result.stderr.strip().splitlines() or ["bad input"])[-1]
        # "align-kit: doctor error: /full/path: why" -> "why": the reason is what the table has room for
        return Outcome(None, note=note.split(f"{path}: ", 1)[-1])
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        return Outcome(None, note=f"no JSON (exit {result.returncode})")
    runs = report.get("runs", []) if isinstance(report, dict) else []
    if not runs:
        return Outcome(None, note="no runs in the JSON")
    verdict = max((r.get("verdict", "warning") for r in runs), key=lambda v: RANK.get(v, 2))
    rules = tuple(dict.fromkeys(a["rule"] for r in runs for a in r.get("alerts", []) if "rule" in a))
    return Outcome(verdict, rules)


def _convert(python: str, kind: str, path: Path, out: Path) -> str | None:
    result = _run([python, str(CONVERT), kind, str(path), str(out), "--run-name", path.stem])
    if result.returncode == 0:
        return None
    return (result.stderr.strip().splitlines() or ["conversion failed"])[-1].replace(f"{path}: ", "")


def rldoctor_outcome(venv: Path, path: Path, scratch: Path) -> Outcome:
    jsonl = scratch / "run.jsonl"
    error = _convert(str(venv / "bin" / "python"), "jsonl", path, jsonl)
    if error:
        return Outcome(None, note=error)
    result = _run([str(venv / "bin" / "rl-doctor"), "diagnose", str(jsonl), "-f", "json", "--no-color"])
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        return Outcome(None, note=(result.stderr.strip().splitlines() or ["no JSON"])[-1])
    severity = (report.get("worst_severity") or "").upper()
    verdict = {"CRITICAL": "failing", "WARNING": "warning"}.get(severity, "healthy")
    rules = tuple(f["detector"] for f in report.get("findings", []) if f.get("severity") in ("WARNING", "CRITICAL"))
    return Outcome(verdict, rules)


def rlprobe_outcome(venv: Path, path: Path, scratch: Path) -> Outcome:
    run_dir = scratch / "rlprobe_run"
    error = _convert(str(venv / "bin" / "python"), "rlprobe", path, run_dir)
    if error:
        return Outcome(None, note=error)
    result = _run([str(venv / "bin" / "rlprobe"), "doctor", str(run_dir), "--json"])
    try:
        findings = json.loads(result.stdout)
    except json.JSONDecodeError:
        return Outcome(None, note=(result.stderr.strip().splitlines() or ["no JSON"])[-1])
    severities = {f.get("severity") for f in findings}
    verdict = "failing" if "critical" in severities else "warning" if "warn" in severities else "healthy"
    rules = tuple(f["signature_id"] for f in findings if f.get("severity") in ("warn", "critical"))
    return Outcome(verdict, rules)


def rlvr_audit_outcome(venv: Path, path: Path, scratch: Path) -> Outcome:
    jsonl = scratch / "run.jsonl"
    error = _convert(str(venv / "bin" / "python"), "jsonl", path, jsonl)
    if error:
        return Outcome(None, note=error)
    result = _run([str(venv / "bin" / "rlvr-audit"), "inspect", "--file", str(jsonl), "--format", "json"])
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        last = (result.stderr.strip().splitlines() or ["no JSON"])[-1]
        return Outcome(None, note=f"needs per-prompt group rewards ({last})")
    if not isinstance(report, dict) or "error" in report:
        return Outcome(None, note=str(report.get("error") if isinstance(report, dict) else report))
    verdicts = {g.get("verdict") for g in report.get("groups", report.get("blocks", [])) if isinstance(g, dict)}
    return Outcome("healthy" if verdicts <= {"HEALTHY"} else "failing", tuple(sorted(v for v in verdicts if v)))


def score(runs: list[LabelledRun], outcomes: dict[str, Outcome], fitting: bool) -> Score:
    """`fitting`: a failing run needs a fitting rule among the fired ones (the doctor)."""
    total = Score()
    for run in runs:
        outcome = outcomes.get(run.run)
        if outcome is None:
            continue
        if outcome.verdict is None:
            total.not_read += 1
        else:
            total.read += 1
            total.not_judged += outcome.verdict == "unjudged"
        if run.label == "healthy":
            total.healthy += 1
            if outcome.verdict == "healthy":
                total.correct += 1
            elif outcome.verdict in ("warning", "failing"):
                total.false_alarms.append(run.run)
        elif run.label == "failing":
            total.failing += 1
            flagged = outcome.verdict in ("warning", "failing")
            fits = not fitting or any(rule in run.fitting_rules for rule in outcome.rules)
            if flagged and fits:
                total.correct += 1
            elif flagged:
                total.wrong_rule.append(run.run)
                total.missed.append(run.run)
            else:
                total.missed.append(run.run)
    return total


@dataclass
class Three:
    """A split's labelled runs in three (and those not read): judged as labelled; read but `unjudged` (never counted
    as labelled, whatever the label: a healthy excerpt too short to judge is not matched by `unjudged`); judged
    otherwise (wrong). `failing_called_healthy` and `unjudged_healthy` are parts of wrong and unjudged."""

    labelled: int = 0
    as_labelled: int = 0
    unjudged: int = 0
    unjudged_healthy: int = 0
    wrong: int = 0
    failing_called_healthy: int = 0
    not_read: int = 0


def three(runs: list[LabelledRun], outcomes: dict[str, Outcome], fitting: bool) -> Three:
    """The runs labelled healthy or failing of `runs` in Three's counts, by score()'s rule of what is as labelled."""
    scored = [run for run in runs if run.label in ("healthy", "failing") and run.run in outcomes]
    counts = Three(labelled=len(scored))
    correct = set()
    for run in scored:
        if score([run], outcomes, fitting).correct:
            correct.add(run.run)
    for run in scored:
        verdict = outcomes[run.run].verdict
        if verdict is None:
            counts.not_read += 1
        elif run.run in correct:
            counts.as_labelled += 1
        elif verdict == "unjudged":
            counts.unjudged += 1
            counts.unjudged_healthy += run.label == "healthy"
        else:
            counts.wrong += 1
            counts.failing_called_healthy += run.label == "failing" and verdict == "healthy"
    return counts


def _three_lines(
    runs: list[LabelledRun], results: dict[str, dict[str, Outcome]], heldback: frozenset[str]
) -> list[str]:
    splits = [("all", runs)]
    splits += [(group, [r for r in runs if group_of(r) == group]) for group in ("published", "made here")]
    if heldback & {run.run for run in runs}:
        splits += [("development", [r for r in runs if r.run not in heldback])]
        splits += [("held back", [r for r in runs if r.run in heldback])]
    lines = [
        "### as labelled, unjudged, wrong",
        "",
        "Each split's runs labelled healthy or failing, in three: judged as labelled; read but `unjudged` (not a match "
        "for any label, a healthy excerpt too short to judge included); judged otherwise (wrong). Not read apart. "
        "The last column is the share as labelled among the runs judged (neither unjudged nor unread).",
        "",
        "| diagnoser | split | labelled | as labelled | unjudged (labelled healthy) | wrong (failing called healthy) "
        "| not read | as labelled, of those judged |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for tool, outcomes in results.items():
        for name, members in splits:
            c = three(members, outcomes, fitting=(tool == "doctor"))
            judged = c.as_labelled + c.wrong
            share = f"{c.as_labelled}/{judged} ({100 * c.as_labelled / judged:.0f} %)" if judged else "-"
            lines.append(
                f"| {tool} | {name} | {c.labelled} | {c.as_labelled} | {c.unjudged} ({c.unjudged_healthy}) "
                f"| {c.wrong} ({c.failing_called_healthy}) | {c.not_read} | {share} |"
            )
    return lines


def per_rule(runs: list[LabelledRun], outcomes: dict[str, Outcome], fitting: bool = True) -> dict[str, dict[str, int]]:
    """Per rule: false alarms (fired on a healthy run), caught (fired on a failing run it fits),
    fired elsewhere (on a failing run it does not fit), missed (fits a failing run, did not fire).
    Without `fitting` (a third-party tool, whose detectors are not the doctor's rules) every firing
    on a failing run counts as caught and nothing as missed per rule."""
    table: dict[str, dict[str, int]] = {}

    def row(rule: str) -> dict[str, int]:
        return table.setdefault(rule, {"false_alarms": 0, "caught": 0, "fired_not_fitting": 0, "missed": 0})

    for run in runs:
        outcome = outcomes.get(run.run)
        if outcome is None:
            continue
        fired = set(outcome.rules)
        if run.label == "healthy":
            for rule in fired:
                row(rule)["false_alarms"] += 1
        elif run.label == "failing":
            for rule in fired:
                row(rule)["caught" if not fitting or rule in run.fitting_rules else "fired_not_fitting"] += 1
            for rule in run.fitting_rules if fitting else ():
                if rule not in fired:
                    row(rule)["missed"] += 1
    return dict(sorted(table.items()))


def group_of(run: LabelledRun) -> str:
    """Published histories (files saved as published, under doctor_runs/published/) and the runs made
    here (align_kit runs, conversions) are reported apart as well as together."""
    return "published" if "doctor_runs/published/" in run.path else "made here"


def _summary(runs: list[LabelledRun], results: dict[str, dict[str, Outcome]]) -> list[str]:
    labelled = [r for r in runs if r.label in ("healthy", "failing")]
    lines = [
        f"Labelled set: {len(runs)} runs ({sum(r.label == 'healthy' for r in runs)} healthy, "
        f"{sum(r.label == 'failing' for r in runs)} failing, {len(runs) - len(labelled)} unlabelled).",
        "",
        "| diagnoser | runs read | not read | read, not judged | correct verdicts | false alarms (healthy) "
        "| failures missed | flagged, rule does not fit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for tool, outcomes in results.items():
        s = score(runs, outcomes, fitting=(tool == "doctor"))
        scored = s.healthy + s.failing
        lines.append(
            f"| {tool} | {s.read} | {s.not_read} | {s.not_judged} | {s.correct}/{scored} "
            f"| {len(s.false_alarms)}/{s.healthy} | {len(s.missed)}/{s.failing} "
            f"| {len(s.wrong_rule) if tool == 'doctor' else '-'} |"
        )
    return lines


def markdown(
    runs: list[LabelledRun], results: dict[str, dict[str, Outcome]], heldback: frozenset[str] = frozenset()
) -> str:
    lines = _summary(runs, results)
    groups = sorted({group_of(run) for run in runs}, key=lambda g: g != "published")
    for group in groups if len(groups) > 1 else ():
        lines += ["", f"### {group} runs only", "", *_summary([r for r in runs if group_of(r) == group], results)]
    if heldback & {run.run for run in runs}:
        # In-sample (the rules were developed on these) beside the runs kept out of that development.
        development = [r for r in runs if r.run not in heldback]
        lines += ["", "### development runs (in-sample)", "", *_summary(development, results)]
        lines += ["", "### held-back runs", "", *_summary([r for r in runs if r.run in heldback], results)]
    lines += ["", *_three_lines(runs, results, heldback)]
    for tool, outcomes in results.items():
        caught = "caught (fits)" if tool == "doctor" else "fired on failing runs"
        lines += ["", f"### {tool}: per rule", "", f"| rule | false alarms | {caught} | fired, not fitting | missed |"]
        lines.append("|---|---|---|---|---|")
        for rule, counts in per_rule(runs, outcomes, fitting=(tool == "doctor")).items():
            lines.append(
                f"| {rule} | {counts['false_alarms']} | {counts['caught']} | {counts['fired_not_fitting']} "
                f"| {counts['missed']} |"
            )
    lines += ["", "### per run", "", "| run | group | label | " + " | ".join(results) + " |"]
    lines.append("|---|---|---|" + "---|" * len(results))
    for run in runs:
        cells = []
        for outcomes in results.values():
            outcome = outcomes.get(run.run)
            if outcome is None:
                cells.append("")
            elif outcome.verdict is None:
                cells.append(f"not read: {outcome.note}"[:110])
            else:
                cells.append(outcome.verdict + (f" ({', '.join(outcome.rules)})" if outcome.rules else ""))
        group = group_of(run) + (", held back" if run.run in heldback else "")
        lines.append(f"| {run.run} | {group} | {run.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument(
        "--align-kit-runs", type=Path, help="folder holding the align_kit runs (outputs/alert_calibration)"
    )
    parser.add_argument("--tools", nargs="*", default=list(TOOLS), choices=TOOLS)
    parser.add_argument(
        "--doctor-command",
        # The doctor of this interpreter's align_kit (the project's .venv), whatever is on PATH.
        default=f"{shlex.quote(sys.executable)} -m align_kit.cli doctor",
        help="the doctor command (--json PATH appended)",
    )
    parser.add_argument("--tools-venv", type=Path, default=Path("/work/tools-venv"))
    parser.add_argument(
        "--heldback", type=Path, default=HELDBACK, help="run names held back from the rules' development"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    runs = load_labels(args.labels)
    results: dict[str, dict[str, Outcome]] = {tool: {} for tool in args.tools}
    for run in runs:
        path = resolve(run, args.align_kit_runs)
        for tool in args.tools:
            if not path.exists():
                results[tool][run.run] = Outcome(None, note=f"{run.path} not found")
                continue
            with tempfile.TemporaryDirectory() as scratch:
                if tool == "doctor":
                    outcome = doctor_outcome(shlex.split(args.doctor_command), path)
                elif tool == "rldoctor":
                    outcome = rldoctor_outcome(args.tools_venv, path, Path(scratch))
                elif tool == "rlprobe":
                    outcome = rlprobe_outcome(args.tools_venv, path, Path(scratch))
                else:
                    outcome = rlvr_audit_outcome(args.tools_venv, path, Path(scratch))
            results[tool][run.run] = outcome
    report = markdown(runs, results, load_heldback(args.heldback))
    sys.stdout.write(report)
    if args.out:
        args.out.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
