"""Overlong handling (DAPO §3.4, arXiv 2503.14476; the training-stability chapter, figure 16-12; the
policy-optimization chapter, figure 18-8).

filter      : truncated completions are masked out of the loss (TRL `mask_truncated_completions`)
soft_punish : a length penalty reward that ramps from 0 to -1 over the last `cache_length` tokens
              of the budget (TRL `get_soft_overlong_punishment`)

Every node, `none` included, logs whether the mechanism had anything to act on (`OverlongEngagement`). DAPO's
claim is that truncated samples inject reward noise: a cut-off answer scores as wrong although it might have
finished correctly. That noise exists only where truncated samples share groups with finished ones (their
advantage is then set against those) and where some of them would in fact have finished correctly, which a
periodic probe measures by letting a few truncated completions continue past the budget, without gradient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from align_kit.core.component import Component, RewardSpec
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.core.hooks import Deferred, TrainerHook, Weighted

NO_PROBE = Weighted(math.nan, 0)  # nothing probed on this process


@dataclass
class Overlong(Component):
    filter_truncated: bool = knob(
        False,
        help="Mask completions cut off by the length budget out of the loss (TRL's mask_truncated_completions), so "
        "a truncated answer is not punished as wrong.",
        source="DAPO §3.4, arXiv 2503.14476; 16.6, figure 16-12",
    )
    soft_punish: bool = knob(
        False,
        help="Add TRL's soft overlong punishment as a reward: 0 up to the budget minus cache_length, falling "
        "linearly to -1 at the budget.",
        source="DAPO §3.4 (Eq. 13), arXiv 2503.14476; 18.3, figure 18-8",
    )
    cache_length: int = knob(
        8,
        help="Tokens before the budget over which the punishment ramps to -1; > 0 and below "
        "trainer.max_completion_length (DAPO: 4096 of 20480, here 8 of 32).",
        source="DAPO §3.4, arXiv 2503.14476",
    )
    punish_weight: float = knob(
        1.0,
        ge=0,
        help="The weight of the soft punishment reward (the penalty itself is <= 0); 1.0 as DAPO.",
        source="DAPO §3.4, arXiv 2503.14476",
    )
    probe_every: int = knob(
        0,
        ge=0,
        help="Train batches between probes that continue a few truncated completions past the budget without "
        "gradient (overlong/probe_*); 0 turns the probe off.",
    )
    probe_samples: int = knob(8, ge=1, help="Truncated completions continued per probe (per process).")
    probe_tokens: int = knob(
        0, ge=0, help="New tokens a probed completion may add; 0 takes trainer.max_completion_length."
    )

    def validate(self) -> None:
        if self.soft_punish and self.cache_length <= 0:
            raise ConfigError(f"overlong.cache_length={self.cache_length} must be > 0 for soft punishment")
        if self.soft_punish and self.punish_weight < 0:
            raise ConfigError(
                f"overlong.punish_weight={self.punish_weight} is negative; the penalty is already <= 0, "
                "use a positive weight"
            )

    def grpo_fields(self) -> dict[str, Any]:
        return {"mask_truncated_completions": self.filter_truncated}

    def monitor_facts(self) -> dict[str, Any]:
        return {"overlong_shaping": self.soft_punish}  # the soft punishment is a reward term against length growth

    def reward_specs(self, trainer_fields: dict[str, Any]) -> list[RewardSpec]:
        if not self.soft_punish:
            return []
        budget = trainer_fields["max_completion_length"]
        if self.cache_length >= budget:
            raise ConfigError(
                f"overlong.cache_length={self.cache_length} must be smaller than "
                f"trainer.max_completion_length={budget}; DAPO punishes only the last part of the budget"
            )
        from trl.rewards import get_soft_overlong_punishment

        func = get_soft_overlong_punishment(max_completion_len=budget, soft_punish_cache=self.cache_length)
        return [RewardSpec(name="soft_overlong", weight=self.punish_weight, max_value=0.0, func=func)]

    def trainer_hooks(self) -> list:
        return [OverlongEngagement(self.probe_every, self.probe_samples, self.probe_tokens)]


class OverlongEngagement(TrainerHook):
    """Per batch that trains: overlong/truncated_in_mixed_groups, the share of truncated completions (no EOS)
    that sit in a group with at least one finished completion. Every `probe_every` batches, up to
    `probe_samples` truncated completions of this process continue for `probe_tokens` more tokens (sampled at the
    trainer's temperature, without gradient, on a forked random state so training draws the same numbers):
    overlong/probe_would_finish is the share that then emits EOS, overlong/probe_would_be_correct the share that
    also earns the correctness reward's full score (NaN without a correctness reward)."""

    def __init__(self, probe_every: int = 0, probe_samples: int = 8, probe_tokens: int = 0):
        self.probe_every, self.probe_samples, self.probe_tokens = probe_every, probe_samples, probe_tokens
        self.batches = 0
        self._eos_ids = None  # the EOS ids on the device, made once

    def on_train_batch(self, trainer, state, batch):
        import torch

        if state.mode != "train":
            return None
        ids = batch["completion_ids"]
        finished = torch.isin(ids, self._eos(trainer, ids.device)).any(dim=1)
        groups = trainer.accelerator.gather(finished).view(-1, state.group_size)
        truncated = ~groups
        mixed = groups.any(dim=1, keepdim=True) & truncated.any(dim=1, keepdim=True)
        # On the device, in float64 as Python divides; 0 / 0 is NaN when nothing was truncated.
        share = (truncated & mixed).sum().double() / truncated.sum().double()
        metrics = {"overlong/truncated_in_mixed_groups": Deferred(share)}
        self.batches += 1
        if self.probe_every and self.batches % self.probe_every == 0:
            metrics.update(self.probe(trainer, state, batch, finished))
        return metrics

    def _eos(self, trainer, device):
        """The EOS ids as a tensor on `device`, made once (a fresh one per batch is a copy from the host)."""
        import torch

        if self._eos_ids is None or self._eos_ids.device != device:
            self._eos_ids = torch.tensor(trainer.eos_token_ids).to(device, non_blocking=True)
        return self._eos_ids

    def probe(self, trainer, state, batch, finished) -> dict[str, float]:
        """Continue up to `probe_samples` of this process's truncated rows (`finished` False); on probing batches
        only, so reading which rows they are back from the device costs nothing on the others."""
        import torch

        from align_kit.rewards.correctness import Correctness

        rows = (~finished).nonzero().flatten()[: self.probe_samples]
        if len(rows) == 0:
            return {"overlong/probe_would_finish": NO_PROBE, "overlong/probe_would_be_correct": NO_PROBE}
        completions = batch["completion_ids"][rows]
        input_ids = torch.cat([batch["prompt_ids"][rows], completions], dim=1)
        attention = torch.cat([batch["prompt_mask"][rows], torch.ones_like(completions)], dim=1)
        model = trainer.accelerator.unwrap_model(trainer.model)
        tokenizer = trainer.processing_class
        extra = self.probe_tokens or trainer.max_completion_length
        # Generate in eval mode: in train mode (gradient checkpointing, no KV cache) the tiny policy's
        # continuations were garbage ('<think></think>9000...'), so no probed completion finished.
        training = model.training
        model.eval()
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=[]):
                torch.manual_seed(trainer.args.seed + self.batches)
                output = model.generate(
                    input_ids=input_ids,
                    attention_mask=attention,
                    max_new_tokens=extra,
                    do_sample=True,
                    temperature=trainer.temperature,
                    eos_token_id=trainer.eos_token_ids,
                    pad_token_id=tokenizer.pad_token_id,
                )
        finally:
            model.train(training)
        continued = output[:, input_ids.shape[1] :]
        eos = torch.tensor(trainer.eos_token_ids, device=continued.device)
        would_finish = torch.isin(continued, eos).any(dim=1)
        # Shares of this process's probed completions, weighted by their number when gathered over processes.
        metrics = {"overlong/probe_would_finish": Weighted(would_finish.float().mean().item(), len(rows))}
        checker = next((func for func in trainer.reward_funcs if isinstance(func, Correctness)), None)
        if checker is None:
            return {**metrics, "overlong/probe_would_be_correct": NO_PROBE}
        texts = tokenizer.batch_decode(torch.cat([completions, continued], dim=1), skip_special_tokens=True)
        examples = [state.inputs[int(row)] for row in rows]
        columns = {key: [example[key] for example in examples] for key in examples[0] if key != "prompt"}
        scores = checker(completions=texts, prompts=[example["prompt"] for example in examples], **columns)
        pairs = zip(would_finish.tolist(), scores, strict=True)
        correct = [done and score is not None and score >= checker.max_value for done, score in pairs]
        return {**metrics, "overlong/probe_would_be_correct": Weighted(sum(correct) / len(correct), len(correct))}
