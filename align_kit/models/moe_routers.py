"""The MoE router families routing replay can hook, and how each turns router logits into gate weights.

In transformers 5.x an MoE block routes through a `*TopKRouter` module whose forward returns
`(router_logits, router_scores, router_indices)` (transformers 5.17, `models/<family>/modeling_<family>.py`):

- `Qwen3MoeTopKRouter`, `Qwen2MoeTopKRouter`, `OlmoeTopKRouter`: `p = softmax(logits)` over all experts in float32,
  the top-k of `p`, divided by their sum when `config.norm_topk_prob`, cast back to the logits dtype.
- `MixtralTopKRouter`: the same softmax and top-k, always divided by their sum, left in float32.

Routing replay keeps the replayed expert *selection* but recomputes its gate weights from the current logits with the
family's own formula (R3, arXiv 2510.11370: softmax over the current logits of the replayed experts), so the router
still gets gradients; for the recorded selection and unchanged parameters the weights are bit-identical to the
router's own. Classes are matched by exact name: a family joins only once its formula has been checked here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch import nn

# torch is imported inside the functions: plan validation reads MOE_MODEL_TYPES before torch loads.

# (router module, router logits [tokens, experts], expert indices [tokens, k] int64) -> gate weights [tokens, k]
GateWeights = Callable[[Any, Any, Any], Any]


def softmax_then_select(router: nn.Module, logits: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Qwen2-MoE, Qwen3-MoE, OLMoE: float32 softmax over all experts, the selected experts' probabilities,
    renormalised over them when `norm_topk_prob`, in the logits dtype."""
    import torch
    from torch import nn

    weights = nn.functional.softmax(logits, dtype=torch.float, dim=-1).gather(-1, indices)
    if router.norm_topk_prob:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.to(logits.dtype)


def softmax_then_select_renormalised(router: nn.Module, logits: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Mixtral: float32 softmax over all experts, the selected experts' probabilities, always renormalised over
    them, kept in float32 (as `MixtralTopKRouter` returns them)."""
    from torch import nn

    weights = nn.functional.softmax(logits.float(), dim=-1).gather(-1, indices)
    return weights / weights.sum(dim=-1, keepdim=True)


@dataclass(frozen=True)
class RouterFamily:
    router_class: str  # the transformers class name of the router module
    model_type: str  # `config.model_type` of the models built from it
    gate_weights: GateWeights


FAMILIES = (
    RouterFamily("Qwen3MoeTopKRouter", "qwen3_moe", softmax_then_select),
    RouterFamily("Qwen2MoeTopKRouter", "qwen2_moe", softmax_then_select),
    RouterFamily("OlmoeTopKRouter", "olmoe", softmax_then_select),
    RouterFamily("MixtralTopKRouter", "mixtral", softmax_then_select_renormalised),
)
SUPPORTED_ROUTERS = ", ".join(family.router_class for family in FAMILIES)
MOE_MODEL_TYPES = tuple(family.model_type for family in FAMILIES)


def router_family(module: nn.Module) -> RouterFamily | None:
    """The family of a router module, or None when `module` is not a supported router."""
    name = type(module).__name__
    return next((family for family in FAMILIES if family.router_class == name), None)


def is_moe_model(model_or_config: Any) -> bool:
    """Whether routing replay can hook this model: a module holding a supported router, or a config of a supported
    family with routed experts (`num_experts`, which Mixtral's config also answers). Dense models answer False."""
    if hasattr(model_or_config, "modules"):  # an nn.Module
        return any(router_family(module) is not None for module in model_or_config.modules())
    model_type = getattr(model_or_config, "model_type", None)
    supported = any(family.model_type == model_type for family in FAMILIES)
    return supported and (getattr(model_or_config, "num_experts", None) or 0) > 0
