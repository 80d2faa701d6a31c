"""The FP8 sampler with the GPU's own FP8 matrix products, beside align_kit's dequantized one (benchmarks/gpu_check.py).

`rollout.quantization=fp8` (align_kit/components/quantize.py) puts the sampler copy's weights on the E4M3 grid and
keeps them dequantized in bf16: the numerics of an FP8 engine's weights, at bf16 speed. An engine on a Hopper GPU
also quantizes the activations and multiplies in FP8 (`torch._scaled_mm`): W8A8, one scale per weight output channel
as in quantize.py and one per activation row (token), computed on the fly. `ScaledMMLinear` is that layer, so the
check can time it against the dequantized path and measure the extra log-prob gap the activation rounding adds.
"""

from __future__ import annotations

import torch
from torch import nn

E4M3 = torch.float8_e4m3fn
E4M3_MAX = torch.finfo(E4M3).max  # 448
TINY = torch.finfo(torch.float32).tiny


def rowwise_e4m3(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`matrix` [rows, cols] on the E4M3 grid with one fp32 scale per row: (fp8 values, scales [rows, 1]).
    The same rounding as quantize.fake_quantize with scale=channel: value = fp8 * scale."""
    matrix = matrix.float()
    scale = (matrix.abs().amax(dim=-1, keepdim=True) / E4M3_MAX).clamp(min=TINY)
    return (matrix / scale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3), scale


class ScaledMMLinear(nn.Module):
    """nn.Linear's forward as W8A8 FP8: weights per output channel (fixed at build), activations per row (each
    call), the product by `torch._scaled_mm` into bf16, the bias (if any) added in bf16."""

    def __init__(self, linear: nn.Linear, source_weight: torch.Tensor | None = None):
        super().__init__()
        weight = linear.weight if source_weight is None else source_weight  # quantize the fp32 master, not bf16
        values, scale = rowwise_e4m3(weight.detach())
        self.register_buffer("weight_fp8", values)  # [out, in], row-major: its .t() is the column-major B
        self.register_buffer("weight_scale", scale.t().contiguous())  # [1, out]
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().to(torch.bfloat16))
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        values, scale = rowwise_e4m3(rows)
        out = torch._scaled_mm(
            values, self.weight_fp8.t(), scale_a=scale, scale_b=self.weight_scale, out_dtype=torch.bfloat16
        )
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)


def swap_in_scaled_mm(copy: nn.Module, source: nn.Module, names: list[str]) -> int:
    """Replace the nn.Linear modules of `copy` whose weight is named in `names` (quantize.quantized_parameters) by
    ScaledMMLinear built from `source`'s fp32 weights; returns how many were replaced. Weights that are not an
    nn.Linear's (fused MoE experts) keep the copy's own path."""
    wanted = {name.removesuffix(".weight") for name in names if name.endswith(".weight")}
    sources = dict(source.named_modules())
    swapped = 0
    for name, module in list(copy.named_modules()):
        if name in wanted and type(module) is nn.Linear:
            parent_name, _, child = name.rpartition(".")
            parent = copy.get_submodule(parent_name) if parent_name else copy
            setattr(parent, child, ScaledMMLinear(module, sources[name].weight))
            swapped += 1
    return swapped
