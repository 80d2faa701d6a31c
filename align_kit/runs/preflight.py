"""Pre-flight of `align-kit train` (and `-m`, `align-kit sweep`): compose and validate every job
before Hydra runs any of them.

Hydra creates the run (or sweep) folder before it calls the job, so a config rejected inside the
job would leave a folder behind, and in a sweep an invalid arm would surface only after the arms
before it had trained. Here each job's overrides are composed exactly as Hydra's basic sweeper
expands them, validated (schema, plan, writable folders, the data), and the first failure ends
the command with one line naming the job's overrides; nothing is written. Imports nothing heavy
but `datasets` (to check the data) and no model.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose, override_parser
from align_kit.experiment.environment_reads import ENV_READS, check_environment_reads
from align_kit.experiment.hydra_private import basic_sweep, command_line_parser
from align_kit.experiment.opt_ins import check_opt_ins, command_line_only, sweep_param_refusal
from align_kit.experiment.plan import ExperimentPlan, build_plan, tagged_choices, validate_dataset
from align_kit.experiment.schema import allowed_packages, resolved
from align_kit.experiment.shared_compose import SweepComposer
from align_kit.experiment.trainer_needs import check_machine
from align_kit.experiment.trl_accepts import DERIVED, check_trl_accepts
from align_kit.experiment.typed_overrides import typed
from align_kit.experiment.write_folders import check_write_folders
from align_kit.runs.hydra_tree import check_hydra_overrides, check_hydra_tree, check_search_folder
from align_kit.runs.sweep_manifest import composed_jobs, task_key

# What composing a job can raise for a bad config: Hydra's and OmegaConf's errors, and YAML's for a file that is not
# YAML (Hydra lets the parser's error through).
COMPOSE_ERRORS = (HydraException, OmegaConfBaseException, yaml.YAMLError)
PSEUDO_FILE_SYSTEMS = (Path("/proc"), Path("/sys"))
# Hydra's own flags that print or inspect instead of running a job: only what Hydra would build or log is checked.
_INSPECTING = ("help", "hydra_help", "cfg", "info", "shell_completion")
PROGRESS_FROM_JOBS = 50  # a sweep this large shows its pre-flight's progress


def check_writable(key: str, folder: str) -> None:
    """`folder` exists as a writable folder, or could be created in one: proven by creating (and removing) a
    file in its nearest existing ancestor, never by creating the folder itself. os.access calls /proc writable
    to root; /proc and /sys hold the kernel's files, never a run's."""
    path = Path(folder).expanduser()
    shown = folder if len(folder) <= 80 else f"{folder[:60]}...({len(folder)} characters)"
    existing = path
    while not _exists(existing) and existing != existing.parent:
        if _exists(existing, link=True):  # a symlink to nothing: mkdir would fail on it
            raise ConfigError(
                f"{key}={shown} cannot be created: {existing} is a symlink to {os.readlink(existing)}, which does not "
                "exist; create that folder, or choose another"
            )
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{key}={shown} cannot be created: {existing} is a file, not a folder")
    name_max = os.pathconf(existing, "PC_NAME_MAX")
    for part in path.relative_to(existing).parts:
        if len(os.fsencode(part)) > name_max:
            raise ConfigError(
                f"{key}={shown} cannot be created: the name {part[:40]}... is {len(os.fsencode(part))} bytes long, "
                f"and the file system of {existing} allows at most {name_max}; choose a shorter name"
            )
    path_max = os.pathconf(existing, "PC_PATH_MAX")
    if len(os.fsencode(os.path.abspath(path))) >= path_max:
        raise ConfigError(
            f"{key}={shown} cannot be created: the path is longer than the {path_max} bytes the file system of "
            f"{existing} allows; choose a shorter one"
        )
    real = existing.resolve()
    pseudo = next((root for root in PSEUDO_FILE_SYSTEMS if real == root or root in real.parents), None)
    if pseudo is not None:
        raise ConfigError(f"{key}={shown} is under {pseudo}, the kernel's own file system; choose a folder on disk")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".align-kit-write-test-"):
            pass
    except OSError as error:
        raise ConfigError(
            f"{key}={shown} is not writable ({existing} refuses a new file: {error.strerror}); "
            "choose a folder you can write"
        ) from None


def _exists(path: Path, link: bool = False) -> bool:
    """Whether `path` (with `link`, the link itself) exists; a name too long to look up does not (pathlib raises
    ENAMETOOLONG)."""
    try:
        return path.is_symlink() if link else path.exists()
    except OSError:
        return False


@dataclass
class SharedWork:
    """What the jobs of one command share: their compositions by shape (`composer`), each task's data and its
    prompts' checks (`datasets`, see check_data) and the nodes built (`built`, see build_plan)."""

    composer: SweepComposer
    datasets: dict = field(default_factory=dict)
    built: dict = field(default_factory=dict)


