"""The Python sections of benchmarks/gpu_check.sh: align_kit's training path on one GPU, measured.

Each subcommand is one guarded section (the shell runs each in its own process under a time limit) and appends one
JSON line to --parts, whatever happens; `summarize` merges them into summary.json and prints the table.

  env                       versions, the GPU, FP8 matrix products, whether logger=none imports wandb
  build-models              a dense Qwen3 (~0.44 B parameters: Qwen3-0.6B's body with the embedded character
                            tokenizer's vocabulary) and a Qwen3-MoE (~0.45 B, 32 experts top-4), random weights,
                            saved with save_pretrained beside the character tokenizer, for model=hf
  train NAME -- OVERRIDES   `align-kit train OVERRIDES` in this process (runpy), so its peak GPU memory is read
  run-report NAME RUN_DIR   a finished run's steps, step time, reward, gaps; the doctor's verdict
  overhead                  align_kit's step time against plain trl.GRPOTrainer on one model, trajectory held fixed
                            (benchmarks/trainer_overhead.py's method: learning rate 1e-12, completions compared)
  sampler-gap               routing/sampler_gap and mismatch/kl before any update on the MoE, per sampler precision
                            (bf16, fp8) and routing_replay (off, r3) (benchmarks/sampler_precision_gap.py's method)
  fp8                       the FP8 sampler with torch._scaled_mm (W8A8, benchmarks/fp8_matmul.py) against the
                            dequantized one (rollout.quantization=fp8): speed per matrix product and per forward, and
                            each sampler's log-prob gap to the fp32 policy
  summarize                 parts -> summary.json, and a table on stdout
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for entry in (str(ROOT), str(ROOT / "benchmarks")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

# Model sizes. full: the check's models; smoke: the same code path, small (the short first call); tiny: a few
# thousand parameters, for the dry run and the tests on a CPU.
DENSE = {
    "full": dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                 intermediate_size=3072),  # Qwen3-0.6B's decoder (its config.json), vocabulary aside
    "smoke": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                  intermediate_size=768),
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                 intermediate_size=64),
}  # fmt: skip
MOE = {
    "full": dict(hidden_size=1024, num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4, head_dim=128,
                 intermediate_size=3072, moe_intermediate_size=512, num_experts=32, num_experts_per_tok=4),
    "smoke": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                  intermediate_size=768, moe_intermediate_size=128, num_experts=16, num_experts_per_tok=4),
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                 intermediate_size=64, moe_intermediate_size=16, num_experts=4, num_experts_per_tok=2),
}  # fmt: skip
POSITIONS = 512  # the arithmetic prompts plus trainer.max_completion_length fit


# ---------------------------------------------------------------------------------------------------------------
# helpers


def append_part(parts: str, record: dict) -> None:
    Path(parts).parent.mkdir(parents=True, exist_ok=True)
    with open(parts, "a") as handle:
        handle.write(json.dumps(record, default=str) + "\n")


def cuda():
    import torch

    return torch.cuda.is_available()


def reset_peak() -> None:
    import torch

    gc.collect()
    if cuda():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_gib() -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 3) if cuda() else None


def guarded(section):
    """Run a section; its record gets ok, error (the last line) and seconds, and always reaches --parts."""

    def run(args):
        started = time.time()
        record = {"section": args.name or args.command}
        try:
            record.update(section(args) or {})
            record["ok"] = record.get("ok", True)
        except BaseException as error:  # a section's failure is its record, not the end of the check
            traceback.print_exc()
            record.update(ok=False, error=f"{type(error).__name__}: {str(error).strip().splitlines()[-1:]}")
            if isinstance(error, KeyboardInterrupt):
                raise
        finally:
            record["seconds"] = round(time.time() - started, 1)
            append_part(args.parts, record)
            print(f"gpu_check: {record['section']}: " + json.dumps(record, default=str)[:2000], flush=True)
        return 0 if record["ok"] else 1

    return run


# ---------------------------------------------------------------------------------------------------------------
# env


def section_env(args) -> dict:
    import importlib.metadata as metadata

    import torch

    record: dict = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda}
    for name in ("transformers", "trl", "accelerate", "datasets", "hydra-core", "omegaconf", "pyarrow", "fsspec",
                 "huggingface-hub", "tokenizers", "safetensors", "numpy", "triton"):  # fmt: skip
        try:
            record[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            record[name] = None
    if cuda():
        properties = torch.cuda.get_device_properties(0)
        record.update(
            gpu=properties.name,
            capability=f"{properties.major}.{properties.minor}",
            gpu_memory_gib=round(properties.total_memory / 2**30, 1),
            multiprocessors=properties.multi_processor_count,
        )
        from fp8_matmul import E4M3

        a = torch.randn(64, 128, device="cuda").to(E4M3)
        b = torch.randn(64, 128, device="cuda").to(E4M3)
        one = torch.ones((), device="cuda")
        try:
            torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            record["scaled_mm"] = True
        except RuntimeError as error:
            record["scaled_mm"] = f"unavailable: {str(error).splitlines()[0]}"
    import align_kit.train  # noqa: F401  (the training entry point, as `align-kit train` imports it)
    from align_kit.tracking.wandb_logger import NoLogger  # noqa: F401
    from align_kit.trainer import AlignTrainer  # noqa: F401

    record["wandb_imported_by_train_path"] = "wandb" in sys.modules
    return record


# ---------------------------------------------------------------------------------------------------------------
# models


def build_models(args) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config, Qwen3MoeConfig

    from align_kit.models.char_tokenizer import build_char_tokenizer

    tokenizer = build_char_tokenizer()
    common = dict(
        vocab_size=len(tokenizer), max_position_embeddings=POSITIONS, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
    )  # fmt: skip
    device = "cuda" if cuda() and args.size != "tiny" else "cpu"
    record = {"size": args.size}
    for name, config in (
        ("dense", Qwen3Config(**DENSE[args.size], **common)),
        ("moe", Qwen3MoeConfig(**MOE[args.size], decoder_sparse_step=1, norm_topk_prob=True, **common)),
    ):
        folder = Path(args.dir) / name
        torch.manual_seed(0)
        with torch.device(device):  # initialised on the GPU: seconds instead of a minute for 0.4 B parameters
            model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.bos_token_id = None
        model.save_pretrained(folder)  # float32: the trainer's master weights, as a real checkpoint trains them
        tokenizer.save_pretrained(folder)
        record[f"{name}_parameters"] = sum(p.numel() for p in model.parameters())
        record[f"{name}_class"] = type(model).__name__
        del model
        reset_peak()
    return record


# ---------------------------------------------------------------------------------------------------------------
# train: `align-kit train` in this process


def section_train(args) -> dict:
    import runpy

    overrides = [o for o in args.overrides if o != "--"]
    run_dir = next((o.split("=", 1)[1] for o in overrides if o.startswith("hydra.run.dir=")), None)
    reset_peak()
    sys.argv = ["align_kit.train", *overrides]
    code = 0
    try:
        runpy.run_module("align_kit.train", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    record = {"exit_code": code, "peak_gib": peak_gib(), "overrides": overrides, "ok": code == 0}
    if run_dir:
        record.update(run_metrics(Path(run_dir)))
    return record


def run_metrics(run_dir: Path) -> dict:
    """What a run folder says: steps, step time, reward, the gaps; the monitor's halt and alerts."""
    record: dict = {"run_dir": str(run_dir)}
    metrics = run_dir / "metrics.jsonl"
    if not metrics.is_file():
        return {**record, "metrics": "no metrics.jsonl"}
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    rows = [row for row in rows if "loss" in row or "reward" in row]

    def series(key):
        return [row[key] for row in rows if isinstance(row.get(key), int | float)]

    times = series("step_time")
    record.update(steps=max((row.get("step", 0) for row in rows), default=0), logged_rows=len(rows))
    if times:
        settled = times[2:] or times  # the first steps hold CUDA's and the allocator's warm-up
        record.update(step_time_median_s=round(statistics.median(settled), 4), step_time_first_s=round(times[0], 3))
    for key in ("reward", "entropy", "mismatch/kl", "mismatch/logp_abs_diff/mean", "routing/sampler_gap",
                "routing/flip_rate", "routing/replayed_fraction", "grad_norm"):  # fmt: skip
        values = series(key)
        if values:
            record[key] = {"first": values[0], "last": values[-1], "mean": statistics.fmean(values)}
    summary = run_dir / "summary.json"
    if summary.is_file():
        loaded = json.loads(summary.read_text())
        record.update(halted=loaded.get("halted"), wall_seconds=round(loaded.get("wall_seconds", 0), 1),
                      start_success_rate=loaded.get("policy", {}).get("start_success_rate"))  # fmt: skip
    alerts = run_dir / "alerts.jsonl"
    if alerts.is_file():
        record["alerts"] = [json.loads(line).get("rule") for line in alerts.read_text().splitlines() if line.strip()]
    return record


