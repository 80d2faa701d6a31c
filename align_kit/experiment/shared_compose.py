"""The jobs of a sweep composed by shape: Hydra composes each distinct shape once, and each job is that tree with
the job's own value overrides applied, as Hydra applies them.

A job's plain value overrides (`key=value`, `++key=value` of a key that is no config group, as Hydra's own split of
overrides finds them) are applied per job by Hydra's own code, on a copy of the shape's tree, in the job's order;
Hydra applies them the same way once the defaults list is composed, so the trees are equal. Everything else is the
job's shape: the config-group choices (`clip=gspo`, `+probe=length`, `~kl`), the `hydra.*` overrides, `+key` and
`~key` (Hydra reads the tree to decide them), and whatever Hydra would refuse. The parts of the `hydra` node that
Hydra derives from a job's overrides are redone per job: `hydra.overrides.task` (in the job's order),
`hydra.job.override_dirname`, and, as for a single composition, `hydra.job.num` and the output folder. A job that
cannot be composed this way is composed by Hydra from scratch, so its error is Hydra's own, word for word.
"""

from __future__ import annotations

import pickle

from omegaconf import DictConfig, read_write

from align_kit.experiment.compose import (
    CONFIG_NAME,
    compose,
    compose_with_hydra,
    search_path,
    start_job,
    without_hydra,
)


class SweepComposer:
    """Composes the jobs of one command (`config_dir`: its `--config-dir`), each distinct shape once."""

    def __init__(self, config_dir: str | None = None):
        from hydra.core.override_parser.overrides_parser import OverridesParser

        self.config_dir = config_dir
        self._parser = OverridesParser.create()
        self._repositories: dict[tuple[str, ...], object] = {}  # by the jobs' hydra.* overrides (the search path)
        # Each shape's composed tree and that tree without `hydra`, pickled: a copy from bytes is a third of
        # OmegaConf's deepcopy, flags and node types kept.
        self._shapes: dict[tuple[str, ...], tuple[bytes, bytes]] = {}

    def compose(self, overrides: list[str], job_num: int | None = None) -> DictConfig:
        """The config `compose(overrides, job_num, config_dir)` gives, HydraConfig set the same."""
        try:
            with_hydra, cfg = self._shared(overrides)
        except Exception:  # Hydra composes the job itself, and refuses it in its own words
            return compose(overrides, job_num, self.config_dir)
        start_job(with_hydra, job_num, own=True)
        return cfg

    def _shared(self, overrides: list[str]) -> tuple[DictConfig, DictConfig]:
        """The job's composed tree, and its config without `hydra`, from its shape's."""
        from align_kit.experiment.hydra_private import apply_value_overrides, override_dirname

        parsed = self._parser.parse_overrides(overrides)
        values = self._values(parsed)
        shape = tuple(override.input_line for override in parsed if not any(override is o for o in values))
        if shape not in self._shapes:
            with_hydra = compose_with_hydra(list(shape), self.config_dir)
            self._shapes[shape] = pickle.dumps(with_hydra), pickle.dumps(without_hydra(with_hydra))
        full, app = self._shapes[shape]
        with_hydra, cfg = pickle.loads(full), pickle.loads(app)
        # Plain assignments: applied to either tree alike, as Hydra applies them to the whole one.
        apply_value_overrides(values, with_hydra)
        apply_value_overrides(values, cfg)
        task = [override for override in parsed if not override.is_hydra_override()]
        with read_write(with_hydra.hydra):
            with_hydra.hydra.overrides.task = [override.input_line for override in task]
            with_hydra.hydra.job.override_dirname = override_dirname(task, with_hydra.hydra.job.config.override_dirname)
        return with_hydra, cfg

    def _values(self, parsed: list) -> list:
        """The job's plain value overrides (`key=value`, `++key=value` of a key that is no config group), in order,
        as Hydra's loader classifies them. `+key` and `~key` stay in the shape: Hydra decides them by reading the
        tree."""
        from align_kit.experiment.hydra_private import value_overrides

        hydra_lines = tuple(override.input_line for override in parsed if override.is_hydra_override())
        if hydra_lines not in self._repositories:
            self._repositories[hydra_lines] = self._repository(list(hydra_lines))
        applied = value_overrides(self._repositories[hydra_lines], parsed)
        return [o for o in applied if not (o.is_hydra_override() or o.is_add() or o.is_delete())]

    def _repository(self, hydra_overrides: list[str]):
        from align_kit.experiment.compose import register_open_trainer_node
        from align_kit.experiment.hydra_private import job_repository

        register_open_trainer_node()
        return job_repository(search_path(self.config_dir), CONFIG_NAME, hydra_overrides)
