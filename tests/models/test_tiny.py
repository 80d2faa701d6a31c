"""model=tiny: a saved Qwen3 built and warm-started here, its cache (reused, rebuilt, safe against a racing build)
and its prompt check."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from align_kit.models.tiny import WARM_START_FILE, TinyModel
from align_kit.tasks.arithmetic import ArithmeticTask
from tests.models.conftest import FAST


def test_tiny_model_is_a_saved_qwen3_with_head_dim_32(tiny_policy):
    _, _, policy = tiny_policy
    config = policy.model.config
    assert config.model_type == "qwen3" and config.head_dim == 32
    assert config.vocab_size == len(policy.tokenizer)
    info = json.loads((Path(policy.path) / WARM_START_FILE).read_text())
    assert info["steps"] == FAST["steps"] and 0.0 <= info["start_success_rate"] <= 1.0


def test_cache_is_reused_for_the_same_config_and_rebuilt_for_another(tiny_policy):
    node, cache, policy = tiny_policy
    marker = node.cache_path(ArithmeticTask(), cache) / WARM_START_FILE
    stamp = marker.stat().st_mtime_ns
    again = TinyModel(warm_start=FAST).load(ArithmeticTask(), cache)
    assert again.path == policy.path and marker.stat().st_mtime_ns == stamp
    other = TinyModel(warm_start={**FAST, "steps": FAST["steps"] + 1})
    assert other.cache_path(ArithmeticTask(), cache) != node.cache_path(ArithmeticTask(), cache)
    assert TinyModel(warm_start=FAST).cache_path(ArithmeticTask(max_operand=50), cache) != marker.parent
    # Settings the task's own cache key leaves out still reach the warm start through its demonstrations.
    assert TinyModel(warm_start=FAST).cache_path(ArithmeticTask(num_train=500), cache) != marker.parent
    assert TinyModel(warm_start=FAST).cache_path(ArithmeticTask(seed=7), cache) != marker.parent


def test_a_build_that_loses_the_race_keeps_the_first_complete_build(tiny_policy):
    # Two sweep jobs may build the same model at once: the second to finish must not replace or break the first.
    node, cache, policy = tiny_policy
    marker = node.cache_path(ArithmeticTask(), cache) / WARM_START_FILE
    stamp = marker.stat().st_mtime_ns
    TinyModel(warm_start={**FAST, "steps": 1, "eval_prompts": 0})._build(marker.parent, ArithmeticTask(), None, 8)
    assert marker.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in Path(cache).iterdir() if ".partial" in p.name) == []


def test_tiny_prompt_problem_names_the_character_and_the_positions():
    model = TinyModel(max_position_embeddings=64)
    assert model.prompt_problem("1+1=", 32) is None
    assert model.prompt_problem("é", 32).startswith("holds 'é' (U+00E9), which model=tiny's character tokenizer")
    # 64 positions - 32 for the completion leave 32 for the prompt: 33 characters are one too many.
    assert model.prompt_problem("x" * 32, 32) is None
    assert model.prompt_problem("x" * 33, 32).startswith("is 33 tokens, more than the 32 positions")
    assert model.prompt_problem("<think>" + "x" * 31, 32) is None  # the tag is one token: 32 in all


def test_a_load_that_finds_a_build_in_progress_waits_for_it_and_builds_nothing(tmp_path, monkeypatch):
    # Parallel sweep jobs, or the suite's parallel workers, needing the same model: one builds, the others wait.
    from types import SimpleNamespace

    import align_kit.core.build_lock as build_lock

    node = TinyModel(warm_start={"steps": 1, "eval_prompts": 0})
    entry = node.cache_path(ArithmeticTask(), tmp_path)
    builds, waiting, loaded = [], threading.Event(), []
    real_build = TinyModel._build
    with build_lock.building(entry):  # this test is the first builder
        flock = build_lock.fcntl.flock

        def announced(handle, operation):
            waiting.set()  # the other load reached the lock: it found no entry and now waits for this build
            flock(handle, operation)

        monkeypatch.setattr(build_lock, "fcntl", SimpleNamespace(flock=announced, LOCK_EX=build_lock.fcntl.LOCK_EX))
        monkeypatch.setattr(TinyModel, "_build", lambda *args: builds.append(args) or real_build(*args))
        other = threading.Thread(target=lambda: loaded.append(node.load(ArithmeticTask(), tmp_path)))
        other.start()
        assert waiting.wait(timeout=600)
        real_build(node, entry, ArithmeticTask(), None, 8)
    other.join(timeout=600)
    assert builds == [] and [policy.path for policy in loaded] == [str(entry)]