def section_run_report(args) -> dict:
    """The doctor's verdict on a finished run (exit 0 healthy, 1 warning, 3 failing), its report saved."""
    run_dir = Path(args.run_dir)
    done = subprocess.run(
        [sys.executable, "-m", "align_kit.cli", "doctor", str(run_dir)], capture_output=True, text=True, cwd=ROOT
    )
    if args.save:
        Path(args.save).write_text(done.stdout + done.stderr)
    verdict = next((line for line in done.stdout.splitlines() if line.startswith("verdict:")), None)
    return {"doctor_exit": done.returncode, "verdict": verdict, "ok": done.returncode in (0, 1, 3)}


# ---------------------------------------------------------------------------------------------------------------
# align_kit against plain TRL


def section_overhead(args) -> dict:
    import torch
    from timing import alternating, base_overrides, build_align_kit, build_trl, train_seconds
    from trainer_overhead import Completions, Phases

    peaks: dict[str, list] = {"align_kit": [], "trl": []}

    def measured(arm, build):
        def build_arm(plan, cache_dir, scratch):
            reset_peak()
            trainer = build(plan, cache_dir, scratch)
            trainer.add_callback(_peak_at_end(peaks[arm]))
            return trainer

        return build_arm

    def clock():
        if cuda():
            torch.cuda.synchronize()
        return time.perf_counter()

    overrides = [*base_overrides(args.cache_dir, args.steps), "trainer.learning_rate=1e-12", *args.override]
    # An untimed run first: CUDA's context, cuBLAS's handles and the allocator's pools are made once per process,
    # and would otherwise land in whichever arm runs first.
    warm_up = [*overrides, "trainer.max_steps=2"]
    record: dict = {"warm_up_seconds": round(train_seconds(warm_up, args.cache_dir, build_trl, clock)[0], 2)}
    phases = Phases()  # align_kit's own phases in the align_kit arm (main thread's CPU time)
    phases.install()
    completions = Completions()
    arms = {
        "align_kit": (overrides, completions.builder("align_kit", measured("align_kit", build_align_kit), phases)),
        "trl": (overrides, completions.builder("trl", measured("trl", build_trl), phases)),
    }
    times = alternating(arms, args.repeats, args.cache_dir, clock=clock)
    ratios = [a / b for a, b in zip(times["align_kit"], times["trl"], strict=True)]
    difference = completions.first_difference("align_kit", "trl")
    total_steps = args.steps * args.repeats
    record.update({
        "steps": args.steps,
        "repeats": args.repeats,
        "overrides": overrides,
        "align_kit_step_s": round(statistics.median(times["align_kit"]) / args.steps, 4),
        "trl_step_s": round(statistics.median(times["trl"]) / args.steps, 4),
        "ratio_median": round(statistics.median(ratios), 4),
        "ratio_range": [round(min(ratios), 4), round(max(ratios), 4)],
        "train_seconds": {arm: [round(t, 2) for t in values] for arm, values in times.items()},
        "completions_identical": difference is None,
        "completions_first_difference": difference,
        "peak_gib": peaks,
        "align_kit_phases_ms_per_step": {
            name: round(1e3 * seconds / total_steps, 3) for name, seconds in sorted(phases.seconds.items())
        },
    })  # fmt: skip
    return record


