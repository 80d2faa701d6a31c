"""The live monitor inside a plain `trl.GRPOTrainer`: add `HealthCallback()` to its callbacks.

The rules, the dashboard, `alerts.jsonl`, `halt.json` and the halt action are `HealthMonitorCallback`'s (the
monitor inside align_kit's own trainer); this subclass only builds what that callback is given by align_kit's
plan, from the trainer's own `GRPOConfig` at `on_train_begin`:

- the `RunContext` (the length budget, the clip range, KL on or off, the reward weights), so alerts judge against
  the run's limits and advise only what is off;
- the folder (`args.output_dir` unless one is given);
- the history on a resume: the monitor state saved in the checkpoint, else `trainer_state.json`'s `log_history`
  (plain TRL writes no `metrics.jsonl`; one given as `metrics_file` is read as align_kit's own runs are).

The reward functions' names come from the first logged step (TRL logs `rewards/<name>/mean` in the order of
`reward_funcs`, the order of `reward_weights`): a callback sees the trainer's arguments, not the trainer.

Its own arguments are checked where they are given (a `ConfigError`, one line naming the argument and the fix),
and the folder again at `on_train_begin`, before the first step: a run must not train for hours to die at its
first alert on a folder it cannot write, nor judge with a reward scale (NaN, inf, <= 0) that silences rules.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from align_kit.core.errors import ConfigError
from align_kit.core.run_files import latest_checkpoint
from align_kit.monitor.callback import HealthMonitorCallback
from align_kit.monitor.rules import Alert, HealthMonitor, RunContext
from align_kit.monitor.rules.context import STATED_GRPO_FIELDS
from align_kit.monitor.samples import SampleBook, generation_from_log, weights_reader
from align_kit.monitor.settings import HealthMonitorConfig

REWARD_PREFIX, REWARD_SUFFIX = "rewards/", "/mean"
# The GRPOConfig fields the monitor's RunContext reads; a TRL run also states its vLLM IS correction.
GRPO_FIELDS = (*STATED_GRPO_FIELDS, "vllm_importance_sampling_correction")


def reward_names(logs: Mapping[str, Any]) -> list[str]:
    """The reward functions' names in one logged row, in logging order (`rewards/<name>/mean`)."""
    return [
        key[len(REWARD_PREFIX) : -len(REWARD_SUFFIX)]
        for key in logs
        if key.startswith(REWARD_PREFIX) and key.endswith(REWARD_SUFFIX)
    ]


def run_context(args: Any, names: list[str] | None = None, reward_max: float | None = None) -> RunContext:
    """What a GRPOConfig (`args`) composes, as the monitor's RunContext (RunContext.from_stated reads its fields
    as it reads a log's stated setup).

    `names`: the reward functions' names, when known; their weights are `args.reward_weights` (TRL's default:
    1.0 each). `reward_max`: the best total reward a completion can score; by default the sum of the positive
    weights, each reward function scoring at most 1.0 (as TRL's own reward functions do), and 1.0 while the
    names are not known yet."""
    weights: dict[str, float] = {}
    if names:
        given = args.reward_weights if args.reward_weights is not None else [1.0] * len(names)
        weights = {name: float(weight) for name, weight in zip(names, given, strict=False)}
    if reward_max is None:
        reward_max = sum(weight for weight in weights.values() if weight > 0) if weights else 1.0
    stated = {name: getattr(args, name, None) for name in GRPO_FIELDS}
    # vLLM's importance-sampling correction only acts when vLLM samples (DESIGN: TRL 1.16 facts).
    stated["is_correction"] = bool(stated.pop("vllm_importance_sampling_correction")) and bool(
        getattr(args, "use_vllm", False)
    )
    return RunContext.from_stated({**stated, "reward_weights": weights}, reward_max=float(reward_max))


def without_halts(config: HealthMonitorConfig) -> HealthMonitorConfig:
    """`config` with every `halt` action turned into `warn`: the alerts show, training never stops."""
    return dataclasses.replace(
        config,
        **{
            rule: dataclasses.replace(getattr(config, rule), action="warn")
            for rule in config.rule_names()
            if getattr(config, rule).action == "halt"
        },
    )


def check_reward_max(value: Any) -> None:
    """None (from the reward weights), or a finite number above the monitor's lowest total reward, 0: a NaN makes
    every comparison false and silences no_signal, an infinite or non-positive one leaves no reward range."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigError(
            f"HealthCallback(reward_max={value!r}): expected a finite number > 0 (the best total reward a completion "
            "can score, above the lowest, 0), or None to take it from the reward weights"
        )


def check_run_dir(run_dir: str | Path) -> None:
    """The folder for alerts.jsonl and halt.json exists as a writable folder, or can be made in one."""
    from align_kit.runs.preflight import check_writable

    try:
        check_writable("run_dir", str(run_dir))
    except ConfigError as error:
        raise ConfigError(f"HealthCallback: {error} (alerts.jsonl and halt.json are written there)") from None


def calling_trainer() -> Any:
    """The `trl.GRPOTrainer` whose callback handler is calling: a callback is handed the model and the optimizer,
    not the trainer, and the completions live on the trainer."""
    import inspect

    from trl import GRPOTrainer

    frame = inspect.currentframe()
    try:
        while frame is not None:
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, GRPOTrainer):
                return candidate
            frame = frame.f_back
    finally:
        del frame
    return None


def measure_by_tokenizer(processing_class: Any, budget: int | None):
    """Lengths in tokens of the completions' text, and `truncated` where a length reaches `budget`."""
    tokenizer = getattr(processing_class, "tokenizer", processing_class)

    def measure(generation) -> None:
        generation.lengths = [
            len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in generation.completions
        ]
        generation.truncated = [budget is not None and length >= budget for length in generation.lengths]
        generation.lengths_source = "re-tokenised text"

    return measure


