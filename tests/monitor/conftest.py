"""The monitor configs composed from conf/monitor/ on their own (default, strict, off)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from align_kit import CONF_DIR
from align_kit.monitor import HealthMonitorConfig


def load_config(name: str) -> HealthMonitorConfig:
    # The group option composed on its own, so the test does not depend on train.yaml's defaults list.
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        node = compose(config_name=f"monitor/{name}").monitor
    return instantiate(node, _convert_="all")


@pytest.fixture(scope="module")
def configs() -> dict[str, HealthMonitorConfig]:
    return {name: load_config(name) for name in ("default", "strict", "off")}
