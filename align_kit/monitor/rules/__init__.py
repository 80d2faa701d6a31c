"""Training-health alert rules (the training-stability chapter, 16.6.1 and table 16-6; the policy-optimization
chapter, 18.3.1-18.3.4 and the alert table of 18.3.7), one module per family:

- base.py: the metric names, `Alert`, the bounded history (`Series`, `History`), `Finding`, `Rule` and the registry;
- context.py: `RunContext`, what the run composes, built once (`from_stated`, `from_plan`);
- gradients, entropy, reward, length, kl_ratio, mismatch_routing: each rule beside its check and its advice;
- table.py: `RULES`, built from the registrations; engine.py: `HealthMonitor`.

Trend rules read smoothed series (means over `span` points, or halves of a `window`): one noisy batch must not raise
a warning (benchmarks/alert_calibration.py measures the false alarms on healthy runs). Advice never recommends a
node that is already on: it is written for the run's own composition (`RunContext`).
"""

from align_kit.monitor.rules.base import (
    CLIPPED,
    EVAL_REWARD,
    FLAT_FRACTION,
    IS_RATIO,
    LOGP_MISMATCH,
    MAX_ATTAINABLE,
    MEAN_LENGTH,
    TRAIN_REWARD,
    Alert,
    Finding,
    GradNormZeros,
    History,
    Memory,
    Recovery,
    Rule,
    RuleCoverage,
    Series,
    TrainEvalPairs,
)
from align_kit.monitor.rules.context import RunContext
from align_kit.monitor.rules.engine import HealthMonitor
from align_kit.monitor.rules.table import RULES

__all__ = [
    "CLIPPED",
    "EVAL_REWARD",
    "FLAT_FRACTION",
    "IS_RATIO",
    "LOGP_MISMATCH",
    "MAX_ATTAINABLE",
    "MEAN_LENGTH",
    "RULES",
    "TRAIN_REWARD",
    "Alert",
    "Finding",
    "GradNormZeros",
    "HealthMonitor",
    "History",
    "Memory",
    "Recovery",
    "Rule",
    "RuleCoverage",
    "RunContext",
    "Series",
    "TrainEvalPairs",
]
