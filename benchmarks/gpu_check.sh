#!/usr/bin/env bash
# align_kit's training path on one GPU with no network and no vLLM, in about 4 minutes (BUDGET_S caps it at 395 s;
# docs/scale.md has the results):
#   1. the carried wheels installed into a target folder (the machine has torch, transformers, accelerate, tokenizers,
#      safetensors, numpy, pandas, pyarrow, ...; not TRL, Hydra, omegaconf, datasets);
#   2. env: versions, the GPU, torch._scaled_mm, whether the training path imports wandb with logger=none;
#   3. the embedded default on the GPU in bf16 (warm start included), its metrics file and the doctor's verdict;
#   4. a dense Qwen3 (~0.44 B) and a Qwen3-MoE (~0.45 B, 32 experts top-4) with random weights, saved for model=hf;
#   5. align_kit's step time against plain trl.GRPOTrainer on the dense model, trajectory held fixed (a ratio);
#   6. routing/sampler_gap and mismatch/kl before any update on the MoE: bf16 and FP8 samplers, routing_replay off/r3;
#   7. the FP8 sampler through torch._scaled_mm against the dequantized one: speed and log-prob gap;
#   8. `align-kit train` with rollout=hf on the MoE (R3, FP8 sampler) and on the dense model;
# each section in its own process under a time limit (one failure does not stop the others), the peak GPU memory of
# each, a summary table last; the log, summary.json, the default run's metrics and the doctor's report under OUT.
#
#   benchmarks/gpu_check.sh [--dry-run] [--smoke] [OUT]     (OUT: $OUT, else outputs/gpu_check/<time>)
#   --smoke: every section at its smallest (3-step runs, small models): the environment's problems, fast
#   --dry-run: print every command; the training commands' composed configs (`--cfg job`); runs nothing else
#
# The wheels (not committed; .whl/ is git-ignored), on a machine with pip and the network, for the device's Python 3.12:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     trl==1.16.0 hydra-core==1.3.8 omegaconf==2.3.1 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 \
#     hydra-joblib-launcher==1.2.0 hydra-submitit-launcher==1.2.0 submitit==1.5.4
#   python3 -m pip wheel --no-deps -w .whl antlr4-python3-runtime==4.9.3     # published as a source archive only
# (2.3 MB in all; tests/benchmarks/test_gpu_check.py installs them into an empty target and imports them.)
# On the lent machine the working tree travels; from a copy of the repository with .whl/ inside it:
#   cd <copy> && PYTHONUNBUFFERED=1 bash benchmarks/gpu_check.sh "$OUT"
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

DRY_RUN=0
SIZE=full
while [[ "${1:-}" == --* ]]; do
    case "$1" in
        --dry-run) DRY_RUN=1 ;;
        --smoke) SIZE=smoke ;;
        *) echo "gpu_check: unknown option $1 (--dry-run, --smoke)" >&2; exit 2 ;;
    esac
    shift
done
OUT="${1:-${OUT:-outputs/gpu_check/$(date +%Y%m%d-%H%M%S)}}"
WORK="${GPU_CHECK_WORK:-/tmp/gpu_check}"
WHEELS="${WHEELS:-.whl}"
PYTHON="${PYTHON:-python3}"
BUDGET_S="${BUDGET_S:-$([[ $SIZE == smoke ]] && echo 130 || echo 395)}"  # all sections, the install included
STARTED=$(date +%s)
MODELS="$WORK/models"
PARTS="$WORK/parts.jsonl"
SECTIONS="$WORK/sections.tsv"
CHECK=(benchmarks/gpu_check.py --parts "$PARTS" --cache-dir "$WORK/cache")

if [[ "$SIZE" == smoke ]]; then
    DEFAULT_STEPS=3; HF_STEPS=3; OVERHEAD=(--steps 3 --repeats 1); GAP=(--seeds 1 --prompts 2)
else
    DEFAULT_STEPS=40; HF_STEPS=15; OVERHEAD=(--steps 10 --repeats 3); GAP=(--seeds 1,2 --prompts 8)
fi
GPU=(trainer.use_cpu=false trainer.bf16=true logger=none trainer.save_strategy=no trainer.disable_tqdm=true
     "paths.cache_dir=$WORK/cache")
DENSE=(model=hf "model.name_or_path=$MODELS/dense")
MOE=(model=hf "model.name_or_path=$MODELS/moe")

if [[ "$DRY_RUN" == 0 ]]; then
    rm -rf "$WORK" && mkdir -p "$WORK" "$OUT" || exit 1
    exec > >(tee -a "$OUT/gpu_check.log") 2>&1
    export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled \
        TOKENIZERS_PARALLELISM=false ALIGN_KIT_CACHE="$WORK/cache"
fi

left() { echo $(( BUDGET_S - ($(date +%s) - STARTED) )); }

