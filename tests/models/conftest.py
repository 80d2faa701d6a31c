"""The tiny policy, warm-started once for the models package's tests."""

from __future__ import annotations

import pytest

from align_kit.models.tiny import TinyModel
from align_kit.rewards.correctness import Correctness
from align_kit.tasks.arithmetic import ArithmeticTask

FAST = {"steps": 100, "eval_prompts": 32}


@pytest.fixture(scope="package")
def tiny_policy(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    node = TinyModel(warm_start=FAST)
    return node, cache, node.load(ArithmeticTask(), cache, reward=Correctness(), max_new_tokens=32)
