"""Conversions for the labelled set of doctor runs (benchmarks/doctor_runs).

Standard library only, so it runs under the project's Python and under the separate venv of the
third-party diagnosers alike (the rlprobe conversion imports rlprobe, which only that venv has).

Two jobs:

1. Read any history file of the labelled set into plain records (one dict per logged point, the
   source's own metric names, plus "step") for the third-party tools, which read fewer formats than
   the doctor: TRL's printed log dicts (in a console log or pasted excerpt), JSON lines (align_kit's
   metrics.jsonl, ms-swift's printed JSON dicts), a TRL/HF trainer_state.json, verl console lines
   (`step:N - key:value - ...`, with Ray's prefix and lines wrapped by copy-paste), the Trainer's
   progress table (markdown `|` rows or CSV, or the HTML table a notebook's output cell keeps) and a
   W&B CSV export. Nothing is renamed here: each
   tool maps the names itself (rldoctor has its own alias table; rlprobe needs its fields, see
   RLPROBE_FIELDS, the one place where names are mapped). The exception: the consoles that name
   their metrics in words (mlx-lm GRPO, prime-rl, DeepSpeed-Chat step 3) get TRL's names for
   reward, loss, kl, entropy, grad norm, learning rate and length (_WORD_NAMES), else no tool would
   know them.

2. Build verl-format and W&B-format files from align_kit or TRL runs of the labelled set, where no
   real published one was found (recorded in SOURCES.md as conversions):
     python benchmarks/doctor_runs/convert.py verl RUN/metrics.jsonl OUT.log
     python benchmarks/doctor_runs/convert.py wandb-csv RUN/metrics.jsonl OUT.csv --run-name NAME

Tool inputs:
     python convert.py jsonl IN OUT.jsonl          (rldoctor: JSONL of records)
     python convert.py rlprobe IN OUT_DIR          (rlprobe: a recorded run directory)
"""

from __future__ import annotations

import argparse
import ast
import csv
import html
import json
import math
import re
import sys
from pathlib import Path

# --- reading -------------------------------------------------------------------------------------

_VERL_START = re.compile(r"^(?:\([^)]*\)\s*)?step:\s*(\d+)\s+-\s+")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _number(text):
    if isinstance(text, bool):
        return None
    if isinstance(text, int | float):
        return float(text)
    if not isinstance(text, str):
        return None
    token = text.strip().lower()
    if token in _NONFINITE:
        return _NONFINITE[token]
    try:
        return float(token)
    except ValueError:
        return None


def _numeric(record: dict) -> dict:
    out = {}
    for key, value in record.items():
        number = _number(value)
        if number is not None:
            out[key] = number
    return out


def _python_dicts(text: str) -> list[dict]:
    """TRL's printed log dicts: `{'loss': 0.1, ...}` anywhere in the text (nan printed bare)."""
    found = []
    for match in re.finditer(r"\{'[^{}]*\}", text):
        body = re.sub(r"(?<=: )(-?inf|nan)(?=[,}])", r"'\1'", match.group(0))
        try:
            value = ast.literal_eval(body)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, dict):
            found.append(_numeric(value))
    return found


def _verl_lines(text: str) -> list[dict]:
    """verl console lines; a line that does not start a record continues the previous one."""
    joined: list[str] = []
    for raw in _ANSI.sub("", text).splitlines():
        line = raw.rstrip("\n")
        if _VERL_START.match(line.strip()):
            joined.append(line.strip())
        elif joined and line.strip():
            joined[-1] += line.strip()  # copy-paste wraps break a key or value: no separator
    records = []
    for line in joined:
        match = _VERL_START.match(line)
        record = {"step": float(match.group(1))}
        for field in line[match.end() :].split(" - "):
            key, sep, value = field.rpartition(":")
            number = _number(value) if sep else None
            if number is not None and key:
                record[key.strip()] = number
        if len(record) > 1:
            records.append(record)
    return records


