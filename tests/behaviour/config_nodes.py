"""Every node the config tree ships (group and option, from conf/train.yaml's defaults list and each group's
folder), and the overrides that let each one compose and build on its own."""

from __future__ import annotations

from omegaconf import OmegaConf

from align_kit import CONF_DIR

DEFAULTS = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "train.yaml").defaults)
GROUPS = sorted(
    next(iter(entry)) for entry in DEFAULTS if isinstance(entry, dict) and next(iter(entry)) not in ("recipe", "sweep")
)
NODES = [(group, path.stem) for group in GROUPS for path in sorted((CONF_DIR / group).glob("*.yaml"))]


def on_the_real_model(sweep_file) -> bool:
    # A sweep of SmolLM2 trains only where `make install-real-model` ran (the real-model tier).
    return "override /model: smollm2" in sweep_file.read_text()


def real_model_stand_in(saved_model_dir: str) -> list[str]:
    # model=smollm2 validates a folder holding the GGUF: a stand-in's file names are enough (nothing loads).
    return [f"model.name_or_path={saved_model_dir}", "model.gguf_file=model.gguf"]


def node_override(group: str, name: str, saved_model_dir: str) -> list[str]:
    task = ["task=tool_calls"] if name.startswith("tool_") else []  # the step rewards read its `calls` column
    if name == "gym_correctness":  # it reads the rows' gym_config / gym_index
        task = ["task=reasoning_gym"]
    if group == "reward" and name == "tool_penalty":  # a penalty's best is 0: it rides beside a reward
        return [*task, "reward=[tool_choice,tool_penalty]", "reward.tool_choice.weight=1.0"]
    if group == "reward":
        # A single reward must reach 1.0 on its own (the training-stability chapter, 16.6.3). The gym rewards are
        # named correctness and format, so the monitor's rules and compare's accuracy panel read them.
        key = name.removeprefix("gym_")
        return [*task, f"reward=[{name}]", f"reward.{key}.weight=1.0"]
    extra = {
        ("model", "hf"): [f"model.name_or_path={saved_model_dir}"],
        ("model", "smollm2"): real_model_stand_in(saved_model_dir),
        ("task", "reasoning_gym"): ["reward=[gym_correctness,gym_format]"],
        ("task", "hf_dataset"): ["task.path=some/dataset"],
        ("task", "tool_calls"): ["reward=[tool_steps]"],  # correctness reads an `answer` column it does not give
        ("logger", "wandb"): ["logger.mode=offline"],  # no API key here; the node itself is tested below
        ("routing_replay", "r2"): ["model=tiny_moe"],  # replay needs an MoE model
        ("routing_replay", "r3"): ["model=tiny_moe"],
        ("rollout", "vllm"): ["trainer.use_cpu=false"],  # vLLM generates on GPUs
    }.get((group, name), [])
    return [f"{group}={name}", *extra]
