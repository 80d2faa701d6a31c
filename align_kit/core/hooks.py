"""The hook protocol: how a component's trainer code plugs into AlignTrainer.

A component node (a Hydra config object) returns its `TrainerHook`s from `trainer_hooks()`; whoever builds the
trainer hands it the hooks (`build_trainer` in align_kit/experiment/build_trainer.py: rollout's, routing_replay's,
the other nodes' in the order of the defaults list in conf/train.yaml, then the built-in health metrics). The trainer
knows no component: what a hook needs of another goes through this protocol. It calls every hook at fixed points,
in this order per training step:

  building(args)                         once, a context around TRL's own __init__ (args: the GRPOConfig), for
                                         options of what TRL builds there (the colocated vLLM engine)
  attach(trainer)                        once, at the end of the trainer's __init__; a hook that makes a copy of
                                         the policy to sample from sets `trainer.sampler_model` here (later hooks
                                         see it: routing hooks go on the model that samples)
  per generation round (BatchState; dynamic sampling opens more rounds, each with its own state):
    generation(trainer, state)           a context around sampling (TRL's _generate_single_turn)
    forward(trainer, call)               a context around each forward of the round (phase "scoring")
    on_rewards(trainer, state)           rewards_per_func is known; a hook may set trainer.reward_weights
    on_scored_batch(trainer, state, batch)  TRL's batch is built; add per-sample tensors, replace advantages
  select_batch(trainer, state, batch, score_round)  training only: may regenerate and return another batch
  on_train_batch(trainer, state, batch)  the batch returned to TRL: the one that trains (after
                                         selection), or an eval batch
  per loss call (LossState):
    loss_terms(trainer, loss)            IS weights on advantages, a KL coefficient, token masks
    forward(trainer, call)               phase "loss"
    on_loss(trainer, loss)               the loss ran; loss.forward holds its (logps, entropies, aux)
  on_step_end(trainer, seconds)          after each training_step (seconds: its wall time)

Every on_* method returns a dict of metrics (or None). The trainer gathers them over processes and
averages them (NaN = "no value on this process"), as TRL does with its own: return the same keys on
every process. A `Weighted` value (what masked_mean and per_domain return) is averaged by its weight, so a
domain's mean covers its rows on every process however they split; a `Summed` one is added up (throughput).
A value computed from tensors stays on the device as `Deferred` (masked_mean and per_domain return those): the
trainer reads every deferred value of a logging step in one device-to-host transfer when it logs, because each
`.item()` in a hook would make a GPU wait for its queue of kernels (docs/performance.md).
state_dict / load_state_dict go into each checkpoint's one hooks file. A hook that adds a tensor as wide as the
batch's prompt or completion to TRL's batch declares it in `batch_keys`, so joining rounds of different widths
(dynamic sampling) re-pads it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Literal

from align_kit.core.errors import ConfigError

Metrics = dict[str, float]


class Weighted(float):
    """A mean over `weight` items (tokens, rows): gathered over processes as a weighted mean."""

    weight: float

    def __new__(cls, value: float, weight: float):
        mean = super().__new__(cls, value)
        mean.weight = float(weight)
        return mean


class Summed(float):
    """A per-process amount whose total over processes is the metric (tokens per second)."""


class Deferred:
    """A metric value still on the device: `value` a 0-dim tensor; with `weight` (a 0-dim tensor or a number) it is
    a `Weighted` mean, with `summed` a `Summed` amount, else a plain value. Read on the host by `read_deferred`."""

    __slots__ = ("value", "weight", "summed")

    def __init__(self, value, weight=None, *, summed: bool = False):
        self.value, self.weight, self.summed = value, weight, summed

    def __repr__(self) -> str:
        return f"Deferred({self.value!r}, weight={self.weight!r}, summed={self.summed})"


def read_deferred(values: list) -> list:
    """`values` with every `Deferred` replaced by the `Weighted`, `Summed` or float it stands for, all read from the
    device in one transfer (one synchronisation however many there are); other values are returned as they are."""
    tensors = [
        part
        for value in values
        if isinstance(value, Deferred)
        for part in (value.value, value.weight)
        if _is_tensor(part)
    ]
    if tensors:
        import torch

        # One float64 buffer for every dtype (counts stay exact), one copy to the host.
        host = iter(
            torch.stack(
                [t.reshape(()) for t in tensors], out=tensors[0].new_empty(len(tensors), dtype=torch.float64)
            ).tolist()
        )
    read = []
    for value in values:
        if not isinstance(value, Deferred):
            read.append(value)
            continue
        number = next(host) if _is_tensor(value.value) else float(value.value)
        if value.summed:
            read.append(Summed(number))
        elif value.weight is not None:
            read.append(Weighted(number, next(host) if _is_tensor(value.weight) else value.weight))
        else:
            read.append(number)
    return read


def on_host(metrics: Metrics | None) -> Metrics | None:
    """A hook's metrics with every `Deferred` value read (one transfer), for code that needs the numbers now."""
    if metrics is None:
        return None
    return dict(zip(metrics, read_deferred(list(metrics.values())), strict=True))