def _table(rows: list[list[str]]) -> list[dict]:
    """Progress table rows (first row the header); `No Log` cells are missing values."""
    header = [re.sub(r"\s*/\s*", "/", cell.strip()) for cell in rows[0]]
    records = []
    for cells in rows[1:]:
        if len(cells) != len(header) or all(set(c.strip()) <= set("-: ") for c in cells):
            continue
        record = {}
        for name, cell in zip(header, cells, strict=True):
            number = _number(cell)
            if number is not None:
                record["step" if name.lower() == "step" else name] = number
        if record:
            records.append(record)
    return records


def _wandb_csv(rows: list[dict]) -> list[dict]:
    """A W&B panel export: `Step`, `<run> - <metric>` (and __MIN/__MAX columns, dropped)."""
    records = []
    for row in rows:
        record = {}
        for column, cell in row.items():
            if column is None or column.endswith(("__MIN", "__MAX")):
                continue
            name = column.split(" - ", 1)[1] if " - " in column else column
            number = _number(cell)
            if number is not None:
                record["step" if name in ("Step", "_step") else name] = number
        if record:
            records.append(record)
    return records


_MLX_ITER = re.compile(r"^Iter (\d+): Train loss ")
_PRIME_STEP = re.compile(r"SUCCESS Step (\d+) \| (.*)")
_DSCHAT_STEP = re.compile(r"^epoch: \d+\|step: (\d+)\|(.*)")
_KEY_VALUE = re.compile(r"^(.*?):?\s+(-?(?:inf|nan|[\d.]+(?:e[-+]?\d+)?))(?:\s*[^\s\d]+(?:/\S+)?)?$", re.I)
# Consoles that name their metrics in words: their reward/loss/kl/entropy/length names become TRL's,
# so that a tool reading TRL names reads them (the other words stay as they are).
_WORD_NAMES = {
    "Train loss": "loss",
    "Total rewards mean": "reward",
    "Total rewards std": "reward_std",
    "KL": "kl",
    "Learning Rate": "learning_rate",
    "Reward": "reward",
    "Loss": "loss",
    "Entropy": "entropy",
    "Grad. Norm": "grad_norm",
    "LR": "learning_rate",
    "Seq. Length": "completions/mean_length",
    "average reward score": "reward",
}


def _word_fields(fields: list[str]) -> dict:
    record = {}
    for field in fields:
        match = _KEY_VALUE.match(field.strip())
        if match:
            name = match.group(1).strip()
            record[_WORD_NAMES.get(name, name)] = _number(match.group(2))
    return {k: v for k, v in record.items() if v is not None}


def _word_consoles(text: str) -> list[dict]:
    """mlx-lm GRPO `Iter N: Train loss x, Total rewards mean y, ...` (training lines only),
    prime-rl `SUCCESS Step N | Reward: x | ...` and DeepSpeed-Chat step 3 (`epoch: 0|step: N|act_loss:
    x|...` followed by `average reward score: y`)."""
    records: list[dict] = []
    for line in re.split(r"\n|', '", text):  # a Python list of log lines printed counts as lines
        line = line.strip()
        if match := _MLX_ITER.match(line):
            body = line.split(": ", 1)[1]
            records.append({"step": float(match.group(1)), **_word_fields(body.split(", "))})
        elif match := _PRIME_STEP.search(line):
            records.append({"step": float(match.group(1)), **_word_fields(match.group(2).split(" | "))})
        elif match := _DSCHAT_STEP.match(line):
            fields = [f.replace(":", "", 1) for f in match.group(2).split("|")]
            records.append({"step": float(match.group(1)), **_word_fields(fields)})
        elif line.startswith("average reward score:") and records:
            records[-1].update(_word_fields([line.replace(":", "", 1)]))
    return [r for r in records if len(r) > 1]


_HTML_ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.S)
_HTML_CELL = re.compile(r"<t[hd][^>]*>(.*?)</t[hd]>", re.S)


