"""Every node of every group, every recipe and every sweep composes and builds a valid plan."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from align_kit import CONF_DIR, PROJECT_ROOT
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import TAGGED_GROUPS, build_plan
from align_kit.train import component_choices
from tests.behaviour.config_nodes import GROUPS, NODES, node_override, on_the_real_model, real_model_stand_in
from tests.gguf_files import write_gguf

RECIPE_DIR = PROJECT_ROOT / "recipes"
RECIPES = sorted(str(path.relative_to(RECIPE_DIR).with_suffix("")) for path in RECIPE_DIR.rglob("*.yaml"))
SWEEPS = sorted(p.stem for p in (PROJECT_ROOT / "sweeps").glob("*.yaml"))


@pytest.fixture(scope="module")
def saved_model_dir(tmp_path_factory) -> str:
    # model=hf needs a folder as save_pretrained leaves it; the files' names are enough to validate (nothing loads).
    folder = tmp_path_factory.mktemp("hf_model")
    (folder / "config.json").write_text('{"model_type": "qwen3"}')
    (folder / "model.safetensors").write_bytes(b"")
    (folder / "tokenizer.json").write_text("{}")
    write_gguf(folder / "model.gguf")  # model=smollm2 (any GGUF): its header is what the pre-flight reads
    return str(folder)


def documented_groups() -> set[str]:
    """The groups of the docs' config-groups table (docs/groups/index.md, its first column)."""
    page = (PROJECT_ROOT / "docs" / "groups" / "index.md").read_text()
    return {line.split("`")[1] for line in page.splitlines() if line.startswith("| `")}


def test_groups_match_the_documented_tree():
    assert set(GROUPS) == documented_groups() - {"recipe", "sweep"}
    assert {"dapo", "dr_grpo", "gspo", "gdpo"} <= set(RECIPES)


@pytest.mark.usefixtures("vllm_importable")
@pytest.mark.parametrize(("group", "name"), NODES, ids=[f"{g}={n}" for g, n in NODES])
def test_every_node_composes_and_builds(group, name, saved_model_dir, tmp_path):
    cfg = compose(node_override(group, name, saved_model_dir))
    choices = component_choices()
    if group in TAGGED_GROUPS and group != "reward":
        assert choices[group] == name
    plan = build_plan(cfg, choices, str(tmp_path))
    assert set(plan.components) >= {
        "model",
        "task",
        "advantage",
        "clip",
        "kl",
        "overlong",
        "rollout",
        "logger",
    }
    assert len(plan.grpo_kwargs["reward_weights"]) == len(plan.rewards)


@pytest.mark.usefixtures("gpu_user")
@pytest.mark.parametrize("recipe", RECIPES)
def test_every_recipe_composes_and_builds(recipe, tmp_path):
    cfg = compose([f"recipe={recipe}"])
    build_plan(cfg, component_choices(), str(tmp_path))


def sweep_jobs(sweep: str) -> list[list[str]]:
    """The override list of every job the sweep file launches (Hydra's basic sweeper: the cross product)."""
    params = OmegaConf.load(PROJECT_ROOT / "sweeps" / f"{sweep}.yaml").hydra.sweeper.params
    axes = [[f"{key}={value}" for value in str(values).split(",")] for key, values in params.items()]
    return [list(job) for job in itertools.product(*axes)]


def build_sweep_jobs(sweep: str, jobs: list[list[str]], saved_model_dir, tmp_path) -> None:
    """Compose and build `jobs` of `sweep` as its launch would."""
    # Without the SmolLM2 wheel (the default tier on a fresh clone) a real-model sweep builds on a stand-in folder.
    model = real_model_stand_in(saved_model_dir) if on_the_real_model(PROJECT_ROOT / "sweeps" / f"{sweep}.yaml") else []
    for job in jobs:
        build_plan(compose([f"sweep={sweep}", *job, *model]), component_choices(), str(tmp_path))


@pytest.mark.parametrize("sweep", SWEEPS)
def test_every_sweep_has_three_seeds_and_builds_its_first_job(sweep, saved_model_dir, tmp_path):
    jobs = sweep_jobs(sweep)
    assert len({frozenset(job) for job in jobs}) == len(jobs) >= 3
    assert len({value for job in jobs for value in job if value.startswith("seed=")}) >= 3
    build_sweep_jobs(sweep, jobs[:1], saved_model_dir, tmp_path)


