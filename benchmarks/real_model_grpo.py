"""GRPO of SmolLM2-135M-Instruct on one reasoning-gym task through `align-kit train`, per seed: accuracy on held-out
items before and after (greedy), the reward and entropy curves, the live monitor's alerts, the doctor's verdict, the
wall time and peak memory of the training process. Results go to --out as one JSON per seed (written as each seed
finishes) and a figure of the curves.

Needs `make install-real-model`. Run (the configuration of docs/real-model.md):
    PYTHONPATH=. .venv/bin/python benchmarks/real_model_grpo.py --seeds 1 2 3 --steps 20 --out docs/real_model
Threads: OMP_NUM_THREADS (torch's default otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from align_kit.core.run_files import METRICS_FILE, latest_checkpoint

TASK = ["task=reasoning_gym", "reward=[gym_correctness,gym_format]"]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def task_overrides(args) -> list[str]:
    options = f"{{min_terms:2,max_terms:2,min_digits:1,max_digits:{args.max_digits}}}"
    return [
        *TASK,
        f"task.datasets=[{args.dataset}]",
        f"task.options={{{args.dataset}:{options}}}",
        f"reward.correctness.extract={args.extract}",
    ]


def held_out(args) -> list[dict]:
    from align_kit.tasks.reasoning_gym import ReasoningGymTask

    options = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": args.max_digits}
    return ReasoningGymTask(datasets=[args.dataset], options={args.dataset: options}, num_eval=args.eval_items).rows(
        "eval"
    )


def accuracy(folder: str, rows: list[dict], args) -> dict:
    """Greedy answers of the model saved in `folder` to the held-out rows, scored by the training reward."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from align_kit.rewards.gym import GymCorrectness, GymFormat

    tokenizer = AutoTokenizer.from_pretrained(folder, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype="float32").eval()
    texts = []
    for start in range(0, len(rows), 8):
        batch = rows[start : start + 8]
        encoded = tokenizer.apply_chat_template(
            [row["prompt"] for row in batch], add_generation_prompt=True, padding=True, return_tensors="pt",
            return_dict=True,
        )  # fmt: skip
        with torch.no_grad():
            out = model.generate(**encoded, max_new_tokens=args.max_tokens, do_sample=False)
        texts += tokenizer.batch_decode(out[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
    columns = {"gym_config": [r["gym_config"] for r in rows], "gym_index": [r["gym_index"] for r in rows]}
    correct = GymCorrectness(extract=args.extract)(texts, **columns)
    other = "tags" if args.extract == "last_number" else "last_number"
    correct_other = GymCorrectness(extract=other)(texts, **columns)
    tagged = GymFormat()(texts)
    return {
        "accuracy": sum(correct) / len(rows),
        f"accuracy_{other}": sum(correct_other) / len(rows),
        "tag_format_rate": sum(tagged) / len(rows),
        "items": len(rows),
        "examples": texts[:3],
    }


def train(seed: int, run_dir: Path, args) -> dict:
    overrides = [
        "model=smollm2",
        *task_overrides(args),
        f"seed={seed}",
        f"trainer.max_steps={args.steps}",
        f"trainer.per_device_train_batch_size={args.prompts * args.generations}",
        f"trainer.num_generations={args.generations}",
        "trainer.steps_per_generation=1",
        f"trainer.max_completion_length={args.max_tokens}",
        f"trainer.learning_rate={args.learning_rate}",
        f"rollout.temperature={args.temperature}",
        f"trainer.save_steps={args.steps}",
        "trainer.save_total_limit=1",
        "trainer.disable_tqdm=true",
        "logger=none",
        f"hydra.run.dir={run_dir}",
        *args.override,
    ]
    started = time.time()
    result = subprocess.run(
        [sys.executable, "-m", "align_kit.cli", "train", *overrides], capture_output=True, text=True
    )
    wall = time.time() - started
    (run_dir.parent / f"{run_dir.name}.log").write_text(result.stdout[-20000:] + result.stderr[-20000:])
    # The largest child so far is the training process (the evaluations run in this process).
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    rows = [json.loads(line) for line in (run_dir / METRICS_FILE).read_text().splitlines() if line.strip()]
    steps = [row for row in rows if "reward" in row]
    curve = {key: [row.get(key) for row in steps] for key in ("reward", "rewards/correctness/mean", "entropy")}
    return {
        "exit_code": result.returncode,
        "overrides": overrides,
        "wall_seconds": round(wall, 1),
        "seconds_per_step": round(wall / max(1, len(steps)), 1),
        "peak_rss_mb": round(peak_mb),
        "curves": curve,
    }


def doctor(run_dir: Path) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "align_kit.cli", "doctor", str(run_dir)], capture_output=True, text=True
    )
    verdict = next((line for line in result.stdout.splitlines() if line.startswith("verdict:")), None)
    return {"exit_code": result.returncode, "verdict": verdict}


