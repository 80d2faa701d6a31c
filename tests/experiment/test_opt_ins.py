"""align_kit.experiment.opt_ins: switches that run a file's code or upload with the user's token, the command line's
alone."""

from __future__ import annotations

import pytest

from align_kit.core.errors import ConfigError
from align_kit.experiment.opt_ins import check_opt_ins, command_line_only, sweep_param_refusal, switches_on


def test_switches_are_found_where_they_are_on():
    data = {
        "model": {"trust_remote_code": True},
        "trainer": {
            "push_to_hub": False,
            "log_completions_hub_repo": None,
            "model_init_kwargs": {"trust_remote_code": 1},
        },
        "other": [{"push_to_hub": True}],
    }
    assert switches_on(data) == [
        "model.trust_remote_code",
        "trainer.model_init_kwargs.trust_remote_code",
        "other[0].push_to_hub",
    ]


def test_command_line_only_keys():
    assert command_line_only("train.allowed_targets")
    assert command_line_only("trainer.push_to_hub") and command_line_only("trainer.log_completions_hub_repo")
    assert command_line_only("model.trust_remote_code")
    assert not command_line_only("trainer.hub_model_id") and not command_line_only("trainer.push_to_hubs")


def test_a_switch_typed_on_the_command_line_passes():
    check_opt_ins({"trainer": {"push_to_hub": True}}, ["trainer.push_to_hub=true"])
    check_opt_ins(
        {"trainer": {"push_to_hub": True, "hub_model_id": "me/m"}},
        ["trainer.push_to_hub=true", "trainer.hub_model_id=me/m"],
    )
    check_opt_ins({"trainer": {"log_completions_hub_repo": "me/c"}}, ["trainer.log_completions_hub_repo=me/c"])
    check_opt_ins({"trainer": {"push_to_hub": True}}, ["trainer={push_to_hub: true}"])


@pytest.mark.parametrize(
    ("data", "command_line", "line"),
    [
        (
            {"trainer": {"push_to_hub": True}},
            [],
            "trainer.push_to_hub=true comes from a config file; it uploads the trained model to the Hugging Face Hub "
            "(trainer.hub_model_id) with your token, which only you may allow: add trainer.push_to_hub=true to the "
            "command line",
        ),
        (
            {"trainer": {"push_to_hub": True, "hub_model_id": "them/m"}},
            ["trainer.push_to_hub=true"],
            "trainer.hub_model_id=them/m comes from a config file; with trainer.push_to_hub=true it names where your "
            "model is uploaded: give it on the command line (trainer.hub_model_id=<your repository>)",
        ),
        (
            {"trainer": {"log_completions_hub_repo": "them/c"}},
            ["trainer.log_completions_hub_repo=me/c"],
            "trainer.log_completions_hub_repo=them/c comes from a config file; it uploads the run's prompts and "
            "completions to that Hugging Face Hub repository with your token, which only you may allow: add "
            "trainer.log_completions_hub_repo=<repository> to the command line",
        ),
        (
            {"model": {"trust_remote_code": True}},
            ["model.trust_remote_code=false"],
            "model.trust_remote_code=true comes from a config file; it lets the model's folder run its own Python, "
            "which only you may allow: add model.trust_remote_code=true to the command line (only for a model you "
            "trust)",
        ),
    ],
)
def test_a_switch_from_a_file_is_refused_with_the_override_that_allows_it(data, command_line, line):
    with pytest.raises(ConfigError) as refused:
        check_opt_ins(data, command_line)
    assert str(refused.value) == line


def test_a_sweep_file_param_is_refused_with_the_override_that_allows_it():
    assert sweep_param_refusal("trainer.push_to_hub") == (
        "hydra.sweeper.params.trainer.push_to_hub: a sweep file may not upload the trained model to the Hugging Face "
        "Hub; only you may allow it: add trainer.push_to_hub=true to the command line"
    )
    assert sweep_param_refusal("+model.trust_remote_code").endswith(
        "add model.trust_remote_code=true to the command line (only for a model you trust)"
    )


@pytest.mark.parametrize(
    "address",
    ["http://127.0.0.1:8000", "http://localhost:8000", "http://0.0.0.0:8000", "http://[::1]:8000", "127.0.0.2"],
)
def test_a_server_on_this_machine_may_come_from_a_file(address):
    check_opt_ins({"rollout": {"server_base_url": address}, "trainer": {"vllm_server_host": "localhost"}}, [])


@pytest.mark.parametrize(
    ("key", "address"),
    [
        ("rollout.server_base_url", "http://gpu-node.example:8000"),
        ("rollout.server_base_url", "http://127.0.0.1.example.com:8000"),  # a name that only starts like loopback
        ("trainer.vllm_server_base_url", "http://10.0.0.7:8000"),
        ("trainer.vllm_server_host", "203.0.113.9"),
    ],
)
def test_a_server_elsewhere_comes_only_from_the_command_line(key, address):
    group, name = key.split(".")
    data = {group: {name: address}}
    with pytest.raises(ConfigError) as refused:
        check_opt_ins(data, [])
    assert str(refused.value) == (
        f"{key}={address} comes from a config file; the run would send its prompts and the policy's weights to that "
        f"server: another machine's address is yours to name, on the command line ({key}=<your server>)"
    )
    check_opt_ins(data, [f"{key}={address}"])
