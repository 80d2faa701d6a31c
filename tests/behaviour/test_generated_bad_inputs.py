"""Generated bad inputs: the valid values of every node, mutated (wrong type, empty, NaN, inf,
negative, zero, huge, list, unicode) with a fixed seed. The pre-flight either accepts the config
or refuses it with one ConfigError line (exit 2 at the CLI); never another exception, and never
an accepted value that a simple second oracle below says must be refused."""

from __future__ import annotations

import copy
import math
import random

import pytest
from omegaconf import OmegaConf

from align_kit import CONF_DIR
from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from align_kit.runs.preflight import validate_composed
from align_kit.train import component_choices
from tests.behaviour.config_nodes import NODES, node_override

SEED = 20261129
CASES = 320
MUTATIONS = ["abc", "''", "nan", "inf", "-inf", "-1", "-0.5", "0", "0.5", "2", "1e300", "99999999999999999999",
             "[1,2]", "'ünï中'", "true", "null"]  # fmt: skip
# Keys whose values name places or hub objects (mutating them tests the file system, not validation).
SKIPPED = ("task.path", "task.name", "model.name_or_path", "paths.", "logger.entity", "rollout.server_base_url")
# The oracle's own lists (written from the docs, not from align_kit.experiment.schema): keys that may be null,
OPTIONAL = {
    "format_schedule.start", "rollout.is_cap_min", "rollout.is_cap_max", "trainer.steps_per_generation",
    "trainer.save_total_limit", "trainer.disable_tqdm", "task.num_demonstrations",
}  # fmt: skip
# numbers that must be > 0,
POSITIVE = {"trainer.learning_rate", "model.warm_start.learning_rate", "rollout.temperature", "clip.eps_low"}
# numbers transformers reads as a share of the run when below 1,
SHARES = {"trainer.warmup_steps", "trainer.logging_steps", "trainer.save_steps"}
# numbers that may be negative,
NEGATIVE_OK = {"monitor.train_eval_divergence.max_eval_gain", "monitor.reward_collapse.max_correctness_gain"}
# keys with a fixed set of names, and counts that must be >= 1. (from the docs, not align_kit.experiment.schema).
CHOICE_KEYS = {
    "advantage.scale_rewards", "advantage.aggregation", "advantage.loss_type", "format_schedule.kind",
    "kl.weighting", "logger.mode", "model.architecture", "model.dtype", "rollout.dtype", "rollout.is_correction",
    "rollout.mode", "routing_replay.mode", "reward.correctness.checker", "trainer.lr_scheduler_type",
    "trainer.save_strategy", "reward.arena.scheme", "reward.arena.swiss_score",
}  # fmt: skip
AT_LEAST_ONE = {
    "trainer.per_device_train_batch_size", "trainer.gradient_accumulation_steps", "trainer.steps_per_generation",
    "trainer.num_iterations", "trainer.num_generations", "trainer.max_completion_length", "trainer.logging_steps",
    "trainer.max_steps", "model.hidden_size", "model.num_layers", "model.num_heads",
    "model.num_kv_heads", "model.head_dim", "model.intermediate_size", "model.warm_start.batch_size",
    "task.num_train", "task.num_demonstrations", "sampling.max_gen_batches", "advantage.n_virtual",
}  # fmt: skip


def leaves(node, prefix: str) -> dict:
    """Every scalar key of a node with its value ({a: {b: 1}} -> {prefix.a.b: 1})."""
    found = {}
    for key, value in node.items():
        path = f"{prefix}.{key}"
        if key == "_target_" or path.startswith(SKIPPED):
            continue
        if isinstance(value, dict):
            found.update(leaves(value, path))
        elif not isinstance(value, list):
            found[path] = value
    return found


def parsed(text: str):
    """The value Hydra's override grammar gives `key=<text>`, for the mutations above (a second,
    hand-written parser)."""
    literals = {"true": True, "false": False, "null": None, "[1,2]": [1, 2]}
    if text in literals:
        return literals[text]
    if text.startswith("'"):
        return text.strip("'")
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return text


