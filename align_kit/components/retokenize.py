"""The re-tokenization check (the training-stability chapter, 16.6.1 (3)), on every generation round: the share of
rollouts whose text does not re-encode to the sampled ids (`mismatch/retokenize_rate`), and the
first such rollout saved to the run folder."""

from __future__ import annotations

import json
from pathlib import Path

from align_kit.core.hooks import TrainerHook

EXAMPLE_FILE = "retokenize_mismatch.json"


def retokenize_differences(tokenizer, encode_prompts, prompts: list, sampled: list[tuple[list[int], list[int]]]):
    """Rebuild each rollout as text and re-encode it the way the training side encodes prompts
    (a multi-turn pipeline feeds the history back as text), then compare with the ids that were
    sampled (the training-stability chapter, 16.6.1 (3)). `sampled` holds (prompt ids, completion ids) per rollout,
    unpadded; `encode_prompts` is the trainer's prompt encoder. Returns {index: (sampled ids,
    re-encoded ids, text)} for the rollouts that differ."""
    from trl.data_utils import is_conversational

    texts = tokenizer.batch_decode([completion_ids for _, completion_ids in sampled], skip_special_tokens=False)
    plain = [index for index, prompt in enumerate(prompts) if not is_conversational({"prompt": prompt})]
    # One call for every plain-text rollout: encoding them one by one cost more than the rest of the check.
    rebuilt = dict(zip(plain, encode_prompts([prompts[i] + texts[i] for i in plain]), strict=True)) if plain else {}
    differences = {}
    for index, (prompt, (prompt_ids, completion_ids)) in enumerate(zip(prompts, sampled, strict=True)):
        if index not in rebuilt:
            messages = [*prompt, {"role": "assistant", "content": texts[index]}]
            encoded = tokenizer.apply_chat_template(
                messages, tokenize=True, continue_final_message=True, return_dict=True
            )
            rebuilt[index] = encoded["input_ids"]
        original = list(prompt_ids) + list(completion_ids)
        if list(rebuilt[index]) != original:
            differences[index] = (original, list(rebuilt[index]), texts[index])
    return differences


class RetokenizeCheck(TrainerHook):
    def __init__(self):
        self.example_saved = False

    def on_scored_batch(self, trainer, state, batch):
        # TRL's own lists, on the host (reading the batch's tensors back would make a GPU wait for its queue); a
        # completion whose loss mask overlong=filter zeroed is checked all the same.
        sampled = list(zip(*state.sampled_ids, strict=True))
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
