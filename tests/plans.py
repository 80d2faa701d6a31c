"""Plans built as `align-kit train` builds them (compose, then validate and build), for tests of what a
configuration becomes."""

from __future__ import annotations

from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.train import component_choices


def plan_for(*overrides: str, run_dir: str = "/tmp/align_kit_validation"):
    return build_plan(compose(list(overrides)), component_choices(), run_dir)
