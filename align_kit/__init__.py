"""align_kit: Hydra-configured RL post-training experiments over TRL's GRPOTrainer."""

from pathlib import Path

__version__ = "0.1.0"

# conf/, recipes/ and sweeps/ live at the repository root beside the package (editable install).
PROJECT_ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = PROJECT_ROOT / "conf"