@pytest.mark.slow  # every job of every sweep: about two minutes of composing; the default tier builds one per sweep
@pytest.mark.parametrize("sweep", SWEEPS)
def test_every_job_of_every_sweep_composes_and_builds(sweep, saved_model_dir, tmp_path):
    build_sweep_jobs(sweep, sweep_jobs(sweep), saved_model_dir, tmp_path)


def test_recipes_and_sweeps_are_reachable_without_plus():
    assert (CONF_DIR / "recipe").resolve() == (PROJECT_ROOT / "recipes").resolve()
    assert (CONF_DIR / "sweep").resolve() == (PROJECT_ROOT / "sweeps").resolve()
    assert Path(CONF_DIR / "train.yaml").read_text().count("recipe: null") == 1


def test_dapo_recipe_selects_the_papers_components(tmp_path):
    cfg = compose(["recipe=dapo"])
    plan = build_plan(cfg, component_choices(), str(tmp_path))
    kwargs = plan.grpo_kwargs
    assert (kwargs["epsilon"], kwargs["epsilon_high"]) == (0.2, 0.28)
    assert kwargs["loss_type"] == "dapo" and kwargs["beta"] == 0.0
    assert [spec.name for spec in plan.rewards] == ["correctness", "format", "soft_overlong"]
    assert kwargs["steps_per_generation"] == 4


def test_any_grpo_field_is_settable_without_plus(tmp_path):
    cfg = compose(["trainer.top_entropy_quantile=0.2", "trainer.learning_rate=1e-4"])
    plan = build_plan(cfg, component_choices(), str(tmp_path))
    assert plan.grpo_kwargs["top_entropy_quantile"] == 0.2
    assert plan.grpo_kwargs["learning_rate"] == 1e-4


@pytest.mark.usefixtures("gpu_user")
def test_gpu_dapo_recipe_carries_the_papers_hyperparameters(tmp_path):
    """DAPO §4.1 (arXiv 2503.14476): lr 1e-6, 20 warm-up rollout steps, 512 prompts x 16 responses, 16
    updates per rollout step, eps 0.2 / 0.28, 16384 + 4096 tokens. The recipe documents 64 GPUs."""
    plan = build_plan(compose(["recipe=gpu/dapo_qwen2.5_32b"]), component_choices(), str(tmp_path))
    kwargs, gpus = plan.grpo_kwargs, 64
    assert kwargs["learning_rate"] == 1e-6
    assert kwargs["per_device_train_batch_size"] * gpus * kwargs["steps_per_generation"] == 512 * 16
    updates_per_rollout = kwargs["steps_per_generation"] // kwargs["gradient_accumulation_steps"]
    assert updates_per_rollout == 16
    assert kwargs["warmup_steps"] == 20 * updates_per_rollout
    assert (kwargs["epsilon"], kwargs["epsilon_high"], kwargs["num_generations"]) == (0.2, 0.28, 16)
    assert kwargs["max_completion_length"] == 16384 + 4096
    assert kwargs["loss_type"] == "dapo" and kwargs["beta"] == 0.0 and kwargs["use_vllm"] is True
    assert [spec.name for spec in plan.rewards] == ["correctness", "soft_overlong"]
    assert plan.components["model"].name_or_path == "Qwen/Qwen2.5-32B"
    # Dynamic sampling (§3.2) on every GPU: each process's 8 x 16 completions hold whole groups of 16.
    assert plan.components["sampling"].dynamic is True
    assert kwargs["per_device_train_batch_size"] * kwargs["steps_per_generation"] % kwargs["num_generations"] == 0
    single = build_plan(compose(["recipe=gpu/dapo_qwen2.5_0.5b_single_gpu"]), component_choices(), str(tmp_path))
    assert single.components["sampling"].dynamic is True
    assert single.grpo_kwargs["per_device_train_batch_size"] * single.grpo_kwargs["steps_per_generation"] == 32 * 16