def _peak_at_end(into: list):
    """A TrainerCallback noting the peak GPU memory when training ends."""
    from transformers import TrainerCallback

    class PeakAtEnd(TrainerCallback):
        def on_train_end(self, args, state, control, **kwargs):
            into.append(peak_gib())

    return PeakAtEnd()


# ---------------------------------------------------------------------------------------------------------------
# the sampler gap on the MoE


def section_sampler_gap(args) -> dict:
    import sampler_precision_gap as gap

    base = ["model=hf", f"model.name_or_path={args.model}", *args.override]
    gap.MODELS.update({"moe_off": base, "moe_r3": [*base, "routing_replay=r3"]})
    samplers = args.samplers.split(",")
    seeds = [int(seed) for seed in args.seeds.split(",")]
    table = []
    for model in ("moe_off", "moe_r3"):
        for sampler in samplers:
            runs = []
            for seed in seeds:
                reset_peak()
                measured = gap.measure(model, sampler, seed, args.prompts, args.cache_dir)
                runs.append({**measured, "peak_gib": peak_gib()})
                print(f"gpu_check: sampler-gap {model} {sampler} seed {seed}: {measured}", flush=True)
            table.append({"routing_replay": model.removeprefix("moe_"), "sampler": sampler, "seeds": seeds,
                          "runs": runs, **{key: _mean_sd([run.get(key) for run in runs]) for key in
                                           ("routing/sampler_gap", "routing/sampler_gap_tokens", "mismatch/kl",
                                            "mismatch/logp_abs_diff/mean")}})  # fmt: skip
    return {"prompts_per_seed": args.prompts, "table": table}