def validate_composed(
    cfg: DictConfig,
    choices: dict[str, str],
    run_dir: str,
    data_cache: dict | None = None,
    built: dict | None = None,
    data: dict | None = None,
):
    """Everything that can be checked before the model loads: the plan, the folders, the data (`data_cache`, `built`:
    what a sweep's jobs share; `data`: the config resolved, when the caller has it)."""
    from align_kit.experiment.plan import reward_choice

    choices = {**choices, "reward": reward_choice(cfg.reward.keys())} if "reward" in cfg else choices
    plan = build_plan(cfg, choices, run_dir, built, data)
    check_machine(plan.effective)
    check_writable("paths.cache_dir", str(cfg.paths.cache_dir))
    check_data(plan, data_cache if data_cache is not None else {})
    return plan


def check_data(plan: ExperimentPlan, cache: dict) -> None:
    """Load the train split (and the eval split, when one is named) and check them; `cache` keeps
    each distinct task's data, and its prompts' checks, across the jobs of a sweep."""
    key = repr(plan.task)
    if key not in cache:
        cache[key] = plan.task.dataset("train"), {}
        plan.task.dataset("eval")  # a named eval split must exist
    dataset, prompt_checks = cache[key]
    validate_dataset(plan, dataset, prompt_checks)


def _run_dir(job_index: int | None) -> tuple[str, str]:
    """(the folder Hydra will give this job, the key that sets it), from the composed Hydra config."""
    from hydra.core.hydra_config import HydraConfig

    hydra_cfg = HydraConfig.get()
    if job_index is None:
        return str(hydra_cfg.run.dir), "hydra.run.dir"
    return str(Path(hydra_cfg.sweep.dir) / str(hydra_cfg.sweep.subdir)), "hydra.sweep.dir"


def validate_job(
    overrides: list[str], job_index: int | None = None, config_dir: str | None = None, shared: SharedWork | None = None
):
    """Compose one job as Hydra will (`config_dir`: a `--config-dir` folder) and validate it; returns its plan.
    With `shared` (what the command's jobs share), the job is composed from its shape's composition, which gives
    the same config, and validated with the checks already made; the outcome is the same."""
    from hydra.core.hydra_config import HydraConfig

    cfg = shared.composer.compose(overrides, job_index) if shared else compose(overrides, job_index, config_dir)
    data = check_buildable(cfg)
    if job_index is not None:  # the sweep's manifest records what each job composes to (sweep_manifest.job_configs)
        composed_jobs[task_key(overrides)] = data
    if job_index == 0:  # the launcher is the sweep's, the same for every job
        from align_kit.runs.slurm_checks import check_slurm_launcher

        check_slurm_launcher(HydraConfig.get().launcher)
    run_dir, dir_key = _run_dir(job_index)
    check_writable(dir_key, run_dir)
    if cfg.train.get("resume") is True:  # a non-boolean is the schema's to refuse
        from align_kit.runs.run_folder import SWEEP_RESUME_REFUSED, check_resume

        if job_index is not None:
            raise ConfigError(SWEEP_RESUME_REFUSED)

        # The run's saved config and the checkpoint it would load (read-only; named precisely there).
        check_resume(Path(run_dir), data)
    choices = tagged_choices(HydraConfig.get().runtime.choices)
    if shared is None:
        plan = validate_composed(cfg, choices, run_dir, data=data)
    else:
        plan = validate_composed(cfg, choices, run_dir, shared.datasets, shared.built, data)
    check_idle_overrides(overrides, plan)
    return plan


