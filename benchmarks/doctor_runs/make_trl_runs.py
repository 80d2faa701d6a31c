"""Plain `trl.GRPOTrainer` runs for the doctor's labelled set: healthy runs and forced failures.

No align_kit trainer: the tiny local policy (align_kit's builder, saved in Hugging Face format), the arithmetic
task's prompts ("37+45=" -> "<think>37+40=77,77+5=82</think>82") and plain Python reward functions, trained by
TRL itself with `report_to="none"`. Each case leaves `<out>/<case>/` (TRL's output folder: trainer_state.json in
its checkpoints and at the end) and `<out>/<case>.log` (the console: the log dicts TRL prints, the progress bar).

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/doctor_runs/make_trl_runs.py --out /work/outputs/doctor_trl_runs
    python benchmarks/doctor_runs/make_trl_runs.py --out /work/outputs/doctor_trl_runs --copy benchmarks/doctor_runs/trl

The cases train one at a time, each in its own process (its console is the log). `--copy` keeps what the doctor
reads: the final trainer_state.json and the console log, per case under `<copy>/<case>/`, and writes
their rows of `labels.csv` (one block; rows of other sources are kept).

Why no bf16-sampler case: without vLLM, TRL samples with the training model itself (one set of weights, one
precision), and its sampler-gap metrics (`sampling/sampling_logp_difference/*`,
`sampling/importance_sampling_ratio/*`) are computed only with `use_vllm=True`. A bf16 sampler is not expressible
in plain TRL on a CPU without vLLM, and no metric would show it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THINK_CLOSE = "</think>"


def correctness(completions, answer, **kwargs):
    """1.0 when the text after the last </think> equals the answer."""
    return [
        float(text.rsplit(THINK_CLOSE, 1)[-1].strip() == str(ref).strip())
        for text, ref in zip(completions, answer, strict=True)
    ]


def think_format(completions, **kwargs):
    """1.0 when <think> opens before </think> closes."""
    scores = []
    for text in completions:
        opening, closing = text.find("<think>"), text.find(THINK_CLOSE)
        scores.append(float(opening != -1 and closing != -1 and opening < closing))
    return scores


def constant(completions, **kwargs):
    """The same score for every completion: no group ever has a spread, so no advantage is ever non-zero."""
    return [0.0] * len(completions)


# TRL logs rewards/<function name>/mean; the names a user would give them.
think_format.__name__ = "format"
REWARDS = {"correctness": correctness, "format": think_format, "constant": constant}


@dataclass(frozen=True)
class Case:
    name: str
    label: str  # healthy | failing
    failure: str  # what was forced ("" when healthy)
    fitting_rules: tuple[str, ...]  # the rules whose advice addresses the failure
    rewards: tuple[str, ...] = ("correctness", "format")
    config: dict = field(default_factory=dict)  # GRPOConfig fields beyond BASE
    warm_start_steps: int = 450  # the tiny model's SFT (450: the shipped default)
    how: str = ""  # the forced cause, in words (the engagement numbers are added from the run's metrics)
    shows: tuple[str, ...] = ("reward", "rewards/correctness/mean", "entropy", "completions/clipped_ratio")


# align_kit's shipped trainer defaults (conf/trainer/default.yaml), as plain GRPOConfig fields: 8 prompts x 8
# completions per generation, 2 mini-steps each.
BASE = dict(
    learning_rate=2e-5,
    lr_scheduler_type="constant",
    per_device_train_batch_size=32,
    gradient_accumulation_steps=1,
    steps_per_generation=2,
    num_generations=8,
    max_completion_length=32,
    max_grad_norm=1.0,
    logging_steps=1,
    save_strategy="steps",
    save_steps=50,
    save_total_limit=1,
    use_cpu=True,
    bf16=False,
    report_to="none",
    dataloader_num_workers=0,
)

CASES = (
    Case("healthy_s0", "healthy", "", (), config=dict(max_steps=150, seed=0), how="the shipped defaults"),
    Case(
        "healthy_s1_log5",
        "healthy",
        "",
        (),
        config=dict(max_steps=150, seed=1, logging_steps=5),
        how="the shipped defaults, another seed, logged every 5 steps",
    ),
    Case(
        "lr_too_high",
        "failing",
        "learning rate too high",
        # The rules whose advice (a lower learning rate, fewer updates per rollout) addresses the cause, as for
        # align_kit's lr_collapse (benchmarks/alert_calibration.py); entropy rose about 3x, then the correctness
        # reward collapsed and the completions ran into the budget.
        (
            "policy_ratio_drift",
            "policy_ratio_noise",
            "clip_ratio_rising",
            "reward_decline",
            "non_finite",
            "entropy_exploding",
        ),
        # align_kit's calibration probe: lr 1e-3 with 8 mini-steps per generation collapses the policy; 3e-3 to be
        # sure in 150 steps.
        config=dict(max_steps=150, seed=0, learning_rate=3e-3, steps_per_generation=8),
        how="learning_rate=3e-3 (150x the default) with 8 mini-steps per generation",
        shows=("rewards/correctness/mean", "entropy", "grad_norm", "completions/clipped_ratio", "frac_reward_zero_std"),
    ),
    Case(
        "constant_reward",
        "failing",
        "reward gives no signal",
        ("no_signal", "zero_std_groups", "grad_norm_vanishing"),
        rewards=("constant",),
        config=dict(max_steps=100, seed=0),
        how="one reward function returning 0.0 for every completion",
        shows=("reward", "reward_std", "frac_reward_zero_std", "loss", "grad_norm"),
    ),
    Case(
        "budget_too_short",
        "failing",
        "length budget too short",
        ("length_pinned", "length_near_max"),
        # Completions need 20-22 tokens: a 12-token budget cuts every one of them.
        config=dict(max_steps=100, seed=0, max_completion_length=12),
        how="max_completion_length=12 where the answers need 20-22 tokens",
        shows=("completions/clipped_ratio", "completions/mean_length", "reward", "frac_reward_zero_std"),
    ),
    Case(
        "format_only_reward",
        "failing",
        "format-only reward",
        ("reward_collapse",),
        # Correctness is scored with weight 0 (logged, not trained on). A 10-step warm start leaves the format
        # unlearnt, so the format can rise while correctness stays flat (18.3.2).
        config=dict(max_steps=150, seed=0, learning_rate=2e-4, reward_weights=[0.0, 1.0]),
        warm_start_steps=10,
        how="reward_weights=[0, 1]: only the format reward trains (correctness logged with weight 0); "
        "10-step warm start, learning_rate=2e-4",
        shows=("rewards/format/mean", "rewards/correctness/mean", "frac_reward_zero_std", "entropy"),
    ),
)


def build_model(out: Path, warm_start_steps: int) -> Path:
    """The tiny policy from align_kit's builder (cached), saved as a plain Hugging Face folder TRL loads."""
    folder = out / f"model_ws{warm_start_steps}"
    if (folder / "config.json").exists():
        return folder
    from align_kit.models.tiny import TinyModel
    from align_kit.tasks.arithmetic import ArithmeticTask

    cache = os.environ.get("ALIGN_KIT_CACHE", str(Path.home() / ".cache" / "align_kit"))
    settings = {"steps": warm_start_steps}
    if warm_start_steps != 450:
        settings["eval_prompts"] = 32
    policy = TinyModel(warm_start=settings).load(ArithmeticTask(), cache)
    policy.model.save_pretrained(folder)
    policy.tokenizer.save_pretrained(folder)
    return folder


