"""Where one GRPO step of SmolLM2-135M-Instruct spends its time, and how far that is from what its arithmetic allows
on this CPU.

1. The step by phase. The configuration of docs/real-model.md's evidence runs (chain_sum, 4 prompts x 4 completions of
   at most 32 tokens, one update per generation, no KL term) trains --steps steps per arm through align_kit's trainer;
   wrappers this script installs on the trainer instance (the product code has no timers) time, in wall and process
   CPU time: generation (`_generate_single_turn`), rewards, scoring forwards without gradient (old or reference
   log-probs, the sampler-mismatch check: none are expected here), the loss forward, the backward, the optimizer
   (gradient clipping, AdamW, zero_grad) and the rest of the step. The first step is a warm-up and is not counted.
2. The step's floating-point work, from the shapes each phase really ran (recorded by the same wrappers):
   2 x (parameters a token meets) per token per forward, with the LM head only where the code applies it, causal
   attention over the context, the backward twice its forward, gradient checkpointing one more forward of the
   decoder layers.
3. The CPU's throughput at those shapes, measured on the model's own weight matrices (every linear map of the 30
   layers and the tied LM head, each a distinct matrix, as a step reads them): forward matmuls at the update's row
   count (compute-bound) and at generation's (16 rows per new token: the 0.5 GB of fp32 weights stream from memory
   on every token, so that phase is memory-bound), the backward's two matmuls per linear map, and the optimizer's
   memory traffic at the measured copy bandwidth. Each phase's bound is its work at its own measured rate; the step's
   bound is their sum, and the table gives the step as a multiple of it. The rates are measured once per dtype, at
   the first arm's shapes.

Run (one torch thread by default, so CPU time counts the work alone on a shared machine):
    PYTHONPATH=. .venv/bin/python benchmarks/real_model_step.py --steps 4
    PYTHONPATH=. .venv/bin/python benchmarks/real_model_step.py --arms as_measured completion_head --steps 3
Needs `make install-real-model`.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch
from timing import build_align_kit, plan_for
from transformers import TrainerCallback

# The configuration of docs/real-model.md's evidence runs (benchmarks/real_model_grpo.py's defaults there).
CONFIGURATION = [
    "model=smollm2",
    "task=reasoning_gym",
    "reward=[gym_correctness,gym_format]",
    "task.datasets=[chain_sum]",
    "task.options={chain_sum:{min_terms:2,max_terms:2,min_digits:1,max_digits:1}}",
    "reward.correctness.extract=last_number",
    "trainer.per_device_train_batch_size=16",
    "trainer.num_generations=4",
    "trainer.steps_per_generation=1",
    "trainer.max_completion_length=32",
    "trainer.learning_rate=1e-5",
    "rollout.temperature=0.7",
    "logger=none",
    "trainer.save_strategy=no",
    "trainer.disable_tqdm=true",
]
# What each arm changes. The evidence runs trained as `as_measured`: TRL's GRPOConfig turns gradient checkpointing on
# and its fused LM head projects every position on a CPU; `completion_head` is align_kit's default now.
ARMS = {
    "as_measured": ["trainer.gradient_checkpointing=true", "model.lm_head_rows=all"],
    "no_checkpointing": ["trainer.gradient_checkpointing=false", "model.lm_head_rows=all"],
    "completion_head": ["trainer.gradient_checkpointing=false", "model.lm_head_rows=completion"],
    "bfloat16": ["trainer.gradient_checkpointing=false", "model.lm_head_rows=completion", "model.dtype=bfloat16"],
}
PHASES = ("generation", "rewards", "scoring forwards", "loss forward", "backward", "optimizer", "rest")


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


class StepPhases(TrainerCallback):
    """Wall and CPU seconds per phase of each optimizer step, and the shapes each phase ran, on one trainer."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.steps: list[dict] = []
        self.current: dict | None = None
        self._wrap("_generate_single_turn", self._generation)
        self._wrap("_calculate_rewards", lambda *a, **k: "rewards")
        self._wrap("_get_per_token_logps_and_entropies", self._forward)
        self._wrap("training_step", lambda *a, **k: None)
        backward = trainer.accelerator.backward
        trainer.accelerator.backward = self._timed(backward, lambda *a, **k: "backward")
        trainer.add_callback(self)

    def _wrap(self, name: str, label) -> None:
        setattr(self.trainer, name, self._timed(getattr(self.trainer, name), label))

    def _timed(self, method, label):
        """`method`, its time added to the phase `label(*args)` names (None: only the return time is kept)."""

        def timed(*args, **kwargs):
            started = clocks()
            result = method(*args, **kwargs)
            ended = clocks()
            phase = label(*args, **kwargs)
            if self.current is not None and phase is not None:
                for index, clock in enumerate(("wall", "cpu")):
                    self.current[clock][phase] += ended[index] - started[index]
            if self.current is not None and method.__name__ == "training_step":
                self.current["training_step_end"] = ended
            if self.current is not None and phase == "generation":
                self.current["shapes"]["generation"].append(
                    (len(args[0]), max(map(len, args[0])), max(map(len, result[0])), sum(map(len, result[0])))
                )
            return result

        return timed

    def _generation(self, prompt_ids, *args, **kwargs):
        return "generation"

    def _forward(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        phase = "loss forward" if self.trainer._loss is not None else "scoring forwards"
        if self.current is not None:
            real, kept = int(attention_mask.sum()), int(attention_mask[:, -logits_to_keep:].sum())
            self.current["shapes"][phase].append((*input_ids.shape, int(logits_to_keep), real, kept))
        return phase

    def on_step_begin(self, args, state, control, **kwargs):
        self.current = {
            "wall": defaultdict(float),
            "cpu": defaultdict(float),
            "shapes": defaultdict(list),
            "begin": clocks(),
        }

    def on_step_end(self, args, state, control, **kwargs):
        step, ended = self.current, clocks()
        for index, clock in enumerate(("wall", "cpu")):
            step[clock]["optimizer"] += ended[index] - step["training_step_end"][index]
            step[clock]["step"] = ended[index] - step["begin"][index]
            named = sum(step[clock][phase] for phase in PHASES[:-1])
            step[clock]["rest"] = step[clock]["step"] - named
        self.steps.append({key: dict(step[key]) for key in ("wall", "cpu", "shapes")})
        self.current = None


# --- the arithmetic --------------------------------------------------------------------------------------------


def model_shapes(model) -> dict:
    """What the FLOP count needs: the decoder layers' linear parameters, the LM head's, the attention width, layers."""
    config = model.config
    layer_params = sum(
        module.weight.numel()
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and ".layers." in name
    )
    head = model.get_output_embeddings().weight
    return {
        "layer_params": layer_params,
        "head_params": head.numel(),
        "attention_width": config.num_attention_heads * config.head_dim,
        "layers": config.num_hidden_layers,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def forward_flops(shapes: dict, rows: int, width: int, head_rows: int, context: int | None = None) -> dict:
    """FLOPs of one forward over `rows` sequences of `width` new positions, the LM head on `head_rows` positions in
    all, each position attending causally to `context` earlier positions plus its own prefix (context=None: none)."""
    tokens = rows * width
    earlier = 0 if context is None else context
    # Position i (0-based among the new ones) attends to earlier + i + 1 keys: QK^T and AV are 2 x 2 x width FLOPs each.
    keys = rows * (width * earlier + width * (width + 1) // 2)
    return {
        "layers": 2 * shapes["layer_params"] * tokens,
        "attention": 4 * shapes["attention_width"] * shapes["layers"] * keys,
        "head": 2 * shapes["head_params"] * head_rows,
    }


def step_work(shapes: dict, record: dict, checkpointing: bool, full_head: bool) -> dict:
    """FLOPs per phase of one recorded step (from the shapes its phases ran). `full_head`: TRL's fused LM head scores
    every position off a Triton device (trl/trainer/utils.py, `compact`); otherwise only the completion tokens."""
    work: dict[str, dict] = {}
    generated = defaultdict(int)
    for rows, prompt_width, completion_width, _ in record["shapes"].get("generation", []):
        prefill = forward_flops(shapes, rows, prompt_width, rows)
        for part, flops in prefill.items():
            generated[f"prefill {part}"] += flops
        # Each later token: one position per row, over the cache of everything before it.
        for made in range(1, completion_width):
            for part, flops in forward_flops(shapes, rows, 1, rows, prompt_width + made - 1).items():
                generated[f"decode {part}"] += flops
    work["generation"] = dict(generated)
    for phase in ("scoring forwards", "loss forward"):
        total = defaultdict(int)
        for rows, width, *rest in record["shapes"].get(phase, []):  # rest: logits_to_keep, real tokens, completion
            # A record of a run before completion tokens were recorded: they are the generation's new tokens.
            kept = rest[2] if len(rest) > 2 else sum(made for *_, made in record["shapes"]["generation"])
            head_rows = rows * (width - 1) if full_head else kept
            for part, flops in forward_flops(shapes, rows, width, head_rows).items():
                total[part] += flops
        work[phase] = dict(total)
    loss = work["loss forward"]
    backward = {part: 2 * flops for part, flops in loss.items()}
    if checkpointing:  # each decoder layer's forward again (the LM head is not checkpointed)
        backward["recompute layers"] = loss.get("layers", 0)
        backward["recompute attention"] = loss.get("attention", 0)
    backward["head recompute"] = loss.get("head", 0)  # the chunked head recomputes its logits tiles
    work["backward"] = backward
    return work


def weight_matrices(model) -> list[torch.Tensor]:
    layers = [m.weight.detach() for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and ".layers." in n]
    return layers


def best_of(repeats: int, run) -> float:
    """Best process CPU seconds of `repeats` runs of `run` (CPU time, as the step's phases are compared in: wall time
    on a shared machine measures the other processes)."""
    times = []
    for _ in range(repeats):
        started = time.process_time()
        run()
        times.append(time.process_time() - started)
    return min(times)


# The compute-bound shapes are timed on every SAMPLED_LAYERS-th layer (6 of 30: 42 distinct matrices, 85 MB in
# float32, more than the caches hold): the rate, not the total, is what is measured, and it costs a fifth of the time.
SAMPLED_LAYERS = 5


def matmul_rates(model, rows_update: int, rows_generation: int, head_rows: int, dtype, repeats: int) -> dict:
    """GFLOP/s of the model's own linear maps at the step's row counts: forward at the update's rows and at
    generation's rows (there every layer's distinct matrix, as a step streams them), the backward's two matmuls at
    the update's rows, the LM head's forward at `head_rows`."""
    every = [w.to(dtype) for w in weight_matrices(model)]
    per_layer = len(every) // model.config.num_hidden_layers
    sampled = [w for index, w in enumerate(every) if (index // per_layer) % SAMPLED_LAYERS == 0]
    head = model.get_output_embeddings().weight.detach().to(dtype)
    rates = {}
    for name, rows, weights in (
        ("forward, update rows", rows_update, sampled),
        ("forward, generation rows", rows_generation, every),
    ):
        inputs = {w.shape[1]: torch.randn(rows, w.shape[1], dtype=dtype) for w in weights}

        def forward(inputs=inputs, weights=weights):
            for w in weights:
                torch.nn.functional.linear(inputs[w.shape[1]], w)

        with torch.no_grad():
            seconds = best_of(repeats, forward)
        rates[name] = 2 * sum(w.numel() for w in weights) * rows / seconds / 1e9
    weights = sampled
    grads = {w.shape[0]: torch.randn(rows_update, w.shape[0], dtype=dtype) for w in weights}
    inputs = {w.shape[1]: torch.randn(rows_update, w.shape[1], dtype=dtype) for w in weights}

    def backward():
        for w in weights:
            grads[w.shape[0]] @ w  # gradient of the input
            grads[w.shape[0]].t() @ inputs[w.shape[1]]  # gradient of the weight

    flops = 2 * 2 * sum(w.numel() for w in weights) * rows_update
    rates["backward, update rows"] = flops / best_of(repeats, backward) / 1e9
    hidden = torch.randn(head_rows, head.shape[1], dtype=dtype)
    rates["LM head, update rows"] = 2 * head.numel() * head_rows / best_of(repeats, lambda: hidden @ head.t()) / 1e9
    return rates


def copy_bandwidth(repeats: int) -> float:
    """GB/s of an elementwise a + b -> c over 3 x 256 MB (the shape of an optimizer's memory traffic)."""
    a, b, c = (torch.empty(64 * 2**20).uniform_() for _ in range(3))
    seconds = best_of(repeats, lambda: torch.add(a, b, out=c))
    return 3 * a.numel() * 4 / seconds / 1e9


# AdamW per parameter: read the weight, its gradient and two moments, write the weight and the moments; clipping
# reads the gradient once more and zero_grad writes it: 9 float32 accesses.
OPTIMIZER_BYTES_PER_PARAMETER = 9 * 4


def bounds(work: dict, rates: dict, bandwidth: float, parameters: int) -> dict:
    """Seconds each phase needs at the measured rates (its work over the rate at its shapes)."""
    generation = work["generation"]
    decode = sum(v for k, v in generation.items() if k.startswith("decode"))
    prefill = sum(v for k, v in generation.items() if k.startswith("prefill"))
    update = rates["forward, update rows"] * 1e9
    result = {
        "generation": decode / (rates["forward, generation rows"] * 1e9) + prefill / update,
        "scoring forwards": sum(work["scoring forwards"].values()) / update,
        "loss forward": sum(v for k, v in work["loss forward"].items() if k != "head") / update
        + work["loss forward"].get("head", 0) / (rates["LM head, update rows"] * 1e9),
        "backward": sum(v for k, v in work["backward"].items() if "head" not in k)
        / (rates["backward, update rows"] * 1e9)
        + sum(v for k, v in work["backward"].items() if "head" in k) / (rates["LM head, update rows"] * 1e9),
        "optimizer": OPTIMIZER_BYTES_PER_PARAMETER * parameters / (bandwidth * 1e9),
    }
    return result


# --- running an arm --------------------------------------------------------------------------------------------


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run_arm(name: str, args) -> dict:
    overrides = [f"paths.cache_dir={args.cache_dir}", f"seed={args.seed}", f"trainer.max_steps={args.steps}"]
    overrides += [*CONFIGURATION, *ARMS[name], *args.override]
    load_start = load()
    with tempfile.TemporaryDirectory() as scratch:
        plan = plan_for(overrides, f"{scratch}/run")
        trainer = build_align_kit(plan, args.cache_dir, scratch)
        phases = StepPhases(trainer)
        trainer.train()
        model = trainer.model
        checkpointing = bool(trainer.args.gradient_checkpointing)
        full_head = plan.model.lm_head_rows == "all"
        dtype = model.dtype
        shapes = model_shapes(model)
    steps = phases.steps[1:]  # the first step is a warm-up
    if not steps:
        raise SystemExit("--steps must be at least 2: the first step is a warm-up")
    last = steps[-1]
    rows_update = sum(rows * width for rows, width, *_ in last["shapes"]["loss forward"])
    rows_head = sum(rows * (width - 1) for rows, width, *_ in last["shapes"]["loss forward"])
    rows_generation = last["shapes"]["generation"][0][0]
    if str(dtype) not in args.measured:  # once per dtype, at the first arm's shapes: the rates hardly move with them
        for measured in (dtype, *(getattr(torch, name) for name in args.dtype_rates)):
            rates = matmul_rates(model, rows_update, rows_generation, rows_head, measured, args.repeats)
            args.measured[str(measured)] = rates
        args.measured["bandwidth"] = copy_bandwidth(args.repeats)
    rates, bandwidth = args.measured[str(dtype)], args.measured["bandwidth"]
    other_rates = {name: args.measured[str(getattr(torch, name))] for name in args.dtype_rates}
    del trainer, model
    gc.collect()
    return {
        "arm": name,
        "overrides": ARMS[name] + args.override,
        "dtype": str(dtype),
        "checkpointing": checkpointing,
        "full_head": full_head,
        "load": [load_start, load()],
        "threads": torch.get_num_threads(),
        "rates_gflops": rates,
        "other_dtype_rates_gflops": other_rates,
        "copy_bandwidth_gbs": bandwidth,
        "shapes": shapes,
        "steps": [{"record": record} for record in steps],
    }


def priced(result: dict) -> dict:
    """`result` with each step's work and bound, from its recorded shapes and the measured rates."""
    for step in result["steps"]:
        full_head = result.get("full_head", True)  # a run written before model.lm_head_rows: TRL's CPU path
        step["work"] = step_work(result["shapes"], step["record"], result["checkpointing"], full_head)
        measured = (result["rates_gflops"], result["copy_bandwidth_gbs"], result["shapes"]["parameters"])
        step["bound"] = bounds(step["work"], *measured)
        # What the configuration needs: no recomputed forward, the LM head on the completion tokens only.
        step["needed"] = bounds(step_work(result["shapes"], step["record"], False, False), *measured)
    return result


def median_range(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} ({min(values):.2f}-{max(values):.2f})"


def report(result: dict) -> None:
    steps = result["steps"]
    print(
        f"\n== {result['arm']}: {' '.join(result['overrides'])}; {result['dtype']}, gradient checkpointing "
        f"{result['checkpointing']}, LM head on every position {result.get('full_head', True)}; {len(steps)} steps "
        f"after a warm-up; torch threads {result['threads']}; load "
        f"average {result['load'][0]} at the start, {result['load'][1]} at the end"
    )
    rates = ", ".join(f"{name} {rate:.1f}" for name, rate in result["rates_gflops"].items())
    print(f"measured GFLOP/s at the step's shapes: {rates}; copy bandwidth {result['copy_bandwidth_gbs']:.1f} GB/s")
    for dtype, measured in result.get("other_dtype_rates_gflops", {}).items():
        print(f"  the same shapes in {dtype}: " + ", ".join(f"{name} {rate:.1f}" for name, rate in measured.items()))
    generation = steps[-1]["record"]["shapes"]["generation"][0]
    loss = steps[-1]["record"]["shapes"]["loss forward"][0]
    print(
        f"shapes (last step): generation {generation[0]} rows, prompt width {generation[1]}, {generation[2]} new "
        f"tokens (of which {generation[3]} not padding); update {loss[0]} rows x {loss[1]} positions "
        f"({loss[3]} not padding)" + (f", {loss[4]} completion tokens" if len(loss) > 4 else "")
    )
    header = f"{'phase':18s} {'wall s, median (range)':>24s} {'CPU s, median':>14s} {'share':>6s}"
    print(header + f" {'GFLOP':>8s} {'bound s':>8s} {'CPU / bound':>11s}")
    step_cpu = statistics.median(s["record"]["cpu"]["step"] for s in steps)
    for phase in (*PHASES, "step"):
        wall = [s["record"]["wall"].get(phase, 0.0) for s in steps]
        cpu = [s["record"]["cpu"].get(phase, 0.0) for s in steps]
        if phase == "step":
            gflop = statistics.median(sum(sum(w.values()) for w in s["work"].values()) for s in steps) / 1e9
            bound = statistics.median(sum(s["bound"].values()) for s in steps)
        else:
            gflop = statistics.median(sum(s["work"].get(phase, {}).values()) for s in steps) / 1e9
            bound = statistics.median(s["bound"].get(phase, 0.0) for s in steps)
        ratio = f"{statistics.median(cpu) / bound:11.2f}" if bound else f"{'':11s}"
        share = 100 * statistics.median(cpu) / step_cpu
        print(
            f"{phase:18s} {median_range(wall):>24s} {statistics.median(cpu):14.2f} {share:5.1f}% {gflop:8.1f} "
            f"{bound:8.2f} {ratio}"
        )
    needed = statistics.median(sum(s["needed"].values()) for s in steps)
    print(
        f"the work the configuration needs (no recomputed forward, the LM head on completion tokens only): bound "
        f"{needed:.2f} s; the step's CPU time is {step_cpu / needed:.2f} x that"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--arms", nargs="+", default=["as_measured", "no_checkpointing", "completion_head"], choices=list(ARMS)
    )
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps per arm; the first is a warm-up")
    parser.add_argument("--repeats", type=int, default=3, help="best of this many timings per throughput shape")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "align_kit"))
    parser.add_argument("--override", action="append", default=[], help="an extra train override for every arm")
    parser.add_argument("--json", help="also write the measurements here")
    parser.add_argument("--report", help="only print the tables of measurements a --json run wrote")
    parser.add_argument(
        "--dtype-rates", nargs="*", default=[], help="also measure the throughput at the same shapes in these dtypes"
    )
    args = parser.parse_args()
    if args.report:
        for result in json.loads(Path(args.report).read_text()):
            report(priced(result))
        return
    args.measured = {}
    if args.threads:
        torch.set_num_threads(args.threads)
    results = []
    for name in args.arms:
        results.append(priced(run_arm(name, args)))
        report(results[-1])
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
