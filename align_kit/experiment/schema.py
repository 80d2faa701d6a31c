"""The schema of every config node, checked right after composition and before anything is built.

One mechanism for the whole tree: a node's schema is the dataclass its `_target_` names (every
align_kit component is one), `trainer`'s is GRPOConfig's annotations read from TRL's source
(`align_kit.experiment.grpo_fields`), and the top-level keys' is `RunSettings` below. Values are checked as
written, never coerced (`seed=1.5`, `seed=true` and `kl.bias_corrected=maybe` are errors), NaN and inf are
refused, choices are a field's `Literal` annotation, and the ranges a type cannot say (counts >= 1, probabilities,
seeds) are the ones each field declares (`align_kit.core.fields.knob`; GRPOConfig's are listed in grpo_fields).
The walk is generic: no table here names a node's key. Rules that tie several keys together stay in each
component's `validate()` and in `align_kit.experiment.plan`. Every error is one ConfigError line:
`<key>=<value>: expected <what>, got <what>`.

`_target_` may name only a class: an align_kit component (`align_kit.core.component.BUILDABLE`, by its own
defining module path), or a class defined in a package the user lists in `train.allowed_targets` (their own
components). Functions, re-exported names, interpolated targets and Hydra's `_args_`/`_partial_`/`_convert_`/
`_recursive_` are refused, and nothing outside align_kit and the listed packages is imported to check a name.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
import math
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from align_kit.core.errors import ConfigError
from align_kit.core.fields import SEED, Range, field_facts, knob
from align_kit.experiment.compose import added_groups, component_groups
from align_kit.experiment.grpo_fields import (
    MISSING,
    STEP_INTERVAL_TEXT,
    STEP_INTERVALS,
    TRAINER_RANGES,
    TRAINER_REQUIRED,
    grpo_config_fields,
    grpo_field_annotations,
    transformers_enums,
)

OWN_PACKAGE = "align_kit"
# Groups holding one node each (built through `_target_`), read from the defaults list like the plan's;
# `reward` holds a node per selected reward.
NODE_GROUPS = (*component_groups(), "monitor")
# The one Hydra key a node carries: the class to build (align_kit.experiment.schema's targets section).
NODE_KEYS = ("_target_",)
INT_LIMIT = 2**63  # anything larger overflows the C integers torch and numpy use


@dataclass
class TrainSettings:
    resume: bool = knob(False, help="Continue from the last checkpoint in hydra.run.dir (one run, not a sweep).")
    overwrite: bool = knob(
        False, help="Move a run folder that already holds a run aside to <folder>.replaced-<time> instead of refusing."
    )
    allow_reward_max_below_one: bool = knob(
        False,
        help="Accept rewards whose best weighted total is below 1.0; keep false, a perfect answer must be able to "
        "score 1.0.",
        source="16.6.3",
    )
    allowed_targets: list[str] = knob(
        default_factory=list,
        help="Your packages whose classes a `_target_` may name (your own components); name them on the command line.",
    )


@dataclass
class PathSettings:
    output_root: str = knob("outputs", help="The folder under which runs/ and sweeps/ are written.")
    cache_dir: str = knob(
        "~/.cache/align_kit", help="Where warm-started tiny models are cached (train.yaml: $ALIGN_KIT_CACHE if set)."
    )


@dataclass
class RunSettings:
    """The keys of train.yaml outside the groups."""

    seed: int = knob(0, within=SEED, help="The run's seed (TRL's `seed`); sweep over it to repeat an arm.")
    train: TrainSettings = knob(default_factory=TrainSettings, help="How the run starts and what it may build.")
    paths: PathSettings = knob(default_factory=PathSettings, help="Where runs and cached models go.")


# ---------------------------------------------------------------------------------------------- types


@dataclass(frozen=True)
class Kind:
    """What a key accepts: some of bool/int/float/str/list/dict/none/any, with details."""

    types: frozenset[str]
    choices: tuple[str, ...] | None = None  # for strings
    item: Kind | None = None  # list items and mapping values
    schema: type | None = None  # a mapping checked field by field against this dataclass

    def merge(self, other: Kind) -> Kind:
        return Kind(
            self.types | other.types,
            self.choices or other.choices,
            self.item or other.item,
            self.schema or other.schema,
        )


ANY = Kind(frozenset({"any"}))
_SCALARS = {"bool": "bool", "int": "int", "float": "float", "str": "str", "list": "list", "dict": "dict"}


def _kind(*names: str, **details: Any) -> Kind:
    return Kind(frozenset(names), **details)


def kind_of_hint(hint: Any) -> Kind:
    """A Python type hint (a component dataclass field) as a Kind."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None):
        return _kind("none")
    if isinstance(hint, type) and hint.__name__ in _SCALARS and origin is None:
        return _kind(_SCALARS[hint.__name__])
    if origin in (typing.Union, types.UnionType):
        kinds = [kind_of_hint(arg) for arg in args]
        merged = kinds[0]
        for other in kinds[1:]:
            merged = merged.merge(other)
        return merged
    if origin is typing.Literal:
        if all(isinstance(arg, str) for arg in args):
            return _kind("str", choices=tuple(args))
        return _kind(*sorted({type(arg).__name__ for arg in args}))
    if origin is list:
        return _kind("list", item=kind_of_hint(args[0]) if args else None)
    if origin is dict:
        return _kind("dict", item=kind_of_hint(args[1]) if args else None)
    if dataclasses.is_dataclass(hint):
        return _kind("dict", schema=hint)
    return ANY


