"""align_kit.experiment.environment_reads: where a config reads the environment, and which of those reads it keeps."""

from __future__ import annotations

import pytest

from align_kit.core.errors import ConfigError
from align_kit.experiment.environment_reads import check_environment_reads, environment_reads, shipped_reads

SHIPPED_CACHE = "${oc.env:ALIGN_KIT_CACHE,${oc.env:HOME}/.cache/align_kit}"  # conf/train.yaml's paths.cache_dir


def test_reads_are_found_at_any_depth_and_in_lists_and_nothing_else():
    raw = {
        "a": "${oc.env:X}",
        "b": {"c": ["plain", "${ oc.env :Y}"], "d": "${oc.decode:'1'}"},
        "e": "${oc.create:{k: 1}}",
        "f": "${seed}",
        "g": "oc.env:X",  # no interpolation
        "h": 3,
        "i": "${oc.select:a,1}",
    }
    assert environment_reads(raw) == {
        "a": "${oc.env:X}",
        "b.c[1]": "${ oc.env :Y}",
        "b.d": "${oc.decode:'1'}",
        "e": "${oc.create:{k: 1}}",
    }


def test_the_shipped_config_reads_the_cache_folder_only():
    assert shipped_reads() == {"paths.cache_dir": SHIPPED_CACHE}


def test_the_shipped_read_and_a_typed_one_are_kept():
    raw = {"paths": {"cache_dir": SHIPPED_CACHE}, "logger": {"project": "${oc.env:USER}"}}
    check_environment_reads(raw, ["logger.project=${oc.env:USER}"])
    # a node given whole on the command line holds its reads
    check_environment_reads({"logger": {"project": "${oc.env:USER}"}}, ["+logger={project: '${oc.env:USER}'}"])
    # Hydra's records of the command line hold its text
    check_environment_reads(
        {"hydra": {"overrides": {"task": ["a=${oc.env:X}"]}, "job": {"override_dirname": "a=${oc.env:X}"}}}, []
    )


@pytest.mark.parametrize(
    ("raw", "command_line", "line"),
    [
        (
            {"logger": {"project": "${oc.env:WANDB_API_KEY}"}},
            [],
            "logger.project=${oc.env:WANDB_API_KEY} comes from a config file; a shared file may not use ${oc.env:...}",
        ),
        # the shipped key with another value
        ({"paths": {"cache_dir": "${oc.env:HF_TOKEN}"}}, [], "paths.cache_dir=${oc.env:HF_TOKEN} comes from"),
        # the command line sets another key, or the same key without a read
        ({"logger": {"project": "${oc.env:X}"}}, ["logger.entity=${oc.env:X}"], "logger.project=${oc.env:X}"),
        ({"logger": {"project_x": "${oc.env:X}"}}, ["logger.project=${oc.env:X}"], "logger.project_x="),
        ({"hydra": {"run": {"dir": "out/${oc.env:X}"}}}, [], "hydra.run.dir=out/${oc.env:X} comes from"),
        (
            {"a": "${oc.decode:'x'}"},
            [],
            "a=${oc.decode:'x'} comes from a config file; a shared file may not use ${oc.decode",
        ),
    ],
)
def test_a_read_from_a_file_is_refused_naming_its_key(raw, command_line, line):
    with pytest.raises(ConfigError) as refused:
        check_environment_reads(raw, command_line)
    assert str(refused.value).startswith(line)