def _notebook_table(text: str) -> list[dict]:
    """The Trainer's HTML progress table from a notebook's outputs (`<th>Step</th>` first). A
    notebook can hold several (an SFT phase, then RL; the same table displayed twice as it grew):
    the tools take one history, so the table with the most columns wins, then the one with the
    most rows."""
    best: list[list[str]] = []
    for cell in json.loads(text).get("cells", []):
        for output in cell.get("outputs", []):
            page = output.get("data", {}).get("text/html", "")
            page = "".join(page) if isinstance(page, list) else page
            if "<th>Step</th>" not in page:
                continue
            rows = [
                [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in _HTML_CELL.findall(row)]
                for row in _HTML_ROW.findall(page)
            ]
            rows = [r for r in rows if r]
            if rows and (len(rows[0]), len(rows)) > ((len(best[0]), len(best)) if best else (0, 0)):
                best = rows
    return _table(best) if best else []


def read_records(path: str | Path) -> list[dict]:
    """One dict per logged point, source names, `step` where the source states it."""
    path = Path(path)
    if path.is_dir():
        for name in ("metrics.jsonl", "trainer_state.json"):
            if (path / name).exists():
                return read_records(path / name)
        raise ValueError(f"{path}: no metrics.jsonl or trainer_state.json")
    text = path.read_text(encoding="utf-8", errors="replace")
    stripped = text.lstrip()
    if path.suffix == ".ipynb":
        if records := _notebook_table(text):
            return records
        raise ValueError(f"{path}: no progress table in the notebook's outputs")
    if stripped.startswith("{") and '"log_history"' in text[:200000]:
        state = json.loads(text)
        records = [_numeric(row) for row in state["log_history"]]
        return [r for r in records if any(k not in ("step", "epoch") for k in r)]
    if path.suffix == ".csv":
        rows = list(csv.DictReader(text.splitlines()))
        if rows and any(" - " in (c or "") for c in rows[0]):
            return _wandb_csv(rows)
        return _table([list(rows[0].keys())] + [list(r.values()) for r in rows]) if rows else []
    if stripped.startswith('{"'):
        return [_numeric(json.loads(line)) for line in text.splitlines() if line.strip().startswith("{")]
    if _VERL_START.search(text) or re.search(r"^\(?[^\n]*step:\d+ - ", text, re.M):
        return _verl_lines(text)
    if "{'" in text:
        return _python_dicts(text)
    if records := _word_consoles(text):
        return records
    table_rows = [line.strip().strip("|").split("|") for line in text.splitlines() if line.count("|") >= 2]
    if table_rows:
        return _table(table_rows)
    raise ValueError(f"{path}: no history found")


def with_steps(records: list[dict]) -> list[dict]:
    """Records without a step get their logged position (1, 2, ...): the tools need one."""
    return [{**r, "step": r.get("step", float(i + 1))} for i, r in enumerate(records)]


# --- tool inputs ---------------------------------------------------------------------------------

# rlprobe's StepRecord fields, from the source names of TRL/align_kit and verl (the same metric
# pairs as the doctor's concepts; verl's actor/ppo_kl is old-vs-new policy, not the reference KL).
RLPROBE_FIELDS = {
    "reward_mean": ("reward", "critic/score/mean", "train/reward"),
    "reward_std": ("reward_std",),
    "reward_min": ("critic/score/min",),
    "reward_max": ("critic/score/max",),
    "kl_mean": ("kl", "actor/kl_loss"),
    "entropy_mean": ("entropy", "actor/entropy", "actor/entropy_loss"),
    "clip_fraction": ("clip_ratio/region_mean", "actor/pg_clipfrac"),
    "adv_mean": ("adv/mean", "critic/advantages/mean"),
    "adv_zero_frac": ("adv/zero_std_fraction",),
    "zero_variance_group_frac": ("frac_reward_zero_std", "groups/flat_fraction"),
    "loss": ("loss", "actor/pg_loss", "Training Loss"),
    "lr": ("learning_rate", "actor/lr"),
    "grad_norm": ("grad_norm", "actor/grad_norm"),
    "completion_len_mean": ("completions/mean_length", "completion_length", "response_length/mean"),
    "completion_len_max": ("completions/max_length", "response_length/max"),
    "truncation_rate": ("completions/clipped_ratio", "response_length/clip_ratio"),
}