def alerts(run_dir: Path) -> list[str]:
    found = []
    for path in run_dir.glob("alert*"):
        if path.is_file():
            found += [line[:200] for line in path.read_text().splitlines() if line.strip()]
    return found


def figure(out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = sorted(out.glob("seed*.json"))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for path in runs:
        data = json.loads(path.read_text())
        for axis, key in zip(axes, ("reward", "entropy"), strict=True):
            values = data["train"]["curves"][key]
            axis.plot(range(1, len(values) + 1), values, label=f"seed {data['seed']}")
    for axis, key in zip(axes, ("reward (weighted sum)", "entropy (nats per token)"), strict=True):
        axis.set_xlabel("step")
        axis.set_title(key)
        axis.legend()
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--dataset", default="chain_sum")
    parser.add_argument("--max-digits", type=int, default=1)
    parser.add_argument("--extract", default="tags", choices=["tags", "last_number"])
    parser.add_argument("--eval-items", type=int, default=32)
    parser.add_argument(
        "--override", action="append", default=[], help="an extra train override (repeatable): overlong=filter"
    )
    parser.add_argument("--before-only", action="store_true", help="only the held-out accuracy of the untrained model")
    parser.add_argument("--out", default="docs/real_model", help="the results (JSON per seed, figure)")
    parser.add_argument("--runs", default="outputs/real_model_grpo", help="the run folders")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from align_kit.models.gguf import ensure_converted
    from align_kit.models.smollm2 import SmolLM2

    node = SmolLM2()
    node.validate()
    cache = os.environ.get("ALIGN_KIT_CACHE", str(Path.home() / ".cache" / "align_kit"))
    base_folder = str(ensure_converted(node.gguf_path(), cache))
    rows = held_out(args)
    before_file = out / "before.json"
    if before_file.is_file():
        before = json.loads(before_file.read_text())
    else:
        started = time.time()
        before = {"load_at_start": load(), **accuracy(base_folder, rows, args)}
        before.update(seconds=round(time.time() - started, 1), load_at_end=load(), extract=args.extract)
        before_file.write_text(json.dumps(before, indent=2))
    print(f"before: accuracy {before['accuracy']:.3f} on {before['items']} held-out items", flush=True)
    if args.before_only:
        return
    for seed in args.seeds:
        result_file = out / f"seed{seed}.json"
        if result_file.is_file():
            continue
        run_dir = Path(args.runs) / f"seed{seed}"  # checkpoints are 0.5 GB: outside the docs
        load_before = load()
        trained = train(seed, run_dir, args)
        checkpoint = latest_checkpoint(run_dir)
        after = accuracy(str(checkpoint), rows, args) if checkpoint else None
        result = {
            "seed": seed,
            "load_at_start": load_before,
            "load_at_end": load(),
            "train": trained,
            "accuracy_before": before["accuracy"],
            "accuracy_after": after and after["accuracy"],
            "after": after,
            "monitor_alerts": alerts(run_dir),
            "doctor": doctor(run_dir),
        }
        result_file.write_text(json.dumps(result, indent=2))
        print(json.dumps({k: v for k, v in result.items() if k != "train"}), flush=True)
        figure(out)


if __name__ == "__main__":
    main()
