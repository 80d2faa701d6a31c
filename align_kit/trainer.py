"""AlignTrainer: the one place that touches TRL internals.

With every component at its TRL-native node it behaves exactly as `trl.GRPOTrainer` (the parity
test holds it to that). Components TRL lacks are `TrainerHook`s (core/hooks.py lists the
calls and their order), handed in by whoever builds the trainer (align_kit/experiment/build_trainer.py builds it
from a plan). The trainer knows no component: it imports only the kernel (align_kit.core; tests/structure/
test_layers.py holds it to that), and each override below calls the hooks at one point:

  __init__                         building contexts around TRL's own __init__ (options of the vLLM engine it makes)
  _generate_and_score_completions  opens a generation round (BatchState), then on_scored_batch;
                                   in training select_batch (dynamic sampling) and on_train_batch
  _generate                        keeps the round's sampled ids, as TRL holds them on the host
  _generate_single_turn            generation contexts (low-precision sampler, routing recorded)
  _calculate_rewards               on_rewards (the format-weight schedule sets reward_weights here)
  _get_per_token_logps_and_entropies  forward contexts (routing replay), phase scoring or loss
  _compute_loss                    loss_terms (IS weights, KL coefficient, token masks), on_loss
  training_step                    on_step_end
  _save_checkpoint / _load_optimizer_and_scheduler  every hook's state in one file per checkpoint
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from trl import GRPOTrainer

from align_kit.core.disk_space import writing
from align_kit.core.hooks import (
    BatchState,
    Forward,
    LossState,
    Summed,
    TrainerHook,
    Weighted,
    apply_loss_terms,
    read_deferred,
)

HOOK_STATE_FILE = "align_kit_hooks.json"
PLAIN = 0
KIND_CODES = {Weighted: 1, Summed: 2}  # how a hook metric gathers; plain floats are PLAIN


class AlignTrainer(GRPOTrainer):
    """GRPOTrainer plus the TrainerHooks it is handed (a plan's: align_kit/experiment/build_trainer.py)."""

    def __init__(self, *args, hooks: Sequence[TrainerHook] = (), **kwargs):
        """`hooks`: the components' TrainerHooks, in the order they run (none: plain GRPOTrainer)."""
        self.hooks = list(hooks)
        with contextlib.ExitStack() as stack:
            for hook in self.hooks:
                stack.enter_context(hook.building(kwargs.get("args")))
            super().__init__(*args, **kwargs)
        columns = self.train_dataset.column_names
        self.domains = sorted(set(self.train_dataset["domain"])) if "domain" in columns else []
        self.sampler_model = None  # the policy's copy that samples, if a hook makes one as it attaches
        self._round: BatchState | None = None  # the generation round in progress
        self._loss: LossState | None = None  # the loss call in progress
        self.last_state: BatchState | None = None  # of the batch last returned for training (tests read it)
        self.last_loss: LossState | None = None
        self._hook_metrics: list[tuple[str, dict]] = []  # (mode, hook metrics) until the next log
        for hook in self.hooks:
            hook.attach(self)

    def hook(self, kind: type):
        """The attached hook of this class, or None."""
        return next((hook for hook in self.hooks if isinstance(hook, kind)), None)

    def _record(self, metrics: dict | None, mode: str) -> None:
        """Keep hook metrics until the next log (`flush_metrics`): values still on the device (`Deferred`) are read
        then, all in one transfer, so no hook makes a GPU wait for its queue of kernels in the middle of a step."""
        if metrics:
            self._hook_metrics.append((mode, metrics))

    def flush_metrics(self) -> None:
        """The hook metrics recorded since the last call, read from the device in one transfer and gathered over
        processes into TRL's metric lists: averaged as TRL averages its own (NaN = no value here), `Weighted` ones by
        their weights, `Summed` ones added up. Every process must send a key as the same kind, in the same order."""
        pending, self._hook_metrics = self._hook_metrics, []
        if not pending:
            return
        values = read_deferred([value for _, metrics in pending for value in metrics.values()])
        names = [(mode, name) for mode, metrics in pending for name in metrics]
        kinds = [KIND_CODES.get(type(value), PLAIN) for value in values]
        rows = [[*_sum_and_weight(value), kind] for value, kind in zip(values, kinds, strict=True)]
        if self.accelerator.num_processes > 1:
            local = torch.tensor(rows, dtype=torch.float64, device=self.accelerator.device)
            gathered = self.accelerator.gather(local).view(-1, len(rows), 3).tolist()
        else:
            gathered = [rows]
        for index, ((mode, name), kind) in enumerate(zip(names, kinds, strict=True)):
            sent = [process[index] for process in gathered]  # (value, weight, kind) from each process
            if any(sent_kind != kind for _, _, sent_kind in sent):
                raise RuntimeError(f"hook metric {name!r} is Weighted, Summed or plain on different processes")
            present = [value for value, _, _ in sent if not math.isnan(value)]
            if kind == KIND_CODES[Weighted]:
                weight = sum(weight for _, weight, _ in sent)
                reduced = sum(value for value, _, _ in sent) / weight if weight > 0 else math.nan
            elif kind == KIND_CODES[Summed]:
                reduced = sum(present) if present else math.nan
            else:
                reduced = sum(present) / len(present) if present else math.nan
            if not math.isnan(reduced):
                self._metrics[mode][name].append(reduced)

    def log(self, logs, start_time=None):
        self.flush_metrics()
        super().log(logs, start_time)

    def _each(self, method: str, *args, mode: str) -> None:
        for hook in self.hooks:
            self._record(getattr(hook, method)(self, *args), mode)

    # --- generation rounds -------------------------------------------------------------------

    def _generate_and_score_completions(self, inputs):
        state, batch = self.score_round(inputs)
        if self.model.training:
            for hook in self.hooks:
                state, batch = hook.select_batch(self, state, batch, self.score_round) or (state, batch)
        self._each("on_train_batch", state, batch, mode=state.mode)
        self.last_state = state
        return batch

    def score_round(self, inputs: list[dict]) -> tuple[BatchState, dict]:
        """One generation round on `inputs` (TRL's generate-and-score plus every hook), with its own state."""
        training = self.model.training
        state = BatchState(
            inputs=inputs,
            mode="train" if training else "eval",
            group_size=self.num_generations if training else self.num_generations_eval,
            start=self.accelerator.process_index * len(inputs),
        )
        outer, self._round = self._round, state
        try:
            batch = super()._generate_and_score_completions(inputs)
            self._each("on_scored_batch", state, batch, mode=state.mode)
        finally:
            self._round = outer
        return state, batch

    def _generate(self, prompts):
        result = super()._generate(prompts)
        if self._round is not None:  # the ids TRL sampled, on the host: hooks read them here, not back from the batch
            self._round.sampled_ids = (result[0], result[1])
        return result

    def _generate_single_turn(self, *args, **kwargs):
        state = self._round
        with contextlib.ExitStack() as stack:
            for hook in self.hooks:
                stack.enter_context(hook.generation(self, state))
            completion_ids, logprobs = super()._generate_single_turn(*args, **kwargs)
        if state is not None and state.sampling_logprobs:
            # The sampler's own log-probs of what it drew: TRL keeps them as sampling_per_token_logps.
            logprobs = state.completion_logprobs(completion_ids)
        return completion_ids, logprobs

    @contextlib.contextmanager
    def generating_with(self, model):
        """Generation inside the block runs on `model` (TRL generates with model_wrapped)."""
        trained, self.model_wrapped = self.model_wrapped, model
        try:
            yield
        finally:
            self.model_wrapped = trained

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        state = self._round
        state.rewards_per_func = rewards_per_func
        self._each("on_rewards", state, mode=state.mode)
        state.reward_weights = self.reward_weights.clone()  # TRL uses the weights in force from here on
        return rewards_per_func

    def fused_head(self) -> dict:
        """The arguments TRL gave `add_fused_lm_head` for the policy (GRPOTrainer.__init__), so a copy
        of the policy (the low-precision sampler) can score as the policy does."""
        outputs = ("log_probs", "entropy")
        return {
            "temperature": self.temperature,
            "cast_lm_head_to_fp32": self.args.cast_lm_head_to_fp32,
            "outputs": outputs,
        }

    def encode_prompts(self, texts: list[str]) -> list[list[int]]:
        """Prompt ids as TRL tokenizes prompts."""
        return self._tokenize_prompts(texts)[0]

    def token_logps(self, model, batch) -> torch.Tensor:
        """Per-token log-probs of a generation batch's completions under `model` (no gradient)."""
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        width, rows = batch["completion_ids"].size(1), self.args.per_device_train_batch_size
        with torch.no_grad():
            return self._get_per_token_logps_and_entropies(model, input_ids, attention, width, rows)[0]

    # --- forwards and loss -------------------------------------------------------------------

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        phase, state = ("loss", self._loss) if self._loss is not None else ("scoring", self._round)
        with contextlib.ExitStack() as stack:
            if state is not None:
                call = Forward(phase, state, model, input_ids, attention_mask, logits_to_keep)
                for hook in self.hooks:
                    stack.enter_context(hook.forward(self, call))
            result = super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
            )
        if phase == "loss" and state is not None:
            state.forward = result
        return result

    def _compute_loss(self, model, inputs):
        mode = "train" if self.model.training else "eval"
        loss = LossState(inputs=inputs, mode=mode)
        terms = [term for hook in self.hooks if (term := hook.loss_terms(self, loss)) is not None]
        loss.inputs, coefficient = apply_loss_terms(inputs, terms)
        beta = self.beta
        if coefficient is not None:
            self.beta = KLCoefficient(coefficient)
        self._loss = loss
        try:
            value = super()._compute_loss(model, loss.inputs)
        finally:
            self.beta, self._loss = beta, None
        self._each("on_loss", loss, mode=mode)
        self.last_loss = loss
        return value

    def training_step(self, model, inputs, num_items_in_batch):
        started = time.perf_counter()
        loss = super().training_step(model, inputs, num_items_in_batch)
        self._each("on_step_end", time.perf_counter() - started, mode="train")
        return loss

    # --- checkpoints: every hook's state in one file ----------------------------------------

    def _save_checkpoint(self, model, trial):
        folder = Path(self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}")
        # A full disk: one line (align_kit.core.disk_space), and the half-written folder renamed so no resume loads it.
        with writing(folder.parent, folder.name, partial=folder if self.args.should_save else None):
            super()._save_checkpoint(model, trial)
            states = {hook.name: state for hook in self.hooks if (state := hook.state_dict())}
            if states and self.args.should_save:
                (folder / HOOK_STATE_FILE).write_text(json.dumps(states))

    def _load_optimizer_and_scheduler(self, checkpoint):
        with _cpu_map_location(self.args.world_size > 1 and self.args.device.type == "cpu"):
            super()._load_optimizer_and_scheduler(checkpoint)
        state_file = Path(checkpoint, HOOK_STATE_FILE) if checkpoint is not None else None
        if state_file is not None and state_file.exists():
            states = json.loads(state_file.read_text())
            for hook in self.hooks:
                if hook.name in states:
                    hook.load_state_dict(states[hook.name])


