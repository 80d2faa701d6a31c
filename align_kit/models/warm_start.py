"""Warm-start SFT on a task's demonstrations, so RL starts from a policy that sometimes succeeds.

A plain loop (cross-entropy on completion tokens only) is enough for a model of a few hundred
thousand parameters and keeps the build independent of TRL's SFT defaults. A demonstration whose
completion is a list of segments (a tool-use trajectory: model turns, each ended by EOS, the
environment's observations, and bad steps) trains with `masked_sft_loss` on the trained segments only
(the training-stability chapter, 16.6.2).

The SFT takes minutes on 2 cores (`make demo`), so it shows its progress: a tqdm bar with ETA on a terminal,
else a log line every 10 % of the steps with the elapsed time and ETA (a bar's carriage returns would pile up
in a log file).
"""

from __future__ import annotations

import logging
import math
import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

from align_kit.core.fields import SEED, knob

log = logging.getLogger(__name__)
PROGRESS_LINES = 10  # plain progress lines per warm start (one every 10 % of the steps)


@dataclass
class WarmStartConfig:
    steps: int = knob(
        450,
        help="SFT steps on the task's demonstrations; 450 makes sampling at temperature 1.0 succeed about 40 % of "
        "the time, 0 starts RL from random weights.",
    )
    batch_size: int = knob(64, ge=1, help="Demonstrations per SFT step.")
    learning_rate: float = knob(3e-3, gt=0, help="AdamW learning rate of the SFT.")
    eval_prompts: int = knob(
        256,
        ge=1,
        help="Prompts sampled once at temperature 1.0 after the SFT to report the starting success rate.",
    )
    seed: int = knob(0, within=SEED, help="Seed of the SFT's batch order and of the success-rate sampling.")
    router_lr_scale: float = knob(
        1.0,
        ge=0,
        help="The MoE routers' learning rate as a multiple of learning_rate; 0 keeps them at their random init. A "
        "router the SFT trains less keeps smaller top-k margins, so a quantized sampler flips more of its choices "
        "(the routing gap Routing Replay removes, 16.6.1 (1)-(2)). Dense models have no router.",
        source="16.6.1 (2)",
    )


def encode_demonstrations(tokenizer, pairs: list[tuple[str, str | list[tuple[str, bool, bool]]]]):
    """Token ids of prompt+completion+eos, with labels masked (-100) on the prompt. A segmented completion
    is (text, trained, ends_turn) segments: EOS follows a segment that ends a model turn, and an untrained
    segment (an observation, a bad step) gets labels -100, its EOS included."""
    rows = []
    for prompt, completion in pairs:
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        ids, labels = list(prompt_ids), [-100] * len(prompt_ids)
        for text, trained, ends_turn in [(completion, True, True)] if isinstance(completion, str) else completion:
            segment = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] * ends_turn
            ids += segment
            labels += segment if trained else [-100] * len(segment)
        rows.append((ids, labels))
    return rows


def masked_sft_loss(logits, labels, loss_mask):
    """The seed's masked SFT loss (16.6.2): position t predicts token t+1 (shifted labels), and the
    cross-entropy is averaged over the positions whose target has loss_mask 1 (at least one)."""
    import torch

    shift_logits = logits[:, :-1, :]
    shift_labels = labels[:, 1:]
    shift_mask = loss_mask[:, 1:].to(logits.dtype)
    per_token = torch.nn.functional.cross_entropy(
        shift_logits.reshape(-1, shift_logits.size(-1)), shift_labels.reshape(-1), reduction="none"
    ).view(shift_labels.shape)
    return (per_token * shift_mask).sum() / shift_mask.sum().clamp(min=1.0)


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


@contextmanager
def progress(total: int, stream: TextIO | None = None) -> Iterator[Callable[[float], None]]:
    """`advance(loss)` once per step of `total`: a tqdm bar on `stream` (stderr) when it is a terminal, else a log
    line at every tenth of the steps, with the elapsed time and the ETA."""
    from tqdm.auto import tqdm

    stream = stream if stream is not None else sys.stderr
    if stream.isatty():
        with tqdm(total=total, desc="warm start", unit="step", file=stream) as bar:
            yield lambda loss: (bar.set_postfix(loss=f"{loss:.3f}", refresh=False), bar.update())
        return
    marks = {math.ceil(total * k / PROGRESS_LINES) for k in range(1, PROGRESS_LINES + 1)}
    started, done = time.monotonic(), 0

    def advance(loss: float) -> None:
        nonlocal done
        done += 1
        if done in marks:
            elapsed = time.monotonic() - started
            eta = elapsed / done * (total - done)
            log.info(
                "warm start: %d/%d steps (%d %%), loss %.3f, %s elapsed, ETA %s",
                done, total, 100 * done // total, loss, tqdm.format_interval(elapsed), tqdm.format_interval(eta),
            )  # fmt: skip

    yield advance


def _parameter_groups(model, config: WarmStartConfig) -> list[dict]:
    """One AdamW group, or two when the routers learn at their own rate (router_lr_scale != 1). At lr 0 AdamW leaves
    a parameter as it was (its decoupled weight decay is lr x decay), so scale 0 keeps the routers' init."""
    from align_kit.models.moe_routers import router_family

    routers = {id(p) for m in model.modules() if router_family(m) is not None for p in m.parameters()}
    if config.router_lr_scale == 1.0 or not routers:
        return [{"params": list(model.parameters())}]
    rest = [p for p in model.parameters() if id(p) not in routers]
    routed = [p for p in model.parameters() if id(p) in routers]
    return [{"params": rest}, {"params": routed, "lr": config.learning_rate * config.router_lr_scale}]


def supervised_warm_start(model, tokenizer, pairs: list[tuple[str, str]], config: WarmStartConfig) -> list[float]:
    """Train in place, showing its progress (`progress`); returns the loss of every step."""
    import torch

    rows = encode_demonstrations(tokenizer, pairs)
    segmented = any(not isinstance(completion, str) for _, completion in pairs)
    rng = random.Random(config.seed)
    optimizer = torch.optim.AdamW(_parameter_groups(model, config), lr=config.learning_rate)
    model.train()
    losses = []
    with progress(config.steps) as advance:
        for _ in range(config.steps):
            batch = rng.sample(rows, min(config.batch_size, len(rows)))
            input_ids, labels, attention = _collate(batch, tokenizer.pad_token_id)
            if segmented:
                logits = model(input_ids=input_ids, attention_mask=attention).logits
                mask = labels != -100
                loss = masked_sft_loss(logits, torch.where(mask, labels, 0), mask)
            else:
                loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            advance(losses[-1])
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
