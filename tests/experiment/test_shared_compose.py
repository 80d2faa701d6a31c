"""A sweep's jobs composed by shape (align_kit.experiment.shared_compose) equal Hydra's full composition of each job:
the config and the `hydra` node a job reads, job by job, over a mixed sweep."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from align_kit.experiment import shared_compose
from align_kit.experiment.compose import compose
from align_kit.experiment.shared_compose import SweepComposer
from align_kit.runs.preflight import sweep_jobs

# A --config-dir folder: a sweep file (a group default, sweeper params, an interpolation), a clip node of the
# user's own (an interpolated value) and a group of its own.
MIXED_FILES = {
    "sweep/mixed.yaml": """
        # @package _global_
        defaults:
          - override /kl: constant
        hydra:
          sweeper:
            params:
              clip: symmetric,wide
        trainer:
          logging_steps: ${seed}
    """,
    "clip/wide.yaml": """
        _target_: align_kit.components.clip.TokenClip
        eps_low: 0.2
        eps_high: ${oc.select:clip.eps_wide,0.35}
    """,
    "clip/broken.yaml": """
        _target_: align_kit.components.clip.TokenClip
        eps_low: 0.2
        eps_high: -1.0
    """,
    "extra/one.yaml": """
        value: 1
    """,
}


def mixed_config_dir(folder: Path) -> str:
    for name, text in MIXED_FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    return str(folder)


def job_view(cfg) -> dict:
    """What a job reads: its config (as written and resolved, struct as Hydra leaves it) and its `hydra` node."""
    hydra = HydraConfig.get()
    return {
        "config": OmegaConf.to_container(cfg, resolve=False),
        "resolved": OmegaConf.to_container(cfg, resolve=True),
        "struct": (OmegaConf.is_struct(cfg), OmegaConf.is_struct(cfg.trainer)),
        "hydra": OmegaConf.to_container(hydra, resolve=False),
        "hydra parts": {
            "task": list(hydra.overrides.task),
            "hydra overrides": list(hydra.overrides.hydra),
            "num": hydra.job.num,
            "override_dirname": hydra.job.override_dirname,
            "sweep": (hydra.sweep.dir, hydra.sweep.subdir),
            "output_dir": hydra.runtime.output_dir,
            "choices": OmegaConf.to_container(hydra.runtime.choices),
        },
    }


@pytest.fixture
def counted(monkeypatch):
    """How often the composer asks Hydra for a composition: of a shape, and of a whole job (its fallback)."""
    calls = {"shape": 0, "whole job": 0}

    def counting(name, original):
        def call(*args, **kwargs):
            calls[name] += 1
            return original(*args, **kwargs)

        return call

    monkeypatch.setattr(shared_compose, "compose_with_hydra", counting("shape", shared_compose.compose_with_hydra))
    monkeypatch.setattr(shared_compose, "compose", counting("whole job", shared_compose.compose))
    return calls


@pytest.mark.parametrize(
    ("command", "shapes"),
    [
        # clip from the sweep file (a group default of the user's folder among them) x a value sweep
        (["sweep=mixed", "trainer.learning_rate=1e-5,3e-5"], 2),
        # a recipe, a group of the user's added (+), a group removed (~), a forced key, a Hydra override
        (
            [
                "recipe=dapo",
                "+extra=one",
                "~kl",
                "++trainer.max_steps=2",
                "seed=3,4",
                "hydra.job.config.override_dirname.exclude_keys=[]",
            ],
            1,
        ),
    ],
)
def test_every_job_equals_hydras_own_composition(command, shapes, tmp_path, counted):
    config_dir = mixed_config_dir(tmp_path / "conf")
    command = [*command, f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    jobs = sweep_jobs(command, config_dir)
    counted.update({"shape": 0, "whole job": 0})
    composer = SweepComposer(config_dir)
    for index, job in enumerate(jobs):
        shared = job_view(composer.compose(job, index))
        full = job_view(compose(job, index, config_dir))
        assert shared == full, job
        assert shared["hydra parts"]["num"] == index
        assert shared["hydra parts"]["output_dir"] == str(tmp_path / "sweep" / str(index))
        assert shared["hydra parts"]["task"] == [o for o in job if not o.startswith("hydra.")]
    assert counted == {"shape": shapes, "whole job": 0}


def test_the_value_overrides_of_a_job_are_its_own(tmp_path):
    config_dir = mixed_config_dir(tmp_path / "conf")
    composer = SweepComposer(config_dir)
    jobs = [["sweep=mixed", "clip=wide", f"seed={seed}", "trainer.learning_rate=1e-5"] for seed in (5, 6)]
    first, second = (composer.compose(job, index) for index, job in enumerate(jobs))
    assert (first.seed, first.trainer.logging_steps, second.seed, second.trainer.logging_steps) == (5, 5, 6, 6)
    assert first.clip.eps_high == 0.35
    # Hydra's override_dirname: the task overrides sorted, `,`-joined, the seed excluded (conf/train.yaml)
    assert HydraConfig.get().job.override_dirname == "clip=wide,sweep=mixed,trainer.learning_rate=1e-5"


def test_a_job_hydra_refuses_is_refused_in_hydras_words(tmp_path, counted):
    from hydra.errors import ConfigCompositionException

    composer = SweepComposer(mixed_config_dir(tmp_path / "conf"))
    with pytest.raises(ConfigCompositionException, match="Could not override 'clip.eps_hgh'"):
        composer.compose(["clip=wide", "clip.eps_hgh=0.3"], 0)
    assert counted["whole job"] == 1
