"""The doctor's advice as a ready experiment (`align-kit doctor RUN --sweep PATH`): a sweep file whose first arm is
the run's own composition and whose other arms are the first one or two advised changes, in the tuning order of
the policy-optimization chapter (18.3.8), with its seeds, the engagement metrics to check before judging, and the
prediction as the exact `align-kit compare --predict` line, stated in the file before anything runs.

Only an align_kit run folder can be turned into a sweep: its composition is read from the run itself (Hydra's
record of the node choices, and every value of its `config.yaml` that differs from those nodes' defaults), and each
advised change is an align_kit override. Every job the file makes is checked with the pre-flight `align-kit sweep`
runs (a change the pre-flight refuses is skipped, and the file says why)."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from align_kit.core.errors import ConfigError
from align_kit.core.run_files import CONFIG_FILE, HYDRA_RECORD, SUMMARY_FILE

DEFAULT_SEEDS = 5  # when one run cannot give the spread between seeds
MAX_ARMS = 2  # advised changes beside the baseline
# Keys that name the run rather than what it trains, or that the sweep sets itself.
NOT_COMPOSITION = ("seed", "paths.", "train.", "hydra.", "trainer.output_dir", "trainer.run_name", "logger.")
# Groups whose choice is not a component of the experiment.
NOT_SWEPT_GROUPS = ("sweep", "recipe", "trainer", "monitor", "logger")

# The direction the metric an alert read should move when the fix works, by rule.
HEALTHY_DIRECTION = {
    "entropy_collapse": "higher",
    "entropy_drop": "higher",
    "entropy_decline": "higher",
    "entropy_exploding": "lower",
    "length_near_max": "lower",
    "length_pinned": "lower",
    "all_truncated": "lower",
    "length_growth": "lower",
    "length_collapse": "higher",
    "reward_plateau": "higher",
    "reward_decline": "higher",
    "no_signal": "higher",
    "reward_collapse": "higher",
    "zero_std_groups": "lower",
    "zero_advantage": "lower",
    "grad_norm_vanishing": "higher",
    "kl_rising": "lower",
    "kl_rising_flat_reward": "lower",
    "policy_ratio_drift": "lower",
    "policy_ratio_noise": "lower",
    "clip_ratio_rising": "lower",
    "logp_mismatch": "lower",
    "sampler_gap_drift": "lower",
}
# Rules whose metric is a length the budget shapes: the truncated share is what the fixes act on.
TRUNCATION_RULES = ("length_near_max", "length_pinned", "all_truncated")
TRUNCATED_SHARE = "completions/clipped_ratio"


@dataclass(frozen=True)
class Change:
    """One advised change as a sweep dimension: `key` (a group, or a dotted value key) from `baseline` to `advised`;
    `engagement`: the metrics that show it acted."""

    fix: str
    key: str
    advised: Any
    engagement: tuple[str, ...] = ()
    group: bool = True


def _half(value: Any) -> Any:
    return float(f"{value / 2:.3g}") if isinstance(value, int | float) and value > 0 else None


def _double(value: Any) -> Any:
    return int(value) * 2 if isinstance(value, int) and value > 0 else None


def _next_eps_high(value: Any) -> Any:
    if not isinstance(value, int | float):
        return None
    return 0.28 if value < 0.28 else round(max(0.3, value + 0.05), 2)


# FIX id (align_kit/monitor/rules/fixes.py) -> the align_kit override it is, as a function of the run's value of the
# key (None: the fix is no single override, e.g. "a harder task mix", and is given as advice only).
GROUP_FIXES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "dynamic_sampling": ("sampling", "dynamic", ("sampling/kept_group_fraction", "sampling/gen_batches")),
    "gdpo": ("advantage", "gdpo", ()),
    "ngrpo": ("advantage", "ngrpo", ()),
    "overlong_filter": ("overlong", "filter", ("overlong/truncated_in_mixed_groups", TRUNCATED_SHARE)),
    "overlong_shaping": ("overlong", "soft_punish", (TRUNCATED_SHARE,)),
    "clip_higher": ("clip", "clip_higher", ("clip_ratio/high_mean", "clip_ratio/region_mean")),
    "gspo": ("clip", "gspo", ("clip_ratio/region_mean",)),
    "add_kl": ("kl", "constant", ("kl",)),
    "routing_replay": ("routing_replay", "r2", ("routing/flip_rate",)),
}
VALUE_FIXES: dict[str, tuple[str, Callable[[Any], Any], tuple[str, ...]]] = {
    "raise_eps_high": ("clip.eps_high", _next_eps_high, ("clip_ratio/high_mean",)),
    "lower_lr": ("trainer.learning_rate", _half, ("grad_norm",)),
    "raise_kl": ("kl.beta", _double, ("kl",)),
    "raise_max_length": ("trainer.max_completion_length", _double, (TRUNCATED_SHARE, "completions/mean_length")),
}


@dataclass
class Composition:
    """An align_kit run's composition: its node choices and the values it set beyond those nodes' defaults."""

    folder: Path
    choices: dict[str, Any]  # group -> node (reward: a list)
    values: dict[str, Any]  # dotted key -> value
    config: dict[str, Any]  # the run's whole config.yaml

    def value(self, key: str) -> Any:
        node: Any = self.config
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node


def _override_value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(_override_value(item) for item in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value and all(c.isalnum() or c in "_-./" for c in value) else repr(value)
    return repr(value) if isinstance(value, float) else str(value)


def _leaves(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, Mapping) and tree:
        found: dict[str, Any] = {}
        for key, value in tree.items():
            found.update(_leaves(value, f"{prefix}{key}."))
        return found
    return {prefix[:-1]: tree}


def is_align_kit_run(folder: Path) -> bool:
    """A folder with the config an align_kit run resolved, and the record of its node choices (Hydra's, or the
    summary's when the run was started in-process)."""
    recorded = (folder / HYDRA_RECORD / "hydra.yaml").is_file() or (folder / SUMMARY_FILE).is_file()
    return (folder / CONFIG_FILE).is_file() and recorded


def _recorded_choices(folder: Path) -> dict[str, Any]:
    hydra_file = folder / HYDRA_RECORD / "hydra.yaml"
    if hydra_file.is_file():
        hydra = yaml.safe_load(hydra_file.read_text(encoding="utf-8")) or {}
        return ((hydra.get("hydra") or {}).get("runtime") or {}).get("choices") or {}
    summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    return summary.get("choices") or {} if isinstance(summary, dict) else {}


def read_composition(folder: Path, compose: Callable[[list[str]], dict] | None = None) -> Composition:
    """The composition of the align_kit run in `folder`. `compose`: overrides -> the resolved config they give
    (align_kit's own composition by default; a test may pass another)."""
    if not is_align_kit_run(folder):
        raise ConfigError(
            f"{folder}: not an align_kit run folder (no {CONFIG_FILE} with {HYDRA_RECORD}/hydra.yaml or "
            f"{SUMMARY_FILE} beside it); "
            "--sweep writes a sweep only for an align_kit run"
        )
    config = yaml.safe_load((folder / CONFIG_FILE).read_text(encoding="utf-8")) or {}
    runtime = _recorded_choices(folder)
    choices: dict[str, Any] = {
        group: node
        for group, node in runtime.items()
        if node and "/" not in group and group not in NOT_SWEPT_GROUPS and group != "reward"
    }
    if isinstance(config.get("reward"), Mapping):
        choices["reward"] = list(config["reward"])
    if compose is None:
        compose = _compose_resolved
    defaults = _leaves(compose([f"{g}={_override_value(n)}" for g, n in choices.items()]))
    values = {
        key: value
        for key, value in _leaves(config).items()
        if not key.startswith(NOT_COMPOSITION) and key not in NOT_COMPOSITION and defaults.get(key, object()) != value
    }
    return Composition(folder, choices, values, config)


def _compose_resolved(overrides: list[str]) -> dict:
    from omegaconf import OmegaConf

    from align_kit.experiment.compose import compose, without_hydra

    return OmegaConf.to_container(without_hydra(compose(overrides)), resolve=True)


@dataclass
class Plan:
    composition: Composition
    changes: list[Change]
    skipped: list[str]  # advice lines that are no single override, or that the pre-flight refused, and why
    seeds: list[int]
    seeds_how: str
    metric: str
    direction: str
    rule: str
    engagement: list[str] = field(default_factory=list)


def change_for(fix: str, composition: Composition) -> Change | None:
    """The advised change `fix` as a sweep dimension for this run, or None when it is no single override or the
    run already has it."""
    if fix in GROUP_FIXES:
        group, node, engagement = GROUP_FIXES[fix]
        return None if composition.choices.get(group) == node else Change(fix, group, node, engagement)
    if fix in VALUE_FIXES:
        key, next_value, engagement = VALUE_FIXES[fix]
        advised = next_value(composition.value(key))
        if advised is None or advised == composition.value(key):
            return None
        return Change(fix, key, advised, engagement, group=False)
    return None


def baseline_of(change: Change, composition: Composition) -> Any:
    return composition.choices.get(change.key) if change.group else composition.value(change.key)


def prediction_for(alert: Any) -> tuple[str, str]:
    """The metric the fixes should move and the direction, from the alert the advice answers."""
    direction = HEALTHY_DIRECTION.get(alert.rule, "lower")
    metric = TRUNCATED_SHARE if alert.rule in TRUNCATION_RULES else alert.metric
    return metric, direction


def seed_plan(
    folder: Path, metric: str, spread_of: Callable[[Path, str], list[float]] | None = None
) -> tuple[list[int], str]:
    """Seeds for the sweep: sized by compare's power analysis from the spread between seeds of this run's own arm
    (sibling runs of the same sweep), for a change of one such spread; the stated default when there is no such
    spread (a single run cannot give it)."""
    from align_kit.compare.power import seeds_needed

    values = (spread_of or arm_values)(folder, metric)
    if len(values) >= 2 and statistics.stdev(values) > 0:
        sd_arm = statistics.stdev(values)
        # Independent arms (sd of the paired difference sqrt(2) sd_arm), an effect of one sd between seeds.
        answer = seeds_needed(sd_arm, math.sqrt(2) * sd_arm, sd_arm)
        count = answer.seeds or answer.best
        how = (
            f"{count} seeds: compare's power for a change of one seed-to-seed sd of {metric}'s AUC/span "
            f"({sd_arm:.3g}, from {len(values)} seeds of this run's arm): "
            f"align-kit compare --power {sd_arm:.3g}:{math.sqrt(2) * sd_arm:.3g}:{sd_arm:.3g}"
        )
        if answer.seeds is None:
            how += f" (no n up to 100 reaches 80 % power; the best, {count}, reaches {answer.power:.0%})"
    else:
        count = DEFAULT_SEEDS
        how = (
            f"{count} seeds, the stated default: one run cannot give the spread between seeds; after the sweep, "
            f"`align-kit compare <sweep folder> --power {metric}` sizes a confirmation from its own seeds"
        )
    return list(range(1, count + 1)), how


def arm_values(folder: Path, metric: str) -> list[float]:
    """AUC/span of `metric` in every run of the folder's parent that belongs to the same arm as `folder`."""
    from align_kit.compare.arms import group_into_arms
    from align_kit.compare.runs import find_run_folders, load_run_folder
    from align_kit.compare.statistics import auc_per_step

    try:
        runs = [load_run_folder(path, [metric]) for path in find_run_folders(folder.parent)]
    except Exception:  # siblings that cannot be read only cost the sizing: the default is stated instead
        return []
    for arm in group_into_arms(runs):
        if any(run.folder == folder.resolve() for run in arm.runs):
            return [auc_per_step(run.series[metric]) for run in arm.runs if metric in run.series]
    return []


def plan_sweep(
    folder: Path,
    alerts: list[Any],
    advice: list[Any],
    name: str,
    compose: Callable[[list[str]], dict] | None = None,
    check: Callable[[str, str], None] | None = None,
    spread_of: Callable[[Path, str], list[float]] | None = None,
    held_back: Mapping[str, str] | None = None,
) -> Plan:
    """The sweep for the align_kit run in `folder`: `alerts` the alerts that count (timeline order), `advice` the
    doctor's lines (align_kit.doctor.advice.Advice, in 18.3.8's order). `check(name, text)` raises ConfigError when
    the sweep file `text` saved as sweep/`name`.yaml makes a job the pre-flight refuses (`preflight_check`).
    `held_back`: fixes not swept, each with the reason the file states (they cannot act on this run yet)."""
    composition = read_composition(folder, compose)
    check = check or preflight_check
    chosen: list[Change] = []
    skipped: list[str] = []
    target: str | None = None  # the rule the arms answer: the first swept change's first; the others must answer it
    for line in advice:
        if target is not None and target not in line.rules:
            continue
        if line.fix in (held_back or {}):
            skipped.append(f"{line.fix}: held back: {held_back[line.fix]}")
            continue
        change = change_for(line.fix, composition)
        if change is None:
            skipped.append(f"{line.fix}: {line.text} (not a single override of this run: advice only)")
            continue
        if len(chosen) >= MAX_ARMS:
            break
        trial = [*chosen, change]
        try:
            check(name, sweep_text(_plan(composition, trial, [], [1], "", alerts, advice), name))
        except ConfigError as error:
            skipped.append(f"{line.fix}: {_override_value(change.advised)} for {change.key} refused: {error}")
            continue
        chosen = trial
        target = target or line.rules[0]
    if not chosen:
        raise ConfigError(
            f"{folder}: none of the advised changes is an override the pre-flight accepts for this run "
            f"({'; '.join(skipped) or 'no advice'}); no sweep written"
        )
    plan = _plan(composition, chosen, skipped, [], "", alerts, advice)
    plan.seeds, plan.seeds_how = seed_plan(folder, plan.metric, spread_of)
    return plan


def _plan(composition, changes, skipped, seeds, how, alerts, advice) -> Plan:
    # The alert the prediction is about: the first that every swept change answers.
    rules_of = {line.fix: line.rules for line in advice}
    answered = [alert for alert in alerts if all(alert.rule in rules_of.get(c.fix, ()) for c in changes)]
    alert = (answered or alerts)[0]
    metric, direction = prediction_for(alert)
    engagement = list(dict.fromkeys(m for change in changes for m in change.engagement if m != metric))
    return Plan(composition, changes, skipped, seeds, how, metric, direction, alert.rule, engagement)


def _nested(values: Mapping[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for key, value in values.items():
        node = tree
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return tree


def _dimensions(plan: Plan) -> dict[str, list[Any]]:
    """Swept key -> its values, the run's own first (compare takes the first arm as the baseline)."""
    dims: dict[str, list[Any]] = {}
    for change in plan.changes:
        values = dims.setdefault(change.key, [baseline_of(change, plan.composition)])
        if change.advised not in values:
            values.append(change.advised)
    return dims


def sweep_text(plan: Plan, name: str, path: str | None = None) -> str:
    """The sweep file (`path`: where it is written, for the commands it states; `<name>.yaml` by default)."""
    dims = _dimensions(plan)
    composition = plan.composition
    fixed_choices = {g: n for g, n in composition.choices.items() if g not in dims}
    values = {
        key: value
        for key, value in composition.values.items()
        if key not in dims and not any(key.startswith(f"{group}.") for group in dims)
    }
    dropped = sorted(key for key in composition.values if any(key.startswith(f"{group}.") for group in dims))
    arms = math.prod(len(v) for v in dims.values())
    compare_metrics = ",".join(dict.fromkeys([plan.metric, *plan.engagement]))
    folder = f"outputs/sweeps/{name}"
    lines = [
        "# @package _global_",
        f"# Written by `align-kit doctor {composition.folder} --sweep`: the doctor's advice for this run as an",
        "# experiment. Arms: the run's own composition first (the baseline), then the advised changes in the tuning",
        "# order of 18.3.8 (data > clipping > KL and learning rate > sampling):",
        *[f"#   {change.fix}: {change.key}={_override_value(change.advised)}" for change in plan.changes],
        f"#   ({arms} arms: every combination of the swept values below)",
        *(["# Advice not swept:"] + [f"#   {line}" for line in plan.skipped] if plan.skipped else []),
        *(
            [
                "# The run's own values of the swept groups are left out (their nodes' defaults apply): "
                + ", ".join(dropped)
            ]
            if dropped
            else []
        ),
        f"# Seeds: {plan.seeds_how}.",
        f"# Before judging, check that each change engaged: {', '.join(plan.engagement) or plan.metric} in the advised "
        "arms against the baseline (a fix that did not act cannot be judged by its outcome).",
        f"# Prediction ({plan.rule} read {plan.metric}): each advised arm moves it {plan.direction} than the baseline.",
        "# Commit this file before running it; then:",
        f"#   align-kit sweep {path or name + '.yaml'} hydra.sweep.dir={folder}",
        f"#   align-kit compare {folder} --metrics {compare_metrics} --predict {plan.metric}:{plan.direction}",
    ]
    body: dict[str, Any] = {}
    if fixed_choices:
        body["defaults"] = [{f"override /{group}": node} for group, node in fixed_choices.items()]
    body.update(_nested(values))
    params = {"seed": ",".join(str(seed) for seed in plan.seeds) or "1"}
    params.update({key: ",".join(_override_value(v) for v in dims[key]) for key in dims})
    body["hydra"] = {"sweeper": {"params": params}}
    wrapped = [part for line in lines for part in _wrap_comment(line)]
    return "\n".join(wrapped) + "\n" + yaml.safe_dump(body, sort_keys=False, default_flow_style=False, width=1000)


def _wrap_comment(line: str, width: int = 118) -> list[str]:
    """A long comment line as several (commands, which a user copies whole, are left as they are)."""
    import textwrap

    if len(line) <= width or line.startswith("#   align-kit"):
        return [line]
    indent = "#   " if line.startswith("#   ") else "# "
    return textwrap.wrap(line[len(indent) :], width, initial_indent=indent, subsequent_indent=indent)


def preflight_check(name: str, text: str) -> None:
    """The pre-flight `align-kit sweep` runs, on `text` saved as sweep/`name`.yaml in a scratch config folder."""
    import tempfile

    from align_kit.runs.preflight import check_command

    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "sweep").mkdir()
        (Path(scratch) / "sweep" / f"{name}.yaml").write_text(text, encoding="utf-8")
        check_command([f"sweep={name}"], True, scratch)


def check_sweep_target(path: Path, inputs: list[str], force: bool, follow: bool) -> None:
    """`--sweep PATH` before any log is read: one run, a usable file name, nothing overwritten unasked."""
    from align_kit.doctor.history import DoctorInputError
    from align_kit.runs.sweep_file_path import name_problem

    if follow:
        raise DoctorInputError("--sweep PATH is not taken with --follow: run the doctor on the finished run")
    if len(inputs) != 1:
        raise DoctorInputError(f"--sweep PATH writes a sweep for one run; got {len(inputs)} PATHs (name one)")
    problem = name_problem(path)
    if problem:
        raise DoctorInputError(f"--sweep {problem}")
    if path.exists() and not path.is_file():
        raise DoctorInputError(f"--sweep {path}: exists and is not a file; name a new .yaml file")
    if path.exists() and not force:
        raise DoctorInputError(f"--sweep {path}: exists; pass --force to overwrite it, or name another file")
    if not path.parent.is_dir():
        raise DoctorInputError(f"--sweep {path}: its folder {path.parent} does not exist")


def write_sweep(path: Path, run_path: str, diagnoses: list[Any], force: bool) -> str:
    """Write the sweep for the one diagnosed run and say so in one line, or say in one line why none was written."""
    import os
    import tempfile

    from align_kit.doctor.budget_first import HELD_BACK, cut_from_the_start, held_back_reason
    from align_kit.doctor.samples import run_folder_of

    if len(diagnoses) != 1:
        return f"sweep: none written: {run_path} holds {len(diagnoses)} runs; name one run folder"
    diagnosis = diagnoses[0]
    folder = run_folder_of(Path(diagnosis.history.source))
    framework = diagnosis.history.framework
    if framework != "align_kit" or folder is None or not is_align_kit_run(folder):
        return (
            f"sweep: none written: {run_path} is a {framework} run, and a sweep file needs an align_kit run's "
            f"composition to start from; the advice above is in {framework}'s terms"
        )
    if not diagnosis.counted or not diagnosis.advice:
        return "sweep: none written: nothing fired that an advised change answers"
    stretch = cut_from_the_start(diagnosis.history)
    held_back = dict.fromkeys(HELD_BACK, held_back_reason(stretch)) if stretch else {}
    try:
        plan = plan_sweep(folder, diagnosis.counted, diagnosis.advice, path.stem, held_back=held_back)
    except ConfigError as error:
        return f"sweep: none written: {error}"
    text = sweep_text(plan, path.stem, str(path))
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    if not force and path.exists():  # appeared while the doctor read the logs
        os.unlink(temporary)
        return f"sweep: none written: {path} appeared meanwhile; pass --force to overwrite it"
    os.replace(temporary, path)
    arms = math.prod(len(values) for values in _dimensions(plan).values())
    return (
        f"sweep: wrote {path} ({arms} arms x {len(plan.seeds)} seeds; prediction {plan.metric}:{plan.direction}); "
        f"run it: align-kit sweep {path} hydra.sweep.dir=outputs/sweeps/{path.stem}"
    )