def must_refuse(key: str, original, text: str) -> bool:
    """The oracle: what no valid config may hold."""
    value = parsed(text)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(original, bool):
        return not isinstance(value, bool) and not (value is None and key in OPTIONAL)
    if isinstance(original, int | float):
        if text in ("''", "[1,2]", "abc", "'ünï中'", "true", "nan", "inf", "-inf") or not number:
            return value is not None or key not in OPTIONAL
        if text == "99999999999999999999" or (value < 0 and key not in NEGATIVE_OK):
            return True
        if key in SHARES and 0 < value < 1:
            return False
        if isinstance(original, int) and not float(value).is_integer():
            return True
        return (key in AT_LEAST_ONE and value < 1) or (key in POSITIVE and value <= 0)
    if isinstance(original, str) and key in CHOICE_KEYS:
        return str(value) != original and text not in ("0", "2")
    return text == "''"


def generated_cases() -> list[tuple[tuple[str, ...], str, object, str]]:
    rng = random.Random(SEED)
    pool = []
    bases = [(group, name) for group, name in NODES]
    top = {"seed": 0, "train.resume": False, "train.allow_reward_max_below_one": False}
    trainer = leaves(OmegaConf.to_container(OmegaConf.load(CONF_DIR / "trainer" / "default.yaml")), "trainer")
    for group, name in bases:
        node = OmegaConf.load(CONF_DIR / group / f"{name}.yaml")
        node = OmegaConf.to_container(node, resolve=False)
        keys = leaves(node, "reward" if group == "reward" else group)
        if group == "reward":
            keys = {k.replace("reward.", f"reward.{name}.", 1) if not k.startswith(f"reward.{name}") else k: v
                    for k, v in keys.items()}  # fmt: skip
        keys = {k: v for k, v in keys.items() if not k.endswith(".defaults") and not str(v).startswith("${")}
        pool += [((group, name), key, value) for key, value in keys.items()]
    pool += [(("clip", "symmetric"), key, value) for key, value in {**top, **trainer}.items()]
    cases = []
    for _ in range(CASES):
        base, key, value = rng.choice(pool)
        cases.append((base, key, value, rng.choice(MUTATIONS)))
    return cases


CASE_LIST = generated_cases()


@pytest.fixture(scope="module")
def composed(tmp_path_factory):
    """One composition per node (Hydra's compose is the slow part); each case overrides a copy
    with Hydra's own override machinery, as the command line would."""
    saved_model_dir = str(tmp_path_factory.mktemp("hf_model"))
    cache = {}

    def get(base):
        if base not in cache:
            cfg = compose(node_override(*base, saved_model_dir))
            cache[base] = (cfg, component_choices())
        return cache[base]

    return get


def apply(cfg, override: str):
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    copied = copy.deepcopy(cfg)
    ConfigLoaderImpl._apply_overrides_to_config(OverridesParser.create().parse_overrides([override]), copied)
    return copied


@pytest.mark.slow  # 40 s of generated configs: the default tier stays near 10 minutes on 2 cores; CI runs both
@pytest.mark.usefixtures("vllm_importable")
def test_generated_mutations_are_accepted_or_refused_in_one_line(composed, tmp_path, monkeypatch, cache_dir):
    from hydra.errors import HydraException

    monkeypatch.setenv("ALIGN_KIT_CACHE", cache_dir)
    outcomes = {"accepted": 0, "refused": 0}
    wrongly_accepted, tracebacks, data = [], [], {}
    for base, key, original, text in CASE_LIST:
        cfg, choices = composed(base)
        override = f"{key}={text}"
        try:
            validate_composed(apply(cfg, override), choices, str(tmp_path / "run"), data)
        except ConfigError as error:
            assert "\n" not in str(error), override
            outcomes["refused"] += 1
            continue
        except HydraException as error:  # the pre-flight prints these as one line too
            assert "Could not override" in str(error) or "Error merging" in str(error), override
            outcomes["refused"] += 1
            continue
        except Exception as error:  # a traceback at the CLI
            tracebacks.append(f"{base} {override}: {type(error).__name__}: {error}")
            continue
        outcomes["accepted"] += 1
        if must_refuse(key, original, text):
            wrongly_accepted.append(f"{base} {override}")
    assert tracebacks == []
    assert wrongly_accepted == []
    assert sum(outcomes.values()) == CASES
    assert outcomes["accepted"] >= 10 and outcomes["refused"] >= 150  # both paths exercised


