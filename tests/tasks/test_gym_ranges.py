"""reasoning-gym options past the hardest level of the dataset's own curriculum are refused before anything is
generated (a chain of 99999999999 terms never finished); the bounds below were read by hand from reasoning-gym
0.1.25's sources, not from align_kit's code."""

from __future__ import annotations

import pytest

pytest.importorskip("reasoning_gym")

from align_kit.core.errors import ConfigError  # noqa: E402
from align_kit.tasks.reasoning_gym import ReasoningGymTask  # noqa: E402


def _task(name: str, **options) -> ReasoningGymTask:
    return ReasoningGymTask(datasets=[name], options={name: options}, num_train=2)


def test_a_huge_size_option_is_refused_naming_the_key_and_the_range(monkeypatch):
    def never(config):
        raise AssertionError("the generator ran on an option past its range")

    monkeypatch.setattr("align_kit.tasks.reasoning_gym.build_dataset", never)
    with pytest.raises(ConfigError) as refused:
        _task("chain_sum", max_terms=99999999999).validate()
    # arithmetic/chain_sum.py: ChainSumCurriculum's num_terms levels are range(2, 13), on min_terms/max_terms
    assert str(refused.value) == (
        "task.options.chain_sum.max_terms=99999999999: past the hardest level of reasoning-gym's curriculum for "
        "chain_sum's num_terms (Maximum number of terms in the expression; its levels run from 2 to 12): the time "
        "to generate an item grows with it; choose max_terms <= 12"
    )


def test_the_hardest_level_itself_is_accepted_and_one_past_it_is_not():
    _task("chain_sum", max_terms=12, max_digits=10).validate()  # ChainSumCurriculum: num_digits levels 1-10
    with pytest.raises(ConfigError, match=r"^task\.options\.chain_sum\.max_digits=11: .*choose max_digits <= 10$"):
        _task("chain_sum", max_digits=11).validate()
    # the lower field of a range attribute is bounded alike (min_terms <= max_terms is the dataset's own check)
    with pytest.raises(ConfigError, match=r"^task\.options\.chain_sum\.min_terms=13: .*choose min_terms <= 12$"):
        _task("chain_sum", min_terms=13, max_terms=12).validate()


def test_levels_that_fall_bound_from_below():
    # geometry/advanced_geometry.py: min_coord levels [-10, -100, -1000, -10000], harder as they fall
    _task("advanced_geometry", min_coord=-10000).validate()
    _task("advanced_geometry", min_coord=-5).validate()  # easier than the first level: not this rule's to refuse
    with pytest.raises(
        ConfigError, match=r"^task\.options\.advanced_geometry\.min_coord=-99999999999: .*choose min_coord >= -10000$"
    ):
        _task("advanced_geometry", min_coord=-99999999999).validate()


def test_options_no_curriculum_bounds_pass_through():
    # basic_arithmetic's curriculum has no attribute on `whitespace`, and modulo_grid's max_target levels
    # [1, 0, 3, 7, 9, 21] do not run one way, so they bound nothing
    _task("basic_arithmetic", whitespace="single").validate()
    _task("modulo_grid", max_target=30).validate()
