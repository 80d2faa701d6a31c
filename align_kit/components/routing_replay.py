"""The `routing_replay` node: MoE Routing Replay (seed 000, 16.6.1 (1)).

off : the router decides in every forward; routing drift is still measured (`routing/flip_rate`,
      `routing/tokens_any_flip`) against the routing recorded while the completion was sampled
r2  : Routing Replay of GSPO (arXiv 2507.18071 §5.3): the expert selection of the forward that
      computes the old log-probs is recorded and replayed in the training forwards of the batch
r3  : Rollout Routing Replay (arXiv 2510.11370): the selection made while generating (HF
      `generate` here; vLLM's routed experts on GPU) is replayed in the old-log-prob and training
      forwards

Only the selection is replayed; gate weights come from the current router logits, so the router
keeps learning. The hooks themselves are in `router_hooks.py`, the supported families in
`moe_routers.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from align_kit.components.base import Component
from align_kit.components.moe_routers import MOE_MODEL_TYPES, SUPPORTED_ROUTERS
from align_kit.errors import ConfigError

MODES = ("off", "r2", "r3")


@dataclass
class RoutingReplay(Component):
    mode: str = "off"

    def validate(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"routing_replay.mode={self.mode!r} is not one of {list(MODES)}")

    @property
    def replays(self) -> bool:
        return self.mode != "off"

    def check_model_node(self, model_node, choice: str | None) -> None:
        """Reject routing replay on a dense model before it loads (what can be known from the config)."""
        if not self.replays:
            return
        model_type = _declared_model_type(model_node)
        if model_type is not None and model_type not in MOE_MODEL_TYPES:
            raise ConfigError(
                f"routing_replay={self.mode} needs a Mixture-of-Experts model but model={choice} is {model_type!r}; "
                f"use model=tiny_moe or a model whose routers are {SUPPORTED_ROUTERS}, or routing_replay=off"
            )


def _declared_model_type(model_node) -> str | None:
    """The transformers model_type the node will build, when knowable without loading it."""
    architecture = getattr(model_node, "architecture", None)
    if architecture is not None:  # the tiny models
        return architecture
    name = getattr(model_node, "name_or_path", None)
    config_file = Path(name).expanduser() / "config.json" if name else None
    if config_file is not None and config_file.is_file():
        return json.loads(config_file.read_text()).get("model_type")
    return None  # a hub name: checked when the model loads
