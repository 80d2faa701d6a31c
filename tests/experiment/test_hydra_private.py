"""Hydra's private API is named in one module, align_kit.experiment.hydra_private, and what it names is Hydra's."""

from __future__ import annotations

from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.utils import get_class

from align_kit.experiment import hydra_private

PACKAGE = Path(__file__).resolve().parents[2] / "align_kit"


def test_only_hydra_private_names_hydras_private_modules():
    naming = sorted(
        str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if "hydra._internal" in path.read_text()
    )
    assert naming == ["experiment/hydra_private.py"]


def test_the_plugin_targets_name_hydras_basic_launcher_and_sweeper():
    launcher, sweeper = get_class(hydra_private.BASIC_LAUNCHER), get_class(hydra_private.BASIC_SWEEPER)
    assert issubclass(launcher, Launcher) and launcher.__name__ == "BasicLauncher"
    assert issubclass(sweeper, Sweeper) and sweeper.__name__ == "BasicSweeper"


def test_a_sweep_expands_to_the_cross_product_in_key_order():
    overrides = OverridesParser.create().parse_overrides(["seed=1,2", "clip=symmetric,clip_higher", "lr=0.1"])
    assert hydra_private.basic_sweep(overrides) == [
        ["seed=1", "clip=symmetric", "lr=0.1"],
        ["seed=1", "clip=clip_higher", "lr=0.1"],
        ["seed=2", "clip=symmetric", "lr=0.1"],
        ["seed=2", "clip=clip_higher", "lr=0.1"],
    ]
    # a later override of the same key replaces the earlier one, as a command line's replaces a sweep file's
    overrides = OverridesParser.create().parse_overrides(["seed=1,2", "seed=7"])
    assert hydra_private.basic_sweep(overrides) == [["seed=7"]]