def _is_tensor(value) -> bool:
    return hasattr(value, "dim")  # a torch.Tensor, without importing torch here


@dataclass
class BatchState:
    """One generation round. `rewards_per_func` [N, K] is gathered over processes (TRL normalises
    groups across them); the batch holds this process's `rows` rows, starting at `start`."""

    inputs: list[dict]
    mode: str  # "train" or "eval"
    group_size: int
    start: int = 0
    rewards_per_func: Any = None
    reward_weights: Any = None  # the weights in force for this batch
    # One [B, new tokens] tensor per generate call: the sampler's log-probs of the tokens it drew, recorded by a
    # generation context; the trainer hands them to TRL as `sampling_per_token_logps` (as vLLM's are).
    sampling_logprobs: list | None = None
    # (prompt ids, completion ids) per rollout, unpadded, as TRL sampled them: on the host, where reading them costs
    # no device-to-host copy (set by the trainer once TRL has generated; completions hold tool tokens in multi-turn).
    sampled_ids: tuple[list[list[int]], list[list[int]]] | None = None
    extras: dict[str, Any] = field(default_factory=dict)  # per-batch data a hook keeps between its calls

    def completion_logprobs(self, completion_ids: list[list[int]]) -> list[list[float]]:
        """The sampler's log-probs of each completion's tokens from the last generate call, as TRL's
        `sampling_per_token_logps` holds them (TRL cuts completions after EOS)."""
        recorded = self.sampling_logprobs[-1].tolist()  # one copy to the host: TRL takes them as lists (as vLLM's)
        return [row[: len(ids)] for row, ids in zip(recorded, completion_ids, strict=True)]

    def local_rows(self, gathered):
        """This process's slice of a tensor gathered over all processes (TRL's process_slice)."""
        return gathered[self.start : self.start + len(self.inputs)]


@dataclass
class LossState:
    inputs: dict[str, Any]  # the micro-batch the loss sees (after loss_terms are applied)
    mode: str
    forward: tuple | None = None  # (logps, entropies, aux_loss) of the loss's own forward


@dataclass
class Forward:
    """One model forward seen by `TrainerHook.forward`."""

    phase: str  # "scoring" (old/ref log-probs of a generation round) or "loss"
    state: BatchState | LossState
    model: Any
    input_ids: Any
    attention_mask: Any
    logits_to_keep: int


@dataclass
class LossTerms:
    """What a hook changes in one loss call: `advantage_weights` [B, T] multiply the advantages (IS
    correction), `kl_coefficient` is a callable giving the KL strength ([B, 1] or [B, T]) that
    replaces TRL's scalar beta, `token_mask` [B, T] multiplies the loss mask (TRL's `tool_mask`, never the
    attention mask)."""

    advantage_weights: Any = None
    kl_coefficient: Any = None
    token_mask: Any = None


@dataclass(frozen=True)
class BatchKey:
    """A tensor of TRL's generation batch whose width follows the batch's, and how it is padded when batches of
    different widths join: `span` "prompt" ([B, prompt width], padded on the left), "completion" ([B, completion
    width], on the right) or "sequence" ([B, prompt + completion, ...], split at the prompt width and padded on
    both sides); `pad` is the value of the padded positions. Per-row tensors need no declaration."""

    name: str
    span: Literal["prompt", "completion", "sequence"]
    pad: float = 0