def _mean_sd(values: list) -> list | None:
    values = [value for value in values if isinstance(value, int | float)]
    if not values:
        return None
    return [statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None]


# ---------------------------------------------------------------------------------------------------------------
# FP8 matrix products


def section_fp8(args) -> dict:
    import torch
    from fp8_matmul import swap_in_scaled_mm
    from transformers import AutoModelForCausalLM

    from align_kit.components.quantize import WeightQuantizer, quantized_parameters

    device = "cuda" if cuda() else "cpu"  # the CPU: the dry run and the tests (its timings mean nothing)
    record: dict = {"gemm": [], "device": device}
    torch.manual_seed(0)
    # 1. One matrix product at the dense model's shapes and one large square, decode-sized (64 rows) and
    #    prefill-sized: bf16 F.linear on the dequantized weight against the FP8 layer and the FP8 kernel alone
    #    (_gemm_case), median of CUDA-event timings over rotating inputs.
    shapes = ((64, 1024, 3072), (8192, 1024, 3072), (8192, 3072, 1024), (64, 4096, 4096), (8192, 4096, 4096))
    for rows, inner, outer in shapes if device == "cuda" else ((16, 64, 48),):
        record["gemm"].append(_gemm_case(rows, inner, outer, device))
    # 2. The dense model as the policy (fp32) and three samplers: bf16, fp8 dequantized (rollout.quantization=fp8's
    #    weights), fp8 through _scaled_mm. Forward time over one batch, and each sampler's gap to the policy on the
    #    same tokens: mean |logp difference| of the tokens and the mean per-position KL(policy || sampler).
    reset_peak()
    policy = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).to(device).eval()
    names = quantized_parameters(policy, quantize_router=False)
    bf16 = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16).to(device).eval()
    dequantized = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16).to(device).eval()
    WeightQuantizer(dequantized, "fp8", "channel", False).apply(dequantized, policy)
    scaled = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16).to(device).eval()
    record["swapped_linears"] = swap_in_scaled_mm(scaled, policy, names)
    vocab = policy.config.vocab_size
    batches = {"prefill 64x128": (64, 128), "decode-sized 64x1": (64, 1)}
    record["forward"] = {}
    with torch.no_grad():
        for label, (batch, length) in batches.items():
            tokens = [torch.randint(0, vocab, (batch, length), device=device) for _ in range(4)]
            record["forward"][label] = {
                name: _median_ms(lambda ids, m=model: m(input_ids=ids).logits, tokens, repeats=20)
                for name, model in (("bf16", bf16), ("fp8_dequantized", dequantized), ("fp8_scaled_mm", scaled))
            }
        tokens = torch.randint(0, vocab, (64, 128), device=device)
        reference = torch.log_softmax(policy(input_ids=tokens).logits.float(), dim=-1)
        record["gap_to_policy"] = {}
        for name, model in (("bf16", bf16), ("fp8_dequantized", dequantized), ("fp8_scaled_mm", scaled)):
            sampler = torch.log_softmax(model(input_ids=tokens).logits.float(), dim=-1)
            next_tokens = tokens[:, 1:].unsqueeze(-1)
            chosen = (reference[:, :-1].gather(-1, next_tokens) - sampler[:, :-1].gather(-1, next_tokens)).abs()
            kl = (reference.exp() * (reference - sampler)).sum(-1)
            record["gap_to_policy"][name] = {"logp_abs_diff_mean": chosen.mean().item(), "kl_mean": kl.mean().item()}
    record["logit_spread"] = reference.std(dim=-1).mean().item()  # near 0: a random model's near-uniform outputs
    record["peak_gib"] = peak_gib()
    return record


