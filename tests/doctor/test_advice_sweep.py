"""The doctor's advice as a sweep file: the run's composition as the baseline, the advised changes, seeds, the
prediction; and `align-kit sweep PATH.yaml`."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from omegaconf import OmegaConf

from align_kit.core.errors import ConfigError
from align_kit.doctor.advice import Advice
from align_kit.doctor.advice_sweep import (
    DEFAULT_SEEDS,
    change_for,
    plan_sweep,
    preflight_check,
    read_composition,
    seed_plan,
    sweep_text,
)

TRUNCATED = SimpleNamespace(rule="all_truncated", metric="completions/clipped_ratio", step=3)
FILTER = Advice("overlong_filter", 1, "overlong=filter", ("all_truncated",))
LONGER = Advice("raise_max_length", 4, "trainer.max_completion_length=8", ("all_truncated",))
HARDER = Advice("harder_data", 1, "a harder task mix", ("zero_std_groups",))


def run_folder(tmp_path: Path, *overrides: str) -> Path:
    """A run folder as `align-kit train <overrides>` leaves it: its resolved config, Hydra's record of the choices."""
    from align_kit.experiment.compose import compose, compose_with_hydra, without_hydra

    config = compose(list(overrides))
    choices = OmegaConf.to_container(compose_with_hydra(list(overrides)).hydra.runtime.choices)
    folder = tmp_path / "run"
    (folder / ".hydra").mkdir(parents=True)
    (folder / "config.yaml").write_text(OmegaConf.to_yaml(without_hydra(config), resolve=True))
    (folder / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"runtime": {"choices": choices}}}))
    return folder


@pytest.fixture(scope="module")
def truncating_run(tmp_path_factory) -> Path:
    return run_folder(tmp_path_factory.mktemp("doctor_sweep"), "trainer.max_completion_length=4", "trainer.max_steps=8")


def test_the_composition_is_the_runs_choices_and_the_values_it_set(truncating_run):
    composition = read_composition(truncating_run)
    assert composition.values == {"trainer.max_completion_length": 4, "trainer.max_steps": 8}
    assert composition.choices["overlong"] == "none" and composition.choices["clip"] == "symmetric"
    assert composition.choices["reward"] == ["correctness", "format"]


def test_a_folder_that_is_no_align_kit_run_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="not an align_kit run folder"):
        read_composition(tmp_path)


def test_an_advised_change_the_run_already_has_is_no_dimension(truncating_run):
    composition = read_composition(truncating_run)
    assert change_for("overlong_filter", composition).key == "overlong"
    composition.choices["overlong"] = "filter"
    assert change_for("overlong_filter", composition) is None
    assert change_for("harder_data", composition) is None  # no single override
    assert change_for("raise_max_length", composition).advised == 8  # 2 x 4


@pytest.mark.slow
def test_the_sweep_file_puts_the_run_first_and_each_job_passes_the_preflight(truncating_run):
    plan = plan_sweep(truncating_run, [TRUNCATED], [HARDER, FILTER, LONGER], "fix_run", spread_of=lambda f, m: [])
    text = sweep_text(plan, "fix_run")
    body = yaml.safe_load(text)
    params = body["hydra"]["sweeper"]["params"]
    assert params == {"seed": "1,2,3,4,5", "overlong": "none,filter", "trainer.max_completion_length": "4,8"}
    assert body["trainer"] == {"max_steps": 8}  # the run's own value; the swept one lives in params only
    assert "--predict completions/clipped_ratio:lower" in text
    assert "harder_data" in text  # said as advice not swept
    assert text.startswith("# @package _global_\n")
    # plan_sweep ran the pre-flight on each change it kept (one seed: the seeds change no rule); one refused:
    with pytest.raises(ConfigError, match="trainer.max_completion_length"):
        preflight_check("bad", text.replace("trainer.max_completion_length: 4,8", "trainer.max_completion_length: 4,0"))


def test_a_change_the_preflight_refuses_is_skipped_and_said(truncating_run):
    def refuse_filter(name: str, text: str) -> None:
        if "overlong: none,filter" in text:
            raise ConfigError("overlong=filter: refused here")

    plan = plan_sweep(
        truncating_run, [TRUNCATED], [FILTER, LONGER], "fix", check=refuse_filter, spread_of=lambda f, m: []
    )
    assert [change.fix for change in plan.changes] == ["raise_max_length"]
    assert any("refused here" in line for line in plan.skipped)


def test_seeds_come_from_the_spread_of_the_runs_arm_or_the_stated_default(tmp_path):
    from align_kit.compare.power import seeds_needed

    seeds, how = seed_plan(tmp_path, "entropy", spread_of=lambda folder, metric: [0.1, 0.2, 0.3])
    expected = seeds_needed(0.1, math.sqrt(2) * 0.1, 0.1)  # sd of 0.1, 0.2, 0.3 is 0.1
    assert seeds == list(range(1, (expected.seeds or expected.best) + 1))
    assert "--power 0.1:0.141:0.1" in how
    seeds, how = seed_plan(tmp_path, "entropy", spread_of=lambda folder, metric: [0.4])
    assert seeds == list(range(1, DEFAULT_SEEDS + 1)) and "one run cannot give" in how


def test_a_sweep_file_runs_by_its_path_from_a_copy_named_by_its_content(tmp_path, monkeypatch):
    from align_kit.sweep import from_sweep_file

    monkeypatch.setenv("ALIGN_KIT_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "fix_run.yaml"
    path.write_text("# @package _global_\nhydra:\n  sweeper:\n    params:\n      seed: 1,2\n")
    args = from_sweep_file([str(path), "trainer.max_steps=2"])
    folder = tmp_path / "cache" / "sweep_files" / hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    assert args == ["fix_run", "--config-dir", str(folder), "trainer.max_steps=2"]
    assert (folder / "sweep" / "fix_run.yaml").read_bytes() == path.read_bytes()


@pytest.mark.parametrize(
    ("name", "message"),
    [("overlong.yaml", "a shipped sweep's"), ("missing.yaml", "no such sweep file"), ("a b.yaml", "letters, digits")],
)
def test_a_sweep_path_that_cannot_run_is_refused(tmp_path, monkeypatch, capsys, name, message):
    from align_kit.sweep import from_sweep_file

    monkeypatch.setenv("ALIGN_KIT_CACHE", str(tmp_path / "cache"))
    if name != "missing.yaml":
        (tmp_path / name).write_text("# @package _global_\n")
    with pytest.raises(SystemExit) as stopped:
        from_sweep_file([str(tmp_path / name)])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_fixes_held_back_are_not_swept_and_the_file_says_why(truncating_run):
    reason = "every completion was cut from step 1 to 8"
    held = {"overlong_filter": reason}
    plan = plan_sweep(truncating_run, [TRUNCATED], [LONGER, FILTER], "fix", spread_of=lambda f, m: [], held_back=held)
    assert [change.fix for change in plan.changes] == ["raise_max_length"]
    assert f"overlong_filter: held back: {reason}" in plan.skipped
    params = yaml.safe_load(sweep_text(plan, "fix"))["hydra"]["sweeper"]["params"]
    assert params == {"seed": "1,2,3,4,5", "trainer.max_completion_length": "4,8"}
