"""benchmarks/doctor_calibration.py's own logic: labels, the doctor's JSON, scoring, the table; and
benchmarks/doctor_runs/convert.py's readers on the formats of the published files. The doctor is
replaced by a stub command that answers with fixed JSON per file."""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks import doctor_calibration as calibration
from benchmarks.doctor_calibration import LabelledRun, Outcome, per_rule, score
from benchmarks.doctor_runs import convert

STUB = textwrap.dedent(
    """
    import json, sys
    path = sys.argv[-1]
    answers = json.load(open(sys.argv[1]))
    if path.endswith("bad.log"):
        print("bad.log: no history found; expected a metric history", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(answers[path.rsplit("/", 1)[-1]]))
    """
)


def _runs() -> list[LabelledRun]:
    return [
        LabelledRun("h1", "h1.log", "trl", "healthy", ()),
        LabelledRun("h2", "h2.log", "trl", "healthy", ()),
        LabelledRun("f1", "f1.log", "trl", "failing", ("entropy_collapse",)),
        LabelledRun("f2", "f2.log", "trl", "failing", ("length_pinned",)),
        LabelledRun("f3", "f3.log", "trl", "failing", ("non_finite",)),
        LabelledRun("u1", "u1.log", "trl", "unlabelled", ()),
    ]


def test_score_counts_fitting_rules_for_the_doctor_and_any_flag_for_tools():
    outcomes = {
        "h1": Outcome("healthy"),
        "h2": Outcome("warning", ("reward_plateau",)),  # false alarm
        "f1": Outcome("failing", ("entropy_collapse",)),  # caught by a fitting rule
        "f2": Outcome("warning", ("reward_plateau",)),  # flagged, but the rule does not fit
        "f3": Outcome(None, note="bad input"),  # not read: missed
        "u1": Outcome("failing", ("non_finite",)),  # read, not scored
    }
    unjudged = score(_runs(), {"h1": Outcome("unjudged"), "f1": Outcome("unjudged")}, fitting=True)
    # Read but not judged: neither correct nor a false alarm on h1; a failure missed on f1.
    assert (unjudged.read, unjudged.not_judged, unjudged.correct) == (2, 2, 0)
    assert unjudged.false_alarms == [] and unjudged.missed == ["f1"]
    doctor = score(_runs(), outcomes, fitting=True)
    # read: h1 h2 f1 f2 u1 = 5; not read: f3. correct: h1, f1 = 2 of 5 labelled.
    assert (doctor.read, doctor.not_read, doctor.correct) == (5, 1, 2)
    assert doctor.false_alarms == ["h2"]
    assert doctor.missed == ["f2", "f3"] and doctor.wrong_rule == ["f2"]
    tool = score(_runs(), outcomes, fitting=False)
    # a tool is right on f2 too (flagged at all): correct h1, f1, f2 = 3; missed only f3.
    assert tool.correct == 3 and tool.missed == ["f3"] and tool.wrong_rule == []


def test_per_rule_counts():
    outcomes = {
        "h1": Outcome("healthy"),
        "h2": Outcome("warning", ("reward_plateau",)),
        "f1": Outcome("failing", ("entropy_collapse", "reward_plateau")),
        "f2": Outcome("healthy"),
        "f3": Outcome("failing", ("non_finite",)),
    }
    table = per_rule(_runs(), outcomes)
    assert table["reward_plateau"] == {"false_alarms": 1, "caught": 0, "fired_not_fitting": 1, "missed": 0}
    assert table["entropy_collapse"]["caught"] == 1
    assert table["length_pinned"] == {"false_alarms": 0, "caught": 0, "fired_not_fitting": 0, "missed": 1}


def test_labels_skip_comment_rows_and_split_rules(tmp_path: Path):
    labels = tmp_path / "labels.csv"
    labels.write_text(
        "run,path,format,label,failure,fitting_rules,source,how_labelled\n"
        "# a block,,,,,,,\n"
        "a,x.log,trl,failing,truncation,length_near_max; length_pinned,src,how\n"
    )
    (run,) = calibration.load_labels(labels)
    assert run.fitting_rules == ("length_near_max", "length_pinned")
    resolved = calibration.resolve(LabelledRun("b", "outputs/alert_calibration/grpo_s0", "", "healthy", ()), tmp_path)
    assert resolved == tmp_path / "grpo_s0"