def _gemm_case(rows: int, inner: int, outer: int, device: str) -> dict:
    """One [rows, inner] x [inner, outer] product: bf16 on the dequantized weight, the FP8 layer (activation
    quantization included), and the FP8 kernel alone (rowwise scales, with fast accumulation, tensorwise)."""
    import torch
    from fp8_matmul import E4M3, ScaledMMLinear, rowwise_e4m3

    linear = torch.nn.Linear(inner, outer, bias=False, device=device)
    fp8 = ScaledMMLinear(linear)
    weight = (fp8.weight_fp8.float() * fp8.weight_scale.t()).to(torch.bfloat16)  # the dequantized path's weight
    b, b_scale = fp8.weight_fp8.t(), fp8.weight_scale
    inputs = [torch.randn(rows, inner, device=device, dtype=torch.bfloat16) for _ in range(8)]
    quantized = [rowwise_e4m3(x) for x in inputs]  # the kernel alone: activations quantized beforehand
    one = torch.ones((), device=device)
    by_tensor = [(values.float() * scale).to(E4M3) for values, scale in quantized]  # any per-tensor input

    def rowwise(q, fast=False):
        return torch._scaled_mm(q[0], b, scale_a=q[1], scale_b=b_scale, out_dtype=torch.bfloat16, use_fast_accum=fast)

    timings = {
        "bf16_dequantized": _median_ms(lambda x: torch.nn.functional.linear(x, weight), inputs),
        "fp8_layer_rowwise": _median_ms(fp8, inputs),
        "fp8_kernel_rowwise": _median_ms(rowwise, quantized),
        "fp8_kernel_rowwise_fast_accum": _median_ms(lambda q: rowwise(q, fast=True), quantized),
        "fp8_kernel_tensorwise": _median_ms(
            lambda a: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), by_tensor
        ),
    }
    x = inputs[0]
    reference = x.double() @ linear.weight.double().t()
    flops = 2 * rows * inner * outer
    return {
        "shape": [rows, inner, outer],
        "ms": timings,
        "tflops": {name: round(flops / ms / 1e9, 1) for name, ms in timings.items()},
        "speedup_layer": round(timings["bf16_dequantized"] / timings["fp8_layer_rowwise"], 3),
        "speedup_kernel": round(timings["bf16_dequantized"] / timings["fp8_kernel_rowwise"], 3),
        "relative_error_vs_fp64": {
            "dequantized": _relative(torch.nn.functional.linear(x, weight), reference),
            "scaled_mm": _relative(fp8(x), reference),
        },
    }


def _median_ms(function, inputs: list, repeats: int = 50) -> float:
    """Median milliseconds of function(input) over `repeats` calls, rotating the inputs (CUDA events)."""
    import torch

    for x in inputs:  # warm-up: kernels chosen, allocator settled
        function(x)
    times = []
    for index in range(repeats):
        if not cuda():
            started = time.perf_counter()
            function(inputs[index % len(inputs)])
            times.append(1e3 * (time.perf_counter() - started))
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        function(inputs[index % len(inputs)])
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return round(statistics.median(times), 4)


def _relative(out, reference) -> float:
    return round(((out.double() - reference).norm() / reference.norm()).item(), 6)


# ---------------------------------------------------------------------------------------------------------------
# summary


