"""Clip engagement at task=two_style's style decision: the token after `<think>` that starts a careful answer.

Clip-Higher's claim (DAPO §3.1) is that the upper bound caps how fast a rare, better choice can rise. In this task
that choice is one token: a digit after `<think>` starts a careful answer, `</think>` a direct one. The clip
metrics (components/clip.py) count every low-probability token; these count the careful decisions alone, per loss
call, over completions that start careful (first token after the first `<think>` is not `</think>`):

  style/careful_decision_prob         mean old probability of that token
  style/careful_decision_low_prob     share of them with old probability below LOW_PROBABILITY (0.1)
  style/careful_decision_upper_bound  of those with a positive advantage, the share whose ratio pi/pi_old
                                      exceeded 1 + epsilon_high: the decisions the upper bound stopped pushing
"""

from __future__ import annotations

import math

from align_kit.components.clip import LOW_PROBABILITY
from align_kit.core.hooks import TrainerHook, masked_mean
from align_kit.rewards.format import THINK_CLOSE, THINK_OPEN


class StyleDecision(TrainerHook):
    def on_loss(self, trainer, loss):
        import torch

        logps = loss.forward[0].detach()
        inputs = loss.inputs
        ids, mask = inputs["completion_ids"], inputs["completion_mask"].float()
        opening, closing = trainer.processing_class.convert_tokens_to_ids([THINK_OPEN, THINK_CLOSE])
        opened = ids == opening
        has_think = opened.any(dim=1)
        position = opened.float().argmax(dim=1) + 1  # the token after the first <think>
        in_range = has_think & (position < ids.shape[1])
        position = position.clamp(max=ids.shape[1] - 1).unsqueeze(1)
        decision_mask = mask.gather(1, position).squeeze(1)
        careful = (in_range & (ids.gather(1, position).squeeze(1) != closing)).float() * decision_mask
        new = logps.gather(1, position).squeeze(1)
        old = inputs.get("old_per_token_logps")
        old = new if old is None else old.detach().gather(1, position).squeeze(1)
        advantages = inputs["advantages"]
        advantages = advantages[:, 0] if advantages.dim() == 2 else advantages
        epsilon_high = trainer.epsilon_high
        return {
            "style/careful_decision_prob": masked_mean(old.exp(), careful),
            "style/careful_decision_low_prob": masked_mean((old < math.log(LOW_PROBABILITY)).float(), careful),
            "style/careful_decision_upper_bound": masked_mean(
                (torch.exp(new - old) > 1 + epsilon_high).float(), careful * (advantages > 0).float()
            ),
        }