def test_runner_on_a_stub_doctor(tmp_path: Path):
    answers = {
        "h1.log": {"runs": [{"verdict": "healthy", "alerts": []}]},
        "f1.log": {
            "runs": [
                {"verdict": "warning", "alerts": []},
                {"verdict": "failing", "alerts": [{"rule": "entropy_collapse"}]},
            ]
        },
    }
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    (tmp_path / "stub.py").write_text(STUB)
    for name in ("h1.log", "f1.log", "bad.log"):
        (tmp_path / name).write_text("{'loss': 0.1}\n")
    labels = tmp_path / "labels.csv"
    labels.write_text(
        "run,path,format,label,failure,fitting_rules,source,how_labelled\n"
        f"h1,{tmp_path}/h1.log,trl,healthy,,,s,h\n"
        f"f1,{tmp_path}/f1.log,trl,failing,collapse,entropy_collapse,s,h\n"
        f"bad,{tmp_path}/bad.log,trl,failing,x,non_finite,s,h\n"
    )
    out = tmp_path / "report.md"
    command = f"{sys.executable} {tmp_path / 'stub.py'} {tmp_path / 'answers.json'}"
    calibration.main(["--labels", str(labels), "--tools", "doctor", "--doctor-command", command, "--out", str(out)])
    report = out.read_text()
    # 2 of 3 read (bad.log exits 2); correct h1 and f1 (the worst of its two runs, fitting rule) = 2/3.
    assert "| doctor | 2 | 1 | 0 | 2/3 | 0/1 | 1/2 | 0 |" in report
    assert "not read: bad.log: no history found" in report


def test_convert_reads_the_published_formats(tmp_path: Path):
    trl = tmp_path / "trl.log"
    trl.write_text(
        "  5%| 1/20\n{'loss': 0.0, 'grad_norm': nan, 'reward': 0.5, 'epoch': 0.1}\n"
        "noise\n{'loss': 1.0, 'reward': 0.25}\n"
    )
    rows = convert.read_records(trl)
    assert len(rows) == 2 and math.isnan(rows[0]["grad_norm"]) and rows[1]["reward"] == 0.25
    verl = tmp_path / "verl.log"
    # Ray's prefix, and a copy-paste wrap inside a value (368.\n902 is 368.902).
    verl.write_text(
        "(TaskRunner pid=1) step:3 - actor/entropy:0.5 - response_length/mean:368.\n902 - actor/grad_norm:nan\n"
    )
    (row,) = convert.read_records(verl)
    assert row["step"] == 3 and row["response_length/mean"] == 368.902 and math.isnan(row["actor/grad_norm"])
    table = tmp_path / "table.txt"
    table.write_text(
        "Step | Training Loss | kl | entropy\n-- | -- | -- | --\n1 | -0.28 | nan | 0\n2 | -0.14 | nan | No Log\n"
    )
    rows = convert.read_records(table)
    assert rows[1] == {"step": 2.0, "Training Loss": -0.14, "kl": rows[1]["kl"]} and "entropy" not in rows[1]
    records = [{"step": 1.0, "reward": 0.5, "entropy": 0.25}, {"step": 2.0, "reward": 0.75}]
    header, csv_rows = convert.wandb_csv_rows(records, "r")
    assert header[:4] == ["Step", "r - train/reward", "r - train/reward__MIN", "r - train/reward__MAX"]
    export = tmp_path / "export.csv"
    export.write_text("\n".join(",".join(row) for row in [header, *csv_rows]) + "\n")
    # the export names are kept as W&B shows them (train/...): each tool maps names itself
    assert convert.read_records(export) == [
        {"step": 1.0, "train/reward": 0.5, "train/entropy": 0.25},
        {"step": 2.0, "train/reward": 0.75},
    ]
    back = tmp_path / "back.log"
    back.write_text("\n".join(convert.verl_lines(records)) + "\n")
    assert convert.read_records(back)[1]["critic/score/mean"] == 0.75


def test_published_and_made_here_runs_get_their_own_tables():
    runs = [
        LabelledRun("p1", "benchmarks/doctor_runs/published/p1.log", "trl", "healthy", ()),
        LabelledRun("p2", "benchmarks/doctor_runs/published/p2.log", "trl", "failing", ("non_finite",)),
        LabelledRun("m1", "outputs/alert_calibration/grpo_s0", "align_kit", "healthy", ()),
    ]
    outcomes = {
        "p1": Outcome("warning", ("reward_plateau",)),
        "p2": Outcome("failing", ("non_finite",)),
        "m1": Outcome("healthy"),
    }
    report = calibration.markdown(runs, {"doctor": outcomes})
    assert [calibration.group_of(r) for r in runs] == ["published", "published", "made here"]
    overall, published, made_here = report.split("| doctor |")[1:4]
    assert overall.startswith(" 3 | 0 | 0 | 2/3 | 1/2 | 0/1 | 0 |")
    assert published.startswith(" 2 | 0 | 0 | 1/2 | 1/1 | 0/1 | 0 |")
    assert made_here.startswith(" 1 | 0 | 0 | 1/1 | 0/1 | 0/0 | 0 |")
    assert report.index("### published runs only") < report.index("### made here runs only")
    assert "| p1 | published | healthy | warning (reward_plateau) |" in report