@pytest.mark.usefixtures("gpu_user")
def test_gpu_gspo_recipe_replays_routing_on_the_papers_moe(tmp_path):
    """GSPO §5 (arXiv 2507.18071): Qwen3-30B-A3B-Base, 4 mini-batch updates per rollout batch, GRPO clip
    0.2 / 0.27 with Routing Replay."""
    plan = build_plan(compose(["recipe=gpu/gspo_routing_replay_qwen3_30b_a3b"]), component_choices(), str(tmp_path))
    kwargs = plan.grpo_kwargs
    assert kwargs["steps_per_generation"] // kwargs["gradient_accumulation_steps"] == 4
    assert (kwargs["epsilon"], kwargs["epsilon_high"]) == (0.2, 0.27)
    assert plan.components["routing_replay"].mode == "r2"
    assert plan.components["model"].name_or_path == "Qwen/Qwen3-30B-A3B-Base"


ACCELERATE_CONFIGS = {"ddp": ("MULTI_GPU", None), "deepspeed_zero2": ("DEEPSPEED", 2)}
ACCELERATE_CONFIGS |= {"deepspeed_zero3": ("DEEPSPEED", 3), "fsdp2": ("FSDP", None)}


@pytest.mark.parametrize("name", sorted(ACCELERATE_CONFIGS))
def test_accelerate_config_files_parse(name):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(PROJECT_ROOT / "accelerate_configs" / f"{name}.yaml"))
    kind, zero_stage = ACCELERATE_CONFIGS[name]
    assert config.distributed_type.value == kind and config.use_cpu is False
    assert (config.deepspeed_config or {}).get("zero_stage") == zero_stage
    if name == "fsdp2":
        assert config.fsdp_config["fsdp_version"] == 2


def test_gpu_recipes_name_the_accelerate_config_they_launch_with():
    named = {}
    for recipe in sorted((PROJECT_ROOT / "recipes" / "gpu").glob("*.yaml")):
        found = re.findall(r"--config_file accelerate_configs/(\w+)\.yaml", recipe.read_text())
        assert found, f"{recipe.name} names no accelerate config"
        assert all((PROJECT_ROOT / "accelerate_configs" / f"{name}.yaml").exists() for name in found)
        named[recipe.stem] = found[0]
    assert named["dapo_qwen2.5_32b"] == "deepspeed_zero3"


def targets_in(value) -> list[str]:
    """Every `_target_` string anywhere in a loaded YAML tree."""
    if isinstance(value, dict):
        found = [value["_target_"]] if isinstance(value.get("_target_"), str) else []
        return found + [target for item in value.values() for target in targets_in(item)]
    if isinstance(value, list):
        return [target for item in value for target in targets_in(item)]
    return []


def test_every_target_the_shipped_configs_name_is_a_registered_component_class():
    """conf/ (its groups, reward/judge/*, recipes and sweeps through their links) builds only classes that
    align_kit registers as buildable, each named by the module that defines it; conf/hydra/ names only the Hydra
    plugins the hydra tree's check allows (a launcher is Hydra's to build, not a component)."""
    import importlib

    from align_kit.core.component import BUILDABLE
    from align_kit.runs.hydra_tree import HYDRA_PLUGINS

    files = sorted(CONF_DIR.rglob("*.yaml"))
    hydra_files = [path for path in files if path.is_relative_to(CONF_DIR / "hydra")]
    plugins = {t for path in hydra_files for t in targets_in(OmegaConf.to_container(OmegaConf.load(path)))}
    assert plugins <= set(HYDRA_PLUGINS["launcher"]) | set(HYDRA_PLUGINS["sweeper"])
    component_files = [path for path in files if path not in hydra_files]
    named = {
        t for path in component_files for t in targets_in(OmegaConf.to_container(OmegaConf.load(path))) if t != "???"
    }
    assert len(named) >= 35 and "align_kit.rewards.judges.CallableJudge" in named
    for target in sorted(named):
        module, _, name = target.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        assert BUILDABLE.get(target) is cls, target
        assert isinstance(cls, type) and f"{cls.__module__}.{cls.__qualname__}" == target
    # conf/ holds no Hydra callback: align_kit installs its own (align_kit.runs.hydra_tree.AppCallbacks).
    assert not any("callbacks" in (OmegaConf.load(path).get("hydra") or {}) for path in files)
