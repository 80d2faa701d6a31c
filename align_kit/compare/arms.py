"""Arms: runs that differ only by seed.

Runs are grouped by every config key and node choice that differs between them. An arm is named by the differing
node choices (`clip=clip_higher`) plus the differing keys those choices do not determine (`clip.eps_high=0.28` when
two runs share `clip=clip_higher` but not eps_high). Arms keep the order of their first run, so the first input
(job 0 of a sweep) is the baseline arm. A key that equals the run's seed in every run (`reward.coin_flip.seed:
${seed}`) follows the seed and is aggregated over with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from align_kit.compare.run_record import Run

UNSET = "unset"
# Keys that change between runs without changing what is trained: the seed (aggregated over), where outputs go,
# how the run is logged, and what a run recorded about itself (`policy.*`, W&B's `_wandb`).
IGNORED_KEYS = frozenset({"seed"})
IGNORED_PREFIXES = ("paths.", "hydra.", "logger.", "policy.", "_")
IGNORED_LEAVES = frozenset({"output_dir", "run_dir", "run_name", "logging_dir"})
# Choice groups that say how runs were launched or logged, not what they trained.
IGNORED_CHOICES = frozenset({"logger", "sweep"})


@dataclass
class Arm:
    name: str
    runs: list[Run] = field(default_factory=list)

    @property
    def seeds(self) -> list[Any]:
        return [run.seed for run in self.runs]


def is_experiment_key(key: str) -> bool:
    return (
        key not in IGNORED_KEYS
        and not key.startswith(IGNORED_PREFIXES)
        and key.rsplit(".", 1)[-1] not in IGNORED_LEAVES
    )


def _shown(mapping: dict[str, Any], key: str) -> str:
    return str(mapping.get(key, UNSET))


def _differing(mappings: list[dict[str, Any]], keep: Callable[[str], bool]) -> list[str]:
    keys = {key for mapping in mappings for key in mapping if keep(key)}
    return sorted(key for key in keys if len({_shown(mapping, key) for mapping in mappings}) > 1)


def _follows_seed(runs: list[Run], key: str) -> bool:
    return all(run.seed is not None and _shown(run.config, key) == str(run.seed) for run in runs)


def _choices_of(run: Run, choice_groups: list[str]) -> tuple[str, ...]:
    return tuple(_shown(run.choices, group) for group in choice_groups)


def arm_keys(runs: list[Run]) -> tuple[list[str], list[str], list[str]]:
    """What defines an arm: (config groups whose node differs, config keys that differ other than by seed, those
    of these keys a node choice does not already determine: the ones an arm's name shows)."""
    choice_groups = _differing([run.choices for run in runs], lambda group: group not in IGNORED_CHOICES)
    config_keys = [
        key for key in _differing([run.config for run in runs], is_experiment_key) if not _follows_seed(runs, key)
    ]

    def determined_by_choices(key: str) -> bool:
        values_per_choice: dict[tuple[str, ...], set[str]] = {}
        for run in runs:
            values_per_choice.setdefault(_choices_of(run, choice_groups), set()).add(_shown(run.config, key))
        return all(len(values) == 1 for values in values_per_choice.values())

    return choice_groups, config_keys, [key for key in config_keys if not determined_by_choices(key)]


def group_into_arms(runs: list[Run]) -> list[Arm]:
    choice_groups, config_keys, named_keys = arm_keys(runs)
    arms: dict[tuple, Arm] = {}
    for run in runs:
        choices = _choices_of(run, choice_groups)
        identity = (choices, tuple(_shown(run.config, key) for key in config_keys))
        if identity not in arms:
            parts = [f"{group}={node}" for group, node in zip(choice_groups, choices, strict=True)]
            parts += [f"{key}={_shown(run.config, key)}" for key in named_keys]
            arms[identity] = Arm(", ".join(parts) or "all runs")
        arms[identity].runs.append(run)
    return list(arms.values())


def drop_duplicate_seeds(arms: list[Arm]) -> list[str]:
    """Two runs of one arm with the same seed would count as two seeds (a rerun job, or one run copied), shrinking
    the spread and inflating n. The first run (input order) is kept, the others left out with a warning."""
    warnings = []
    for arm in arms:
        first: dict[Any, Run] = {}
        kept = []
        for run in arm.runs:
            if run.seed is not None and run.seed in first:
                warnings.append(
                    f"warning: duplicate (arm, seed): arm {arm.name!r} has seed {run.seed} in {first[run.seed].label} "
                    f"and in {run.label}; counted once, {run.label} left out"
                )
                continue
            first.setdefault(run.seed, run)
            kept.append(run)
        arm.runs = kept
    return warnings
