"""Health metrics TRL does not log that the source chapters' dashboards use (the policy-optimization chapter,
18.3.1-18.3.4); a hook the trainer always attaches, after every component's.

Per batch that trains (after dynamic sampling's filter; every generation round otherwise):
adv/mean, adv/std, adv/zero_std_fraction (groups whose advantages are all
equal: no gradient), groups/flat_fraction (groups whose raw weighted reward totals are equal within
a tolerance relative to the reward scale, `sampling.flat_groups`; unlike TRL's frac_reward_zero_std
it counts groups flat at 0.8 in float32, and it is per group under GDPO too), reward/<domain> and
completions/mean_length/<domain>. Per loss call:
policy_ratio/mean (pi_theta / pi_old over completion tokens, exactly 1 on-policy), policy_ratio/abs_dev
(mean |ratio - 1|: the token-level ratio noise that routing flips add, GSPO §5.3), entropy/<domain>
and kl/<domain> (TRL's k3 estimator, unweighted). Per optimizer step: tokens_per_sec (prompt +
completion tokens trained on per second of the step, generation included).
"""

from __future__ import annotations

import torch

from align_kit.components.advantage import weighted_reward_total
from align_kit.components.dynamic_sampling import flat_groups
from align_kit.components.kl import k3
from align_kit.core.hooks import Deferred, Summed, TrainerHook, masked_mean, per_domain


class TrainingMetrics(TrainerHook):
    """Every value stays on the device (`Deferred`): the trainer reads them when it logs, in one transfer."""

    def __init__(self):
        self.step_tokens = 0  # a 0-dim tensor once a loss ran

    def on_scored_batch(self, trainer, state, batch):
        if trainer.domains:  # per-sample, so it follows the samples through shuffling and splitting
            index = torch.tensor([trainer.domains.index(row["domain"]) for row in state.inputs])
            # Copied without waiting: a copy from host memory must not stall the device's queue.
            batch["domain_index"] = index.to(batch["completion_ids"].device, non_blocking=True)
        return None

    def on_train_batch(self, trainer, state, batch):
        # Over every process's rows (a std of stds is not the batch's std); each process calls this once per batch.
        advantages = trainer.accelerator.gather(batch["advantages"])
        metrics = {
            "adv/mean": Deferred(advantages.mean()),
            "adv/std": Deferred(advantages.std()) if advantages.numel() > 1 else 0.0,
            "adv/zero_std_fraction": Deferred((advantages.view(-1, state.group_size).std(dim=1) < 1e-6).float().mean()),
        }
        totals = weighted_reward_total(state.rewards_per_func, state.reward_weights)
        metrics["groups/flat_fraction"] = Deferred(flat_groups(totals, state.group_size).float().mean())
        if "domain_index" not in batch:
            return metrics
        rewards = state.local_rows(totals)
        scored = ~torch.isnan(rewards)
        lengths = batch["completion_mask"].sum(dim=1).float()
        index, domains = batch["domain_index"], trainer.domains
        metrics.update(per_domain(torch.nan_to_num(rewards), scored, index, domains, "reward"))
        metrics.update(per_domain(lengths, torch.ones_like(lengths), index, domains, "completions/mean_length"))
        return metrics

    def on_loss(self, trainer, loss):
        inputs = loss.inputs
        logps, entropies = (tensor.detach() for tensor in loss.forward[:2])
        mask = inputs["completion_mask"]
        old = inputs.get("old_per_token_logps")
        ratio = torch.ones_like(logps) if old is None else torch.exp(logps - old)
        metrics = {
            "policy_ratio/mean": masked_mean(ratio, mask),
            "policy_ratio/abs_dev": masked_mean((ratio - 1).abs(), mask),
        }
        if loss.mode == "train":
            self.step_tokens = self.step_tokens + inputs["prompt_mask"].sum() + mask.sum()
        if "domain_index" not in inputs:
            return metrics
        index, domains = inputs["domain_index"], trainer.domains
        metrics.update(per_domain(entropies, mask, index, domains, "entropy"))
        if "ref_per_token_logps" in inputs:
            metrics.update(per_domain(k3(inputs["ref_per_token_logps"] - logps), mask, index, domains, "kl"))
        return metrics

    def on_step_end(self, trainer, seconds: float):
        tokens, self.step_tokens = self.step_tokens, 0
        if torch.is_tensor(tokens):  # in float64, as Python divides
            return {"tokens_per_sec": Deferred(tokens.double() / seconds, summed=True)}
        return {"tokens_per_sec": Summed(tokens / seconds)}
