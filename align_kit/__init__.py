"""align_kit: Hydra-configured RL post-training experiments over TRL's GRPOTrainer."""

from pathlib import Path

__version__ = "0.1.0"

# The configs: align_kit/conf is a link to the repository's conf/ in a source checkout (an editable install) and
# a folder of copies in an installed wheel; recipes and sweeps are its `recipe` and `sweep` groups.
CONF_DIR = (Path(__file__).resolve().parent / "conf").resolve()
# The source checkout (tests, benchmarks); an installed wheel has no such folder.
PROJECT_ROOT = Path(__file__).resolve().parent.parent
