"""The pre-flight (every job validated before Hydra runs any), the `_target_` allowlist, the schema
read from TRL's source, and the data readers."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from align_kit.config import compose
from align_kit.errors import ConfigError
from align_kit.plan import build_plan
from align_kit.preflight import check_command
from align_kit.schema import kind_of_annotation
from align_kit.tasks.hf_dataset import read_csv_rows, read_json_rows
from align_kit.train import component_choices
from tests.conftest import cli_env


def test_a_hostile_target_is_refused_by_the_real_command_and_the_file_is_untouched(tmp_path, cache_dir):
    victim = tmp_path / "F"
    victim.write_text("keep me\n")
    work = tmp_path / "work"
    work.mkdir()
    command = ["train", "logger=none", "logger._target_=builtins.open", f"+logger.file={victim}", "+logger.mode=w"]
    result = subprocess.run(
        [str(Path(sys.executable).parent / "align-kit"), *command],
        cwd=work,
        capture_output=True,
        text=True,
        env=cli_env(cache_dir),
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "align-kit: config error: logger._target_=builtins.open is outside align_kit; a config builds only "
        "align_kit's component classes (list your own package in train.allowed_targets=[my_package] to build its "
        "classes)"
    ]
    assert victim.read_text() == "keep me\n"
    assert list(work.iterdir()) == []


def test_every_job_of_a_sweep_is_validated_before_any_runs(tmp_path, monkeypatch, cache_dir):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ALIGN_KIT_CACHE", cache_dir)
    plans = check_command(["sweep=clip_higher"], multirun=True)
    # sweeps/clip_higher.yaml: eps_high 0.2, 0.28, 0.4 x seeds 1..5, in Hydra's order (first key outermost).
    expected = [(eps, seed) for eps in (0.2, 0.28, 0.4) for seed in (1, 2, 3, 4, 5)]
    assert [(p.grpo_kwargs["epsilon_high"], p.grpo_kwargs["seed"]) for p in plans] == expected
    assert [Path(p.grpo_kwargs["output_dir"]).name for p in plans] == [str(i) for i in range(15)]
    assert list(tmp_path.iterdir()) == []


def test_a_valid_single_run_passes_and_writes_nothing(tmp_path, monkeypatch, cache_dir):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ALIGN_KIT_CACHE", cache_dir)
    [plan] = check_command(["seed=7", "hydra.run.dir=somewhere"], multirun=False)
    assert plan.grpo_kwargs["seed"] == 7 and plan.grpo_kwargs["output_dir"] == "somewhere"
    assert list(tmp_path.iterdir()) == []


USER_REWARD = """
from dataclasses import dataclass
from align_kit.rewards.base import RewardNode

@dataclass
class Length(RewardNode):
    unit: int = 4

    def __call__(self, completions, **kwargs):
        return [0.0 for _ in completions]
"""


@pytest.fixture
def user_package(tmp_path, monkeypatch):
    package = tmp_path / "my_rewards"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "length.py").write_text(textwrap.dedent(USER_REWARD))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "+reward.length={_target_: my_rewards.length.Length, weight: 0.0, unit: 2}"


def plan_for(*overrides: str):
    return build_plan(compose(list(overrides)), component_choices(), "/tmp/align_kit_preflight")


def test_a_users_component_needs_its_module_in_the_allowlist(user_package):
    with pytest.raises(ConfigError) as refused:
        plan_for(user_package)
    assert str(refused.value).startswith("reward.length._target_=my_rewards.length.Length is outside align_kit")

    plan = plan_for(user_package, "train.allowed_targets=[my_rewards]")
    assert [spec.name for spec in plan.rewards] == ["correctness", "format", "length"]


def test_a_users_component_is_type_checked_like_ours(user_package):
    with pytest.raises(ConfigError) as refused:
        plan_for(user_package, "train.allowed_targets=[my_rewards]", "reward.length.unit=2.5")
    assert str(refused.value) == "reward.length.unit=2.5: expected an integer, got a float"


def test_an_allowlist_prefix_matches_whole_module_names_only(user_package):
    with pytest.raises(ConfigError, match="is outside align_kit"):
        plan_for(user_package, "train.allowed_targets=[my_rew]")


@pytest.mark.parametrize(
    ("annotation", "types", "choice"),
    [
        ("int | None", {"int", "none"}, None),
        ("SchedulerType | str", {"str"}, "cosine"),
        ("OptimizerNames | str", {"str"}, "adamw_torch"),
        ("dict[str, Any] | str | None", {"dict", "str", "none"}, None),
        ("list[float] | None", {"list", "none"}, None),
        ("Optional[int]", {"int", "none"}, None),
        ("Literal['a', 'b']", {"str"}, "a"),
        ("ParallelismConfig | None", {"any", "none"}, None),
    ],
)
def test_annotations_from_trls_source_become_kinds(annotation, types, choice):
    kind = kind_of_annotation(ast.parse(annotation, mode="eval").body)
    assert set(kind.types) == types
    assert (choice in kind.choices) if choice else kind.choices is None


def test_csv_values_stay_text(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text('prompt,answer\n"1,2",007\n\nx,3\n')
    assert read_csv_rows(path, "F") == [{"prompt": "1,2", "answer": "007"}, {"prompt": "x", "answer": "3"}]


def test_json_reads_an_array_or_lines(tmp_path):
    array, lines = tmp_path / "a.json", tmp_path / "l.jsonl"
    array.write_text('[{"prompt": "p", "answer": 1}]')
    lines.write_text('\ufeff{"prompt": "p", "answer": 1}\n\n{"prompt": "q", "answer": "2"}\n')
    assert read_json_rows(array, "F") == [{"prompt": "p", "answer": 1}]
    assert read_json_rows(lines, "F") == [{"prompt": "p", "answer": 1}, {"prompt": "q", "answer": "2"}]
    lines.write_text('{"prompt": "p", "answer": 1}\n{"prompt": "q" "answer": 2}\n')
    with pytest.raises(ConfigError) as refused:
        read_json_rows(lines, "F")
    assert str(refused.value) == "F line 2: not valid JSON (Expecting ',' delimiter at column 16)"