class HealthCallback(HealthMonitorCallback):
    """The monitor for `trl.GRPOTrainer(..., callbacks=[HealthCallback()])`.

    config: the rules' settings (`HealthMonitorConfig()`: the shipped defaults, as `monitor=default`).
    run_dir: where `alerts.jsonl` and `halt.json` go; `args.output_dir` by default.
    halt: False turns every `halt` action into `warn` (the NaN/inf guard still never saves broken weights).
    metrics_file: an align_kit `metrics.jsonl` to rebuild the history from on a resume; by default
        `<run_dir>/metrics.jsonl` when present, else `trainer_state.json`'s log history.
    reward_max: the best total reward (see `run_context`)."""

    def __init__(
        self,
        config: HealthMonitorConfig | None = None,
        run_dir: str | Path | None = None,
        halt: bool = True,
        metrics_file: str | Path | None = None,
        reward_max: float | None = None,
    ):
        config = config if config is not None else HealthMonitorConfig()
        if not isinstance(config, HealthMonitorConfig):
            raise ConfigError(
                f"HealthCallback(config={type(config).__name__}): expected a HealthMonitorConfig "
                "(align_kit.monitor.HealthMonitorConfig(), the shipped rules)"
            )
        check_reward_max(reward_max)
        if run_dir is not None:
            check_run_dir(run_dir)
        if metrics_file is not None and Path(metrics_file).exists() and not Path(metrics_file).is_file():
            raise ConfigError(
                f"HealthCallback(metrics_file={str(metrics_file)!r}): is not a file; expected align_kit's "
                "metrics.jsonl to rebuild the history from on a resume, or None"
            )
        self.config = config if halt else without_halts(config)
        self._given_run_dir, self._given_metrics_file, self._reward_max = run_dir, metrics_file, reward_max
        self._args: Any = None
        self._rewards_known = False
        self._output_dir = Path(".")
        # The monitor and the folder are the trainer's, known at on_train_begin; until then, the defaults.
        super().__init__(HealthMonitor(self.config), run_dir or ".", metrics_file or "metrics.jsonl")

    def on_train_begin(self, args, state, control, **kwargs):
        self._args, self._output_dir = args, Path(args.output_dir)
        self.run_dir = Path(self._given_run_dir or args.output_dir)
        if state.is_world_process_zero:  # the rank that writes: refused now, not at the first alert hours in
            check_run_dir(self.run_dir)
            self.run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_file = Path(self._given_metrics_file or self.run_dir / "metrics.jsonl")
        self.monitor = HealthMonitor(
            self.config, context=run_context(args, reward_max=self._reward_max), framework="trl"
        )
        self._rewards_known = False
        self.halted = None
        logged = [row for row in state.log_history if row.get("step", 0) <= state.global_step]
        for row in logged:
            self._learn_rewards(row)
        self._trainer = calling_trainer()
        if self.config.enabled and self._trainer is not None and state.is_world_process_zero:
            self.samples = SampleBook(self.config.samples, self.run_dir)
        self._seen_generation = None
        super().on_train_begin(args, state, control, **kwargs)  # the checkpoint's monitor state, or metrics_file
        if state.global_step and not self.monitor.history:
            # Plain TRL: the history is trainer_state.json's log history; alerts raised again here are not repeated.
            for row in logged:
                self.monitor.update(row["step"], row)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs:
            self._learn_rewards(logs)
        return super().on_log(args, state, control, logs=logs, **kwargs)

    def on_step_end(self, args, state, control, **kwargs):
        if self.samples is not None:
            self._record_generation(args, state)
        return super().on_step_end(args, state, control, **kwargs)

    def _record_generation(self, args, state) -> None:
        """The trainer's newest generation batch into the samples' ring, once per batch (TRL's completion log
        holds the last one; a new batch is new string objects). Lengths are measured by re-tokenising the text
        when a file is written: plain TRL keeps no completion ids."""
        from align_kit.trainer import logged_generations

        completions = self._trainer._logs["completion"]
        if not completions or self._seen_generation == (len(completions), id(completions[-1])):
            return
        self._seen_generation = (len(completions), id(completions[-1]))
        generation = generation_from_log(
            logged_generations(self._trainer, len(completions)), state.global_step - 1, args.num_generations
        )
        by_tokenizer = measure_by_tokenizer(self._trainer.processing_class, args.max_completion_length)
        with_weights = weights_reader(self._trainer.reward_weights.clone())

        def measure(generation) -> None:
            by_tokenizer(generation)
            with_weights(generation)

        generation.measure = measure
        self.samples.ring.add(generation)

    def _learn_rewards(self, logs: Mapping[str, Any]) -> None:
        """The reward weights (and the default reward_max) once a row names the reward functions."""
        names = reward_names(logs)
        if self._rewards_known or not names or self._args is None:
            return
        self._rewards_known = True
        learnt = run_context(self._args, names, self._reward_max)
        self.monitor.context = dataclasses.replace(
            self.monitor.context,
            reward_weights=learnt.reward_weights,
            reward_max=learnt.reward_max,
            overlong_shaping=learnt.overlong_shaping,
        )

    def _with_last_checkpoint(self, alert: Alert) -> Alert:
        found = latest_checkpoint(self._output_dir, complete=True) if self._output_dir.is_dir() else None
        where = (
            f"the last finite checkpoint is {found} (trainer.train(resume_from_checkpoint=True) continues from it)"
            if found
            else "no checkpoint was saved before this step (GRPOConfig.save_steps)"
        )
        return dataclasses.replace(alert, advice=f"{alert.advice}; {where}")