# section NAME LIMIT_S COMMAND...: runs it under min(LIMIT_S, the time left), records its exit code and seconds.
section() {
    local name=$1 limit=$2; shift 2
    echo "+ $*"
    [[ "$DRY_RUN" == 1 ]] && return 0
    local remaining; remaining=$(left)
    (( limit > remaining )) && limit=$remaining
    if (( limit < 5 )); then
        echo "gpu_check: $name skipped: the budget is spent"; printf '%s\t%s\t%s\n' "$name" 124 0 >>"$SECTIONS"
        return 0
    fi
    echo "== $name (limit ${limit} s, $(left) s left)"
    local begin=$SECONDS code
    timeout --kill-after=5 "$limit" "$@"
    code=$?
    printf '%s\t%s\t%s\n' "$name" "$code" "$(( SECONDS - begin ))" >>"$SECTIONS"
    (( code == 124 )) && echo "gpu_check: $name stopped at its limit of ${limit} s"
    return 0
}

# The training commands, printed by the dry run with their composed configs.
train_command() {  # NAME RUN_DIR OVERRIDES...
    local name=$1 run_dir=$2; shift 2
    if [[ "$DRY_RUN" == 1 ]]; then
        echo "+ $PYTHON -m align_kit.train $* hydra.run.dir=$run_dir --cfg job"
        "$PYTHON" -m align_kit.train "$@" "hydra.run.dir=$run_dir" --cfg job >/dev/null || echo "gpu_check: $name does not compose"
        return 0
    fi
    section "$name" "$LIMIT" "$PYTHON" "${CHECK[@]}" --name "$name" train -- "$@" "hydra.run.dir=$run_dir"
}

echo "gpu_check: size $SIZE, budget ${BUDGET_S} s, output in $OUT, scratch in $WORK"
section install 60 "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$WORK/site" "$WHEELS"/*.whl
export PYTHONPATH="$WORK/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if [[ "$DRY_RUN" == 0 ]]; then
    (nvidia-smi; nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv) \
        >"$OUT/nvidia-smi.txt" 2>&1
    head -20 "$OUT/nvidia-smi.txt"
fi
section env 60 "$PYTHON" "${CHECK[@]}" env

# The sections that time (overhead, fp8) run alone first. Then the embedded default beside the rest: its warm start
# (450 SFT steps) runs on the CPU, about a minute on 4 of the 16 cores (OMP_NUM_THREADS), while the other sections use
# the GPU and the other cores. (The figures in docs/scale.md of 2026-12-04 came from an earlier order, with the default
# beside the timing sections.)
section build-models 90 "$PYTHON" "${CHECK[@]}" build-models --dir "$MODELS" --size "$SIZE"
section overhead 150 "$PYTHON" "${CHECK[@]}" overhead "${OVERHEAD[@]}" --override "${GPU[0]}" --override "${GPU[1]}" \
    --override "${DENSE[0]}" --override "${DENSE[1]}"
section fp8 60 "$PYTHON" "${CHECK[@]}" fp8 --model "$MODELS/dense"
LIMIT=$([[ $SIZE == smoke ]] && echo 110 || echo 200)
DEFAULT_PID=""
if [[ "$DRY_RUN" == 1 ]]; then
    train_command default "$WORK/runs/default" "${GPU[@]}" "trainer.max_steps=$DEFAULT_STEPS"
else
    (export OMP_NUM_THREADS=4; train_command default "$WORK/runs/default" "${GPU[@]}" "trainer.max_steps=$DEFAULT_STEPS") &
    DEFAULT_PID=$!
fi
section sampler-gap 100 "$PYTHON" "${CHECK[@]}" sampler-gap --model "$MODELS/moe" "${GAP[@]}" \
    --override trainer.use_cpu=false --override trainer.bf16=true
LIMIT=90
train_command moe-r3-fp8 "$WORK/runs/moe_r3" "${GPU[@]}" "${MOE[@]}" routing_replay=r3 rollout.dtype=bfloat16 \
    rollout.quantization=fp8 "trainer.max_steps=$HF_STEPS"
[[ "$DRY_RUN" == 0 && -f "$WORK/runs/moe_r3/metrics.jsonl" ]] && cp "$WORK/runs/moe_r3/metrics.jsonl" "$OUT/moe_r3_metrics.jsonl"
LIMIT=70
train_command dense "$WORK/runs/dense" "${GPU[@]}" "${DENSE[@]}" "trainer.max_steps=$HF_STEPS"

[[ -n "$DEFAULT_PID" ]] && wait "$DEFAULT_PID"
section default-doctor 30 "$PYTHON" "${CHECK[@]}" --name default-doctor run-report "$WORK/runs/default" \
    --save "$OUT/default_doctor.txt"
[[ "$DRY_RUN" == 0 && -f "$WORK/runs/default/metrics.jsonl" ]] && cp "$WORK/runs/default/metrics.jsonl" "$OUT/default_metrics.jsonl"
if [[ "$DRY_RUN" == 0 ]]; then
    "$PYTHON" benchmarks/gpu_check.py --parts "$PARTS" summarize --sections "$SECTIONS" --out "$OUT/summary.json"
    echo "gpu_check: $(( $(date +%s) - STARTED )) s in all"
fi
