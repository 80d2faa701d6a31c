"""Weight quantization of the sampler copy, as inference engines quantize a policy for rollouts.

The training-stability chapter, 16.6.1 (2): to raise throughput, rollout engines use INT8/FP8 quantization while the
trainer keeps fp32 master weights, so sampler and trainer compute different distributions (and, in an MoE, route
some tokens to other experts) on the same weights. Here the weights are quantized and dequantized at once, and the
copy keeps the dequantized values in its bf16 compute dtype: the numerical effect on log-probs and routing is the
engine's (weights on the FP8/INT8 grid, activations in bf16), not its speed.

- fp8  : E4M3 (`torch.float8_e4m3fn`, largest finite value 448), the format of FP8 rollout engines.
- int8 : symmetric weight-only INT8, round to nearest, levels -127..127.
- scale: `channel` takes one scale per output channel (each row of a weight as `F.linear` takes it, `[..., out,
  in]`), `tensor` one per weight matrix; a fused expert tensor `[experts, out, in]` is one matrix per expert, as
  vLLM's FP8 MoE keeps a weight scale per expert.

Kept in bf16, as engines keep them by default: embeddings and the LM head (tied in the tiny models), norms and
biases (1-D). The MoE router weights are quantized only with `quantize_router` (engines differ on this).
The scale is fp32, and the dequantized weight is rounded to bf16 when stored, as weight-only kernels dequantize
into the activation dtype before the matmul: up to 2**-8 relative (an FP8 step is 2**-3 relative; for INT8, up to a
quarter of a level at the top of the range).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch
    from torch import nn

Format = Literal["none", "fp8", "int8"]  # rollout.quantization; none keeps the bf16 weights
Scale = Literal["channel", "tensor"]
INT8_MAX = 127.0


def fake_quantize(weight: torch.Tensor, fmt: Format, scale: Scale) -> torch.Tensor:
    """`weight` quantized to `fmt` with `scale` scales and dequantized, in float32."""
    import torch

    weight = weight.float()
    amax = weight.abs().amax(dim=-1 if scale == "channel" else (-2, -1), keepdim=True)
    top = torch.finfo(torch.float8_e4m3fn).max if fmt == "fp8" else INT8_MAX
    step = (amax / top).clamp(min=torch.finfo(torch.float32).tiny)  # an all-zero row stays zero
    scaled = (weight / step).clamp(-top, top)
    if fmt == "fp8":
        grid = scaled.to(torch.float8_e4m3fn).float()  # round to nearest even on the E4M3 grid
    else:
        grid = scaled.round()
    return grid * step


def quantized_parameters(model: nn.Module, quantize_router: bool) -> list[str]:
    """Names of the parameters an engine quantizes: the weights (2-D and more) of the decoder, not the embeddings
    or the LM head, and the MoE routers' only with `quantize_router`."""
    from align_kit.models.moe_routers import router_family

    kept = {id(p) for module in (model.get_input_embeddings(), model.get_output_embeddings()) if module is not None
            for p in module.parameters()}  # fmt: skip
    if not quantize_router:
        kept |= {id(p) for m in model.modules() if router_family(m) is not None for p in m.parameters()}
    return [name for name, p in model.named_parameters() if p.dim() >= 2 and id(p) not in kept]


class WeightQuantizer:
    """Writes the quantized weights of a source model into its low-precision copy (same parameter names)."""

    def __init__(self, copy: nn.Module, fmt: Format, scale: Scale, quantize_router: bool):
        self.fmt, self.scale = fmt, scale
        self.names = quantized_parameters(copy, quantize_router)

    def apply(self, copy: nn.Module, source: nn.Module) -> None:
        """After the copy's sync: its quantized weights from the source's own (fp32) values, not from the bf16 copy
        (quantizing a bf16 rounding would round twice)."""
        import torch

        targets, sources = dict(copy.named_parameters()), dict(source.named_parameters())
        with torch.no_grad():
            for name in self.names:
                targets[name].copy_(fake_quantize(sources[name].detach(), self.fmt, self.scale))