def rlprobe_rows(records: list[dict]) -> list[dict]:
    rows = []
    for record in with_steps(records):
        row = {"step": int(record["step"])}
        for field, names in RLPROBE_FIELDS.items():
            for name in names:
                if name in record:
                    row[field] = record[name]
                    break
        rows.append(row)
    return rows


def write_rlprobe_run(records: list[dict], out_dir: str | Path, run_id: str) -> None:
    """A run directory in rlprobe's own format, written by rlprobe's own writer."""
    from rlprobe.schemas import RunManifest, StepRecord
    from rlprobe.storage import RunWriter

    manifest = RunManifest(run_id=run_id, created_at="2026-01-01T00:00:00", algorithm="grpo")
    writer = RunWriter(out_dir, manifest)
    for row in rlprobe_rows(records):
        writer.add_step(StepRecord(**row))
    writer.close()


# --- verl / W&B files from a run of the labelled set ---------------------------------------------

# align_kit/TRL name -> the name verl logs for the same quantity (verl's metric_utils and actor).
TO_VERL = {
    "entropy": "actor/entropy",
    "loss": "actor/pg_loss",
    "kl": "actor/kl_loss",
    "clip_ratio/region_mean": "actor/pg_clipfrac",
    "clip_ratio/low_mean": "actor/pg_clipfrac_lower",
    "grad_norm": "actor/grad_norm",
    "learning_rate": "actor/lr",
    "reward": "critic/score/mean",
    "adv/mean": "critic/advantages/mean",
    "completions/mean_length": "response_length/mean",
    "completions/max_length": "response_length/max",
    "completions/min_length": "response_length/min",
    "completions/clipped_ratio": "response_length/clip_ratio",
}


def verl_lines(records: list[dict], pid: int = 4242) -> list[str]:
    lines = []
    for record in with_steps(records):
        step = int(record["step"])
        fields = [f"{TO_VERL[k]}:{record[k]!r}" for k in TO_VERL if k in record]
        if "reward" in record:  # verl logs the reward after KL-in-reward shaping beside the score
            fields.insert(
                fields.index(f"critic/score/mean:{record['reward']!r}") + 1, f"critic/rewards/mean:{record['reward']!r}"
            )
        lines.append(f"(TaskRunner pid={pid}) step:{step} - training/global_step:{step} - " + " - ".join(fields))
    return lines


def wandb_csv_rows(records: list[dict], run_name: str) -> tuple[list[str], list[list[str]]]:
    """What W&B's "Export panel data (CSV)" gives for one run: `Step`, then per metric the value
    column `<run> - train/<metric>` and its `__MIN`/`__MAX` columns (equal without grouping)."""
    names = [k for k in records[0] if k != "step"] if records else []
    for record in records[1:]:
        names += [k for k in record if k != "step" and k not in names]
    header = ["Step"]
    for name in names:
        column = f"{run_name} - train/{name}"
        header += [column, f"{column}__MIN", f"{column}__MAX"]
    rows = []
    for record in with_steps(records):
        row = [str(int(record["step"]))]
        for name in names:
            value = "" if name not in record else repr(record[name])
            row += [value, value, value]
        rows.append(row)
    return header, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["jsonl", "rlprobe", "verl", "wandb-csv"])
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("--run-name", default="run")
    parser.add_argument("--keys", nargs="*", help="verl/wandb-csv: keep only these source keys")
    args = parser.parse_args(argv)
    records = read_records(args.source)
    if args.keys:
        records = [{k: v for k, v in r.items() if k in args.keys or k == "step"} for r in records]
    out = Path(args.out)
    if args.kind == "jsonl":
        out.write_text("".join(json.dumps(r) + "\n" for r in with_steps(records)))
    elif args.kind == "rlprobe":
        write_rlprobe_run(records, out, args.run_name)
    elif args.kind == "verl":
        out.write_text("\n".join(verl_lines(records)) + "\n")
    else:
        header, rows = wandb_csv_rows(records, args.run_name)
        with out.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows(rows)
    print(f"{args.kind}: {len(records)} points from {args.source} -> {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
