"""MoE Routing Replay (R2, R3) for Hugging Face MoE models: record the experts every token was routed to, replay that
selection in later forwards, and measure how often the current router would have chosen differently.

Why: after a policy update an MoE router can send the same token to other experts, so old and new log-probs come
from different expert sets and the importance ratio jumps (the training-stability chapter, 16.6.1 (1); GSPO,
arXiv 2507.18071 §5.3).
R2 records the routing of the forward that computes the old log-probs and replays it in the training forwards of the
same batch. R3 ("Rollout Routing Replay", arXiv 2510.11370) replays the routing the rollout engine chose while
generating: recorded here during HF `generate`, or vLLM's `routed_experts` laid out by `pad_routing`. Only the expert
*selection* is replayed; gate weights are recomputed from the current logits (`moe_routers`), so the router learns.

Layout: routing is `[batch, seq_len, num_moe_layers, top_k]` in the smallest integer dtype that holds every expert
id; position t is token t of `torch.cat([prompt_ids, completion_ids], 1)`. It is a per-sample tensor (leading batch
dimension), so it can ride in TRL's batch dict through shuffling and splitting. A `valid [batch, seq_len]` mask marks
positions that hold routing; elsewhere replay lets the router choose. The last token of a generated sequence is
never forwarded during generation (vLLM's array has `seq_len - 1` rows for the same reason), so its slot is zero and
invalid; that is harmless, because the log-prob of token t comes from position t - 1 and nothing reads the logits of
the last position.

Hooks: a forward hook on each router (which may replace its output) and a pre/post hook on the hooked model that
opens and closes each forward; TRL's chunked forwards consume the replayed rows in order. Under gradient
checkpointing the decoder layer re-runs during backward, after the `replay` block has exited: each checkpointed call
is wrapped so that its recompute sees the routing of its own forward.

Not covered: beam search and generation without a KV cache (routing history would not follow the sequences); the
load-balancing aux loss, which transformers recomputes from the logits with its own top-k.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from align_kit.core.hooks import Deferred
from align_kit.models.moe_routers import SUPPORTED_ROUTERS, RouterFamily, router_family

Mode = Literal["record", "replay", "observe"]
# (indices [B, S, L, k], valid [B, S] or None, mask [B, S] or None)
_Reference = tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]


class UnsupportedModelError(ValueError):
    """The model holds no MoE router that routing replay knows how to hook."""


def index_dtype(num_experts: int) -> torch.dtype:
    """The smallest integer dtype holding expert ids 0..num_experts-1 (routing is stored per token and layer)."""
    if num_experts <= 256:
        return torch.uint8
    return torch.int16 if num_experts <= 2**15 else torch.int32


def flip_metrics(
    current: torch.Tensor,
    reference: torch.Tensor,
    mask: torch.Tensor | None = None,
    valid: torch.Tensor | None = None,
) -> dict[str, Deferred]:
    """Compare two routings `[batch, seq_len, layers, top_k]` as expert *sets* per (token, layer).

    `routing/flip_rate`: share of (token, layer) pairs whose sets differ; `routing/tokens_any_flip`: share of tokens
    with at least one layer differing. Tokens count where `mask` (e.g. completion tokens) and `valid` (the reference
    exists) are both true.
    """
    counts = _flip_counts(_sets_differ(current, reference), mask, valid)
    return _metrics(counts, num_layers=current.shape[2])


def _sets_differ(current: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    # A router's top-k holds distinct experts, so sorted lists are equal exactly when the sets are.
    return (current.sort(dim=-1).values != reference.sort(dim=-1).values.to(current.dtype)).any(dim=-1)


def _flip_counts(flips: torch.Tensor, mask: torch.Tensor | None, valid: torch.Tensor | None) -> torch.Tensor:
    """From flips `[batch, seq_len, layers]`: (flipped pairs, tokens with a flip, compared tokens, masked tokens)."""
    masked = torch.ones(flips.shape[:2], dtype=torch.bool, device=flips.device) if mask is None else mask.bool()
    compared = masked if valid is None else masked & valid.bool()
    return torch.stack(
        [
            (flips & compared[..., None]).sum(),
            (flips.any(dim=-1) & compared).sum(),
            compared.sum(),
            masked.sum(),
        ]
    ).to(torch.float64)


def _metrics(counts: torch.Tensor, num_layers: int) -> dict[str, Deferred]:
    # Weighted by what they count, so a multi-process run's rates cover every process's tokens. On the device (float64
    # counts): a rate with nothing compared is NaN of weight 0, which the trainer treats as "no value here".
    flipped_pairs, flipped_tokens, compared, _ = counts.unbind()
    return {
        "routing/flip_rate": Deferred(flipped_pairs / (compared * num_layers), compared * num_layers),
        "routing/tokens_any_flip": Deferred(flipped_tokens / compared, compared),
    }


def pad_routing(
    per_sequence: Sequence[torch.Tensor | np.ndarray],
    prompt_lengths: Sequence[int],
    completion_lengths: Sequence[int],
    *,
    prompt_width: int | None = None,
    completion_width: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lay per-sequence routing out like TRL's batch: prompts left-padded, completions right-padded.

    `per_sequence[i]` is `[n_i, layers, top_k]` over the unpadded prompt + completion tokens of sequence i (vLLM's
    `CompletionOutput.routed_experts`), with `n_i = p_i + c_i - 1` (the last token never forwarded) or `p_i + c_i`.
    Token t of sequence i lands at position `P - p_i + t` of `[B, P + C, layers, top_k]`, where P and C default to
    the longest prompt and completion. Returns `(indices, valid)`; padding and missing slots are zero and invalid.
    """
    arrays = [torch.as_tensor(a) for a in per_sequence]
    if not len(arrays) == len(prompt_lengths) == len(completion_lengths):
        raise ValueError(
            f"{len(arrays)} routing arrays for {len(prompt_lengths)} prompts and {len(completion_lengths)} completions"
        )
    width_p = max(prompt_lengths) if prompt_width is None else prompt_width
    width_c = max(completion_lengths) if completion_width is None else completion_width
    indices = arrays[0].new_zeros((len(arrays), width_p + width_c, *arrays[0].shape[1:]))
    valid = torch.zeros(indices.shape[:2], dtype=torch.bool)
    for i, (routing, p, c) in enumerate(zip(arrays, prompt_lengths, completion_lengths, strict=True)):
        if p > width_p or c > width_c:
            raise ValueError(
                f"sequence {i}: prompt {p} / completion {c} tokens exceed the widths {width_p} / {width_c}"
            )
        if not p + c - 1 <= len(routing) <= p + c:
            raise ValueError(
                f"sequence {i}: routing covers {len(routing)} tokens, expected {p + c - 1} or {p + c} "
                f"(prompt {p} + completion {c}); the arrays must be unpadded and in batch order"
            )
        start = width_p - p  # the prompt is right-aligned at width_p and the completion follows it
        indices[i, start : start + len(routing)] = routing
        valid[i, start : start + len(routing)] = True
    return indices, valid


