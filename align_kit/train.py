"""`align-kit train` (also `python -m align_kit.train`): compose -> validate -> build -> train -> report."""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
import time
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from align_kit import CONF_DIR
from align_kit.core.disk_space import DISK_FULL_EXIT_CODE, DiskFull, writing
from align_kit.core.errors import ConfigError, TrainingHalted, TrainingInterrupted
from align_kit.core.processes import is_main_process
from align_kit.core.run_files import CONFIG_FILE, SUMMARY_FILE, latest_checkpoint
from align_kit.experiment.compose import CONFIG_NAME, register_open_trainer_node
from align_kit.experiment.plan import build_plan, reward_choice, tagged_choices, validate_dataset
from align_kit.runs.hydra_tree import install_callbacks
from align_kit.runs.run_folder import check_resume, claimed_run_folder
from align_kit.runs.sweep_summary import failed_job
from align_kit.tracking.wandb_logger import NoLogger, RunIdentity, wandb_group

log = logging.getLogger("align_kit")


def component_choices() -> dict[str, str]:
    """Which node of each group the current Hydra job selected (absent recipe/sweep omitted)."""
    from hydra.core.hydra_config import HydraConfig

    return tagged_choices(HydraConfig.get().runtime.choices)


def hydra_context() -> tuple[dict[str, str], str, str | None, str]:
    """(component choices, run folder, W&B group, run name) of the current Hydra job."""
    from hydra.core.hydra_config import HydraConfig

    hydra_cfg = HydraConfig.get()
    choices = component_choices()
    group = wandb_group(choices, hydra_cfg.mode.name == "MULTIRUN", hydra_cfg.sweep.dir)
    name = hydra_cfg.job.override_dirname or "default"
    return choices, hydra_cfg.runtime.output_dir, group, name


def run_identity(cfg: DictConfig, choices: dict[str, str], group: str | None, name: str) -> RunIdentity:
    tags = [f"{g}={c}" for g, c in sorted(choices.items())] + [f"seed={cfg.seed}"]
    config = OmegaConf.to_container(cfg, resolve=True)
    config.update({f"choice/{g}": c for g, c in choices.items()})
    return RunIdentity(name=name, group=group, tags=tags, config=config)


def report(run_dir: Path, summary: dict) -> None:
    offline_runs = sorted(run_dir.glob("wandb/offline-run-*"))
    lines = [
        "",
        f"align-kit: run finished in {summary['wall_seconds']:.0f} s; outputs in {run_dir}",
        "  config.yaml, metrics.jsonl (one line per step), summary.json, checkpoint-*/",
        f"  final reward {summary['final'].get('reward')}, "
        f"warm-start success rate {summary['policy'].get('start_success_rate')}",
        f"  compare runs: align-kit compare {run_dir} <other run folders | sweep folder>",
        "  W&B: " + (f"wandb sync {offline_runs[-1]}" if offline_runs else "logger=wandb or logger=wandb_offline"),
    ]
    print("\n".join(lines))


def run(cfg: DictConfig, choices: dict[str, str], run_dir: str, group: str | None = None, name: str = "default"):
    """Train one experiment; returns the summary dict. ConfigError is raised before any model loads."""
    folder = Path(run_dir)
    if not is_main_process():  # rank 0 owns (and locks) the run folder; every rank trains
        return _train(cfg, choices, folder, group, name)
    # Under Hydra the RunFolderGuard callback already checked and locked the folder before Hydra wrote .hydra/
    # into it (then this is a no-op); without it, or in-process, the folder is checked and locked here.
    with claimed_run_folder(folder, "hydra.run.dir", bool(cfg.train.resume), bool(cfg.train.get("overwrite", False))):
        if cfg.train.resume:
            check_resume(folder, OmegaConf.to_container(cfg, resolve=True))
        return _train(cfg, choices, folder, group, name)


