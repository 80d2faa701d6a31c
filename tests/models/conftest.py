"""The tiny policy, warm-started once for the models package's tests."""

from __future__ import annotations

import pytest

from align_kit.models.tiny import TinyModel
from align_kit.rewards.correctness import Correctness
from align_kit.tasks.arithmetic import ArithmeticTask

# A few steps: these tests read the saved model's structure and the cache, not what it learned.
FAST = {"steps": 10, "eval_prompts": 8}


@pytest.fixture(scope="package")
def tiny_policy(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    node = TinyModel(warm_start=FAST)
    return node, cache, node.load(ArithmeticTask(), cache, reward=Correctness(), max_new_tokens=32)
