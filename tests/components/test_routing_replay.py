"""Routing Replay inside the trainer on the tiny MoE: recorded routing, replay, drift metrics."""

from __future__ import annotations

import contextlib

import pytest
import torch
from trl.trainer.utils import shuffle_sequence_dict, split_tensor_dict

from align_kit.components.routing_replay import RouteReplay
from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.tracking.metrics_file import read_metrics
from align_kit.train import component_choices
from tests.conftest import generation_inputs

MOE = ["model=tiny_moe", "trainer.steps_per_generation=2"]  # mini-steps: TRL computes old log-probs


def first_micro_batch(trainer, batch):
    rows = trainer.args.per_device_train_batch_size
    return {k: v[:rows] if isinstance(v, torch.Tensor) and v.dim() > 0 else v for k, v in batch.items()}


def test_routing_replay_on_a_dense_model_is_rejected_before_loading(tmp_path):
    with pytest.raises(ConfigError, match=r"routing_replay=r2 needs a Mixture-of-Experts model but model=tiny"):
        build_plan(compose(["routing_replay=r2"]), component_choices(), str(tmp_path))


@pytest.mark.parametrize("mode", ["r2", "r3"])
def test_replay_without_a_parameter_change_reproduces_the_old_log_probs_exactly(mode, build_trainer):
    trainer = build_trainer(*MOE, f"routing_replay={mode}")
    batch = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=8))
    assert batch["routed_experts"].dtype == torch.uint8
    assert trainer.hook(RouteReplay).hooks.bytes_per_token == 4 * 2 * 1  # 4 MoE layers x top-2 x 1 byte
    micro = first_micro_batch(trainer, batch)  # the same rows the old-log-prob forward saw first
    with torch.no_grad():
        trainer._compute_loss(trainer.model, micro)
    logps = trainer.last_loss.forward[0]
    mask = micro["completion_mask"].bool()
    assert torch.equal(logps[mask], micro["old_per_token_logps"][mask])  # ratio exactly 1 on every token
    trainer.flush_metrics()
    metrics = trainer._metrics["train"]
    # R2 replays every completion token. R3 has no routing for the last token of a full-width row (never
    # fed during generation), so those tokens route freely: one per row whose last slot is a real token.
    completion_tokens = mask.sum().item()
    unreplayed = 0 if mode == "r2" else mask[:, -1].sum().item()
    assert metrics["routing/replayed_fraction"][-1] == pytest.approx(1 - unreplayed / completion_tokens)
    assert metrics["routing/flip_rate"][-1] == 0.0


def test_r3_replays_the_routing_recorded_while_sampling(build_trainer):
    trainer = build_trainer(*MOE, "routing_replay=r3")
    batch = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4))
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad(), trainer.hook(RouteReplay).hooks.record():
        trainer.model(input_ids=ids, attention_mask=attention)
    full_forward = trainer.hook(RouteReplay).hooks.take()
    valid = batch["routed_experts_valid"] & attention.bool()
    # Left-padded prompts of different lengths: every real position matches a full forward's routing.
    assert torch.equal(batch["routed_experts"][valid], full_forward[valid])


@pytest.mark.slow
def test_without_replay_the_router_drifts_after_updates(train_once, tmp_path):
    train_once(tmp_path, *MOE, "logger=none", "routing_replay=off", "trainer.learning_rate=3e-3", "trainer.max_steps=6")
    rows = [row for row in read_metrics(tmp_path / "metrics.jsonl") if "routing/flip_rate" in row]
    # Sampled without replay: generations 0 and 2 of 3 (steps 1-2 and 5-6), both mini-steps of each.
    assert [row["step"] for row in rows] == [1, 2, 5, 6]
    # The second mini-step of each generation runs after an update: its routing differs from the sampled one.
    assert max(row["routing/flip_rate"] for row in rows) > 0
    assert all(0 <= row["routing/tokens_any_flip"] <= 1 for row in rows)
    assert all("routing/replayed_fraction" not in row for row in rows)


def test_with_replay_the_training_forward_uses_the_recorded_experts(train_once, tmp_path):
    train_once(tmp_path, *MOE, "logger=none", "routing_replay=r2", "trainer.learning_rate=3e-3", "trainer.max_steps=6")
    rows = [row for row in read_metrics(tmp_path / "metrics.jsonl") if "routing/flip_rate" in row]
    assert [row["routing/replayed_fraction"] for row in rows] == [1.0] * 6
    # The router would choose differently after updates (flip_rate > 0) but replay routed by the record.
    assert max(row["routing/flip_rate"] for row in rows) > 0