def _train(cfg: DictConfig, choices: dict[str, str], folder: Path, group: str | None, name: str) -> dict:
    started = time.time()
    run_dir = str(folder)
    main_process = is_main_process()
    choices = {**choices, "reward": reward_choice(cfg.reward.keys())}
    plan = build_plan(cfg, choices, run_dir)
    for note in plan.notes:
        print(f"align-kit: {note}", file=sys.stderr)

    folder.mkdir(parents=True, exist_ok=True)
    if main_process:
        with writing(folder, CONFIG_FILE):
            (folder / CONFIG_FILE).write_text(OmegaConf.to_yaml(cfg, resolve=True))
    session = plan.logger.session if main_process else NoLogger().session

    with session(folder, run_identity(cfg, choices, group, name)) as wandb_run:
        train_dataset = plan.task.dataset("train")
        validate_dataset(plan, train_dataset)
        rollout = plan.components["rollout"]
        if plan.effective("use_vllm") and rollout.mode == "server":  # before the policy loads
            from align_kit.vllm_server import wait_for_server

            wait_for_server(rollout.server_base_url, rollout.server_timeout_s)
        policy = plan.model.load(
            plan.task,
            cfg.paths.cache_dir,
            reward=plan.answer_judge,  # the warm start's success rate
            max_new_tokens=plan.effective("max_completion_length"),
        )
        if "start_success_rate" in policy.info:
            log.info("policy warm start: success rate %.3f at temperature 1.0", policy.info["start_success_rate"])
        if wandb_run is not None:
            wandb_run.config.update({"policy": policy.info}, allow_val_change=True)

        from align_kit.components.routing_replay import RouteReplay
        from align_kit.experiment.build_trainer import build_trainer
        from align_kit.runs.stop_signals import StopOnSignal

        stop = StopOnSignal()
        trainer = build_trainer(
            plan, policy.model, policy.tokenizer, extra_callbacks=(stop,), train_dataset=train_dataset
        )
        try:
            trainer.train(resume_from_checkpoint=True if cfg.train.resume else None)
        finally:
            stop.release()
        if stop.forced:  # a second signal, even one whose KeyboardInterrupt a finalizer dropped: stopped at once
            raise KeyboardInterrupt
        if stop.received is not None and trainer.state.global_step < trainer.state.max_steps:  # else it finished
            saved = latest_checkpoint(folder) if plan.effective("save_strategy") != "no" else None
            raise TrainingInterrupted(
                stop.received.name, stop.exit_code, trainer.state.global_step, saved and str(saved)
            )
        if stop.received is not None:  # it came during the last generation's steps: the stop fell on the run's end
            print(
                f"align-kit: {stop.received.name} received during the last generation's steps; the run finished "
                f"them (step {trainer.state.global_step} of {trainer.state.max_steps}) instead of stopping: nothing "
                "to resume",
                file=sys.stderr,
            )
        halted = trainer.health_monitor.halted

        history = [row for row in trainer.state.log_history if "reward" in row]
        replay = trainer.hook(RouteReplay)
        router_hooks = replay.hooks if replay is not None else None  # None on a dense model without replay
        summary = {
            "run_dir": str(folder),
            "choices": choices,
            "seed": int(cfg.seed),
            "steps": trainer.state.global_step,
            "wall_seconds": time.time() - started,
            "reward_max": plan.reward_max,
            "halted": json.loads(halted.to_json()) if halted else None,
            "routing_bytes_per_token": router_hooks.bytes_per_token if router_hooks else None,
            "policy": policy.info,
            "final": history[-1] if history else {},
        }
        if main_process:
            with writing(folder, SUMMARY_FILE):
                (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, default=str))
    if main_process:
        report(folder, summary)
    if halted:
        raise TrainingHalted(halted)
    return summary


register_open_trainer_node()
install_callbacks()  # the run-folder guard and the sweep summary run whatever the config's hydra.callbacks say


@hydra.main(config_path=str(CONF_DIR), config_name=CONFIG_NAME, version_base="1.3")
def main(cfg: DictConfig) -> dict[str, str] | None:
    """One job. In a sweep a failure is returned, not raised, so the other jobs run and the sweep's table
    (align_kit.runs.sweep_summary) reports it."""
    from hydra.core.hydra_config import HydraConfig

    choices, run_dir, group, name = hydra_context()
    multirun = HydraConfig.get().mode.name == "MULTIRUN"
    if not multirun:  # `run` checks and locks the folder (the RunFolderGuard callback did so already under Hydra)
        return _job(cfg, choices, run_dir, group, name, multirun)
    from align_kit.runs.run_lock import hold

    try:
        with hold(Path(run_dir), f"sweep job folder {run_dir}"):  # one process per job (RunFolderGuard)
            return _job(cfg, choices, run_dir, group, name, multirun)
    except ConfigError as error:  # the job's folder is in use by a live run: this job's outcome, not the sweep's
        print(f"align-kit: config error: {error}", file=sys.stderr)
        return {"status": "config error", "error": str(error)}


