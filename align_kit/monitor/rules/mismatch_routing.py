"""Sampler/trainer mismatch and MoE routing rules: the logp gap, the IS ratio drifting (16.6.1)."""

from __future__ import annotations

from collections.abc import Mapping
from statistics import fmean

from align_kit.monitor.rules.base import (
    IS_RATIO,
    LOGP_MISMATCH,
    Finding,
    History,
    Memory,
    Rule,
    above_threshold,
    first_logged,
    fixed,
    halves_growth,
    last_span,
    register,
    rule,
    span_points,
)
from align_kit.monitor.rules.context import RunContext
from align_kit.monitor.settings import (
    SamplerGapDrift,
)

SAMPLER_FIXES = ("match_sampler_precision", "is_correction", "routing_replay")


register(
    Rule(
        "logp_mismatch",
        LOGP_MISMATCH,
        above_threshold(LOGP_MISMATCH),
        "train/inference |logp difference| ({metric}) mean {recent_mean:.4g} > {threshold:g}",
        fixed(
            "align the inference engine's precision with the trainer's (e.g. bf16 on both) and check "
            "tokenization round-trips; for MoE models use routing replay"
        ),
        memory=last_span,
        fixes=SAMPLER_FIXES,
        points=span_points,
        level=True,
    )
)


def _sampler_gap_advice(context: RunContext, _: Mapping[str, float]) -> str:
    advice = (
        "the sampler and the trainer disagree more and more: run the sampler in the trainer's precision (bf16 on "
        "both), correct with importance sampling (rollout.is_correction)"
    )
    return advice if context.routing_replay else advice + ", and on an MoE model use routing_replay=r2"


@rule(
    "sampler_gap_drift",
    (IS_RATIO, *LOGP_MISMATCH),
    "{what}: the sampler drifts away from the trainer",
    _sampler_gap_advice,
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
        recent = fmean(ratio.last(s.span))
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
