"""The `routing_replay` node: MoE Routing Replay (the training-stability chapter, 16.6.1 (1)).

off : the router decides in every forward; routing drift is still measured (`routing/flip_rate`,
      `routing/tokens_any_flip`, and `routing/sampler_gap*`) against the routing recorded while the
      completion was sampled, on every other generation (DRIFT_EVERY): recording every token's routing
      cost about 1.3 % of a training step on the tiny MoE
r2  : Routing Replay of GSPO (arXiv 2507.18071 §5.3): the expert selection of the forward that
      computes the old log-probs is recorded and replayed in the training forwards of the batch
r3  : Rollout Routing Replay (arXiv 2510.11370): the selection made while generating (HF
      `generate` here; vLLM's routed experts with a GPU build, components/vllm_routing.py) is replayed in
      the old-log-prob and training forwards

Only the selection is replayed; gate weights come from the current router logits, so the router
keeps learning. The hooks themselves are in `router_hooks.py`, the supported families in
`moe_routers.py`.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any, Literal

from align_kit.core.component import Component
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.core.hooks import BatchKey, TrainerHook, Weighted
from align_kit.models.moe_routers import MOE_MODEL_TYPES, SUPPORTED_ROUTERS

# A rate this process has nothing for: weight 0, so the gathered rate is the other processes' (all rates here
# are `Weighted`, and every process must return the same kind for a key).
NO_VALUE = Weighted(math.nan, 0)
# Without replay the routing is only measured: on generations whose index (global step // steps_per_generation) is a
# multiple of this, so a resumed run measures the same ones.
DRIFT_EVERY = 2


@dataclass
class RoutingReplay(Component):
    mode: Literal["off", "r2", "r3"] = knob(
        "off",
        help="off: the router decides in every forward (drift is still measured on an MoE model); r2: replay the "
        "experts of the old-log-prob forward in the training forwards; r3: replay the experts chosen while "
        "generating. MoE models only; r2 acts only off-policy.",
        source="16.6.1 (1); GSPO §5.3, arXiv 2507.18071; R3, arXiv 2510.11370",
    )

    @property
    def replays(self) -> bool:
        return self.mode != "off"

    def trainer_hooks(self) -> list:
        return [RouteReplay(self)]

    def check(self, plan) -> None:
        """Reject routing replay on a dense model before it loads (what can be known from the config)."""
        if not self.replays:
            return
        model_type = plan.model.declared_model_type()
        if model_type is not None and model_type not in MOE_MODEL_TYPES:
            raise ConfigError(
                f"routing_replay={self.mode} needs a Mixture-of-Experts model but model={plan.choices.get('model')} "
                f"is {model_type!r}; use model=tiny_moe or a model whose routers are {SUPPORTED_ROUTERS}, or "
                "routing_replay=off"
            )

    def monitor_facts(self) -> dict[str, Any]:
        return {"routing_replay": self.replays}


class RouteReplay(TrainerHook):
    """Router hooks on every MoE policy (drift is measured even without replay). Routing travels in
    the batch dict (`routed_experts`, `routed_experts_valid`), so TRL's shuffling and mini-step
    splitting carry it with its samples."""

    batch_keys = (BatchKey("routed_experts", "sequence"), BatchKey("routed_experts_valid", "sequence"))

    def __init__(self, node: RoutingReplay):
        self.node = node
        self.hooks = None  # RouterHooks on the trained policy (None: dense model, replay off)
        self.generation_hooks = None  # on the model that generates (the sampler copy, if any)

    def building(self, args):
        """R3 from vLLM: TRL builds the colocated engine in its __init__; it must return routed experts."""
        if args is not None and args.use_vllm and self.node.mode == "r3":
            from align_kit.components.vllm_routing import returning_routed_experts

            return returning_routed_experts()
        return contextlib.nullcontext()

    def attach(self, trainer) -> None:
        from align_kit.components.router_capture import RouterHooks, UnsupportedModelError
        from align_kit.models.moe_routers import is_moe_model

        if not self.node.replays and not is_moe_model(trainer.model):
            return
        try:
            self.hooks = RouterHooks(trainer.model)
        except UnsupportedModelError as error:
            raise ConfigError(f"routing_replay={self.node.mode}: {error}") from None
        sampler = trainer.sampler_model  # set by the rollout's hook, which attaches before this one
        self.generation_hooks = RouterHooks(sampler) if sampler is not None else self.hooks

    @contextlib.contextmanager
    def generation(self, trainer, state):
        if self.hooks is None:
            yield
            return
        if trainer.use_vllm:  # the engine samples: its own routing, if it returns it (R3 from vLLM)
            if self.node.mode != "r3":
                state.extras["generated_routing"] = None
                yield
                return
            from align_kit.components.vllm_routing import capture_outputs, routing_from_outputs

            with capture_outputs(trainer.vllm_generation.llm) as outputs:
                yield
            state.extras["generated_routing"] = routing_from_outputs(outputs)
            return
        generation = trainer.state.global_step // trainer.args.steps_per_generation
        if not self.node.replays and generation % DRIFT_EVERY:  # not measured: nothing recorded or compared
            state.extras["generated_routing"] = None
            yield
            return
        with self.generation_hooks.record():
            yield
        state.extras["generated_routing"] = self.generation_hooks.take_generated()

    def forward(self, trainer, call):
        """r2 records while scoring, r3 replays the sampled routing while scoring, and every training
        forward replays (r2, r3) or observes (off)."""
        if self.hooks is None or trainer.accelerator.unwrap_model(call.model) is not trainer.model:
            return contextlib.nullcontext()
        width = call.input_ids.size(1)
        completion_positions = call.attention_mask.clone()
        completion_positions[:, : width - call.logits_to_keep] = 0  # flip statistics count completion tokens
        if call.phase == "scoring":
            if self.node.mode == "r2":
                call.state.extras["recorded_scoring"] = True
                call.state.extras["scoring_positions"] = completion_positions
                return self.hooks.record()
            # The trainer's own choices are compared with the sampler's (before any update): the gap R3 removes.
            if call.state.extras["generated_routing"] is None:  # vLLM sampled and returned no routing
                return contextlib.nullcontext()
            indices, valid = call.state.extras["generated_routing"]
            block = self.hooks.replay if self.node.mode == "r3" else self.hooks.observe
            return block(indices[:, :width], valid=valid[:, :width], mask=completion_positions)
        batch = call.state.inputs
        if "routed_experts" not in batch:
            return contextlib.nullcontext()
        block = self.hooks.replay if self.node.replays else self.hooks.observe
        return block(batch["routed_experts"], valid=batch.get("routed_experts_valid"), mask=completion_positions)

    def on_scored_batch(self, trainer, state, batch):
        """R2's routing from the old-log-prob forward, otherwise the routing recorded while sampling; and the
        sampler-trainer routing gap of the scoring forward: routing/sampler_gap (share of completion (token, layer)
        pairs whose expert set differs between the sampler's and the trainer's weights before any update) and
        routing/sampler_gap_tokens (share of completion tokens with any layer differing)."""
        from align_kit.components.router_capture import flip_metrics

        if self.hooks is None:
            return None
        width = batch["prompt_ids"].size(1) + batch["completion_ids"].size(1)
        recorded = self.hooks.take() if self.node.mode == "r2" and state.extras.get("recorded_scoring") else None
        if state.extras["generated_routing"] is None:  # vLLM sampled (off, r2): no sampler routing to compare
            if recorded is not None:
                batch["routed_experts"] = recorded
            return {"routing/sampler_gap": NO_VALUE, "routing/sampler_gap_tokens": NO_VALUE}
        indices, valid = state.extras["generated_routing"]
        indices, valid = indices[:, :width], valid[:, :width]
        if recorded is not None:
            gap = flip_metrics(recorded, indices, mask=state.extras["scoring_positions"], valid=valid)
            batch["routed_experts"] = recorded
        else:
            gap = self.hooks.pop_metrics()
            batch["routed_experts"], batch["routed_experts_valid"] = indices, valid
        return {
            "routing/sampler_gap": gap.get("routing/flip_rate", NO_VALUE),
            "routing/sampler_gap_tokens": gap.get("routing/tokens_any_flip", NO_VALUE),
        }

    def on_loss(self, trainer, loss):
        if self.hooks is None:
            return None
        # The same keys on every process (NaN: no routing compared here), so they gather like TRL's.
        metrics = self.hooks.pop_metrics()
        names = ("routing/flip_rate", "routing/tokens_any_flip") + (
            ("routing/replayed_fraction",) if self.node.replays else ()
        )
        return {name: metrics.get(name, NO_VALUE) for name in names}