def check_idle_overrides(overrides: list[str], plan: ExperimentPlan) -> None:
    """A value the user sets (on the command line or in a sweep's params) for a field its node ignores as configured
    (Component.idle_fields) is refused: as any setting without effect, and in a sweep it would make arms that train
    the same thing."""
    for override in override_parser().parse_overrides(list(overrides)):
        if override.is_delete():
            continue
        group, _, name = override.key_or_group.partition(".")
        node = plan.components.get(group)
        fix = node.idle_fields().get(name) if node is not None and name else None
        if fix is not None:
            raise ConfigError(
                f"{override.input_line.lstrip('+')} changes nothing in this config: "
                f"{group}.{name} counts only with {fix}; drop it, or set {fix.split('|')[0]}"
            )


def check_buildable(cfg: DictConfig) -> dict:
    """What the composed job can make Hydra build or log (align_kit.runs.hydra_tree), that it reads the environment
    only where the user wrote so (align_kit.experiment.environment_reads), and that its own packages and the switches
    that run code or upload are named on the command line (align_kit.experiment.opt_ins), that a file points no write
    outside the working folder (align_kit.experiment.write_folders), before anything else is read;
    the job's nodes are align_kit.experiment.schema's to check (every `_target_`, before any is imported or built).
    Returns the config resolved."""
    from hydra.core.hydra_config import HydraConfig

    hydra_cfg = HydraConfig.get()
    # As typed: iterating Hydra's record itself would resolve an interpolation inside a line (`+reward.copy=${clip}`).
    # A handed-over sweep manifest's lines are a file's.
    task_overrides = typed(OmegaConf.to_container(hydra_cfg.overrides.task, resolve=False))
    command_line = [*task_overrides, *typed(OmegaConf.to_container(hydra_cfg.overrides.hydra, resolve=False))]
    raw = {**OmegaConf.to_container(cfg, resolve=False), "hydra": OmegaConf.to_container(hydra_cfg, resolve=False)}
    check_environment_reads(raw, command_line)  # before anything resolves them
    data = resolved(cfg)
    folders = {
        "paths.output_root": str(OmegaConf.select(cfg, "paths.output_root")),
        "paths.cache_dir": str(OmegaConf.select(cfg, "paths.cache_dir")),
        "hydra.run.dir": str(hydra_cfg.run.dir),
        "hydra.sweep.dir": str(hydra_cfg.sweep.dir),
    }
    check_write_folders(raw, folders, command_line, os.getcwd())
    allowed = allowed_packages(data, task_overrides)
    check_opt_ins(data, task_overrides)
    check_hydra_tree(hydra_cfg, allowed)
    return data


def sweep_jobs(
    overrides: list[str], config_dir: str | None = None, composer: SweepComposer | None = None
) -> list[list[str]]:
    """The override list of every job `-m` launches: Hydra's basic sweeper over the sweep file's
    `hydra.sweeper.params` and the command line's overrides (`composer`: the sweep's shared compositions, to
    read the sweep file's). A sweep of no job is refused (Hydra would report "0 of 0 jobs ok"), naming the sweeps
    that expand to nothing."""
    from hydra.core.hydra_config import HydraConfig

    parser = override_parser(config_dir)
    fixed = [override.input_line for override in parser.parse_overrides(overrides) if not override.is_sweep_override()]
    (composer or SweepComposer(config_dir)).compose(fixed)
    params = HydraConfig.get().sweeper.get("params") or {}
    written = OmegaConf.to_container(params, resolve=False) if params else {}
    for key, value in written.items():  # each job reads them as command-line overrides
        name = str(key).lstrip("+~")
        if command_line_only(name):
            raise ConfigError(sweep_param_refusal(key))
        if name.startswith(("hydra.", "hydra/")):  # the launch reads Hydra's settings once, not per job
            raise ConfigError(
                f"hydra.sweeper.params.{key}: a sweep's jobs share Hydra's own settings; set them in the sweep "
                "file's hydra: node or on the command line, not as a swept value"
            )
        if ENV_READS.search(str(value)):
            raise ConfigError(
                f"hydra.sweeper.params.{key}={value}: a sweep file may not read the environment (each job would save "
                "the value in its config); write the values out, or give them on the command line"
            )
    arguments = [f"{key}={value}" for key, value in params.items()] + list(overrides)
    parsed = parser.parse_overrides(arguments)
    jobs = basic_sweep(parsed)
    if not jobs:
        empty = [o.input_line for o in parsed if o.is_sweep_override() and not list(o.sweep_string_iterator())]
        raise ConfigError(
            f"-m launches no job: {' and '.join(empty)} sweeps over no value; give every swept key at least one "
            "(e.g. seed=range(0,3) is 0, 1, 2; glob(...) must match a node of its group)"
        )
    return jobs


