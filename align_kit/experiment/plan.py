"""Compose -> validate: turn a Hydra config into an ExperimentPlan, before torch or TRL load.

Every rule answers with one ConfigError line naming the keys and the fix. docs/validation.md lists
the rules. This module holds the generic ones (trainer names, field ownership, batch shapes, the
reward maximum); a rule that ties one node to the rest of the plan is that node's `check(plan)`
(Component.check), called here for every node. Field ownership (the precedence rule): a GRPOConfig
field set by a component node (e.g. `epsilon_high` by `clip`) is owned by that node;
`trainer.<field>` may repeat the node's value but never contradict it. Every other GRPOConfig
field belongs to `trainer`.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from align_kit.core.component import Component, RewardSpec
from align_kit.core.contracts import Logger, Model, Task
from align_kit.core.errors import ConfigError
from align_kit.core.processes import world_size
from align_kit.core.run_files import require_checkpoint
from align_kit.experiment.compose import added_groups, component_groups
from align_kit.experiment.grpo_fields import grpo_config_fields
from align_kit.experiment.schema import OWN_PACKAGE, check_config, check_trainer
from align_kit.experiment.trainer_needs import check_trainer_config, cpu_fallback_warning

COMPONENT_GROUPS = component_groups()
# The groups whose node choices name a run (W&B tags, summary.json, compare arms).
TAGGED_GROUPS = (*COMPONENT_GROUPS, "reward", "recipe", "sweep")
# Fields align_kit derives itself; setting them under trainer would be silently overwritten.
DERIVED_FIELDS = ("output_dir", "seed", "report_to", "reward_weights", "run_name")
# GRPOConfig fields a config may not set, with why and what to do instead: TRL's Trainer does not read
# `resume_from_checkpoint` (a fresh run would start), and a token in the config is saved with it (config.yaml, W&B,
# each checkpoint's training arguments).
REFUSED_FIELDS = {
    "resume_from_checkpoint": "is not read by the trainer (a fresh run would start); resume a run with "
    "train.resume=true hydra.run.dir=<its folder>",
    "hub_token": "would be saved with the run's config (config.yaml, W&B, each checkpoint); log in with "
    "`hf auth login` or set HF_TOKEN in the environment you start align-kit from",
}
REWARD_MAX_TOLERANCE = 1e-9


@dataclass
class ExperimentPlan:
    components: dict[str, Component]
    rewards: list[RewardSpec]
    grpo_kwargs: dict[str, Any]
    choices: dict[str, str]
    monitor: Any = None  # HealthMonitorConfig (align_kit.monitor)
    notes: list[str] = field(default_factory=list)  # shown once at start
    reward_max: float = 1.0  # what a perfect completion earns under the configured weights
    allow_reward_max_below_one: bool = False  # train.allow_reward_max_below_one
    # The key that set each GRPOConfig field of grpo_kwargs: `trainer.<name>`, or the node that owns it.
    field_sources: dict[str, str] = field(default_factory=dict)

    @property
    def model(self) -> Model:
        return self.components["model"]

    @property
    def answer_judge(self) -> Any:
        """The reward function that scores whether an answer is right (RewardSpec.judges_answer), or None."""
        return next((spec.func for spec in self.rewards if spec.judges_answer), None)

    @property
    def task(self) -> Task:
        return self.components["task"]

    @property
    def logger(self) -> Logger:
        return self.components["logger"]

    def effective(self, name: str) -> Any:
        """A GRPOConfig field as TRL will see it (our value, else TRL's default)."""
        return self.grpo_kwargs.get(name, grpo_config_fields().get(name))

    @property
    def generation_batch(self) -> int:
        """Completions per generation over all processes, as TRL derives it (GRPOConfig.__post_init__)."""
        per_device = self.effective("per_device_train_batch_size")
        steps = self.effective("steps_per_generation") or self.effective("gradient_accumulation_steps")
        return self.effective("generation_batch_size") or per_device * world_size() * steps

    def refuses_reward_max(self, reward_max: float) -> bool:
        """Whether the rule that a perfect completion earns at least 1.0 (16.6.3) refuses this maximum."""
        return reward_max < 1.0 - REWARD_MAX_TOLERANCE and not self.allow_reward_max_below_one


def tagged_choices(choices: Mapping[str, Any]) -> dict[str, str]:
    """The node choices that name a run, from Hydra's runtime choices (unselected recipe/sweep omitted)."""
    return {group: str(node) for group, node in choices.items() if is_tagged(group) and node}


def is_tagged(group: str) -> bool:
    """Every top-level group names the run (a group a config adds too), except the trainer's fields and the monitor's
    thresholds; nested groups (reward/judge) and Hydra's own (hydra/launcher) do not."""
    return group in TAGGED_GROUPS or ("/" not in group and group not in ("trainer", "monitor"))


def reward_choice(reward_names: Iterable[str]) -> str:
    """The reward list as one choice, `correctness+format`: Hydra records no choice for a list default."""
    return "+".join(reward_names)


def _instantiate(node: DictConfig, key: str, content: Any = None, built: dict | None = None) -> Any:
    """Build a Hydra node; a failure becomes a ConfigError naming the node. With `built` (nodes already built, by
    key and resolved `content`), a node of align_kit's own classes, whose build is a function of its keys, is built
    once and each later caller gets a copy of it as built: Hydra copies and resolves a node to build it, milliseconds
    a node. One that cannot be copied (it holds a lock) is built each time."""
    if built is None or not _own_class(content):
        return _build(node, key)
    cache_key = (key, repr(content))
    if cache_key in built:
        first = built[cache_key]
        return _build(node, key) if first is None else copy.deepcopy(first)
    component = _build(node, key)
    try:
        built[cache_key] = copy.deepcopy(component)
    except TypeError:
        built[cache_key] = None
    return component


def _own_class(content: Any) -> bool:
    target = content.get("_target_") if isinstance(content, Mapping) else None
    return isinstance(target, str) and target.startswith(f"{OWN_PACKAGE}.")


def _build(node: DictConfig, key: str) -> Any:
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    try:
        return instantiate(node, _convert_="all")
    except InstantiationException as error:
        cause = error.__cause__
        if isinstance(cause, ConfigError):
            raise cause from None
        raise ConfigError(f"{key}: cannot build this node ({cause or error}); check its keys") from None


def instantiate_node(node: DictConfig, key: str, content: Any = None, built: dict | None = None) -> Component:
    component = _instantiate(node, key, content, built)
    component.group = key
    component.validate()
    return component


def _merge_node_fields(components: dict[str, Component], choices: dict[str, str]) -> tuple[dict, dict]:
    fields: dict[str, Any] = {}
    owners: dict[str, str] = {}
    for group, component in components.items():
        for name, value in component.grpo_fields().items():
            if name in fields and fields[name] != value:
                first = owners[name]
                raise ConfigError(
                    f"{first}={choices.get(first)} sets {name}={fields[name]!r} but "
                    f"{group}={choices.get(group)} sets {name}={value!r}; these nodes cannot be combined"
                    + (components[first].field_hint(name) or component.field_hint(name))
                )
            fields[name], owners[name] = value, group
    return fields, owners


def _check_trainer_names(trainer: dict) -> None:
    known = grpo_config_fields()
    for name in trainer:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean trainer.{close[0]}?" if close else "see trl.GRPOConfig for the field names"
            raise ConfigError(f"trainer.{name} is not a GRPOConfig field; {hint}")
        if name in DERIVED_FIELDS:
            raise ConfigError(f"trainer.{name} is set by align_kit; use {_derived_hint(name)} instead")
        if name in REFUSED_FIELDS and trainer[name] is not None:
            raise ConfigError(f"trainer.{name} {REFUSED_FIELDS[name]}")  # a token is never echoed


def _check_trainer_ownership(
    trainer: dict, node_fields: dict, owners: dict, components: dict[str, Component], choices: dict
) -> None:
    for name, value in trainer.items():
        if name in node_fields and node_fields[name] != value:
            group = owners[name]
            raise ConfigError(
                f"trainer.{name}={value!r} contradicts {group}={choices.get(group)}, which sets "
                f"{name}={node_fields[name]!r}; change the {group} node's own key (see conf/{group}/) "
                f"or select another {group} node" + components[group].field_hint(name)
            )


def _derived_hint(name: str) -> str:
    return {
        "output_dir": "hydra.run.dir=<folder>",
        "seed": "seed=<int>",
        "report_to": "logger=wandb|wandb_offline|none",
        "reward_weights": "reward.<name>.weight=<float>",
        "run_name": "the override list (it names the run)",
    }[name]


def _check_monitor_facts(nodes: dict[str, Component], choices: dict[str, str]) -> None:
    """What each node tells the health monitor (Component.monitor_facts) names fields of its RunContext: an unknown
    name was a TypeError when the trainer was built, after the model had loaded."""
    import dataclasses

    from align_kit.monitor.rules import RunContext

    known = {item.name for item in dataclasses.fields(RunContext)}
    for key, node in nodes.items():
        unknown = sorted(set(node.monitor_facts()) - known)
        if unknown:
            node_name = f"{key}={choices[key]}" if key in choices else key
            raise ConfigError(
                f"{node_name}: its monitor_facts() names {', '.join(unknown)}, which the health monitor does not "
                f"know (RunContext's fields: {', '.join(sorted(known))}); return only those"
            )


def _check_batch_shape(plan: ExperimentPlan) -> None:
    generations = plan.effective("num_generations")
    per_device = plan.effective("per_device_train_batch_size")
    steps = plan.effective("steps_per_generation") or plan.effective("gradient_accumulation_steps")
    processes = world_size()
    generation_batch = plan.generation_batch
    across = f" x {processes} processes" if processes > 1 else ""
    shape = f"trainer.per_device_train_batch_size={per_device}{across} x steps_per_generation={steps}"
    if generations < 2:
        raise ConfigError(
            f"trainer.num_generations={generations}: group normalisation needs at least 2 completions per prompt"
        )
    explicit = plan.effective("generation_batch_size")
    if explicit and explicit % (per_device * processes):
        raise ConfigError(
            f"trainer.generation_batch_size={explicit} is not a multiple of the global batch "
            f"(trainer.per_device_train_batch_size={per_device}{across}); make it one"
        )
    if generation_batch % generations:
        raise ConfigError(
            f"trainer.num_generations={generations} does not divide the generation batch of {generation_batch} "
            f"completions ({shape}); make the batch a multiple of num_generations"
        )


def _check_rewards_fit_task(reward_nodes: list, task: Task, choices: dict[str, str]) -> None:
    """Every column a reward reads is one the task gives (a task class that declares no COLUMNS is not checked)."""
    given = task.COLUMNS
    if given is None:
        return
    for node in reward_nodes:
        for column, fix in node.needs().items():
            if column not in given:
                raise ConfigError(
                    f"reward.{node.group} reads the column {column!r}, which task={choices.get('task')} does not "
                    f"give (its columns: {list(given)}); {fix}"
                )


def _reward_max_terms(plan: ExperimentPlan) -> str:
    return " + ".join(f"{spec.weight:g}*{spec.max_value:g} ({spec.name})" for spec in plan.rewards)


def _note_reward_max_above_one(plan: ExperimentPlan) -> None:
    if plan.reward_max > 1.0 + REWARD_MAX_TOLERANCE:
        plan.notes.append(
            f"reward maximum is {_reward_max_terms(plan)} = {plan.reward_max:g} "
            "(above 1.0, as in the policy-optimization chapter's correctness + format)"
        )


def _check_reward_max(plan: ExperimentPlan) -> None:
    if plan.refuses_reward_max(plan.reward_max):
        raise ConfigError(
            f"a perfect completion earns {_reward_max_terms(plan)} = {plan.reward_max:g} < 1.0, so group "
            "normalisation loses resolution and the reward plateaus below 1.0 (the training-stability chapter, "
            "16.6.3); raise reward.<name>.weight so the maximum is 1.0, or set train.allow_reward_max_below_one=true"
        )


def build_plan(
    cfg: DictConfig, choices: dict[str, str], run_dir: str, built: dict | None = None, data: dict | None = None
) -> ExperimentPlan:
    """The plan of a composed config (`built`: nodes already built, shared by a sweep's jobs, see _instantiate;
    `data`: the config resolved, when the caller has it)."""
    # Types, ranges and `_target_`s of every node first: nothing is imported or built before.
    data = check_config(cfg, data)
    trainer = data["trainer"]
    _check_trainer_names(trainer)
    check_trainer(trainer)
    components = {
        group: instantiate_node(cfg[group], group, data[group], built)
        for group in (*COMPONENT_GROUPS, *added_groups(cfg))
    }
    reward_nodes = [instantiate_node(node, name, data["reward"][name], built) for name, node in cfg.reward.items()]
    _check_rewards_fit_task(reward_nodes, components["task"], choices)

    node_fields, owners = _merge_node_fields(components, choices)
    for name, value in node_fields.items():  # a node's own keys become GRPOConfig fields: same rules
        try:
            check_trainer({name: value})
        except ConfigError as error:
            raise ConfigError(f"{owners[name]}={choices.get(owners[name])} sets {error}") from None
    _check_trainer_ownership(trainer, node_fields, owners, components, choices)
    grpo_kwargs = {**trainer, **node_fields}

    effective_trainer = {name: grpo_kwargs.get(name, default) for name, default in grpo_config_fields().items()}
    rewards = [spec for node in reward_nodes for spec in node.reward_specs(effective_trainer)]
    for component in components.values():
        rewards += component.reward_specs(effective_trainer)
    for component in components.values():
        component.bind_rewards(rewards)

    grpo_kwargs.update(
        output_dir=run_dir,
        seed=int(cfg.seed),
        report_to=components["logger"].report_to(),
        reward_weights=[spec.weight for spec in rewards],
        run_name=Path(run_dir).name,
    )
    plan = ExperimentPlan(
        components=components,
        rewards=rewards,
        grpo_kwargs=grpo_kwargs,
        choices=choices,
        monitor=_instantiate(cfg.monitor, "monitor", data["monitor"], built),  # validates itself on construction
        reward_max=sum(spec.weight * spec.max_value for spec in rewards),
        allow_reward_max_below_one=bool(cfg.train.allow_reward_max_below_one),
        field_sources={
            **{name: f"trainer.{name}" for name in trainer},
            **{
                name: f"{owners[name]}={choices.get(owners[name])} (its {name}={value})"
                for name, value in node_fields.items()
            },
        },
    )
    _check_monitor_facts(components, choices)
    _check_batch_shape(plan)
    check_trainer_config(plan.effective, plan.task, choices.get("task"))
    warning = cpu_fallback_warning(plan.effective)
    if warning:
        plan.notes.append(warning)
    _note_reward_max_above_one(plan)
    for node in (*components.values(), *reward_nodes):  # each node's own rules against the plan (Component.check)
        node.check(plan)
    _check_reward_max(plan)  # after the nodes': a format schedule's unselected reward is named first
    if cfg.train.resume:
        require_checkpoint(Path(run_dir))
    return plan


def validate_dataset(plan: ExperimentPlan, dataset, prompt_checks: dict | None = None) -> None:
    """Data-dependent checks, run once the training set is loaded and before the model is. `prompt_checks` keeps
    the prompts' check for this dataset by what it reads (the model node and the completion budget) across the
    jobs of a sweep."""
    generation_batch, generations = plan.generation_batch, plan.effective("num_generations")
    # TRL's sampler drops an incomplete batch of prompts: a smaller dataset trains zero steps.
    prompts_needed = generation_batch // generations
    source = plan.task.source
    if len(dataset) < prompts_needed:
        raise ConfigError(
            f"{source} has {len(dataset)} rows, fewer than the {prompts_needed} prompts of one generation batch "
            f"({generation_batch} completions / trainer.num_generations={generations}); add rows or lower "
            "trainer.per_device_train_batch_size / trainer.steps_per_generation"
        )
    # The model's own check of a prompt (model=tiny from its config, model=hf from its saved tokenizer).
    if "prompt" in dataset.column_names:
        budget = plan.effective("max_completion_length")
        checks = {} if prompt_checks is None else prompt_checks
        key = (repr(plan.model), budget)
        if key not in checks:
            checks[key] = _first_prompt_problem(plan.model, dataset["prompt"], budget)
        if checks[key] is not None:
            row, problem = checks[key]
            raise ConfigError(f"{source} row {row}: prompt {problem}")
    for component in plan.components.values():
        component.check_dataset(dataset)


def _first_prompt_problem(model: Model, prompts: Iterable, budget: int) -> tuple[int, str] | None:
    """(row, problem) of the first prompt `model` cannot take with a completion budget of `budget`."""
    for row, prompt in enumerate(prompts, start=1):
        problem = model.prompt_problem(prompt, budget)
        if problem:
            return row, problem
    return None
