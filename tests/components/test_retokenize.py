"""The re-tokenization check (16.6.1 (3)): which rollouts do not re-encode to their sampled ids, and the rate and
first example the hook logs."""

from __future__ import annotations

import json

from align_kit.components.retokenize import RetokenizeCheck, retokenize_differences
from align_kit.core.hooks import BatchState
from align_kit.models.char_tokenizer import build_char_tokenizer
from tests.conftest import generation_inputs


def test_spelled_out_tag_does_not_survive_re_encoding():
    tokenizer = build_char_tokenizer()
    encode = lambda texts: [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]  # noqa: E731
    prompt_ids = encode(["1+1="])[0]
    clean = encode(["<think>1+1=2</think>2"])[0]
    spelled = [tokenizer.convert_tokens_to_ids(c) for c in "<think>"] + encode(["2</think>2"])[0]
    differences = retokenize_differences(
        tokenizer, encode, ["1+1=", "1+1="], [(prompt_ids, clean), (prompt_ids, spelled)]
    )
    assert list(differences) == [1]
    sampled, rebuilt, text = differences[1]
    assert text == "<think>2</think>2" and len(rebuilt) == len(sampled) - 6  # seven characters became one tag


def test_conversational_rollouts_are_rebuilt_with_the_chat_template():
    tokenizer = build_char_tokenizer()
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'] }}:{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    )
    prompt = [{"role": "user", "content": "1+1="}]
    prompt_ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)
    completion = tokenizer("<think>2</think>2", add_special_tokens=False)["input_ids"]
    sampled = [(list(prompt_ids["input_ids"]), completion)]
    assert retokenize_differences(tokenizer, None, [prompt], sampled) == {}


def test_retokenize_rate_is_logged_and_the_first_example_saved(build_trainer, tmp_path):
    trainer = build_trainer()
    spelled = [trainer.processing_class.convert_tokens_to_ids(c) for c in "<think>"]
    inputs = generation_inputs(trainer, prompts=1)
    prompts = [row["prompt"] for row in inputs]
    prompt_ids = [trainer.encode_prompts([p])[0] for p in prompts]
    state = BatchState(inputs=inputs, mode="train", group_size=trainer.num_generations)
    # The check reads TRL's host lists (the trainer sets them as TRL generates), not the batch's tensors.
    state.sampled_ids = (prompt_ids, [spelled] + [[5] * 7] * (len(prompts) - 1))
    metrics = trainer.hook(RetokenizeCheck).on_scored_batch(trainer, state, {})
    assert metrics["mismatch/retokenize_rate"] == 1 / len(prompts)
    saved = json.loads((tmp_path / "run" / "retokenize_mismatch.json").read_text())
    assert saved["completion_text"] == "<think>" and saved["sampled_ids"][-7:] == spelled