def _one_sweep(overrides: list[str], config_dir: str | None = None) -> None:
    """One `sweep=` choice: with two, Hydra silently keeps the last (`config_dir`: where `glob(...)` also looks)."""
    chosen = [
        override
        for override in override_parser(config_dir).parse_overrides(overrides)
        if override.key_or_group == "sweep" and not override.is_delete()
    ]
    values = [value for override in chosen for value in _values(override)]
    if len(values) > 1:
        raise ConfigError(
            f"{len(values)} sweeps chosen ({', '.join(f'sweep={value}' for value in values)}); a command runs one "
            "sweep: keep one, and run the others as commands of their own"
        )


def _values(override) -> list[str]:
    return list(override.sweep_string_iterator()) if override.is_sweep_override() else [override.get_value_string()]


def _varying(jobs: list[list[str]]) -> set[str]:
    """The keys whose value differs between jobs: what names an arm."""
    values: dict[str, set[str]] = {}
    for job in jobs:
        for override in job:
            key, _, value = override.partition("=")
            values.setdefault(key, set()).add(value)
    return {key for key, seen in values.items() if len(seen) > 1 or len(jobs) == 1}


def check_override_keys(overrides: list[str]) -> None:
    """Every override names a key: Hydra reads `=0.3` as a config group override without a group and fails
    with a ValueError deep in its defaults list."""
    for override in overrides:
        key, equals, value = override.partition("=")
        if equals and not key.lstrip("+~"):
            raise ConfigError(f"{override!r} sets no key; write key=value (e.g. clip.eps_high={value})")


def check_command(overrides: list[str], multirun: bool, config_dir: str | None = None) -> list[ExperimentPlan]:
    """Validate every job of the command (`config_dir`: its `--config-dir`); a failure is one ConfigError line
    (naming the job in a sweep). Returns each job's plan."""
    return [plan for _, plan in checked_jobs(overrides, multirun, config_dir)]


def checked_jobs(
    overrides: list[str], multirun: bool, config_dir: str | None = None
) -> list[tuple[list[str], ExperimentPlan]]:
    """check_command's jobs with their overrides, in the order Hydra launches them (a sweep's expansion)."""
    check_override_keys(overrides)
    try:
        _one_sweep(overrides, config_dir)
        if not multirun:
            plan = validate_job(overrides, config_dir=config_dir)
            check_trl_accepts(plan.grpo_kwargs, plan.field_sources)  # last: it imports TRL
            return [(list(overrides), plan)]
        composed_jobs.clear()
        shared = SharedWork(SweepComposer(config_dir))
        jobs = sweep_jobs(overrides, config_dir, shared.composer)
    except COMPOSE_ERRORS as error:
        raise ConfigError(one_line(error)) from None
    arms = _varying(jobs)
    plans, folders = [], {}
    with progress(len(jobs)) as advance, _loaded_objects_frozen():
        for index, job in enumerate(jobs):
            arm = printable(" ".join(override for override in job if override.partition("=")[0] in arms))
            try:
                plans.append(validate_job(job, index, config_dir, shared))
            except ConfigError as error:
                raise ConfigError(f"sweep job {index} of {len(jobs)} ({arm}): {error}") from None
            except COMPOSE_ERRORS as error:
                raise ConfigError(f"sweep job {index} of {len(jobs)} ({arm}): {one_line(error)}") from None
            _own_folder(index, jobs, folders)
            advance()
    _trl_accepts_every_job(plans, jobs, arms)  # last: it imports TRL
    return list(zip(jobs, plans, strict=True))


def _trl_accepts_every_job(plans: list[ExperimentPlan], jobs: list[list[str]], arms: set[str]) -> None:
    """TRL's GRPOConfig accepts each job's values (align_kit.experiment.trl_accepts), checked once per distinct set
    (the fields align_kit derives per job, such as the seed and folder, are never what TRL refuses)."""
    seen = set()
    for index, plan in enumerate(plans):
        distinct = repr(sorted((k, repr(v)) for k, v in plan.grpo_kwargs.items() if k not in DERIVED))
        if distinct in seen:
            continue
        seen.add(distinct)
        try:
            check_trl_accepts(plan.grpo_kwargs, plan.field_sources)
        except ConfigError as error:
            arm = printable(" ".join(override for override in jobs[index] if override.partition("=")[0] in arms))
            raise ConfigError(f"sweep job {index} of {len(jobs)} ({arm}): {error}") from None


