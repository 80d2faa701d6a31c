"""The configs ship inside the package: a wheel installed in a fresh venv (not editable) works from any folder.

The fresh venv gets no downloads: its own site-packages holds only the wheel, and a .pth line puts the shared venv's
site-packages (torch, TRL, Hydra) after it on sys.path. A .pth inside an added folder is not run, so the shared
venv's editable align_kit stays invisible and `import align_kit` must find the wheel's copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from align_kit import PROJECT_ROOT
from tests.conftest import FAST_POLICY

SOURCE = ("pyproject.toml", "README.md", "align_kit", "conf", "recipes", "sweeps")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv holding the built wheel; returns its bin/ folder."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"  # a copy, so the build leaves nothing in the checkout
    source.mkdir()
    for name in SOURCE:
        path = PROJECT_ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", str(source), "--no-deps", "--no-build-isolation", "-w", str(root / "dist")], check=True
    )
    venv = root / "venv"
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    wheel = next((root / "dist").glob("align_kit-*.whl"))
    # Installed before the .pth exists: pip must not see the shared venv's align_kit as already there.
    install = [*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps", "--no-index", str(wheel)]
    subprocess.run(install, check=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    Path(purelib, "shared_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def run_in(folder: Path, *command: str, cache: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(OMP_NUM_THREADS="1", WANDB_SILENT="true", WANDB_MODE="offline")
    if cache is not None:
        env["ALIGN_KIT_CACHE"] = str(cache)
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)


COMPOSE_ALL = """
import json, sys
import align_kit
from align_kit.experiment.compose import compose
conf = align_kit.CONF_DIR
recipes = sorted(str(p.relative_to(conf / "recipe").with_suffix("")) for p in (conf / "recipe").rglob("*.yaml"))
sweeps = sorted(p.stem for p in (conf / "sweep").glob("*.yaml"))
out = {"conf": str(conf), "package": align_kit.__file__, "recipes": {}, "sweeps": {}}
for name in recipes:
    out["recipes"][name] = compose([f"recipe={name}"]).trainer.get("learning_rate")
for name in sweeps:
    out["sweeps"][name] = compose([f"sweep={name}"]).trainer.get("max_steps")
print(json.dumps(out))
"""


def source_value(path: Path, key: str):
    return OmegaConf.select(OmegaConf.load(path), key)


@pytest.mark.slow
def test_wheel_composes_every_recipe_and_sweep_from_any_folder(installed, tmp_path):
    result = run_in(tmp_path, str(installed / "python"), "-c", COMPOSE_ALL)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.splitlines()[-1])
    venv = installed.parent
    assert Path(out["package"]).is_relative_to(venv) and Path(out["conf"]).is_relative_to(venv)
    assert not Path(out["conf"]).is_symlink()
    # Every file of the source folders, and its own values (read here straight from the YAML).
    recipes = PROJECT_ROOT / "recipes"
    expected_recipes = {str(p.relative_to(recipes).with_suffix("")): p for p in recipes.rglob("*.yaml")}
    assert sorted(out["recipes"]) == sorted(expected_recipes)
    for name, path in expected_recipes.items():
        if source_value(path, "trainer.learning_rate") is not None:
            assert out["recipes"][name] == source_value(path, "trainer.learning_rate"), name
    expected_sweeps = {p.stem: p for p in (PROJECT_ROOT / "sweeps").glob("*.yaml")}
    assert sorted(out["sweeps"]) == sorted(expected_sweeps)
    for name, path in expected_sweeps.items():
        if source_value(path, "trainer.max_steps") is not None:
            assert out["sweeps"][name] == source_value(path, "trainer.max_steps"), name


@pytest.mark.slow
def test_wheel_sweep_cfg_job_and_a_user_config_dir(installed, tmp_path):
    result = run_in(tmp_path, str(installed / "align-kit"), "sweep", "clip_higher", "--cfg", "job")
    assert result.returncode == 0, result.stderr[-3000:]
    job = OmegaConf.create(result.stdout)
    assert job.trainer.max_steps == 160 and job.clip.eps_high == 0.28  # sweeps/clip_higher.yaml, conf/clip
    assert job.task.careful_share == 0.08  # the sweep selects task=two_style and sets its rare careful style
    # A user's own folder: a new clip node and a sweep using it, reached with --config-dir.
    mine = tmp_path / "my_conf"
    (mine / "clip").mkdir(parents=True)
    (mine / "sweep").mkdir()
    (mine / "clip" / "wide.yaml").write_text(
        "_target_: align_kit.components.clip.TokenClip\neps_low: 0.2\neps_high: 0.35\n"
    )
    (mine / "sweep" / "wide_seeds.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /clip: wide\nhydra:\n  sweeper:\n    params:\n      seed: 1,2\n"
    )
    result = run_in(
        tmp_path, str(installed / "align-kit"), "sweep", "wide_seeds", "--config-dir", "my_conf", "--cfg", "job"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert OmegaConf.create(result.stdout).clip.eps_high == 0.35


@pytest.mark.slow
def test_wheel_trains_and_compares_from_any_folder(installed, tmp_path):
    cache = tmp_path / "cache"
    run_dir = tmp_path / "run"
    result = run_in(
        tmp_path,
        str(installed / "align-kit"),
        "train",
        *FAST_POLICY,
        "trainer.max_steps=2",
        "trainer.save_strategy=no",
        "logger=none",
        f"hydra.run.dir={run_dir}",
        cache=cache,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 2
    result = run_in(tmp_path, str(installed / "align-kit"), "compare", str(run_dir), "--out", str(tmp_path / "cmp"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "cmp" / "report.md").is_file()