@dataclasses.dataclass(frozen=True)
class _Forward:
    """What one forward of the hooked model does at its routers; pinned into gradient-checkpoint recomputes."""

    mode: Mode
    batch: int
    seq_len: int
    recorded: torch.Tensor | None = None  # record: [b, s, L, k], filled layer by layer
    reference: torch.Tensor | None = None  # replay/observe: [b, s, L, k], this forward's rows
    valid: torch.Tensor | None = None  # [b, s]: positions whose reference exists
    mask: torch.Tensor | None = None  # [b, s]: positions that count in the statistics
    flips: torch.Tensor | None = None  # [b, s, L], filled layer by layer
    recompute: bool = False  # a checkpoint recompute: route as in the forward, record and count nothing


class RouterHooks:
    """Record, replay and observe the expert selection of a Hugging Face MoE model.

    Forwards of `model` inside `record()` store every (token, MoE layer) top-k selection (`take`, `take_generated`);
    inside `replay(indices)` they route by `indices` with gate weights from the current logits; inside
    `observe(indices)` they run unchanged. Replay and observe count how often the current router disagrees with
    `indices` (`pop_metrics`). Several forwards in one block (TRL's chunks) take consecutive rows of `indices`.
    """

    def __init__(self, model: nn.Module) -> None:
        found = [(name, module, router_family(module)) for name, module in model.named_modules()]
        routers = [(name, module, family) for name, module, family in found if family is not None]
        if not routers:
            raise UnsupportedModelError(
                f"routing replay found no MoE router in {type(model).__name__}; supported routers: {SUPPORTED_ROUTERS} "
                "(Qwen3-MoE, Qwen2-MoE, OLMoE, Mixtral). A dense model has nothing to replay."
            )
        shapes = {(module.num_experts, module.top_k) for _, module, _ in routers}
        if len(shapes) > 1:
            raise UnsupportedModelError(f"routers disagree on (num_experts, top_k): {sorted(shapes)}")
        self.num_experts, self.top_k = shapes.pop()
        self.num_layers = len(routers)
        self.index_dtype = index_dtype(self.num_experts)
        # The innermost checkpointable ancestor of each router: the decoder layer that re-runs during backward.
        self._checkpointed = list(
            {id(layer): layer for layer in (_checkpoint_layer(model, name) for name, _, _ in routers) if layer}.values()
        )
        self._handles = [
            model.register_forward_pre_hook(self._open_forward, with_kwargs=True),
            model.register_forward_hook(self._close_forward),
            *(
                module.register_forward_hook(self._router_hook(i, family))
                for i, (_, module, family) in enumerate(routers)
            ),
        ]
        self._mode: Mode | None = None
        self._forward: _Forward | None = None
        self._reference: _Reference | None = None
        self._next_row = 0
        self._chunks: list[torch.Tensor] = []
        self._counts: torch.Tensor | None = None
        self._replayed_forwards = False

    @property
    def bytes_per_token(self) -> int:
        """Storage of one token's routing: layers x top_k x the index itemsize."""
        return self.num_layers * self.top_k * self.index_dtype.itemsize

    @contextmanager
    def record(self) -> Iterator[None]:
        """Store the routing of every forward in the block; read it back with `take` or `take_generated`."""
        with self._mode_block("record"):
            yield

    def take(self) -> torch.Tensor:
        """The routing of the recorded forwards, joined along the batch (TRL's chunks): `[B, S, L, k]`."""
        chunks, self._chunks = self._chunks, []
        if not chunks:
            raise RuntimeError("no routing recorded: run forwards of the hooked model inside record()")
        if len({chunk.shape[1] for chunk in chunks}) > 1:
            raise ValueError(f"recorded forwards differ in length {[c.shape[1] for c in chunks]}; take_generated()?")
        return torch.cat(chunks)

    def take_generated(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The routing of one `generate` call with a KV cache, aligned with `cat([prompt_ids, completion_ids], 1)`.

        The prompt forward gives positions 0..P-1 and each later forward the one token it fed; the last generated
        token is never fed, so its slot (the last one) is zero and marked invalid. Returns `(indices [B, P + C, L, k],
        valid [B, P + C])`.
        """
        chunks, self._chunks = self._chunks, []
        if not chunks:
            raise RuntimeError("no routing recorded: run model.generate(...) inside record()")
        prompt, steps = chunks[0], chunks[1:]
        if any(step.shape[0] != prompt.shape[0] or step.shape[1] != 1 for step in steps):
            raise ValueError(
                "generation routing needs one token per forward after the prompt: generate with use_cache=True, "
                f"without beam search (recorded forwards: {[tuple(c.shape[:2]) for c in chunks]})"
            )
        indices = torch.cat([prompt, *steps, prompt.new_zeros((prompt.shape[0], 1, *prompt.shape[2:]))], dim=1)
        valid = torch.ones(indices.shape[:2], dtype=torch.bool, device=indices.device)
        valid[:, -1] = False
        return indices, valid

    @contextmanager
    def replay(
        self, indices: torch.Tensor, *, valid: torch.Tensor | None = None, mask: torch.Tensor | None = None
    ) -> Iterator[None]:
        """Route forwards in the block by `indices [B, S, L, k]` where `valid [B, S]` (default everywhere).

        Gate weights come from the current logits of the replayed experts, so they carry gradients. `mask [B, S]`
        selects the tokens counted in the statistics (completion tokens). Forwards take consecutive rows.
        """
        with self._mode_block("replay", self._checked(indices, valid, mask)):
            yield

    @contextmanager
    def observe(
        self, indices: torch.Tensor, *, valid: torch.Tensor | None = None, mask: torch.Tensor | None = None
    ) -> Iterator[None]:
        """Like `replay`, but the forwards route as the model itself would: only the statistics are collected."""
        with self._mode_block("observe", self._checked(indices, valid, mask)):
            yield

    def pop_metrics(self) -> dict[str, Deferred]:
        """Flip statistics over the replay/observe forwards since the last call (see `flip_metrics`), plus
        `routing/replayed_fraction` (share of masked (token, layer) pairs routed by replay) after replay forwards."""
        counts, self._counts = self._counts, None
        replayed, self._replayed_forwards = self._replayed_forwards, False
        if counts is None:
            return {}
        metrics = _metrics(counts, self.num_layers)
        _, _, compared, masked = counts.unbind()
        if replayed:
            metrics["routing/replayed_fraction"] = Deferred(compared / masked, masked)
        return metrics

    def close(self) -> None:
        """Remove the hooks from the model."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _checked(self, indices: torch.Tensor, valid: torch.Tensor | None, mask: torch.Tensor | None) -> _Reference:
        expected = (self.num_layers, self.top_k)
        if indices.ndim != 4 or tuple(indices.shape[2:]) != expected:
            raise ValueError(
                f"routing must be [batch, seq_len, {expected[0]}, {expected[1]}], got {tuple(indices.shape)}"
            )
        for name, extra in (("valid", valid), ("mask", mask)):
            if extra is not None and extra.shape != indices.shape[:2]:
                raise ValueError(f"{name} must be {tuple(indices.shape[:2])}, got {tuple(extra.shape)}")
        return indices, valid, mask

    @contextmanager
    def _mode_block(self, mode: Mode, reference: _Reference | None = None) -> Iterator[None]:
        if self._mode is not None:
            raise RuntimeError(f"routing {mode}() inside {self._mode}(): one mode at a time")
        # Layers get a checkpoint function only once `gradient_checkpointing_enable()` ran, maybe after __init__.
        pinned = [
            (layer, layer._gradient_checkpointing_func)
            for layer in self._checkpointed
            if hasattr(layer, "_gradient_checkpointing_func")
        ]
        for layer, checkpoint in pinned:
            layer._gradient_checkpointing_func = self._pinning(checkpoint)
        self._mode, self._reference, self._next_row = mode, reference, 0
        if mode == "record":
            self._chunks = []
        try:
            yield
        finally:
            self._mode, self._reference, self._forward = None, None, None
            for layer, checkpoint in pinned:
                layer._gradient_checkpointing_func = checkpoint

    def _pinning(self, checkpoint: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a layer's checkpoint function so the recompute in backward routes like the forward it repeats."""

        def checkpointed(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            forward, calls = self._forward, 0
            if forward is None:
                return checkpoint(function, *args, **kwargs)

            def pinned(*inner_args: Any, **inner_kwargs: Any) -> Any:
                nonlocal calls
                outer = self._forward
                self._forward = forward if calls == 0 else dataclasses.replace(forward, recompute=True)
                calls += 1
                try:
                    return function(*inner_args, **inner_kwargs)
                finally:
                    self._forward = outer

            return checkpoint(pinned, *args, **kwargs)

        return checkpointed

    def _open_forward(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        if self._mode is None:
            self._forward = None
            return
        inputs = next(
            (x for x in (kwargs.get("input_ids"), kwargs.get("inputs_embeds"), *args[:1]) if torch.is_tensor(x)), None
        )
        if inputs is None:
            raise ValueError("routing replay reads the batch shape from input_ids or inputs_embeds; neither was given")
        batch, seq_len = inputs.shape[:2]
        if self._mode == "record":
            recorded = torch.zeros(
                (batch, seq_len, self.num_layers, self.top_k), dtype=self.index_dtype, device=inputs.device
            )
            self._forward = _Forward("record", batch, seq_len, recorded=recorded)
            return
        indices, valid, mask = self._reference
        rows = slice(self._next_row, self._next_row + batch)
        if rows.stop > indices.shape[0] or seq_len != indices.shape[1]:
            raise ValueError(
                f"a forward of {batch} x {seq_len} tokens does not fit the routing {tuple(indices.shape[:2])} "
                f"from row {rows.start}: replay/observe the routing recorded for these same rows"
            )
        self._next_row = rows.stop

        def rows_of(tensor: torch.Tensor | None) -> torch.Tensor | None:
            # Without waiting: routing on the host (vLLM's) is copied in stream order; on the device this is a no-op.
            return None if tensor is None else tensor[rows].to(inputs.device, non_blocking=True)

        flips = torch.zeros((batch, seq_len, self.num_layers), dtype=torch.bool, device=inputs.device)
        self._forward = _Forward(
            self._mode,
            batch,
            seq_len,
            reference=rows_of(indices),
            valid=rows_of(valid),
            mask=rows_of(mask),
            flips=flips,
        )

    def _close_forward(self, module: nn.Module, args: tuple, output: Any) -> None:
        forward, self._forward = self._forward, None
        if forward is None:
            return
        if forward.mode == "record":
            self._chunks.append(forward.recorded)
            return
        counts = _flip_counts(forward.flips, forward.mask, forward.valid)
        self._counts = counts if self._counts is None else self._counts + counts  # both on the forward's device
        self._replayed_forwards |= forward.mode == "replay"

    def _router_hook(self, layer: int, family: RouterFamily) -> Callable[..., Any]:
        def hook(router: nn.Module, args: tuple, output: tuple) -> tuple | None:
            forward = self._forward
            if forward is None:
                return None
            logits, _, chosen = output
            if chosen.shape[0] != forward.batch * forward.seq_len:
                raise RuntimeError(
                    f"router of MoE layer {layer} saw {chosen.shape[0]} tokens in a {forward.batch} x "
                    f"{forward.seq_len} forward"
                )
            if forward.mode == "record":
                if not forward.recompute:
                    forward.recorded[:, :, layer] = chosen.view(forward.batch, forward.seq_len, -1)
                return None
            reference = forward.reference[:, :, layer].reshape(-1, self.top_k).long()
            if not forward.recompute:
                forward.flips[:, :, layer] = _sets_differ(chosen, reference).view(forward.batch, forward.seq_len)
            if forward.mode == "observe":
                return None
            if forward.valid is not None:
                reference = torch.where(forward.valid.reshape(-1, 1), reference, chosen)
            return logits, family.gate_weights(router, logits, reference), reference

        return hook


def _checkpoint_layer(model: nn.Module, router_name: str) -> nn.Module | None:
    """The innermost ancestor of a router that transformers may checkpoint (it carries `gradient_checkpointing`)."""
    parts = router_name.split(".")
    for depth in range(len(parts) - 1, 0, -1):
        ancestor = model.get_submodule(".".join(parts[:depth]))
        if hasattr(ancestor, "gradient_checkpointing"):
            return ancestor
    return None