@contextlib.contextmanager
def _loaded_objects_frozen() -> Iterator[None]:
    """Left out of Python's full garbage collections for the loop: each job's config trees (cycles: parent and child)
    make one every few dozen jobs, and each walks every object alive, the loaded libraries' most of all (a quarter
    of a large sweep's pre-flight); unfrozen after, collected as before."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def progress(jobs: int) -> Iterator[Callable[[], None]]:
    """The pre-flight's progress on stderr, for a sweep of PROGRESS_FROM_JOBS jobs or more (a smaller one is checked
    in seconds): a bar with the time left on a terminal, cleared when done or refused (the error line follows it);
    elsewhere (a log file, a pipe) one line, not a bar redrawn per job. Yields what to call after each job."""
    if jobs < PROGRESS_FROM_JOBS:
        yield lambda: None
        return
    if not sys.stderr.isatty():
        print(f"align-kit: pre-flight: validating {jobs} sweep jobs before any runs", file=sys.stderr)
        yield lambda: None
        return
    from tqdm import tqdm

    with tqdm(total=jobs, desc="align-kit: pre-flight", unit="job", leave=False, file=sys.stderr) as bar:
        yield bar.update


def _own_folder(index: int, jobs: list[list[str]], folders: dict[str, int]) -> None:
    """Job `index` (just composed) gets a folder no earlier job has: a shared one would hold two jobs' files, and a
    relaunch would count the second job as finished by the first."""
    from hydra.core.hydra_config import HydraConfig

    sweep = HydraConfig.get().sweep
    subdir = str(sweep.subdir)
    inside = os.path.normpath(os.path.join(str(sweep.dir), subdir))
    relative = os.path.relpath(inside, os.path.normpath(str(sweep.dir)))
    if Path(subdir).is_absolute() or relative == os.curdir or relative.split(os.sep)[0] == os.pardir:
        raise ConfigError(
            f"sweep job {index} of {len(jobs)}: hydra.sweep.subdir={subdir} puts its folder at {inside}, not inside "
            f"hydra.sweep.dir={sweep.dir}; a job's folder is a folder inside the sweep's, "
            "e.g. hydra.sweep.subdir=${hydra.job.num} (the default) or ${hydra.job.override_dirname}"
        )
    if subdir in folders:
        first = folders[subdir]
        raise ConfigError(
            f"sweep jobs {first} and {index} of {len(jobs)} would share one folder: hydra.sweep.subdir={subdir} "
            "for both; make the job folder depend on the job, "
            "e.g. hydra.sweep.subdir=${hydra.job.num} (the default) or ${hydra.job.override_dirname}"
        )
    folders[subdir] = index


def printable(text: str) -> str:
    """`text` with its unprintable characters escaped as Python writes them (`\\n`): an error stays one line."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def one_line(error: BaseException) -> str:
    if isinstance(error, yaml.YAMLError):  # a config file (a --config-dir recipe, a sweep file) that is not YAML
        mark = getattr(error, "problem_mark", None)
        where = f"{mark.name} line {mark.line + 1}" if mark is not None else "a config file"
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        return f"{where}: not valid YAML ({problem}); fix the file (a YAML mapping of keys and values)"
    text = str(error).split("Config search path:")[0]  # Hydra appends its search path: noise here
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "; ".join(lines) or type(error).__name__


def flags_first(argv: list[str]) -> list[str]:
    """`argv` with Hydra's flags (and the values they take) moved before the overrides, each group in its order:
    Hydra's parser reads the overrides as one run of positional arguments, so a flag between two overrides
    (`seed=1 --config-dir DIR recipe=x`) would leave the rest unread. A flag is accepted anywhere on the line."""
    flags, words = split_flags(argv)
    return [*flags, *words]


