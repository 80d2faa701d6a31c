#!/usr/bin/env bash
# The GPU path in one script, for a machine with a GPU, vLLM (pip install -e '.[vllm]') and no network:
#   1. rollout=vllm colocated on the embedded tiny model (built and warm-started locally), a few steps;
#   2. R3 from vLLM on the tiny MoE (the engine's routed experts replayed in training);
#   3. with two GPUs or more, a two-process run (accelerate_configs/ddp.yaml);
#   4. align_kit's step time against plain TRL's at the same vLLM config (benchmarks/trainer_overhead.py,
#      target ratio <= 1.03);
# then prints each run's train/inference mismatch metrics and step times.
#   benchmarks/gpu_smoke.sh [--dry-run] [output folder]    (default: outputs/gpu_smoke/<time>)
set -euo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
if [[ "${1:-}" == "--dry-run" ]]; then DRY_RUN=1; shift; fi
OUT="${1:-outputs/gpu_smoke/$(date +%Y%m%d-%H%M%S)}"
PYTHON="${PYTHON:-.venv/bin/python}"
STEPS="${STEPS:-10}"
GPUS="${GPUS:-$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)}"
COMMON=(trainer.use_cpu=false "trainer.max_steps=$STEPS" trainer.save_strategy=no trainer.disable_tqdm=true
        logger=none rollout=vllm rollout.gpu_memory_utilization=0.2)

run() {
    echo "+ $*"
    if [[ "$DRY_RUN" == 0 ]]; then "$@"; fi
}

echo "gpu_smoke: output in $OUT; GPUs: $GPUS; steps: $STEPS"
run "$PYTHON" -m align_kit.train "${COMMON[@]}" "hydra.run.dir=$OUT/vllm_colocate"
run "$PYTHON" -m align_kit.train "${COMMON[@]}" model=tiny_moe routing_replay=r3 "hydra.run.dir=$OUT/vllm_r3_moe"
if [[ "$GPUS" -ge 2 ]]; then
    run "$PYTHON" -m accelerate.commands.launch --config_file accelerate_configs/ddp.yaml --num_processes 2 \
        -m align_kit.train "${COMMON[@]}" "hydra.run.dir=$OUT/two_processes"
else
    echo "gpu_smoke: one GPU, no two-process run"
fi
run "$PYTHON" benchmarks/trainer_overhead.py --steps 30 --repeats 3 --override rollout=vllm \
    --override trainer.use_cpu=false --override rollout.gpu_memory_utilization=0.1

if [[ "$DRY_RUN" == 0 ]]; then
    "$PYTHON" - "$OUT" <<'PY'
import json, statistics, sys
from pathlib import Path

for run in sorted(Path(sys.argv[1]).iterdir()):
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    gap = [r["sampling/sampling_logp_difference/mean"] for r in rows if "sampling/sampling_logp_difference/mean" in r]
    ratio = [r["sampling/importance_sampling_ratio/mean"] for r in rows if "sampling/importance_sampling_ratio/mean" in r]
    steps = [r["step_time"] for r in rows if "step_time" in r][2:]
    flips = [r["routing/flip_rate"] for r in rows if "routing/flip_rate" in r]
    print(f"{run.name}: mean |logp gap| {statistics.mean(gap) if gap else float('nan'):.2e}, "
          f"IS ratio mean {statistics.mean(ratio) if ratio else float('nan'):.3f}, "
          f"step time median {statistics.median(steps) if steps else float('nan'):.3f} s"
          + (f", routing flip rate {statistics.mean(flips):.3f}" if flips else ""))
PY
fi