def kind_of_annotation(node: ast.expr) -> Kind:
    """An annotation from TRL's or transformers' source (GRPOConfig) as a Kind; `Enum | str` takes the
    enum's values as its choices."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return kind_of_annotation(node.left).merge(kind_of_annotation(node.right))
    if isinstance(node, ast.Constant) and node.value is None:
        return _kind("none")
    if isinstance(node, ast.Name):
        if node.id in _SCALARS:
            return _kind(_SCALARS[node.id])
        if node.id in transformers_enums():
            return _kind("str", choices=transformers_enums()[node.id])
        return ANY
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        outer = node.value.id
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if outer in ("Optional", "Union"):
            merged = _kind("none") if outer == "Optional" else kind_of_annotation(inner[0])
            for part in inner:
                merged = merged.merge(kind_of_annotation(part))
            return merged
        if outer in ("list", "List"):
            return _kind("list", item=kind_of_annotation(inner[0]))
        if outer in ("dict", "Dict"):
            return _kind("dict", item=kind_of_annotation(inner[-1]))
        if outer == "Literal":
            values = [ast.literal_eval(part) for part in inner]
            if all(isinstance(value, str) for value in values):
                return _kind("str", choices=tuple(values))
            return _kind(*sorted({type(value).__name__ for value in values}))
    return ANY


@cache
def dataclass_kinds(cls: type) -> dict[str, Kind]:
    """The init fields of a dataclass as Kinds; a field's `metadata["schema"]` names the dataclass a
    plain-dict field is checked against (the tiny model's `warm_start`)."""
    hints = typing.get_type_hints(cls)
    kinds = {}
    for item in dataclasses.fields(cls):
        if not item.init:
            continue
        kinds[item.name] = kind_of_hint(hints[item.name])
        if "schema" in item.metadata:
            kinds[item.name] = _kind("dict", schema=item.metadata["schema"])
    return kinds


@cache
def dataclass_ranges(cls: type) -> dict[str, Range]:
    """The ranges the init fields of a dataclass declare (`align_kit.core.fields.knob`), by field name."""
    return {facts.name: facts.bounds for facts in field_facts(cls) if facts.bounds is not None}


@lru_cache(maxsize=1)
def trainer_kinds() -> dict[str, Kind]:
    kinds = {}
    for name, (annotation, choices) in grpo_field_annotations().items():
        kind = kind_of_annotation(annotation)
        if choices and "str" in kind.types:
            kind = dataclasses.replace(kind, choices=tuple(str(choice) for choice in choices))
        kinds[name] = kind
    return kinds


def show(value: Any) -> str:
    """A value as a user would type it on the command line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):  # quoted when blank or unprintable (a newline would break the one-line error)
        return value if value.strip() and value.isprintable() else repr(value)
    if isinstance(value, list | dict):
        return json.dumps(value, default=str, ensure_ascii=False)
    return repr(value)


def _got(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float" if math.isfinite(value) else "a non-finite number"
    if isinstance(value, str):
        return "an empty value" if not value.strip() else "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def describe(kind: Kind) -> str:
    parts = []
    if "bool" in kind.types:
        parts.append("true or false")
    if "float" in kind.types:
        parts.append("a finite number")
    elif "int" in kind.types:
        parts.append("an integer")
    if "str" in kind.types:
        parts.append(f"one of [{', '.join(kind.choices)}]" if kind.choices else "a non-empty string")
    if "list" in kind.types:
        parts.append("a list")
    if "dict" in kind.types:
        parts.append("a mapping")
    text = " or ".join(parts) or "a value"
    return f"{text} or null" if "none" in kind.types else text


def _refuse(key: str, value: Any, expected: str) -> ConfigError:
    return ConfigError(f"{key}={show(value)}: expected {expected}, got {_got(value)}")


def check_value(key: str, value: Any, kind: Kind) -> None:
    """`value` has the kind `key` accepts, as written (no coercion), and is finite."""
    accepts = kind.types
    if "any" in accepts:
        return
    if value is None:
        if "none" not in accepts:
            raise _refuse(key, value, describe(kind))
        return
    if isinstance(value, bool):
        ok = "bool" in accepts
    elif isinstance(value, int):
        ok = bool({"int", "float"} & accepts)
        if ok and abs(value) >= INT_LIMIT:
            raise ConfigError(f"{key}={show(value)}: expected a number below 2^63")
    elif isinstance(value, float):
        ok = "float" in accepts
        if ok and not math.isfinite(value):
            raise _refuse(key, value, "a finite number")
    elif isinstance(value, str):
        ok = "str" in accepts and bool(value.strip())
        if ok and kind.choices and value not in kind.choices:
            raise ConfigError(f"{key}={show(value)}: expected one of [{', '.join(kind.choices)}]")
    elif isinstance(value, list):
        ok = "list" in accepts
        if ok:
            for index, item in enumerate(value):
                check_value(f"{key}[{index}]", item, kind.item or ANY)
    elif isinstance(value, Mapping):
        ok = "dict" in accepts
        if ok and kind.schema is not None:
            check_fields(key, value, kind.schema)
        elif ok:
            for name, item in value.items():
                check_value(f"{key}.{name}", item, kind.item or ANY)
    else:
        ok = False
    if not ok:
        raise _refuse(key, value, describe(kind))


def check_fields(key: str, node: Mapping, cls: type, allowed: Sequence[str] = ()) -> None:
    """Every key of `node` is a field of the dataclass `cls`, with a value of the field's kind (`allowed`: the
    packages a node inside it may come from)."""
    kinds, ranges = dataclass_kinds(cls), dataclass_ranges(cls)
    for name, value in node.items():
        if name in NODE_KEYS:
            continue
        path = f"{key}.{name}" if key else name
        if name not in kinds:
            where = f"{key} ({cls.__name__})" if key else "the config"
            raise ConfigError(f"{path} is not a key of {where}; its keys: {', '.join(sorted(kinds))}")
        if isinstance(value, Mapping) and "_target_" in value:  # a node inside a node (reward.arena.judge)
            check_node(path, value, allowed)
            continue
        check_value(path, value, kinds[name])
        check_range(path, value, kinds[name], ranges.get(name))


# --------------------------------------------------------------------------------------------- ranges

# The range of a node's integer whose field declares none (a count, a step), and of a GRPOConfig number without one
# in TRAINER_RANGES whose TRL default is >= 0.
NON_NEGATIVE = Range(0)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_range(key: str, value: Any, kind: Kind, bounds: Range | None) -> None:
    """A node's or top-level number within its field's declared range (`bounds`); an integer without one, >= 0."""
    if not _is_number(value):
        return
    integer = "float" not in kind.types
    rule = bounds or (NON_NEGATIVE if integer else None)
    if rule is not None and not rule.holds(value):
        raise ConfigError(f"{key}={show(value)}: expected {rule.describe(integer)}")
    if integer and abs(value) >= INT_LIMIT:
        raise ConfigError(f"{key}={show(value)}: expected an integer below 2^63")


def check_trainer_range(name: str, value: Any, trainer: Mapping) -> None:
    key = f"trainer.{name}"
    if value is None and name in TRAINER_REQUIRED:
        raise ConfigError(f"{key}=null: expected {TRAINER_RANGES[name].describe(True)}; align_kit needs it set")
    if not _is_number(value):
        return
    if isinstance(value, int) and abs(value) >= INT_LIMIT:
        raise ConfigError(f"{key}={show(value)}: expected a number below 2^63")
    if name == "max_steps":
        # transformers' -1 means "train trainer.num_train_epochs epochs"; 0 or below trains nothing.
        if value >= 1 or (value == -1 and "num_train_epochs" in trainer):
            return
        raise ConfigError(f"{key}={show(value)}: expected an integer >= 1 (or -1 with trainer.num_train_epochs set)")
    if name in STEP_INTERVALS:
        if (isinstance(value, int) and value >= 1) or (isinstance(value, float) and 0 < value < 1):
            return
        raise ConfigError(f"{key}={show(value)}: expected {STEP_INTERVAL_TEXT}")
    rule = TRAINER_RANGES.get(name)
    default = grpo_config_fields().get(name, MISSING)
    if rule is None and _is_number(default) and default >= 0:
        rule = NON_NEGATIVE
    integer = "float" not in trainer_kinds()[name].types
    if rule is not None and not rule.holds(value):
        raise ConfigError(f"{key}={show(value)}: expected {rule.describe(integer)}")


# -------------------------------------------------------------------------------------------- targets

# Hydra's instantiate keys a config may not carry: a node is built from its `_target_` class with named keys
# only (positional `_args_`, a deferred `_partial_` call and `_convert_`/`_recursive_` change what is built).
HYDRA_SPECIAL_KEYS = ("_args_", "_partial_", "_convert_", "_recursive_")
# Never a user's own package: the machinery align_kit runs on (and align_kit, whose components need no listing).
NOT_USER_PACKAGES = (OWN_PACKAGE, "hydra", "hydra_plugins", "omegaconf")
ALLOW_HINT = "list your own package in train.allowed_targets=[my_package] to build its classes"


def under(name: str, prefix: str) -> bool:
    """`name` is the module `prefix` or inside it (whole module names: `my_rew` is not under `my_rewards`)."""
    return name == prefix or name.startswith(f"{prefix}.")


def allowed_packages(data: Mapping, task_overrides: list[str] | None = None) -> list[str]:
    """`train.allowed_targets` of the resolved config: the user's own packages (not the standard library, not
    the machinery). With `task_overrides` (the command line's), each must be named there, where the user sees
    it: a preset or a shared config file cannot widen what a run may build."""
    allowed = (data.get("train") or {}).get("allowed_targets") or []
    if not isinstance(allowed, list) or not all(isinstance(name, str) for name in allowed):
        raise ConfigError(f"train.allowed_targets={show(allowed)}: expected a list of your package names")
    for index, name in enumerate(allowed):
        key = f"train.allowed_targets[{index}]"
        if not all(part.isidentifier() for part in name.split(".")):
            raise ConfigError(f"{key}={show(name)}: expected a package name, e.g. my_package or my_package.rewards")
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top in NOT_USER_PACKAGES:
            raise ConfigError(
                f"{key}={name}: expected your own package; {top} is "
                f"{'align_kit or what it runs on' if top in NOT_USER_PACKAGES else 'a standard-library module'}"
            )
    if task_overrides is not None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        named: set[str] = set()
        for override in OverridesParser.create().parse_overrides(list(task_overrides)):
            if override.key_or_group == "train.allowed_targets" and isinstance(override.value(), list):
                named |= {str(item) for item in override.value()}
        unnamed = [name for name in allowed if name not in named]
        if unnamed:
            raise ConfigError(
                f"train.allowed_targets lists {', '.join(unnamed)} from a config file; name the packages a run may "
                f"build from on the command line: train.allowed_targets=[{', '.join(allowed)}]"
            )
    return allowed


def buildable_class(where: str, target: Any, allowed: list[str]) -> type:
    """The class a `_target_` names: a component registered in align_kit's BUILDABLE, or a class defined in a
    package listed in `allowed`, each by its own defining path. Nothing outside align_kit and the listed
    packages is imported to find out."""
    from align_kit.core.component import BUILDABLE

    if target == "???":
        raise ConfigError(f"{where} is not set; name the class to build: {where}=my_package.module.MyClass")
    if not isinstance(target, str) or not target.strip():
        raise ConfigError(f"{where}={show(target)}: expected the dotted name of a component class")
    module_name = target.rpartition(".")[0]
    own = under(module_name, OWN_PACKAGE)
    if not own and not any(under(module_name, prefix) for prefix in allowed):
        raise ConfigError(
            f"{where}={target} is outside align_kit; a config builds only align_kit's component classes ({ALLOW_HINT})"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        module = None
    if own:
        if target not in BUILDABLE:
            raise ConfigError(
                f"{where}={target} is not an align_kit component class; a config builds components only "
                "(functions, re-exported names and other modules' attributes are refused)"
            )
        return BUILDABLE[target]
    found = getattr(module, target.rpartition(".")[2], None) if module is not None else None
    if found is None:
        raise ConfigError(f"{where}={target} cannot be imported; check the module and class name")
    if not isinstance(found, type):
        raise ConfigError(f"{where}={target} is not a class; a config builds classes only ({_got(found)})")
    defined = f"{found.__module__}.{found.__qualname__}"
    if defined != target:
        raise ConfigError(
            f"{where}={target} is {defined}, defined elsewhere; name a class of your listed packages where it "
            "is defined"
        )
    return found


def check_function_names(key: str, node: Mapping, cls: type, allowed: list[str]) -> None:
    """A node's fields marked `metadata={"function": True}` name a user's function (the callable judge): it
    must be a plain function defined in a package listed in train.allowed_targets."""
    if not dataclasses.is_dataclass(cls):
        return
    for item in dataclasses.fields(cls):
        if not item.metadata.get("function") or item.name not in node:
            continue
        where, name = f"{key}.{item.name}", node[item.name]
        if name == "???":
            raise ConfigError(
                f"{where} is not set; name your function: {where}=my_package.module.my_function "
                "(with train.allowed_targets=[my_package])"
            )
        module_name = name.rpartition(".")[0] if isinstance(name, str) else ""
        if not any(under(module_name, prefix) for prefix in allowed):
            raise ConfigError(
                f"{where}={show(name)} is not in a package listed in train.allowed_targets; name a function of "
                "your own package and list it: train.allowed_targets=[my_package]"
            )
        try:
            found = getattr(importlib.import_module(module_name), name.rpartition(".")[2], None)
        except ImportError:
            found = None
        if not inspect.isfunction(found) or f"{found.__module__}.{found.__qualname__}" != name:
            raise ConfigError(f"{where}={name}: expected a function defined there (def {name.rpartition('.')[2]}(...))")


def check_targets(key: str, value: Any, allowed: list[str]) -> None:
    """Every `_target_` anywhere in the (resolved) tree names a buildable class, and no node carries Hydra's
    other instantiate keys."""
    if isinstance(value, Mapping):
        for name, item in value.items():
            path = f"{key}.{name}" if key else str(name)
            if name in HYDRA_SPECIAL_KEYS:
                raise ConfigError(
                    f"{path}={show(item)}: Hydra's {name} is not accepted; a node is built from its _target_ class "
                    "and its named keys only"
                )
        if "_target_" in value:
            where = f"{key}._target_" if key else "_target_"
            check_function_names(key, value, buildable_class(where, value["_target_"], allowed), allowed)
        for name, item in value.items():
            check_targets(f"{key}.{name}" if key else str(name), item, allowed)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_targets(f"{key}[{index}]", item, allowed)


def check_written_targets(key: str, raw: Any, names: tuple[str, ...] = ("_target_",)) -> None:
    """What a node builds is written out, not interpolated (`_target_: ${oc.env:X}` could differ between the
    check and the build); `raw` is the unresolved tree."""
    if isinstance(raw, Mapping):
        for name, item in raw.items():
            path = f"{key}.{name}" if key else str(name)
            if name in names and isinstance(item, str) and "${" in item:
                raise ConfigError(f"{path}={item}: write the class name out; it may not be an interpolation")
            check_written_targets(path, item, names)
    elif isinstance(raw, list):
        for index, item in enumerate(raw):
            check_written_targets(f"{key}[{index}]", item, names)


# ---------------------------------------------------------------------------------------------- entry


def resolved(cfg: DictConfig) -> dict:
    """The config as plain data, every interpolation resolved; a broken one names its key."""
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None) or "config"
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"{key}: cannot be resolved ({message})") from None


def check_node(key: str, node: Any, allowed: list[str], group: str | None = None) -> None:
    """A group's node: a mapping with a `_target_` whose class's fields it matches (with `group`, a class of
    that group: see group_accepts)."""
    if not isinstance(node, Mapping) or "_target_" not in node:
        raise ConfigError(f"{key}={show(node)}: expected a node with a _target_; select one, e.g. {key}=<name>")
    cls = buildable_class(f"{key}._target_", node["_target_"], allowed)
    if group is not None and not group_accepts(group, cls) and not shipped_classes(group):
        raise ConfigError(
            f"{key}._target_={node['_target_']}: {group} is a group this config adds, which holds only a component "
            "of your own (a Component subclass in a package of train.allowed_targets)"
        )
    if group is not None and not group_accepts(group, cls):
        raise ConfigError(
            f"{key}._target_={node['_target_']} is not a {group} node; select one of the group's nodes "
            f"({', '.join(sorted(c.__name__ for c in shipped_classes(group)))}) or a component of your own"
        )
    if dataclasses.is_dataclass(cls):
        check_fields(key, node, cls, allowed)


@cache
def shipped_classes(group: str) -> frozenset[type]:
    """The classes conf/<group>/*.yaml build (for `reward`, the nodes inside each file)."""
    from align_kit import CONF_DIR
    from align_kit.core.component import BUILDABLE

    targets = set()
    for path in sorted((CONF_DIR / group).glob("*.yaml")):
        loaded = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        nodes = loaded.values() if group == "reward" else [loaded]
        targets |= {node["_target_"] for node in nodes if isinstance(node, Mapping) and "_target_" in node}
    for target in targets:
        importlib.import_module(target.rpartition(".")[0])  # registers its classes
    return frozenset(BUILDABLE[target] for target in targets)


def group_accepts(group: str, cls: type) -> bool:
    """An align_kit class in a group is one of the classes the group's shipped nodes build, or a subclass of one
    (the bare Component of step_mask=off admits itself only): a clip node cannot stand in for a reward. A class of
    the user's listed packages is a component of their own, for any group."""
    from align_kit.core.component import Component

    if not under(cls.__module__, OWN_PACKAGE):
        return issubclass(cls, Component)
    return any(cls is base or (base is not Component and issubclass(cls, base)) for base in shipped_classes(group))


def check_config(cfg: DictConfig, data: dict | None = None) -> dict:
    """Targets, types and ranges of the whole composed config (without `hydra`), before anything is
    instantiated; returns the resolved config (`data`: `resolved(cfg)`, when the caller has it)."""
    data = resolved(cfg) if data is None else data
    allowed = allowed_packages(data)
    check_written_targets("", OmegaConf.to_container(cfg, resolve=False))
    check_targets("", data, allowed)  # first: what may be built, wherever it sits
    check_fields("", {key: data[key] for key in ("seed", "train", "paths") if key in data}, RunSettings)
    known = {"seed", "train", "paths", "trainer", "reward", *NODE_GROUPS}
    unknown = sorted(set(data) - known - set(added_groups(data)))
    if unknown:
        raise ConfigError(f"{unknown[0]} is not a key of the config; its keys: {', '.join(sorted(known))}")
    for group in (*NODE_GROUPS, *added_groups(data)):
        check_node(group, data.get(group), allowed, group)
    rewards = data.get("reward")
    if not isinstance(rewards, Mapping) or not rewards:
        raise ConfigError(
            f"reward={show(rewards)}: expected at least one reward node, e.g. reward=[correctness,format]"
        )
    for name, node in rewards.items():
        check_node(f"reward.{name}", node, allowed, "reward")
    trainer = data.get("trainer")
    if not isinstance(trainer, Mapping):
        raise ConfigError(f"trainer={show(trainer)}: expected a mapping of GRPOConfig fields")
    return data


def check_trainer(trainer: Mapping) -> None:
    """Types, choices and ranges of `trainer.<field>` (names were checked by `align_kit.experiment.plan`)."""
    kinds = trainer_kinds()
    for name, value in trainer.items():
        check_value(f"trainer.{name}", value, kinds[name])
        check_trainer_range(name, value, trainer)
