"""The LM head over the completion tokens only, on a CPU as on a GPU.

TRL 1.16's fused LM head (`add_fused_lm_head`, trl/trainer/utils.py) projects through the head only the positions
whose label is kept, the completion tokens, when its Triton kernel runs (`compact`); on any other device it projects
every position, prompt and padding included, and zeroes the unused ones afterwards, because on Neuron a changing
number of kept positions would change the tile shapes and recompile. A CPU compiles nothing. There the full
projection is arithmetic nobody reads: on SmolLM2 (a 49,152-token vocabulary, 64-token prompts, 32-token completions)
the head's forward and backward over every position were 14 % of a GRPO step's work
(docs/real-model.md, "What a step costs"). The kept rows are the same rows either way, so the log-probabilities and
entropies are the same numbers; the head's weight gradient sums fewer (zero) rows, which can change its last bit. A
model node chooses it (`model.lm_head_rows`, hf and smollm2); model=tiny keeps TRL's path, so the parity test holds
that model to plain TRL bit for bit.
"""

from __future__ import annotations

import contextlib

from align_kit.core.hooks import TrainerHook


@contextlib.contextmanager
def completion_rows_on_cpu():
    """While open, TRL's fused LM head takes its compact path (kept positions only) on a CPU too; only that decision
    changes: the kernel module keeps its own Triton test, so a CPU still folds its tiles with torch."""
    import trl.trainer.utils as fused

    original = fused._use_triton
    fused._use_triton = lambda device: device.type == "cpu" or original(device)
    try:
        yield
    finally:
        fused._use_triton = original


class CompletionOnlyHead(TrainerHook):
    """Every forward of the trainer (the scoring passes of a generation round and the loss) with the head on the
    completion rows only; generation does not use the fused head."""

    def forward(self, trainer, call):
        return completion_rows_on_cpu()