def test_the_oracle_reads_values_as_hydra_does():
    assert math.isnan(parsed("nan")) and parsed("inf") == math.inf and parsed("[1,2]") == [1, 2]
    assert parsed("''") == "" and parsed("true") is True and parsed("null") is None and parsed("1e300") == 1e300
    assert must_refuse("seed", 0, "0.5") and must_refuse("trainer.max_steps", 200, "0")
    assert not must_refuse("trainer.max_steps", 200, "2") and must_refuse("kl.bias_corrected", False, "null")


# ------------------------------------------------------------- the hydra subtree and nodes inside nodes

HYDRA_SEED = 20261201
HYDRA_CASES = 90
# Values for a key that names what to build: functions, classes of the standard library and of align_kit,
# Hydra's own plugins, an interpolation, plain values.
NAMES = [
    "shutil.copyfile", "os.makedirs", "builtins.open", "pathlib.Path", "subprocess.Popen", "logging.FileHandler",
    "logging.StreamHandler", "logging.handlers.SocketHandler", "align_kit.runs.run_folder.move_aside",
    "align_kit.sandbox.run_python", "align_kit.runs.run_folder.Path", "align_kit.sandbox.shutil.rmtree",
    "align_kit.components.clip.TokenClip", "align_kit.rewards.judges.ArithmeticJudge",
    "hydra._internal.core_plugins.basic_launcher.BasicLauncher",
    "hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "${oc.env:HOME}", "abc", "''", "1", "null",
]  # fmt: skip
# Values for a key that names a file or folder of the job.
PATHS = ["../x", "/tmp/x", "a/b", "..", "x" * 300, "''", "ok", ".hydra", "${hydra.runtime.output_dir}/other.log"]
STREAMS = ["ext://sys.stdout", "ext://sys.stderr", "ext://os.environ", "ext://shutil.copyfile", "abc"]
# (the overrides that select the node, the key or the node to add `{}` around the value, what the value is).
POSITIONS = [
    ([], "hydra.launcher._target_", "plugin"),
    ([], "hydra.sweeper._target_", "plugin"),
    ([], "+hydra.callbacks.extra={_target_:{}}", "callback"),
    ([], "hydra.job_logging.handlers.console.class", "handler"),
    ([], "hydra.job_logging.handlers.file.class", "handler"),
    ([], "hydra.hydra_logging.handlers.console.class", "hydra_handler"),
    ([], "+hydra.job_logging.formatters.extra={class:{}}", "formatter"),
    ([], "hydra.job_logging.handlers.file.filename", "log_file"),
    ([], "hydra.job_logging.handlers.console.stream", "stream"),
    ([], "hydra.hydra_logging.handlers.console.stream", "stream"),
    ([], "hydra.job.name", "job_name"),
    ([], "hydra.output_subdir", "subdir"),
    ([], "hydra.job.chdir", "chdir"),
    (["reward=[correctness,arena]"], "reward.arena.judge._target_", "node"),
    (["reward=[correctness,arena]"], "+reward.arena.judge.inner={_target_:{}}", "node"),
    (["kl=per_domain"], "+kl.betas.extra={_target_:{}}", "node"),
    ([], "+reward.extra={_target_:{},weight:0.0}", "node"),
    ([], "+trainer.extra={_target_:{}}", "node"),
    ([], "clip._target_", "node"),
]
VALUES = {"log_file": PATHS, "job_name": PATHS, "subdir": PATHS, "stream": STREAMS, "chdir": ["true", "false", "null"]}