def _job(cfg: DictConfig, choices: dict, run_dir: str, group: str | None, name: str, multirun: bool) -> dict:
    """One job in its folder: a sweep job first decides from its folder whether it runs at all."""
    from hydra.core.hydra_config import HydraConfig

    if multirun:  # a relaunched sweep skips finished jobs, resumes stopped ones (RunFolderGuard refused train.resume)
        from align_kit.runs.sweep_manifest import RESUME, SKIP, begin_job

        action = begin_job(run_dir, HydraConfig.get().job.num, HydraConfig.get().sweep.dir)
        if action == SKIP:
            return {"status": "ok", "error": None}
        cfg.train.resume = action == RESUME
    from align_kit.runs.launchers import isolated_job

    try:
        with isolated_job():  # its own threads; no W&B run or accelerate state left for the next job
            run(cfg, choices, run_dir, group, name)
    except TrainingInterrupted as stop:
        if multirun:
            requeue_job(stop)  # a SLURM job asked to requeue: it does, and this process ends there
        if multirun:  # the sweep resumes as a whole: finished jobs skipped, this one from its checkpoint if any
            how = f"resume the sweep with: align-kit sweep --resume {HydraConfig.get().sweep.dir}"
        elif stop.checkpoint:
            how = f"resume with: {resume_command(run_dir)}"
        else:
            how = "start a new run (or train.overwrite=true to reuse this folder)"
        print(f"align-kit: {stop}; {how}", file=sys.stderr)
        sys.exit(stop.exit_code)  # a Ctrl-C also ends a sweep
    except KeyboardInterrupt:
        print("align-kit: interrupted; stopped at once, without saving a checkpoint", file=sys.stderr)
        sys.exit(130)
    except DiskFull as full:
        print(f"align-kit: disk full: {full.strerror}", file=sys.stderr)
        if not multirun:
            sys.exit(DISK_FULL_EXIT_CODE)
        return {"status": "disk full", "error": full.strerror}
    except (ConfigError, TrainingHalted) as error:
        kind = "config error" if isinstance(error, ConfigError) else "training halted"
        print(f"align-kit: {kind}: {error}", file=sys.stderr)
        if not multirun:
            sys.exit(2 if isinstance(error, ConfigError) else 3)
        return {"status": kind, "error": str(error).splitlines()[-1]}
    except Exception as error:
        if not multirun:
            raise
        return failed_job(run_dir, error)
    return {"status": "ok", "error": None}


def requeue_job(stop: TrainingInterrupted) -> None:
    """Where `stop` came from submitit's requeue signal (a SLURM job near its time limit or pre-empted), the checkpoint
    is saved: submitit requeues the job and exits; the requeued job resumes from the checkpoint (begin_job)."""
    from align_kit.runs.stop_signals import requeue, requeue_signal

    number = requeue_signal()
    if number is None or stop.signal_name != number.name:
        return
    print(f"align-kit: {stop}; requeueing the SLURM job {os.environ.get('SLURM_JOB_ID')}", file=sys.stderr)
    refused = requeue(number)
    print(f"align-kit: not requeued: {refused}", file=sys.stderr)


def resume_command(run_dir: str) -> str:
    """The command that resumes this job: its own overrides, its folder, train.resume=true."""
    from hydra.core.hydra_config import HydraConfig

    dropped = ("hydra.run.dir=", "train.resume=", "train.overwrite=", "hydra.sweep.dir=")
    kept = [o for o in HydraConfig.get().overrides.task if not o.lstrip("+~").startswith(dropped)]
    return shlex.join(["align-kit", "train", *kept, f"hydra.run.dir={run_dir}", "train.resume=true"])


if __name__ == "__main__":  # as safe as `align-kit train`: the same pre-flight first
    from align_kit.runs.preflight import flags_first, run_preflight

    sys.argv[1:] = flags_first(sys.argv[1:])
    run_preflight(sys.argv[1:])
    main()
