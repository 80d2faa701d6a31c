"""Sampler/trainer mismatch and MoE routing rules (16.6.1): the logp gap, the IS ratio drifting, and two setup rules
judged from the run's composition: an IS correction over a filtered sampler, a router auxiliary loss during RL."""

from __future__ import annotations

from align_kit.monitor.rules.base import (
    IS_RATIO,
    LOGP_MISMATCH,
    Finding,
    History,
    Memory,
    Rule,
    above_threshold,
    first_logged,
    halves_growth,
    last_span,
    register,
    rule,
    span_points,
)
from align_kit.monitor.rules.context import RunContext
from align_kit.monitor.settings import (
    SamplerGapDrift,
    SetupRule,
)

SAMPLER_FIXES = ("match_sampler_precision", "is_correction", "routing_replay")


register(
    Rule(
        "logp_mismatch",
        LOGP_MISMATCH,
        above_threshold(LOGP_MISMATCH),
        "train/inference |logp difference| ({metric}) mean {recent_mean:.4g} > {threshold:g}",
        memory=last_span,
        fixes=SAMPLER_FIXES,
        points=span_points,
        level=True,
    )
)


@rule(
    "sampler_gap_drift",
    (IS_RATIO, *LOGP_MISMATCH),
    "{what}: the sampler drifts away from the trainer",
    memory=lambda s: Memory(tail=max(s.span, s.window)),
    fixes=SAMPLER_FIXES,
    points=lambda s: min(s.span, s.window),
)
def _sampler_gap_drift(s: SamplerGapDrift, history: History, _: RunContext) -> Finding | None:
    ratio = history[IS_RATIO]
    gap_metric = first_logged(history, LOGP_MISMATCH)
    gap = history[gap_metric]
    judged = None
    if ratio.count >= s.span:
        recent = ratio.mean_last(s.span)
        values = {"recent_mean": recent, "ratio_deviation": s.ratio_deviation}
        if abs(recent - 1.0) > s.ratio_deviation:
            words = {
                "what": f"the IS ratio trainer/sampler averages {recent:.4g}, more than {s.ratio_deviation:g} from 1"
            }
            return Finding(True, values, IS_RATIO, words)
        judged = Finding(False, values, IS_RATIO, {"what": ""})
    if gap.count >= s.window:
        first, second, growth = halves_growth(gap.last(s.window))
        values = {"first_half": first, "second_half": second, "rise": s.rise, "min_gap": s.min_gap}
        what = f"{gap_metric} rose from {first:.4g} to {second:.4g} between the halves of the window"
        return Finding(growth > s.rise and second > s.min_gap, values, gap_metric, {"what": what}, points=s.window)
    return judged


def _filters(context: RunContext) -> list[str]:
    """The sampler filters in force: top_p < 1, top_k > 0, min_p > 0."""
    found = []
    if context.top_p is not None and context.top_p < 1:
        found.append(f"top_p={context.top_p:g}")
    if context.top_k is not None and context.top_k > 0:
        found.append(f"top_k={context.top_k}")
    if context.min_p is not None and context.min_p > 0:
        found.append(f"min_p={context.min_p:g}")
    return found


@rule(
    "is_correction_filtered",
    (),
    "the importance-sampling correction is on while {filters} filter the sampler: the sampler's log-probs are "
    "renormalised over the kept tokens, the trainer's are over the whole vocabulary, so every ratio is scaled by "
    "the kept probability mass (biased, not a policy change)",
    context=("is_correction",),
    fixes=("unfiltered_sampler",),
    setup=True,
)
def _is_correction_filtered(_s: SetupRule, _history: History, context: RunContext) -> Finding | None:
    if context.is_correction is None:
        return None
    filters = _filters(context)
    return Finding(bool(context.is_correction and filters), {}, "", {"filters": ", ".join(filters) or "none"})


@rule(
    "moe_aux_loss",
    (),
    "the router's auxiliary loss is on (router_aux_loss_coef={coef}{added}) during RL: it moves the routing apart "
    "from the reward, so the experts that sampled a token are not those that train it",
    context=("router_aux_loss_coef",),
    fixes=("router_aux_off", "routing_replay"),
    setup=True,
)
def _moe_aux_loss(_s: SetupRule, _history: History, context: RunContext) -> Finding | None:
    coef = context.router_aux_loss_coef
    if coef is None:
        return None
    # transformers adds the auxiliary loss only with output_router_logits on; a run that states it off has none.
    on = coef > 0 and context.output_router_logits is not False
    added = "" if context.output_router_logits else "; whether the model adds it (output_router_logits) is not stated"
    return Finding(on, {}, "", {"coef": f"{coef:g}", "added": added})
