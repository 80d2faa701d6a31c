"""Reward components by role: the names real runs give their reward functions -> accuracy / format / neither, the
choice among several of one role, and a user's map winning."""

from __future__ import annotations

import pytest

from align_kit.doctor.keymaps import resolve, role_keys
from align_kit.doctor.reward_roles import assign, role_of, words


@pytest.mark.parametrize(
    ("name", "role"),
    [
        # accuracy-like
        ("correctness_reward_func", "accuracy"),
        ("check_answer", "accuracy"),
        ("accuracy_reward", "accuracy"),
        ("acc_reward", "accuracy"),
        ("math_reward", "accuracy"),
        ("answer_reward", "accuracy"),
        ("int_reward_func", "accuracy"),
        ("check_numbers", "accuracy"),
        ("correctness", "accuracy"),
        # format-like
        ("xmlcount_reward_func", "format"),
        ("match_format_exactly", "format"),
        ("match_format_approximately", "format"),
        ("strict_format_reward_func", "format"),
        ("soft_format_reward_func", "format"),
        ("format_reward", "format"),
        ("tag_count_reward", "format"),
        ("thinkFormatReward", "format"),
        ("format", "format"),
        # neither: no stem, or stems of both roles
        ("len_reward", None),
        ("reasoning_steps_reward", None),
        ("repetition_penalty", None),
        ("format_and_answer_reward", None),
        ("point_reward", None),  # `int` only as a whole word
    ],
)
def test_role_of_a_component_name(name, role):
    assert role_of(name)[0] == role


def test_words():
    assert words("strictFormatReward2") == ["strict", "format", "reward", "2"]
    assert words("xmlcount_reward_func") == ["xmlcount", "reward", "func"]


def test_several_of_one_role_the_strongest_stem_is_read():
    chosen, notes = assign(
        [
            ("rewards/int_reward_func/mean", "int_reward_func"),
            ("rewards/correctness_reward_func/mean", "correctness_reward_func"),
            ("rewards/soft_format_reward_func/mean", "soft_format_reward_func"),
            ("rewards/strict_format_reward_func/mean", "strict_format_reward_func"),
            ("rewards/xmlcount_reward_func/mean", "xmlcount_reward_func"),
            ("rewards/len_reward/mean", "len_reward"),
        ]
    )
    # `correct` ranks before the whole word `int`; the three format ones all hold `format` or `xml`: `format` first,
    # and of the two with `format` the first logged.
    assert chosen == {
        "rewards/correctness_reward_func/mean": "accuracy",
        "rewards/soft_format_reward_func/mean": "format",
    }
    assert notes == [
        "accuracy read from rewards/correctness_reward_func/mean (by its name; also accuracy-like, left as they are: "
        "rewards/int_reward_func/mean); override with --map accuracy=COLUMN",
        "format read from rewards/soft_format_reward_func/mean (by its name; also format-like, left as they are: "
        "rewards/strict_format_reward_func/mean, rewards/xmlcount_reward_func/mean); override with --map format=COLUMN",
        "reward components with no accuracy or format role by name: rewards/len_reward/mean "
        "(--map accuracy=COLUMN / --map format=COLUMN to give one)",
    ]


def test_the_roles_beside_the_key_map_and_a_user_map_winning():
    keys = ["reward", "rewards/check_answer/mean", "rewards/match_format_exactly/mean", "rewards/my_judge/mean"]
    mapping, _ = resolve(keys, "trl")
    # Each component keeps its own concept; the roles name the components read as accuracy and format as well.
    assert mapping["rewards/check_answer/mean"] == "rewards/check_answer/mean"
    assert role_keys(mapping)[0] == {
        "rewards/check_answer/mean": "accuracy",
        "rewards/match_format_exactly/mean": "format",
    }
    # --map accuracy=rewards/my_judge/mean: the user's column is accuracy; format is still found by name.
    user = {"accuracy": "rewards/my_judge/mean"}
    mapping, _ = resolve(keys, "trl", user)
    assert mapping["rewards/my_judge/mean"] == "accuracy"
    assert role_keys(mapping, user)[0] == {"rewards/match_format_exactly/mean": "format"}


def test_a_component_that_moves_is_read_before_a_flat_one():
    # soft_format (rank 0, `format`) logged 0.0 throughout; xmlcount (rank 1, `xml`) moves: the one that moves is read,
    # since the rules read a role's movement.
    components = [("rewards/soft_format/mean", "soft_format"), ("rewards/xmlcount/mean", "xmlcount")]
    assert assign(components)[0] == {"rewards/soft_format/mean": "format"}
    assert assign(components, flat=["rewards/soft_format/mean"])[0] == {"rewards/xmlcount/mean": "format"}


def test_flat_components_found_in_a_log(tmp_path):
    from align_kit.doctor.readers import read_runs

    path = tmp_path / "log.txt"
    path.write_text(
        "{'reward': 0.5, 'rewards/soft_format_reward_func': 0.0, 'rewards/xmlcount_reward_func': 0.125}\n"
        "{'reward': 0.75, 'rewards/soft_format_reward_func': 0.0, 'rewards/xmlcount_reward_func': 0.25}\n"
    )
    (history,) = read_runs(str(path))
    assert history.roles == {"format": "rewards/xmlcount_reward_func"}
    # Read under both names: its own concept and the role.
    assert history.rows[1][1]["format"] == history.rows[1][1]["rewards/xmlcount_reward_func/mean"] == 0.25