class KLCoefficient:
    """Stands in for TRL's scalar `beta` inside one loss call (a hook's `LossTerms.kl_coefficient`): TRL computes
    `beta * per_token_kl`, so the product uses `values()` ([B, 1] per sample or [B, T] per token), evaluated at that
    moment so it can use the entropies of the same forward pass; `!= 0` stays true so TRL keeps the KL branch on."""

    def __init__(self, values):
        self.values = values

    def __mul__(self, per_token_kl):
        return self.values() * per_token_kl

    __rmul__ = __mul__

    def __eq__(self, other) -> bool:
        return False if other == 0 else NotImplemented

    def __ne__(self, other) -> bool:
        return True if other == 0 else NotImplemented

    __hash__ = None


def logged_generations(trainer: GRPOTrainer, rows: int) -> dict:
    """The newest `rows` entries of the completion log any GRPOTrainer keeps for `log_completions` (`_logs`, filled
    whether or not that is on: prompts, completions, rewards per function, advantages; every process's rows), as
    Python lists. Reading it costs no device transfer: TRL already made the lists."""
    log = trainer._logs

    def tail(values) -> list:
        return list(values)[-rows:] if rows else []

    return {
        "prompt": tail(log["prompt"]),
        "completion": tail(log["completion"]),
        "rewards": {name: tail(values) for name, values in log["rewards"].items()},
        "advantages": tail(log["advantages"]),
    }


def stop_token_ids(trainer: GRPOTrainer) -> list[int]:
    """The ids that end a completion as TRL counts it finished (`completions/clipped_ratio`): EOS ids and pad."""
    return [*trainer.eos_token_ids, trainer._tokenizer.pad_token_id]


def _sum_and_weight(value) -> tuple[float, float]:
    """What one process sends for a metric: a `Weighted` mean as (mean x weight, weight), with (0, 0) when it
    covers nothing (its NaN must not reach the sum); any other value as (value, 1)."""
    if isinstance(value, Weighted):
        return (value * value.weight, value.weight) if value.weight else (0.0, 0.0)
    return float(value), 1.0


@contextlib.contextmanager
def _cpu_map_location(active: bool):
    """Several processes on CPU: transformers loads the optimizer to args.device, torch.device("cpu", rank), a
    location torch.load cannot restore to ("cpu:1"); plain "cpu" is the same memory."""
    if not active:
        yield
        return
    original = torch.load

    def load(*args, map_location=None, **kwargs):
        if isinstance(map_location, torch.device) and map_location.type == "cpu":
            map_location = "cpu"
        return original(*args, map_location=map_location, **kwargs)

    torch.load = load
    try:
        yield
    finally:
        torch.load = original
