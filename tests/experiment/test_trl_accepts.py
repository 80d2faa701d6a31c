"""The pre-flight holds a plan to TRL's own refusals: what GRPOConfig refuses is refused before the model loads, as one
line naming our keys, and the batch rules the plan words itself are exactly ones GRPOConfig refuses too (a new TRL
that drops or changes one fails here, not in a user's run)."""

from __future__ import annotations

import pytest
from trl import GRPOConfig

from align_kit.core.errors import ConfigError
from align_kit.experiment.trl_accepts import named_fields, refusal_line
from align_kit.runs.preflight import check_command

# (trainer values, a fragment of the pre-flight's line): the batch rules align_kit's plan words itself.
OWN_WORDS = [
    ({"num_generations": 1}, "trainer.num_generations=1"),
    ({"generation_batch_size": 40}, "trainer.generation_batch_size=40 is not a multiple of the global batch"),
    ({"num_generations": 5}, "trainer.num_generations=5 does not divide the generation batch"),
    ({"per_device_train_batch_size": 10}, "trainer.num_generations=8 does not divide the generation batch"),
]
# Values only TRL refuses (GRPOConfig.__post_init__): refused in the pre-flight with TRL's reason.
TRLS_WORDS = [
    ({"generation_batch_size": 64, "steps_per_generation": 2}, "trainer.generation_batch_size=64 with trainer.steps_"),
    ({"auto_find_batch_size": True}, "trainer.auto_find_batch_size=True"),
    (
        {"vllm_importance_sampling_clip_min": 3.0, "vllm_importance_sampling_clip_max": 2.0},
        "trainer.vllm_importance_sampling_clip_min=3.0 with trainer.vllm_importance_sampling_clip_max=2.0",
    ),
    ({"log_completions_hub_repo": "me/x"}, "trainer.log_completions_hub_repo=me/x"),
]


def overrides(values: dict) -> list[str]:
    return [
        f"trainer.{name}={str(value).lower() if isinstance(value, bool) else value}" for name, value in values.items()
    ]


@pytest.fixture(scope="module")
def default_kwargs() -> dict:
    """The GRPOConfig values of the default config, as the pre-flight passes them."""
    [plan] = check_command([], False)
    return plan.grpo_kwargs


@pytest.mark.parametrize(("values", "fragment"), OWN_WORDS, ids=[str(v) for v, _ in OWN_WORDS])
def test_each_batch_rule_the_plan_words_itself_is_one_trl_refuses(values, fragment, default_kwargs):
    with pytest.raises(ConfigError, match=fragment):
        check_command(overrides(values), False)
    kwargs = {**default_kwargs, **values}
    if values.get("generation_batch_size"):  # TRL takes one of the two, as the plan does
        kwargs.pop("steps_per_generation", None)
    with pytest.raises(ValueError):
        GRPOConfig(**kwargs)


@pytest.mark.parametrize(("values", "fragment"), TRLS_WORDS, ids=[str(v) for v, _ in TRLS_WORDS])
def test_what_only_trl_refuses_is_refused_before_the_model_loads(values, fragment, default_kwargs):
    with pytest.raises(ValueError):
        GRPOConfig(**{**default_kwargs, **values})
    with pytest.raises(ConfigError, match=f"^{fragment}") as refused:
        check_command(overrides(values), False)
    assert "\n" not in str(refused.value)


def test_the_default_config_and_a_recipe_are_values_trl_accepts(default_kwargs):
    GRPOConfig(**default_kwargs)
    [plan] = check_command(["recipe=dapo"], False)
    GRPOConfig(**plan.grpo_kwargs)


def test_a_refusal_names_our_keys_for_the_fields_trl_names():
    message = "generation_batch_size (64) must be divisible by num_generations (5).\nmore detail"
    assert named_fields(message) == ["generation_batch_size", "num_generations"]
    kwargs = {"generation_batch_size": 64, "num_generations": 5, "output_dir": "x"}
    sources = {"generation_batch_size": "trainer.generation_batch_size", "num_generations": "advantage=x (its n=5)"}
    assert refusal_line(message, kwargs, sources) == (
        "trainer.generation_batch_size=64 with advantage=x (its n=5): TRL's GRPOConfig refuses these values "
        "(generation_batch_size (64) must be divisible by num_generations (5).); change one of them"
    )