def test_routing_stays_attached_to_its_sample_through_shuffle_and_split(build_trainer):
    trainer = build_trainer(*MOE, "routing_replay=r2")
    batch = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=8))
    # Give every sample a distinct, known routing: expert ids from its row number.
    rows = batch["routed_experts"].size(0)
    known = torch.arange(rows, dtype=torch.uint8).view(-1, 1, 1, 1).expand_as(batch["routed_experts"]).clone()
    batch["routed_experts"] = known
    batch["row"] = torch.arange(rows)
    torch.manual_seed(3)
    for part in split_tensor_dict(shuffle_sequence_dict(batch), trainer.args.steps_per_generation):
        assert torch.equal(part["routed_experts"][:, 0, 0, 0].long(), part["row"])
        originals = batch["completion_ids"][part["row"]]
        assert torch.equal(part["completion_ids"], originals)


@pytest.mark.slow
def test_dynamic_sampling_keeps_routing_aligned(build_trainer):
    trainer = build_trainer(*MOE, "routing_replay=r3", "sampling=dynamic")
    batch = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=8))
    width = batch["prompt_ids"].size(1) + batch["completion_ids"].size(1)
    assert batch["routed_experts"].shape[:2] == (batch["prompt_ids"].size(0), width)
    with torch.no_grad():
        trainer._compute_loss(trainer.model, first_micro_batch(trainer, batch))
    trainer.flush_metrics()
    assert trainer._metrics["train"]["routing/replayed_fraction"][-1] > 0.9


def test_replay_on_a_dense_model_that_validation_could_not_see_fails_at_load(overrides_for, tmp_path):
    # A hub model's type is unknown until it loads; the trainer then refuses with the supported routers.
    from align_kit.components.routing_replay import RoutingReplay
    from align_kit.experiment.build_trainer import build_trainer

    cfg = compose(overrides_for("logger=none"))
    plan = build_plan(cfg, component_choices(), str(tmp_path))
    plan.components["routing_replay"] = RoutingReplay(mode="r3")
    policy = plan.model.load(plan.task, cfg.paths.cache_dir)
    with pytest.raises(ConfigError, match=r"routing_replay=r3: routing replay found no MoE router in Qwen3ForCausalLM"):
        build_trainer(plan, policy.model, policy.tokenizer)


def routers_raw_choices(model, record: list):
    """Prepended forward hooks on every MoE router: each router's own top-k choice, before any replay swaps it."""
    routers = [module for module in model.modules() if type(module).__name__.endswith("TopKRouter")]
    return [
        router.register_forward_hook(lambda module, args, output: record.append(output[2].clone()), prepend=True)
        for router in routers
    ]


@pytest.mark.parametrize(
    "mode", [pytest.param("off", marks=pytest.mark.slow), pytest.param("r2", marks=pytest.mark.slow), "r3"]
)
def test_the_sampler_trainer_routing_gap_before_any_update(mode, build_trainer):
    # A bfloat16 sampler copy routes some tokens differently from the float32 policy it was copied from.
    trainer = build_trainer(*MOE, f"routing_replay={mode}", "rollout.dtype=bfloat16")
    generation_hooks = trainer.hook(RouteReplay).generation_hooks
    take_generated, captured = generation_hooks.take_generated, []
    generation_hooks.take_generated = lambda: captured.append(take_generated()) or captured[-1]
    batch = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=8))
    ((sampled, valid),) = captured  # what the sampler chose while generating
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    width = ids.size(1)
    sampled, valid = sampled[:, :width], valid[:, :width]
    completion = torch.zeros_like(attention, dtype=torch.bool)
    completion[:, batch["prompt_ids"].size(1) :] = batch["completion_mask"].bool()
    # The trainer's own choice per layer: free-running (off, r2), or on R3's path, where every layer below was
    # routed as the sampler routed (the choices R3 overrides).
    raw: list = []
    handles = routers_raw_choices(trainer.model, raw)
    routed = trainer.hook(RouteReplay).hooks.replay(sampled, valid=valid) if mode == "r3" else contextlib.nullcontext()
    with torch.no_grad(), routed:
        trainer.model(input_ids=ids, attention_mask=attention)
    for handle in handles:
        handle.remove()
    trainer.hook(RouteReplay).hooks.pop_metrics()
    choices = torch.stack([layer.view(ids.size(0), width, -1) for layer in raw], dim=2)
    counted = completion & valid
    differ = (choices.sort(-1).values != sampled.sort(-1).values.long()).any(-1)
    trainer.flush_metrics()
    assert trainer._metrics["train"]["routing/sampler_gap"][-1] == pytest.approx(differ[counted].float().mean().item())
    assert trainer._metrics["train"]["routing/sampler_gap_tokens"][-1] == pytest.approx(
        differ.any(-1)[counted].float().mean().item()
    )
