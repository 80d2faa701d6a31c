"""Run folders written by hand as `align-kit train` leaves them (Hydra's record, config, metrics, summary and
checkpoints), and a byte-and-mtime snapshot of a folder to prove nothing in it changed."""

from __future__ import annotations

import hashlib
import json
import struct
import zipfile
from pathlib import Path

from omegaconf import OmegaConf

from align_kit.experiment.compose import compose

# The run every resume test starts from: these overrides wrote its config.yaml.
RUN = ["logger=none", "seed=5", "trainer.max_steps=8", "trainer.save_steps=4"]


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file below `folder` (hidden ones included): content hash and modification time."""
    return {
        str(path.relative_to(folder)): (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def write_safetensors(path: Path, floats: int = 2) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [floats], "data_offsets": [0, 4 * floats]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * (4 * floats))


def write_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data.pkl", b"state")


def write_checkpoint(folder: Path, step: int) -> Path:
    checkpoint = folder / f"checkpoint-{step}"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    write_safetensors(checkpoint / "model.safetensors")
    write_zip(checkpoint / "optimizer.pt")
    write_zip(checkpoint / "scheduler.pt")
    return checkpoint


def write_run(folder: Path, overrides: list[str] = RUN, steps: tuple[int, ...] = (4, 8)) -> Path:
    """What a finished `align-kit train` leaves: Hydra's record, config.yaml, metrics, summary, checkpoints."""
    cfg = compose(overrides)
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    (folder / ".hydra" / "overrides.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(overrides)))
    (folder / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    (folder / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "loss": 0.1}) + "\n" for s in range(1, 9)))
    (folder / "summary.json").write_text(json.dumps({"steps": 8}))
    for step in steps:
        write_checkpoint(folder, step)
    return folder


def hydra_config(*overrides: str):
    """The full config (hydra node included) that Hydra hands its callbacks."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from align_kit import CONF_DIR
    from align_kit.experiment.compose import CONFIG_NAME, register_open_trainer_node

    register_open_trainer_node()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name=CONFIG_NAME, overrides=list(overrides), return_hydra_config=True)