class TrainerHook:
    """Base of every component's trainer code; every method is a no-op."""

    batch_keys: tuple[BatchKey, ...] = ()  # the width-following tensors on_scored_batch adds to TRL's batch

    @property
    def name(self) -> str:
        """Key of its state in the checkpoint's hooks file (a subclass may set a shorter one)."""
        return type(self).__name__

    def building(self, args):
        """A context around TRL's GRPOTrainer.__init__ (`args`: its GRPOConfig); the hook is not attached yet."""
        return contextlib.nullcontext()

    def attach(self, trainer) -> None:
        return None

    def generation(self, trainer, state: BatchState):
        return contextlib.nullcontext()

    def forward(self, trainer, call: Forward):
        return contextlib.nullcontext()

    def on_rewards(self, trainer, state: BatchState) -> Metrics | None:
        return None

    def on_scored_batch(self, trainer, state: BatchState, batch: dict) -> Metrics | None:
        return None

    def select_batch(self, trainer, state: BatchState, batch: dict, score_round) -> tuple[BatchState, dict] | None:
        """Return (state, batch) to train on another batch; `score_round(inputs)` runs one more round."""
        return None

    def on_train_batch(self, trainer, state: BatchState, batch: dict) -> Metrics | None:
        return None

    def loss_terms(self, trainer, loss: LossState) -> LossTerms | None:
        return None

    def on_loss(self, trainer, loss: LossState) -> Metrics | None:
        return None

    def on_step_end(self, trainer, seconds: float) -> Metrics | None:
        return None

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        return None


def apply_loss_terms(inputs: dict, terms: list[LossTerms]) -> tuple[dict, Any]:
    """The loss inputs with IS weights and token masks applied, and the KL coefficient (or None)."""
    coefficients = [term.kl_coefficient for term in terms if term.kl_coefficient is not None]
    if len(coefficients) > 1:
        raise ConfigError("two components set a per-sample KL coefficient; select one kl node")
    for term in terms:
        if term.advantage_weights is not None:
            # IS ratios >= 0 commute with PPO's min, so scaling (B, T) advantages equals scaling the
            # per-token policy loss, as TRL does for vLLM; TRL accepts (B, T) advantages.
            advantages = inputs["advantages"]
            advantages = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
            inputs = {**inputs, "advantages": advantages * term.advantage_weights}
        if term.token_mask is not None:
            # Through TRL's loss-only `tool_mask`: `completion_mask` is also the forward's attention mask, so
            # zeroing it mid-sequence would change the log-probs of the tokens after it.
            import torch

            kept = inputs.get("tool_mask", torch.ones_like(inputs["completion_mask"]))
            inputs = {**inputs, "tool_mask": kept * term.token_mask.to(kept.dtype)}
    return inputs, coefficients[0] if coefficients else None


def masked_mean(values, mask) -> Deferred:
    """Mean of `values` over the positions where `mask` is 1 (NaN when there are none), weighted by their count; on
    the device."""
    count = mask.sum()
    return Deferred((values * mask).sum() / count, count)


def per_domain(values, mask, domain_index, domains: list[str], prefix: str) -> Metrics:
    """`{prefix}/<domain>`: masked mean of [B, ...] `values` over each domain's rows, NaN for a domain
    absent here (so every process returns the same keys). All domains at once, on the device: a boolean selection
    per domain would read each one's row count back to the host."""
    rows = len(values)
    sums = (values * mask).reshape(rows, -1).sum(dim=1)
    counts = mask.reshape(rows, -1).sum(dim=1)
    index = domain_index.to(sums.device, non_blocking=True)
    sums = sums.new_zeros(len(domains)).index_add_(0, index, sums)
    counts = counts.new_zeros(len(domains)).index_add_(0, index, counts)
    means = sums / counts
    return {f"{prefix}/{domain}": Deferred(means[i], counts[i]) for i, domain in enumerate(domains)}