def conf_classes() -> set[str]:
    """The classes the shipped configs build (read from conf/'s YAML, not from align_kit)."""
    found = set()
    for path in CONF_DIR.rglob("*.yaml"):
        for line in path.read_text().splitlines():
            if line.strip().startswith("_target_:"):
                found.add(line.split(":", 1)[1].split("#")[0].strip())
    return found - {"???"}


def must_refuse_in_hydra(kind: str, text: str) -> bool:
    """The oracle for the hydra subtree and nested nodes: what nothing may build or write (from the docs)."""
    value = parsed(text)
    if kind == "node":  # only align_kit's own component classes
        return value not in conf_classes()
    if kind == "plugin":  # Hydra's own launchers and sweeper
        return not str(value).startswith("hydra.")
    if kind == "callback":  # nothing of align_kit or the standard library is a user's Hydra callback
        return True
    if kind in ("handler", "hydra_handler", "formatter"):
        if kind == "hydra_handler" and value == "logging.FileHandler":  # Hydra logs before the run folder exists
            return True
        return not str(value).startswith("logging.") or str(value).startswith("logging.handlers.")
    if kind == "log_file":
        return not str(value).startswith("${hydra.runtime.output_dir}/")
    if kind == "job_name":
        return not value or "/" in str(value) or str(value) == ".." or len(str(value)) > 255
    if kind == "subdir":
        return value is not None and (not value or str(value).startswith("/") or ".." in str(value).split("/"))
    if kind == "stream":
        return value not in ("ext://sys.stdout", "ext://sys.stderr")
    return kind == "chdir" and value is True


def hydra_cases() -> list[tuple[list[str], str, str]]:
    rng = random.Random(HYDRA_SEED)
    cases = []
    for _ in range(HYDRA_CASES):
        base, key, kind = rng.choice(POSITIONS)
        text = rng.choice(VALUES.get(kind, NAMES))
        override = key.replace("{}", text) if "{}" in key else f"{key}={text}"
        cases.append(([*base, override], kind, text))
    return cases


HYDRA_CASE_LIST = hydra_cases()


@pytest.mark.slow  # 30 s of generated configs, as above
def test_generated_hydra_and_nested_node_values_are_accepted_or_refused_in_one_line(tmp_path, monkeypatch, cache_dir):
    """Through the real pre-flight (composition included): one ConfigError line or a valid config, never a
    traceback, never an accepted value the oracle refuses, and nothing written."""
    from align_kit.runs.preflight import check_command

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("ALIGN_KIT_CACHE", cache_dir)
    outcomes = {"accepted": 0, "refused": 0}
    wrongly_accepted, tracebacks = [], []
    for overrides, kind, text in HYDRA_CASE_LIST:
        try:
            check_command(overrides, multirun=False)
        except ConfigError as error:
            assert "\n" not in str(error), overrides
            outcomes["refused"] += 1
            continue
        except Exception as error:  # a traceback at the CLI
            tracebacks.append(f"{overrides}: {type(error).__name__}: {error}")
            continue
        outcomes["accepted"] += 1
        if must_refuse_in_hydra(kind, text):
            wrongly_accepted.append(" ".join(overrides))
    assert tracebacks == []
    assert wrongly_accepted == []
    assert list(work.iterdir()) == []
    assert outcomes["accepted"] >= 5 and outcomes["refused"] >= 60  # both paths exercised
    assert {kind for _, kind, _ in HYDRA_CASE_LIST} == {kind for _, _, kind in POSITIONS}


def test_the_hydra_oracle_reads_the_docs_rules():
    assert must_refuse_in_hydra("node", "shutil.copyfile") and not must_refuse_in_hydra(
        "node", "align_kit.components.clip.TokenClip"
    )
    assert must_refuse_in_hydra("plugin", "align_kit.runs.run_folder.Path") and not must_refuse_in_hydra(
        "plugin", "hydra.x.Y"
    )
    assert must_refuse_in_hydra("job_name", "../x") and not must_refuse_in_hydra("job_name", "ok")
    assert must_refuse_in_hydra("chdir", "true") and not must_refuse_in_hydra("chdir", "null")
