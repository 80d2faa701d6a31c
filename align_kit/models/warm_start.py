"""Warm-start SFT on a task's demonstrations, so RL starts from a policy that sometimes succeeds.

A plain loop (cross-entropy on completion tokens only) is enough for a model of a few hundred
thousand parameters and keeps the build independent of TRL's SFT defaults.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass
class WarmStartConfig:
    steps: int = 450
    batch_size: int = 64
    learning_rate: float = 3e-3
    eval_prompts: int = 256  # sampled once at temperature 1.0 to report the starting success rate
    seed: int = 0


def encode_demonstrations(tokenizer, pairs: list[tuple[str, str]]):
    """Token ids of prompt+completion+eos, with labels masked (-100) on the prompt."""
    rows = []
    for prompt, completion in pairs:
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append((prompt_ids + completion_ids, [-100] * len(prompt_ids) + completion_ids))
    return rows


def _collate(rows, pad_id: int):
    import torch

    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (ids, labs) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        labels[i, : len(labs)] = torch.tensor(labs)
        attention[i, : len(ids)] = 1
    return input_ids, labels, attention


def supervised_warm_start(model, tokenizer, pairs: list[tuple[str, str]], config: WarmStartConfig) -> list[float]:
    """Train in place; returns the loss of every step."""
    import torch

    rows = encode_demonstrations(tokenizer, pairs)
    rng = random.Random(config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    model.train()
    losses = []
    for _ in range(config.steps):
        batch = rng.sample(rows, min(config.batch_size, len(rows)))
        input_ids, labels, attention = _collate(batch, tokenizer.pad_token_id)
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    model.eval()
    return losses


def sampled_success_rate(model, tokenizer, prompts: list[str], answers: list[str], reward, max_new_tokens: int):
    """Share of prompts whose one completion, sampled at temperature 1.0, the reward scores 1.0."""
    import torch

    encoded = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        output = model.generate(
            **encoded,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    completions = tokenizer.batch_decode(output[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
    scores = reward(completions, answer=answers)
    return sum(1.0 for s in scores if s == 1.0) / len(scores)
