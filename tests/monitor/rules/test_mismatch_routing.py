"""The setup rules, judged from what the run states: an importance-sampling correction over a filtered sampler, an
MoE router's auxiliary loss on during RL."""

from __future__ import annotations

from align_kit.monitor.rules import RunContext
from tests.monitor.rules.helpers import fired, replay

ROW = [{"loss": 0.1}]  # any logged row: a setup rule judges once, on the first


def test_an_is_correction_over_a_filtered_sampler_is_biased():
    alerts = replay(ROW, RunContext(is_correction=True, top_p=0.9, top_k=50))[1]
    assert fired(alerts, "is_correction_filtered") == [(1, "is_correction_filtered")]
    assert "while top_p=0.9, top_k=50 filter the sampler" in alerts[0].message
    assert alerts[0].fixes == ("unfiltered_sampler",)
    # top_p 1, top_k 0 (TRL's defaults) and min_p None filter nothing; a filter without a correction is no bias.
    assert fired(replay(ROW, RunContext(is_correction=True, top_p=1.0, top_k=0))[1], "is_correction_filtered") == []
    assert fired(replay(ROW, RunContext(is_correction=False, min_p=0.05))[1], "is_correction_filtered") == []
    assert fired(replay(ROW, RunContext(is_correction=True, min_p=0.05))[1], "is_correction_filtered") != []


def test_an_unstated_correction_cannot_be_judged():
    monitor, alerts = replay(ROW, RunContext(top_p=0.9))
    assert fired(alerts, "is_correction_filtered") == []
    coverage = {entry.rule: entry for entry in monitor.coverage()}["is_correction_filtered"]
    assert not coverage.judged and coverage.reason == "needs is_correction (unknown)"


def test_a_router_auxiliary_loss_during_rl():
    alerts = replay(ROW, RunContext(router_aux_loss_coef=0.001, output_router_logits=True))[1]
    assert fired(alerts, "moe_aux_loss") == [(1, "moe_aux_loss")]
    assert alerts[0].fixes == ("router_aux_off", "routing_replay")
    # The coefficient set but output_router_logits off: transformers adds no auxiliary loss.
    off = RunContext(router_aux_loss_coef=0.001, output_router_logits=False)
    assert fired(replay(ROW, off)[1], "moe_aux_loss") == []
    assert fired(replay(ROW, RunContext(router_aux_loss_coef=0.0))[1], "moe_aux_loss") == []


def test_the_stated_settings_feed_the_setup_fields():
    context = RunContext.from_stated(
        {"top_p": 0.95, "top_k": 20, "min_p": "0.0", "is_correction": "token_truncate", "router_aux_loss_coef": 0.02}
    )
    assert (context.top_p, context.top_k, context.min_p, context.is_correction) == (0.95, 20, 0.0, True)
    assert context.router_aux_loss_coef == 0.02 and context.output_router_logits is None
    assert RunContext.from_stated({"is_correction": "none"}).is_correction is False


def test_a_grpo_config_feeds_the_setup_fields():
    from types import SimpleNamespace

    from align_kit.integrations.trl import GRPO_FIELDS, run_context

    fields = dict.fromkeys(GRPO_FIELDS) | {"reward_weights": None, "top_p": 0.9, "top_k": 0, "min_p": None}
    fields["vllm_importance_sampling_correction"] = True  # TRL's default; it applies only when vLLM samples
    on = run_context(SimpleNamespace(**fields, use_vllm=True))
    off = run_context(SimpleNamespace(**fields, use_vllm=False))
    assert (on.is_correction, on.top_p, on.top_k, off.is_correction) == (True, 0.9, 0, False)
