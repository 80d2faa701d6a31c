"""The re-tokenization check (the training-stability chapter, 16.6.1 (3)), on every generation round: the share of
rollouts whose text does not re-encode to the sampled ids (`mismatch/retokenize_rate`), and the
first such rollout saved to the run folder."""

from __future__ import annotations

import json
from pathlib import Path

from align_kit.components.rollout import retokenize_differences
from align_kit.core.hooks import TrainerHook

EXAMPLE_FILE = "retokenize_mismatch.json"


class RetokenizeCheck(TrainerHook):
    def __init__(self):
        self.example_saved = False

    def on_scored_batch(self, trainer, state, batch):
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
        prompts = [row["prompt"] for row in state.inputs]
        differences = retokenize_differences(trainer.processing_class, trainer.encode_prompts, prompts, sampled)
        if differences and not self.example_saved and trainer.accelerator.is_main_process:
            index = min(differences)
            original, rebuilt, text = differences[index]
            example = {"step": trainer.state.global_step, "prompt": prompts[index], "completion_text": text}
            example.update(sampled_ids=original, reencoded_ids=rebuilt)
            Path(trainer.args.output_dir, EXAMPLE_FILE).write_text(json.dumps(example, indent=2))
            self.example_saved = True
        return {"mismatch/retokenize_rate": len(differences) / len(prompts)}