def split_flags(argv: list[str]) -> tuple[list[str], list[str]]:
    """(Hydra's flags with their values, the other words), each in its order."""
    actions = {name: action for action in command_line_parser()._actions for name in action.option_strings}
    flags, overrides = [], []
    index = 0
    while index < len(argv):
        arg = argv[index]
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg
        action = actions.get(name)
        if action is None:
            (flags if arg.startswith("-") and "=" not in arg else overrides).append(arg)
            index += 1
            continue
        flags.append(arg)
        index += 1
        takes = action.nargs is None or (action.nargs == "?" and action.choices is not None)
        if takes and "=" not in arg and index < len(argv):
            value = argv[index]
            if action.nargs is None or value in (action.choices or ()):
                flags.append(value)
                index += 1
    return flags, overrides


def run_preflight(argv: list[str]) -> list[list[str]]:
    """The pre-flight of `align-kit train <argv>` (and `python -m align_kit.train <argv>`): when every job is valid,
    returns each job's overrides (a sweep's expansion; none for a command that only inspects), else prints one line
    and exits 2. A command that only inspects (`--cfg`, `--help`, ...) is checked for what Hydra would build or log
    (it configures logging too), not for the data."""
    args, unknown = command_line_parser().parse_known_args(flags_first(argv))
    try:
        if unknown:  # Hydra's own parser refuses them too, with its usage text
            raise ConfigError(
                f"unrecognized arguments: {' '.join(unknown)} (Hydra's flags: -m, --config-dir DIR, --cfg job, ...; "
                "overrides are key=value)"
            )
        config_dir = check_entry_arguments(args)
        if any(getattr(args, name, None) for name in _INSPECTING):
            check_inspecting(args.overrides, config_dir)
            return []
        return [job for job, _ in checked_jobs(args.overrides, bool(args.multirun), config_dir)]
    except ConfigError as error:
        print(f"align-kit: config error: {error}", file=sys.stderr)
        sys.exit(2)
    finally:
        from hydra.core.global_hydra import GlobalHydra

        GlobalHydra.instance().clear()  # Hydra's own entry initialises it afresh


def check_entry_arguments(args) -> str | None:
    """Hydra's own flags that change where the config comes from; returns the `--config-dir` folder."""
    if args.experimental_rerun:
        raise ConfigError(
            f"--experimental-rerun {args.experimental_rerun}: not accepted (it loads a pickled config, which can "
            "run any code); rerun with the run's overrides (its .hydra/overrides.yaml)"
        )
    for flag, value in (("--config-name", args.config_name), ("--config-path", args.config_path)):
        if value:
            raise ConfigError(
                f"{flag} {value}: align-kit composes its own train config; add your configs with --config-dir DIR "
                "(recipe/NAME.yaml, sweep/NAME.yaml or any group's NAME.yaml there) and select them, e.g. recipe=NAME"
            )
    check_one_mode(args)
    try:
        check_hydra_overrides(args.overrides)
    except COMPOSE_ERRORS as error:
        raise ConfigError(one_line(error)) from None
    if args.config_dir is not None:
        check_search_folder(f"--config-dir {args.config_dir}", args.config_dir)
    return args.config_dir


def check_one_mode(args) -> None:
    """Hydra runs one of --run, --multirun, --cfg, --info, --shell-completion and raises a ValueError (a traceback)
    when given two: the same rule, as one line."""
    modes = {
        "--run": args.run,
        "-m/--multirun": args.multirun,
        f"--cfg {args.cfg}": args.cfg,
        "--info": args.info is not None,
        "--shell-completion": args.shell_completion,
    }
    given = [flag for flag, on in modes.items() if on]
    if len(given) > 1:
        raise ConfigError(
            f"{' and '.join(given)}: Hydra takes only one of --run, --multirun, --cfg, --info, --shell-completion; "
            "e.g. `align-kit train --cfg job seed=1` shows one job's config (drop -m and give one value per key)"
        )


def check_inspecting(overrides: list[str], config_dir: str | None) -> None:
    """`--cfg`, `--help` and the like compose (and Hydra sets up its logging) without running a job: only what
    Hydra would build or log is checked; a config that does not compose is Hydra's to report."""
    try:
        cfg = compose(overrides, config_dir=config_dir)
    except yaml.YAMLError as error:  # Hydra would print the parser's lines
        raise ConfigError(one_line(error)) from None
    except COMPOSE_ERRORS:
        return
    check_buildable(cfg)
