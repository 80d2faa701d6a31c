"""`align-kit sweep NAME [overrides]`: `align-kit train -m sweep=NAME ...` plus the checks a sweep needs."""

from __future__ import annotations

import sys
from pathlib import Path

from align_kit import CONF_DIR

# Hydra flags that print or inspect instead of running: they take no -m.
INSPECT_FLAGS = ("--cfg", "-c", "--info", "-i", "--help", "-h", "--hydra-help")


def config_dirs(args: list[str]) -> list[Path]:
    """The packaged configs, then each `--config-dir DIR` / `-cd DIR` / `--config-dir=DIR` a user added."""
    dirs = [CONF_DIR]
    for i, arg in enumerate(args):
        if arg in ("--config-dir", "-cd") and i + 1 < len(args):
            dirs.append(Path(args[i + 1]))
        elif arg.startswith("--config-dir="):
            dirs.append(Path(arg.split("=", 1)[1]))
    return dirs


def sweep_names(args: list[str]) -> list[str]:
    return sorted({path.stem for folder in config_dirs(args) for path in (folder / "sweep").glob("*.yaml")})


def folder_command(flag: str, rest: list[str]) -> None:
    """`--status FOLDER [--all]` prints the manifest's table (`--all`: a row per job, however many);
    `--resume FOLDER [overrides]` relaunches the sweep there."""
    from align_kit.core.errors import ConfigError
    from align_kit.runs import sweep_manifest
    from align_kit.runs.sweep_manifest import MANIFEST_FILE, read
    from align_kit.runs.sweep_summary import status_table

    usage = f"usage: align-kit sweep {flag} <sweep folder>" + (
        " [--all]" if flag == "--status" else f" [{sweep_manifest.REPLAN_FLAG}] [overrides]"
    )
    extra = [arg for arg in rest[1:] if arg != "--all"] if flag == "--status" else []
    if not rest or rest[0].startswith("-") or extra:
        unknown = f" (not accepted here: {' '.join(extra)})" if extra else ""
        print(usage + unknown, file=sys.stderr)
        sys.exit(2)
    folder = Path(rest[0])
    if folder.exists() and not folder.is_dir():
        print(
            f"align-kit sweep {flag}: {folder} is a file, not a sweep folder; pass the folder that `align-kit sweep` "
            "created (outputs/sweeps/<time>)",
            file=sys.stderr,
        )
        sys.exit(2)
    if flag == "--resume" and sweep_manifest.REPLAN_FLAG in rest[1:]:
        sweep_manifest.replan = True
        rest = [arg for arg in rest if arg != sweep_manifest.REPLAN_FLAG]
    try:
        manifest = read(folder)
    except ConfigError as error:
        print(f"align-kit: config error: {error}", file=sys.stderr)
        sys.exit(2)
    if manifest is None:
        print(
            f"align-kit sweep {flag}: {folder} holds no {MANIFEST_FILE}; pass a folder that `align-kit sweep` "
            "created (outputs/sweeps/<time>)",
            file=sys.stderr,
        )
        sys.exit(2)
    if flag == "--status":
        print(status_table(folder, manifest, every_job="--all" in rest[1:]))
        return
    resume(folder, manifest, rest[1:])


def resume(folder: Path, manifest: dict, typed: list[str]) -> None:
    """`--resume FOLDER [typed]`: relaunch the sweep in `folder` from its manifest, checked as a first launch is; a
    manifest this account did not launch is held to its sweep as align_kit.runs.manifest_trust says."""
    import os

    from align_kit import train
    from align_kit.core.errors import ConfigError
    from align_kit.experiment.typed_overrides import handed_over, override_key
    from align_kit.runs import sweep_manifest
    from align_kit.runs.launchers import THREADS_ENV, given, plan
    from align_kit.runs.manifest_trust import check_job_folders, check_jobs_made, launched_here
    from align_kit.runs.preflight import flags_first, run_preflight
    from align_kit.runs.sweep_manifest import resume_command, task_key

    # Someone else's manifest holds their command line: the keys its lines set count as a file's, except those typed
    # now (a line typed as the manifest has it is dropped from the line: the manifest's copy stands).
    handed = [] if launched_here(manifest) else [*manifest["task_overrides"], *manifest.get("hydra_overrides", [])]
    arguments = resume_command(folder, manifest)
    if given(typed, "hydra/launcher") is not None:  # a launcher named now replaces the first launch's settings
        arguments = [arg for arg in arguments if not is_launcher_setting(arg)]
    handed_keys = {override_key(arg) for arg in arguments if arg in handed} - {override_key(arg) for arg in typed}
    launch = flags_first([*arguments, *[arg for arg in typed if arg not in handed]])
    if given(launch, "hydra/launcher") is None:  # started on Hydra's default launcher: resumed on it too
        launch.append("hydra/launcher=basic")
    try:
        check_job_folders(folder, manifest)
        with handed_over(handed_keys):
            made = run_preflight(["-m", *launch])  # every job, as a first launch checks them: one line, exit 2
        check_jobs_made(folder, manifest, [task_key(job) for job in made])
        # each job composes as it did at the first launch (or --replan), said before any launcher line
        sweep_manifest.check_replan(
            folder, manifest, sweep_manifest.job_configs([j["overrides"] for j in manifest["jobs"]])
        )
    except ConfigError as error:
        print(f"align-kit: config error: {error}", file=sys.stderr)
        sys.exit(2)
    added, threads, line = plan(launch, len(manifest["jobs"]))
    if threads > 0:
        os.environ[THREADS_ENV] = str(threads)
    print(line, file=sys.stderr)
    sys.argv = ["align-kit train", *launch, *added]
    train.main()