def summarize(args) -> int:
    parts = []
    if Path(args.parts).is_file():
        parts = [json.loads(line) for line in Path(args.parts).read_text().splitlines() if line.strip()]
    sections = {}
    if args.sections and Path(args.sections).is_file():  # the shell's view: exit code and seconds per section
        for line in Path(args.sections).read_text().splitlines():
            name, code, seconds = line.split("\t")
            sections[name] = {"exit_code": int(code), "seconds": float(seconds)}
    summary = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "shell_sections": sections,
               "sections": {part["section"]: part for part in parts}}  # fmt: skip
    Path(args.out).write_text(json.dumps(summary, indent=2, default=str))
    print("\n== gpu_check summary")
    names = list(sections) + [name for name in summary["sections"] if name not in sections]
    for name in names:
        part = summary["sections"].get(name, {})
        shell = sections.get(name, {"exit_code": 0 if part.get("ok") else 1, "seconds": part.get("seconds", 0.0)})
        state = "ok" if shell["exit_code"] == 0 else f"FAILED (exit {shell['exit_code']})"
        print(f"{name:22s} {state:20s} {shell['seconds']:7.1f} s  {_headline(part)}")
    print(f"summary: {args.out}")
    return 0


def _headline(part: dict) -> str:
    if not part:
        return "(no record)"
    if not part.get("ok", False) and part.get("error"):
        return str(part["error"])[:160]
    keys = ("gpu", "scaled_mm", "wandb_imported_by_train_path", "dense_parameters", "moe_parameters", "steps",
            "step_time_median_s", "peak_gib", "verdict", "ratio_median", "completions_identical", "halted")  # fmt: skip
    shown = [f"{key}={part[key]}" for key in keys if key in part]
    if "table" in part:
        shown += [f"{row['routing_replay']}/{row['sampler']}: gap={_fmt(row['routing/sampler_gap'])} "
                  f"kl={_fmt(row['mismatch/kl'])}" for row in part["table"]]  # fmt: skip
    if "gemm" in part:
        shown += [
            f"{tuple(g['shape'])}: layer x{g['speedup_layer']} kernel x{g['speedup_kernel']}" for g in part["gemm"]
        ]
        shown += [f"{name}: kl={gap['kl_mean']:.2e}" for name, gap in part.get("gap_to_policy", {}).items()]
    return "; ".join(shown)[:600]


def _fmt(pair) -> str:
    return "-" if pair is None else f"{pair[0]:.3g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=os.environ.get("GPU_CHECK_PARTS", "/tmp/gpu_check/parts.jsonl"))
    parser.add_argument("--name", default=None, help="the section's name in the parts file (default: the command)")
    parser.add_argument("--cache-dir", default=os.environ.get("ALIGN_KIT_CACHE", "/tmp/gpu_check/cache"))
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("env")
    build = commands.add_parser("build-models")
    build.add_argument("--dir", required=True)
    build.add_argument("--size", choices=("full", "smoke", "tiny"), default="full")
    train = commands.add_parser("train")
    train.add_argument("overrides", nargs=argparse.REMAINDER)
    report = commands.add_parser("run-report")
    report.add_argument("run_dir")
    report.add_argument("--save", default=None, help="write the doctor's report here")
    overhead = commands.add_parser("overhead")
    overhead.add_argument("--steps", type=int, default=10)
    overhead.add_argument("--repeats", type=int, default=2)
    overhead.add_argument("--override", action="append", default=[])
    sampler = commands.add_parser("sampler-gap")
    sampler.add_argument("--model", required=True)
    sampler.add_argument("--samplers", default="bf16,fp8 channel")
    sampler.add_argument("--seeds", default="1,2")
    sampler.add_argument("--prompts", type=int, default=8)
    sampler.add_argument("--override", action="append", default=[])
    fp8 = commands.add_parser("fp8")
    fp8.add_argument("--model", required=True)
    summary = commands.add_parser("summarize")
    summary.add_argument("--out", required=True)
    summary.add_argument("--sections", default=None)
    args = parser.parse_args()
    if args.command == "summarize":
        return summarize(args)
    section = {"env": section_env, "build-models": build_models, "train": section_train,
               "run-report": section_run_report, "overhead": section_overhead, "sampler-gap": section_sampler_gap,
               "fp8": section_fp8}[args.command]  # fmt: skip
    return guarded(section)(args)


if __name__ == "__main__":
    sys.exit(main())
