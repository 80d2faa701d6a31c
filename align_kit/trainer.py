"""AlignTrainer: the one place that touches TRL internals.

With every component at its TRL-native node it behaves exactly as `trl.GRPOTrainer` (the parity
test holds it to that). Components TRL lacks hook its extension points, never copies of its
methods:

  _calculate_rewards               format-weight schedule (sets TRL's reward_weights per batch)
  _generate_and_score_completions  NGRPO advantages, per-domain KL coefficients, dynamic sampling,
                                   sampler/trainer log-prob mismatch and its IS correction,
                                   re-tokenization check
  _generate_single_turn            generation on a low-precision sampler copy; sampler log-probs and
                                   (MoE) routing recorded while sampling
  _get_per_token_logps_and_entropies  MoE routing recorded, replayed or observed per forward
  _compute_loss                    per-sample / per-token KL coefficient, IS-corrected advantages
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import torch
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from trl import GRPOConfig, GRPOTrainer

from align_kit.components.advantage import TRLAdvantage, weighted_reward_total
from align_kit.components.format_schedule import FormatWeightSchedule
from align_kit.components.kl import KLCoefficient, PerDomainKL, ReweightedKL, entropy_weights
from align_kit.components.rollout import (
    HFRollout,
    LowPrecisionSampler,
    completion_logprobs,
    importance_ratio,
    mismatch_metrics,
    recording_sampled_logprobs,
    retokenize_differences,
)
from align_kit.components.routing_replay import RoutingReplay
from align_kit.components.sampling import AllGroups, concat_batches, groups_with_signal, select_groups
from align_kit.errors import ConfigError
from align_kit.monitor.callback import HealthMonitorCallback, QuietProgressCallback
from align_kit.monitor.rules import HealthMonitor
from align_kit.plan import ExperimentPlan, validate_dataset
from align_kit.tracking.metrics_file import MetricsFileCallback

METRICS_FILE = "metrics.jsonl"
RETOKENIZE_EXAMPLE_FILE = "retokenize_mismatch.json"
SCHEDULE_STATE_FILE = "format_schedule.json"


class AlignTrainer(GRPOTrainer):
    """GRPOTrainer plus the components of an ExperimentPlan."""

    def __init__(self, *args, components: dict | None = None, **kwargs):
        components = components or {}
        self.advantage_node = components.get("advantage", TRLAdvantage())
        self.kl_node = components.get("kl")
        self.rollout_node = components.get("rollout", HFRollout())
        self.sampling_node = components.get("sampling", AllGroups())
        self.format_schedule: FormatWeightSchedule | None = components.get("format_schedule")
        self.routing_node = components.get("routing_replay", RoutingReplay())
        super().__init__(*args, **kwargs)
        self._rewards_per_func = None
        self._loss_forward = None  # (logps, entropies) of the forward inside the current loss call
        self._capture_loss_forward = False
        self._retokenize_example_saved = False
        self.sampler = None
        if self.rollout_node.dtype != "float32":
            # The fused LM head TRL gave the policy (GRPOTrainer.__init__), for the copy's own scoring forward.
            fused_head = {"temperature": self.temperature, "cast_lm_head_to_fp32": self.args.cast_lm_head_to_fp32}
            self.sampler = LowPrecisionSampler(
                self.model, self.rollout_node.dtype, **fused_head, outputs=("log_probs", "entropy")
            )
        # After the sampler copy exists: a deep copy of a hooked model would copy the hooks too.
        self.router_hooks, self._generation_hooks = self._attach_router_hooks()
        self._routing_phase: str | None = None  # "scoring" (old log-probs) or "loss" (training forward)
        self._generated_routing = None  # (indices, valid) recorded during the last generate
        self._loss_routing = None  # the batch whose routing the current training forward uses
        self._recorded_scoring = False  # r2: did this generation's scoring forwards record routing?
        self._step_tokens = 0  # tokens trained on in the current optimizer step (tokens_per_sec)
        self._format_index = None
        if self.format_schedule is not None and not self.format_schedule.is_constant:
            self._format_index = self.reward_func_names.index(self.format_schedule.reward)
            self.format_schedule.bind(float(self.reward_weights[self._format_index]))
        self._domains = sorted(set(self.train_dataset["domain"])) if "domain" in self.train_dataset.column_names else []
        if self.sampling_node.dynamic and self.accelerator.num_processes > 1:
            raise ConfigError("sampling=dynamic filters groups per process; it supports one process only")

    def _attach_router_hooks(self):
        """Hooks on every MoE policy (drift is measured even without replay); replay on a dense model
        is an error naming the supported router classes."""
        from align_kit.components.moe_routers import is_moe_model
        from align_kit.components.router_hooks import RouterHooks, UnsupportedModelError

        if not self.routing_node.replays and not is_moe_model(self.model):
            return None, None
        try:
            hooks = RouterHooks(self.model)
        except UnsupportedModelError as error:
            raise ConfigError(f"routing_replay={self.routing_node.mode}: {error}") from None
        return hooks, (RouterHooks(self.sampler.model) if self.sampler is not None else hooks)

    @classmethod
    def from_plan(cls, plan: ExperimentPlan, model, tokenizer, extra_callbacks=(), train_dataset=None) -> AlignTrainer:
        """`train_dataset`: already loaded and checked by `validate_dataset` (else loaded here)."""
        if train_dataset is None:
            train_dataset = plan.task.dataset("train")
            validate_dataset(plan, train_dataset)
        run_dir = Path(plan.grpo_kwargs["output_dir"])
        eval_dataset = plan.task.dataset("eval") if getattr(plan.task, "num_eval", 0) else None
        monitor = HealthMonitor.from_plan(plan)
        health = HealthMonitorCallback(monitor, run_dir, run_dir / METRICS_FILE)
        trainer = cls(
            model=model,
            reward_funcs=[spec.func for spec in plan.rewards],
            args=GRPOConfig(**plan.grpo_kwargs),
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=tokenizer,
            callbacks=[MetricsFileCallback(run_dir / METRICS_FILE), health, *extra_callbacks],
            components=plan.components,
        )
        # The dashboard line replaces HF's raw log dicts on the console.
        trainer.remove_callback(PrinterCallback)
        if trainer.pop_callback(ProgressCallback) is not None:
            trainer.add_callback(QuietProgressCallback)
        trainer.health = health
        return trainer

    # --- rewards and generation -------------------------------------------------------------

    @property
    def _mode(self) -> str:
        return "train" if self.model.training else "eval"

    @property
    def _group_size(self) -> int:
        return self.num_generations if self.model.training else self.num_generations_eval

    def _local_rows(self, gathered, rows: int):
        """This process's slice of a tensor gathered over all processes (TRL's process_slice)."""
        start = self.accelerator.process_index * rows
        return gathered[start : start + rows]

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        scheduled = self._format_index is not None and self.model.training
        if scheduled:  # the weight in force for this batch's advantages
            self.reward_weights[self._format_index] = self.format_schedule.weight(self.state.global_step)
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if scheduled:
            self.format_schedule.observe(torch.nanmean(rewards_per_func[:, self._format_index]).item())
        self._rewards_per_func = rewards_per_func
        return rewards_per_func

    def _generate_single_turn(self, *args, **kwargs):
        recording = self._generation_hooks.record() if self._generation_hooks else contextlib.nullcontext()
        with recording:
            result = self._generate_on_sampler(*args, **kwargs)
        if self._generation_hooks is not None:
            self._generated_routing = self._generation_hooks.take_generated()
        return result

    def _generate_on_sampler(self, *args, **kwargs):
        """TRL's generation, on the low-precision copy if there is one; when the mismatch is measured it
        returns the sampler's log-probs of the sampled tokens, as the vLLM path does (TRL's
        `sampling_per_token_logps`)."""
        if not self.rollout_node.measures_mismatch:
            return super()._generate_single_turn(*args, **kwargs)
        trained = self.model_wrapped
        if self.sampler is not None:
            self.sampler.sync(self.model, self.state.global_step)
            self.model_wrapped = self.sampler.model
        try:
            with recording_sampled_logprobs(self.accelerator.unwrap_model(self.model_wrapped)) as recorded:
                completion_ids, _ = super()._generate_single_turn(*args, **kwargs)
        finally:
            self.model_wrapped = trained
        return completion_ids, completion_logprobs(recorded[-1], completion_ids)

    def _generate_and_score_completions(self, inputs):
        batch = self._score_generation(inputs)
        if self.sampling_node.dynamic and self.model.training:
            batch = self._keep_groups_with_signal(inputs, batch)
        return batch

    def _score_generation(self, inputs):
        self._routing_phase = "scoring"
        try:
            batch = super()._generate_and_score_completions(inputs)
            if self.rollout_node.measures_mismatch:
                self._measure_mismatch(batch)
        finally:
            self._routing_phase = None
        if self.router_hooks is not None:
            self._attach_routing(batch)
        if self.advantage_node.replaces_trl_advantages:
            advantages = self.advantage_node.compute(self._rewards_per_func, self.reward_weights, self._group_size)
            batch["advantages"] = self._local_rows(advantages, len(inputs)).to(batch["advantages"].device)
        if self._domains:
            batch["domain_index"] = torch.tensor([self._domains.index(row["domain"]) for row in inputs])
        if isinstance(self.kl_node, PerDomainKL) and self.kl_node.active:
            betas = [self.kl_node.beta_for(row["domain"]) for row in inputs]
            batch["kl_coefficient"] = torch.tensor(betas, dtype=torch.float32).unsqueeze(1)
        self._log_generation_health(batch)
        if self.rollout_node.check_retokenize:
            self._check_retokenization(inputs, batch)
        return batch

    def _log_generation_health(self, batch) -> None:
        """Metrics TRL does not log that the seeds' dashboards use (seed 002, 18.3.1 and 18.3.2)."""
        metrics = self._metrics[self._mode]
        advantages = batch["advantages"]
        metrics["adv/mean"].append(advantages.mean().item())
        metrics["adv/std"].append(advantages.std().item() if advantages.numel() > 1 else 0.0)
        # The zero-advantage ratio: prompts whose group's advantages are all equal (no gradient).
        metrics["adv/zero_std_fraction"].append(
            (advantages.view(-1, self._group_size).std(dim=1) < 1e-6).float().mean().item()
        )
        if "domain_index" not in batch:
            return
        rewards = self._local_rows(weighted_reward_total(self._rewards_per_func, self.reward_weights), len(advantages))
        lengths = batch["completion_mask"].sum(dim=1).float()
        for index in batch["domain_index"].unique().tolist():
            rows = batch["domain_index"] == index
            domain = self._domains[index]
            metrics[f"reward/{domain}"].append(torch.nanmean(rewards[rows]).item())
            metrics[f"completions/mean_length/{domain}"].append(lengths[rows].mean().item())

    def _attach_routing(self, batch) -> None:
        """Routing travels in the batch dict, so TRL's shuffling and mini-step splitting carry it with
        its samples: R2's from the old-log-prob forward, otherwise the routing recorded while sampling."""
        width = batch["prompt_ids"].size(1) + batch["completion_ids"].size(1)
        recorded = self.router_hooks.take() if self.routing_node.mode == "r2" and self._recorded_scoring else None
        self._recorded_scoring = False
        self.router_hooks.pop_metrics()  # scoring-forward statistics: the logged ones are the training forwards'
        if recorded is not None:
            batch["routed_experts"] = recorded
            return
        indices, valid = self._generated_routing
        batch["routed_experts"], batch["routed_experts_valid"] = indices[:, :width], valid[:, :width]

    def _measure_mismatch(self, batch) -> None:
        """The trainer's log-probs of the sampled tokens against the sampler's, recorded as it sampled them
        (mismatch/*: what the IS correction corrects), and, with a low-precision copy, against the copy's
        full forward over the same tokens (mismatch/rescore_*: the precision gap alone, without the
        generation path: KV cache, sampling settings)."""
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        width = batch["completion_ids"].size(1)
        rows = self.args.per_device_train_batch_size
        mask = batch["completion_mask"]
        if "tool_mask" in batch:  # tool output tokens were not sampled (TRL records 0.0 for them)
            mask = mask * batch["tool_mask"]
        sampler_logps = batch["sampling_per_token_logps"]
        with torch.no_grad():
            train_logps = batch.get("old_per_token_logps")
            if train_logps is None:
                train_logps = self._get_per_token_logps_and_entropies(self.model, input_ids, attention, width, rows)[0]
            gaps = mismatch_metrics(train_logps, sampler_logps, mask)
            if self.sampler is not None:
                copy = self.sampler.model
                rescored = self._get_per_token_logps_and_entropies(copy, input_ids, attention, width, rows)[0]
                gaps.update(mismatch_metrics(train_logps, rescored.float(), mask, "mismatch/rescore_"))
        for name, value in gaps.items():
            self._metrics[self._mode][name].append(value)
        node = self.rollout_node
        if node.is_correction != "none":
            batch["rollout_is_ratio"] = importance_ratio(
                train_logps, sampler_logps, mask, node.is_correction, node.is_cap_min, node.is_cap_max
            )

    def _check_retokenization(self, inputs, batch) -> None:
        sampled = [
            (prompt[prompt_mask.bool()].tolist(), completion[completion_mask.bool()].tolist())
            for prompt, prompt_mask, completion, completion_mask in zip(
                batch["prompt_ids"],
                batch["prompt_mask"],
                batch["completion_ids"],
                batch["completion_mask"],
                strict=True,
            )
        ]
        prompts = [row["prompt"] for row in inputs]
        differences = retokenize_differences(
            self.processing_class, lambda texts: self._tokenize_prompts(texts)[0], prompts, sampled
        )
        self._metrics[self._mode]["mismatch/retokenize_rate"].append(len(differences) / len(prompts))
        if differences and not self._retokenize_example_saved and self.accelerator.is_main_process:
            index = min(differences)
            original, rebuilt, text = differences[index]
            example = {"step": self.state.global_step, "prompt": prompts[index], "completion_text": text}
            example.update(sampled_ids=original, reencoded_ids=rebuilt)
            Path(self.args.output_dir, RETOKENIZE_EXAMPLE_FILE).write_text(json.dumps(example, indent=2))
            self._retokenize_example_saved = True

    def _keep_groups_with_signal(self, inputs, batch):
        """DAPO dynamic sampling (components/sampling.py): regenerate until the batch holds only
        groups whose rewards differ, or the round budget is spent."""
        group_size = self.num_generations
        needed = len(inputs) // group_size
        kept: list[tuple[dict, list[int]]] = []
        dropped: list[tuple[dict, list[int]]] = []
        generated = kept_count = rounds = 0
        while True:
            rounds += 1
            signal = groups_with_signal(weighted_reward_total(self._rewards_per_func, self.reward_weights), group_size)
            flags = signal.tolist()
            kept.append((batch, [g for g, has in enumerate(flags) if has]))
            dropped.append((batch, [g for g, has in enumerate(flags) if not has]))
            generated += len(signal)
            kept_count += int(signal.sum())
            if kept_count >= needed or rounds >= self.sampling_node.max_gen_batches:
                break
            batch = self._score_generation(self._draw_prompts(needed, rounds))
        chosen, remaining = [], needed
        for part, groups in kept + dropped:
            take = groups[:remaining]
            if take:
                chosen.append(select_groups(part, take, group_size))
                remaining -= len(take)
        metrics = self._metrics["train"]
        metrics["sampling/kept_group_fraction"].append(kept_count / generated)
        metrics["sampling/gen_batches"].append(rounds)
        metrics["sampling/filled_groups"].append(max(needed - kept_count, 0))
        return concat_batches(chosen, self.processing_class.pad_token_id)

    def _draw_prompts(self, count: int, round_index: int) -> list[dict]:
        # Seeded by run seed, step and round: a resumed run draws the same extra prompts.
        generator = torch.Generator().manual_seed(
            self.args.seed * 1_000_003 + self.state.global_step * 101 + round_index
        )
        picks = torch.randint(len(self.train_dataset), (count,), generator=generator).tolist()
        return [dict(self.train_dataset[i]) for i in picks for _ in range(self.num_generations)]

    # --- loss -------------------------------------------------------------------------------

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        with self._routing_block(model, input_ids, attention_mask, logits_to_keep):
            result = super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
            )
        if self._capture_loss_forward:
            self._loss_forward = result
        return result

    def _routing_block(self, model, input_ids, attention_mask, logits_to_keep):
        """How this forward routes (routing_replay.py): r2 records while scoring, r3 replays the sampled
        routing while scoring, and every training forward replays (r2, r3) or observes (off)."""
        hooks = self.router_hooks
        if hooks is None or self._routing_phase is None or self.accelerator.unwrap_model(model) is not self.model:
            return contextlib.nullcontext()
        width = input_ids.size(1)
        completion_positions = attention_mask.clone()
        completion_positions[:, : width - logits_to_keep] = 0  # flip statistics count completion tokens
        if self._routing_phase == "scoring":
            if self.routing_node.mode == "r2":
                self._recorded_scoring = True
                return hooks.record()
            if self.routing_node.mode == "r3":
                indices, valid = self._generated_routing
                return hooks.replay(indices[:, :width], valid=valid[:, :width], mask=completion_positions)
            return contextlib.nullcontext()
        batch = self._loss_routing
        block = hooks.replay if self.routing_node.replays else hooks.observe
        return block(batch["routed_experts"], valid=batch.get("routed_experts_valid"), mask=completion_positions)

    def _kl_coefficient(self, inputs) -> KLCoefficient | None:
        if "kl_coefficient" in inputs:
            return KLCoefficient(lambda: inputs["kl_coefficient"])
        if isinstance(self.kl_node, ReweightedKL) and self.kl_node.active:
            mask = inputs["completion_mask"]
            return KLCoefficient(lambda: self.kl_node.beta * entropy_weights(self._loss_forward[1], mask))
        return None

    def _compute_loss(self, model, inputs):
        if "rollout_is_ratio" in inputs:
            # IS ratios >= 0 commute with PPO's min, so scaling (B, T) advantages equals scaling the
            # per-token policy loss, as TRL does for vLLM; TRL accepts (B, T) advantages.
            inputs = {**inputs, "advantages": inputs["advantages"].unsqueeze(1) * inputs["rollout_is_ratio"]}
        coefficient = self._kl_coefficient(inputs)
        beta = self.beta
        self._capture_loss_forward = True
        if coefficient is not None:
            self.beta = coefficient
        if "routed_experts" in inputs:
            self._routing_phase, self._loss_routing = "loss", inputs
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            self.beta = beta
            self._capture_loss_forward = False
            self._routing_phase, self._loss_routing = None, None
        self._log_loss_health(inputs)
        if "domain_index" in inputs and "ref_per_token_logps" in inputs:
            self._log_kl_per_domain(inputs)
        if self.router_hooks is not None:
            for name, value in self.router_hooks.pop_metrics().items():
                self._metrics[self._mode][name].append(value)
        return loss

    def _log_loss_health(self, inputs) -> None:
        """policy_ratio/mean (pi_theta / pi_old over completion tokens, exactly 1 on-policy; seed 002,
        18.3.4), policy_ratio/abs_dev (mean |ratio - 1|: the token-level ratio noise that routing flips
        add, GSPO §5.3) and entropy/<domain>, from the forward the loss just ran."""
        logps, entropies = (tensor.detach() for tensor in self._loss_forward[:2])
        mask = inputs["completion_mask"]
        old = inputs.get("old_per_token_logps")
        ratio = torch.ones_like(logps) if old is None else torch.exp(logps - old)
        metrics = self._metrics[self._mode]
        tokens = mask.sum().clamp(min=1)
        metrics["policy_ratio/mean"].append(((ratio * mask).sum() / tokens).item())
        metrics["policy_ratio/abs_dev"].append((((ratio - 1).abs() * mask).sum() / tokens).item())
        self._step_tokens += int(inputs["prompt_mask"].sum() + mask.sum())
        if "domain_index" not in inputs:
            return
        for index in inputs["domain_index"].unique().tolist():
            rows = inputs["domain_index"] == index
            value = (entropies[rows] * mask[rows]).sum() / mask[rows].sum().clamp(min=1)
            metrics[f"entropy/{self._domains[index]}"].append(value.item())

    def _log_kl_per_domain(self, inputs) -> None:
        logps = self._loss_forward[0].detach()
        difference = inputs["ref_per_token_logps"] - logps
        per_token_kl = torch.exp(difference) - difference - 1  # TRL's k3 estimator, unweighted
        mask = inputs["completion_mask"]
        for index in inputs["domain_index"].unique().tolist():
            rows = inputs["domain_index"] == index
            value = (per_token_kl[rows] * mask[rows]).sum() / mask[rows].sum().clamp(min=1)
            self._metrics[self._mode][f"kl/{self._domains[index]}"].append(value.item())

    def training_step(self, model, inputs, num_items_in_batch):
        self._step_tokens = 0
        started = time.perf_counter()
        loss = super().training_step(model, inputs, num_items_in_batch)
        # Tokens (prompt + completion) trained on per second of this step, generation included.
        self._metrics["train"]["tokens_per_sec"].append(self._step_tokens / (time.perf_counter() - started))
        if self._format_index is not None:
            self._metrics["train"]["schedule/format_weight"].append(float(self.reward_weights[self._format_index]))
        return loss

    # --- checkpoint state of stateful components ---------------------------------------------

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self._format_index is not None and self.args.should_save:
            folder = Path(self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}")
            (folder / SCHEDULE_STATE_FILE).write_text(json.dumps(self.format_schedule.state_dict()))

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if self._format_index is not None and checkpoint is not None:
            state_file = Path(checkpoint, SCHEDULE_STATE_FILE)
            if state_file.exists():
                self.format_schedule.load_state_dict(json.loads(state_file.read_text()))