def is_launcher_setting(override: str) -> bool:
    """An override that says how jobs are launched (not what they train): replaced when a resume names a launcher."""
    key = override.split("=", 1)[0].lstrip("+~")
    return key == "hydra/launcher" or key.startswith(("hydra.launcher.", "hydra.sweeper.max_batch_size"))


def main(rest: list[str]) -> None:
    from align_kit import train

    if rest and rest[0] in ("--status", "--resume"):
        folder_command(rest[0], rest[1:])
        return
    from align_kit.runs.preflight import flags_first, split_flags

    flags, words = split_flags(rest)  # Hydra's flags may stand anywhere: the sweep's name is the first other word
    rest = [*words[:1], *flags, *words[1:]]
    from align_kit.runs.sweep_file_path import is_sweep_path

    if rest and is_sweep_path(rest[0]):
        rest = from_sweep_file(rest)
    names = sweep_names(rest)
    if not rest or rest[0].startswith("-") or "=" in rest[0]:
        print(f"usage: align-kit sweep <name> [hydra overrides]; names: {', '.join(names)}", file=sys.stderr)
        sys.exit(2)
    # A sweep found through a hydra.searchpath entry is Hydra's to find (or to name as missing).
    if rest[0] not in names and not any(arg.startswith("hydra.searchpath") for arg in rest):
        print(f"align-kit sweep: no sweep {rest[0]!r}; names: {', '.join(names)}", file=sys.stderr)
        sys.exit(2)
    named = [arg for i, arg in enumerate(rest) if arg in names and (i == 0 or not rest[i - 1].startswith("-"))]
    if len(named) > 1:  # `sweep a b` would pass b to Hydra as an override
        print(
            f"align-kit sweep: {len(named)} sweeps named ({', '.join(named)}); a command runs one sweep: "
            f"align-kit sweep {named[0]} [overrides], then the others as commands of their own",
            file=sys.stderr,
        )
        sys.exit(2)
    inspect = any(arg.split("=", 1)[0] in INSPECT_FLAGS for arg in rest[1:])
    if inspect:
        from align_kit.runs.preflight import run_preflight

        run_preflight([f"sweep={rest[0]}", *rest[1:]])  # Hydra sets up its logging for --help: checked first
        sys.argv = ["align-kit train", *flags_first([f"sweep={rest[0]}", *rest[1:]])]
        train.main()
        return
    from align_kit.runs.preflight import run_preflight

    run_preflight(["-m", f"sweep={rest[0]}", *rest[1:]])  # every job valid before any folder or launcher line
    added = launch_plan(rest)
    sys.argv = ["align-kit train", *flags_first(["-m", f"sweep={rest[0]}", *added, *rest[1:]])]
    train.main()


def from_sweep_file(rest: list[str]) -> list[str]:
    """`PATH.yaml [args]` as `NAME --config-dir DIR [args]`: the file is copied, as it is now, to DIR/sweep/NAME.yaml
    in the cache (a folder named by the file's content, so a `--resume` finds the very file the sweep started from),
    and goes through the same pre-flight as any sweep file a user adds with --config-dir."""
    import hashlib
    import os

    from align_kit.runs.sweep_file_path import name_problem

    path = Path(rest[0])
    problem = name_problem(path) if path.is_file() else f"{path}: no such sweep file (a path ending in .yaml names one)"
    if problem:
        print(f"align-kit sweep: {problem}", file=sys.stderr)
        sys.exit(2)
    name = path.stem
    if any(arg in ("--config-dir", "-cd") or arg.startswith("--config-dir=") for arg in rest[1:]):
        print(f"align-kit sweep: {path} is run from a folder of its own; --config-dir is not accepted beside a sweep "
              "file's path (put the file in DIR/sweep/ and run `align-kit sweep NAME --config-dir DIR`)",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    content = path.read_bytes()
    cache = Path(os.environ.get("ALIGN_KIT_CACHE") or Path.home() / ".cache" / "align_kit")
    folder = cache / "sweep_files" / hashlib.sha256(content).hexdigest()[:16]
    copy = folder / "sweep" / f"{name}.yaml"
    if not copy.is_file() or copy.read_bytes() != content:
        copy.parent.mkdir(parents=True, exist_ok=True)
        temporary = copy.with_suffix(".tmp")
        temporary.write_bytes(content)
        temporary.replace(copy)
    return [name, "--config-dir", str(folder), *rest[1:]]


def task_overrides(args: list[str]) -> list[str]:
    return [
        arg
        for arg in args
        if "=" in arg and not arg.startswith("-") and not arg.split("=", 1)[0].lstrip("+~").startswith("hydra")
    ]


def launch_plan(rest: list[str]) -> list[str]:
    """Choose how the jobs run (align_kit.runs.launchers), say it, and return the overrides that choose it."""
    import os

    from omegaconf import OmegaConf

    from align_kit.runs.launchers import THREADS_ENV, plan
    from align_kit.runs.sweep_manifest import job_overrides

    files = [folder / "sweep" / f"{rest[0]}.yaml" for folder in config_dirs(rest)]
    found = [path for path in files if path.is_file()]
    params = OmegaConf.select(OmegaConf.load(found[-1]), "hydra.sweeper.params") if found else None
    params = OmegaConf.to_container(params) if params is not None else {}
    user_dirs = config_dirs(rest)[1:]
    config_dir = str(user_dirs[-1]) if user_dirs else None  # Hydra keeps the last --config-dir
    jobs = len(job_overrides([f"sweep={rest[0]}", *task_overrides(rest[1:])], params, config_dir))
    added, threads, line = plan(rest[1:], jobs)
    if threads > 0:
        os.environ[THREADS_ENV] = str(threads)  # inherited by the jobs' processes
    print(line, file=sys.stderr)
    return added