def train(case: Case, out: Path, max_steps: int | None = None) -> None:
    """One case, in this process (its console is the case's log); `max_steps` shortens it (a smoke test)."""
    from trl import GRPOConfig, GRPOTrainer

    from align_kit.tasks.arithmetic import ArithmeticTask

    model = build_model(out, case.warm_start_steps)
    config = {**BASE, **case.config, **({"max_steps": max_steps} if max_steps else {})}
    args = GRPOConfig(output_dir=str(out / case.name), **config)
    trainer = GRPOTrainer(
        model=str(model),
        reward_funcs=[REWARDS[name] for name in case.rewards],
        args=args,
        train_dataset=ArithmeticTask().dataset("train"),
    )
    trainer.train()
    trainer.save_state()  # trainer_state.json of the final state in the output folder itself


def run_all(out: Path, names: list[str], max_steps: int | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        if case.name not in names:
            continue
        if (out / case.name / "trainer_state.json").exists():
            print(f"{case.name}: done before", flush=True)
            continue
        build_model(out, case.warm_start_steps)  # before the timer: a cold cache builds the policy
        shutil.rmtree(out / case.name, ignore_errors=True)
        started = time.monotonic()
        with (out / f"{case.name}.log").open("w") as log:
            subprocess.run(
                [sys.executable, __file__, "--out", str(out), "--train", case.name]
                + (["--max-steps", str(max_steps)] if max_steps else []),
                check=True,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1"),
            )
        print(f"{case.name}: {time.monotonic() - started:.0f} s", flush=True)


def copy_for_doctor(out: Path, into: Path) -> None:
    """The final trainer_state.json and the console log of each case, under `<into>/<case>/`."""
    for case in CASES:
        state = out / case.name / "trainer_state.json"
        if not state.exists():
            continue
        target = into / case.name
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(state, target / "trainer_state.json")
        shutil.copyfile(out / f"{case.name}.log", target / f"{case.name}.log")


def engagement(out: Path, case: Case) -> dict[str, float]:
    """First and last values (means over 5 logged rows) of the metrics each forced failure moves."""
    history = [row for row in json.loads((out / case.name / "trainer_state.json").read_text())["log_history"]]
    rows = [row for row in history if "loss" in row]
    keys = (
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "entropy",
        "loss",
        "grad_norm",
        "completions/clipped_ratio",
        "completions/mean_length",
        "rewards/format/mean",
        "rewards/correctness/mean",
    )
    summary = {"logged_rows": len(rows), "last_step": rows[-1]["step"]}
    for key in keys:
        values = [row[key] for row in rows if isinstance(row.get(key), int | float)]
        if values:
            head, tail = values[:5], values[-5:]
            summary[key] = (round(sum(head) / len(head), 4), round(sum(tail) / len(tail), 4), round(max(values), 4))
    return summary


LABEL_COLUMNS = ("run", "path", "format", "label", "failure", "fitting_rules", "source", "how_labelled")
SOURCE = "made here: benchmarks/doctor_runs/make_trl_runs.py (plain trl.GRPOTrainer)"
# What the doctor reads of each case: the final trainer_state.json and the console log.
FORMATS = (("trainer_state", "trainer_state.json", ""), ("trl_console_log", "{case}.log", "_console"))


def label_rows(out: Path, into: Path) -> list[dict[str, str]]:
    """Two rows per case (its trainer_state.json and its console log), labelled by the forced cause and the
    metrics that show it: (first, last, max) of the means over the first and the last 5 logged values."""
    rows = []
    for case in CASES:
        if not (out / case.name / "trainer_state.json").exists():
            continue
        numbers = engagement(out, case)
        shown = "; ".join(
            f"{key} {numbers[key][0]:g} -> {numbers[key][1]:g} (max {numbers[key][2]:g})"
            for key in case.shows
            if key in numbers
        )
        cause = "forced" if case.label == "failing" else "setup"
        how = (
            f"{cause}: {case.how}; {numbers['logged_rows']} logged rows to step {numbers['last_step']}; "
            f"first 5 -> last 5 logged means: {shown}"
        )
        for kind, name, suffix in FORMATS:
            path = into / case.name / name.format(case=case.name)
            rows.append(
                {
                    "run": f"trl_{case.name}{suffix}",
                    "path": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
                    "format": kind,
                    "label": case.label,
                    "failure": case.failure,
                    "fitting_rules": ";".join(case.fitting_rules),
                    "source": SOURCE,
                    "how_labelled": how,
                }
            )
    return rows


def write_labels(rows: list[dict[str, str]], labels: Path) -> None:
    """This script's rows, as one block, in `labels` (created if absent); other sources' rows are kept as they are,
    this block taking the place of the one written before."""
    import csv

    kept: list[dict[str, str]] = []
    at = None
    if labels.exists():
        with labels.open(newline="") as handle:
            for row in csv.DictReader(handle):
                if row.get("source") == SOURCE:
                    at = len(kept) if at is None else at
                    continue
                kept.append(row)
    at = len(kept) if at is None else at
    with labels.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=LABEL_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(kept[:at] + rows + kept[at:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cases", default=",".join(case.name for case in CASES))
    parser.add_argument("--train", help="train this one case in this process")
    parser.add_argument("--max-steps", type=int, help="shorten every case (a smoke test)")
    parser.add_argument("--copy", type=Path, help="copy what the doctor reads under this folder")
    parser.add_argument("--labels", type=Path, default=ROOT / "benchmarks" / "doctor_runs" / "labels.csv")
    parser.add_argument("--engagement", action="store_true", help="print each case's (first, last, max) values")
    parsed = parser.parse_args()
    if parsed.train:
        train(next(case for case in CASES if case.name == parsed.train), parsed.out, parsed.max_steps)
        return
    if parsed.engagement:
        for case in CASES:
            if (parsed.out / case.name / "trainer_state.json").exists():
                print(case.name, json.dumps(engagement(parsed.out, case)))
        return
    if parsed.copy:
        copy_for_doctor(parsed.out, parsed.copy)
        write_labels(label_rows(parsed.out, parsed.copy.resolve()), parsed.labels)
        return
    run_all(parsed.out, parsed.cases.split(","), parsed.max_steps)


if __name__ == "__main__":
    main()