def test_convert_reads_the_consoles_that_name_metrics_in_words(tmp_path: Path):
    mlx = tmp_path / "mlx.log"
    mlx.write_text(
        "Iter 150: Val loss 0.053, Val total_rewards_mean 0.938, Val took 8.933s\n"
        "Iter 160: Train loss 0.013, Total rewards mean 1.183, KL 0.001, Learning Rate 1.000e-05, Peak mem 17.601 GB\n"
    )
    (record,) = convert.read_records(mlx)  # the validation line is not a training point
    assert record == {
        "step": 160.0,
        "loss": 0.013,
        "reward": 1.183,
        "kl": 0.001,
        "learning_rate": 1e-05,
        "Peak mem": 17.601,
    }
    prime = tmp_path / "prime.log"
    prime.write_text(
        "02:33:26 SUCCESS Step 28 | Time: 73.77s | Reward: 0.3887 | Seq. Length: 345.6 tokens/sample | Async Level: 1\n"
        "[default0]:15:41:30 SUCCESS Step 9 | Loss: 0.0000 | Entropy: 0.3571 | Grad. Norm: 0.0000 | LR: 3.00e-06\n"
    )
    first, second = convert.read_records(prime)
    assert first == {
        "step": 28.0,
        "Time": 73.77,
        "reward": 0.3887,
        "completions/mean_length": 345.6,
        "Async Level": 1.0,
    }
    assert second == {"step": 9.0, "loss": 0.0, "entropy": 0.3571, "grad_norm": 0.0, "learning_rate": 3e-06}
    dschat = tmp_path / "dschat.log"
    dschat.write_text(
        "epoch: 0|step: 3184|ppo_ep: 1|act_loss: inf|cri_loss: inf|unsuper_loss: 0.0\n"
        "average reward score: -6.359375\n---\n"
    )
    (record,) = convert.read_records(dschat)
    assert record["step"] == 3184.0 and record["reward"] == -6.359375 and math.isinf(record["act_loss"])


def test_convert_reads_a_notebooks_html_progress_table(tmp_path: Path):
    def table(header: list[str], rows: list[list[str]]) -> str:
        head = "".join(f"<th>{h}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
        return f'<table border="1"><thead><tr style="text-align: left;">{head}</tr></thead><tbody>{body}</tbody>'

    sft = table(["Step", "Training Loss"], [["5", "0.75"], ["10", "0.59"], ["15", "0.43"]])
    grpo = table(
        ["Step", "Training Loss", "reward", "completions / mean_length"],
        [["1", "0.000000", "-7.500000", "1846.0"], ["2", "0.000100", "13.000000", "1174.75"]],
    )
    notebook = {
        "cells": [
            {"cell_type": "code", "outputs": [{"output_type": "stream", "text": ["{'loss': 9.0}\n"]}]},
            {"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {"text/html": [sft]}}]},
            {"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {"text/html": grpo}}]},
        ]
    }
    path = tmp_path / "run.ipynb"
    path.write_text(json.dumps(notebook))
    # The RL table (more columns) is the history; the SFT table and the printed dict are not.
    assert convert.read_records(path) == [
        {"step": 1.0, "Training Loss": 0.0, "reward": -7.5, "completions/mean_length": 1846.0},
        {"step": 2.0, "Training Loss": 0.0001, "reward": 13.0, "completions/mean_length": 1174.75},
    ]
    empty = tmp_path / "empty.ipynb"
    empty.write_text(json.dumps({"cells": []}))
    with pytest.raises(ValueError, match="no progress table"):
        convert.read_records(empty)


def test_heldback_runs_are_scored_apart(tmp_path: Path):
    split = tmp_path / "heldback.txt"
    split.write_text("# held back before tuning\n\np2\nm1\nnot_in_labels\n")
    heldback = calibration.load_heldback(split)
    assert heldback == {"p2", "m1", "not_in_labels"}
    assert calibration.load_heldback(tmp_path / "absent.txt") == frozenset()
    labels = {"p1": ("healthy", ()), "p2": ("failing", ("no_signal",)), "m1": ("healthy", ())}
    runs = [LabelledRun(n, f"benchmarks/doctor_runs/published/{n}.log", "trl", *labels[n]) for n in labels]
    outcomes = {
        "p1": Outcome("healthy"),
        "p2": Outcome("healthy"),  # a failing run called healthy: missed
        "m1": Outcome("warning", ("reward_plateau",)),  # a false alarm
    }
    report = calibration.markdown(runs, {"doctor": outcomes}, heldback)
    overall, development, held = report.split("| doctor |")[1:4]
    # by hand: development = p1 only (1/1 correct); held back = p2 (missed) and m1 (false alarm): 0/2
    assert overall.startswith(" 3 | 0 | 0 | 1/3 | 1/2 | 1/1 | 0 |")
    assert development.startswith(" 1 | 0 | 0 | 1/1 | 0/1 | 0/0 | 0 |")
    assert held.startswith(" 2 | 0 | 0 | 0/2 | 1/1 | 1/1 | 0 |")
    assert report.index("### development runs (in-sample)") < report.index("### held-back runs")
    assert "| p2 | published, held back | failing | healthy |" in report
    # no held-back run among the labelled ones: no split tables
    assert "held-back runs" not in calibration.markdown(runs, {"doctor": outcomes}, frozenset({"x"}))
