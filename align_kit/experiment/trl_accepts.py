"""TRL's own refusals of a plan's GRPOConfig values, found before the model loads.

`GRPOConfig.__post_init__` (and `TrainingArguments`') refuses combinations that the schema and the plan's rules do
not all copy (`generation_batch_size` with `steps_per_generation`, for one), and a new TRL version adds more. So
the pre-flight builds the GRPOConfig each job will train with, from the same values, and turns its ValueError into
one line naming our keys; nothing is copied, and a new check of TRL's is honoured the day it ships. Importing TRL
costs seconds: it is done only once every other check of every job has passed (a config error answers without
it), in the process that then trains, which imports TRL anyway.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any

from align_kit.core.errors import ConfigError
from align_kit.experiment.grpo_fields import grpo_config_fields

# Set by align_kit for every run, not by a user's key: the same for every job, and never what TRL refuses.
DERIVED = ("output_dir", "seed", "report_to", "reward_weights", "run_name")
# Fields that TrainingArguments checks against the machine the check runs on (a bf16 GPU, Ampere's tf32), not
# against the other values: a sweep composed on a CPU login node for a GPU partition must pass. The plan checks the
# device itself where the job runs; here they take CPU values, so only TRL's refusals of the values remain.
MACHINE_FIELDS = {"bf16": False, "fp16": False, "tf32": None, "use_cpu": True}
# A launcher's environment (torchrun, accelerate launch): building TrainingArguments sets up accelerate's device
# state from it, which would start torch.distributed in the pre-flight.
LAUNCHER_ENV = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@contextlib.contextmanager
def _detached_from_the_launcher():
    """The check runs as one CPU process, and leaves no accelerate state behind: the run then sets up its own."""
    saved = {
        name: os.environ.pop(name)
        for name in list(os.environ)
        if name in LAUNCHER_ENV or name.startswith("ACCELERATE_")
    }
    try:
        yield
    finally:
        os.environ.update(saved)
        from accelerate.state import AcceleratorState

        AcceleratorState._reset_state(reset_partial_state=True)


def named_fields(message: str) -> list[str]:
    """The GRPOConfig fields a message names, in order of appearance (`generation_batch_size`, ...)."""
    fields = grpo_config_fields()
    return list(dict.fromkeys(word for word in re.findall(r"[a-z][a-z0-9_]+", message) if word in fields))


def refusal_line(message: str, grpo_kwargs: dict[str, Any], sources: dict[str, str]) -> str:
    """TRL's refusal as one line: the keys of ours that set the fields it names (`sources`: a field's key, e.g.
    `trainer.steps_per_generation` or `clip=clip_higher`), then TRL's own first line."""
    first = next((line.strip() for line in message.splitlines() if line.strip()), "no reason given")
    named = [name for name in named_fields(message) if name in grpo_kwargs and name not in DERIVED]
    keys = [
        f"{sources.get(name, f'trainer.{name}')}" + ("" if "=" in sources.get(name, "") else f"={grpo_kwargs[name]}")
        for name in named
    ]
    said = f"{' with '.join(keys)}: " if keys else ""
    return f"{said}TRL's GRPOConfig refuses these values ({first}); change one of them"


def check_trl_accepts(grpo_kwargs: dict[str, Any], sources: dict[str, str]) -> None:
    """Build the GRPOConfig a job trains with (nothing is written: output_dir is only named); a ValueError or
    TypeError of TRL's becomes one ConfigError line."""
    from trl import GRPOConfig

    try:
        with _detached_from_the_launcher():
            GRPOConfig(**{**grpo_kwargs, **MACHINE_FIELDS})
    except (ValueError, TypeError) as error:
        raise ConfigError(refusal_line(str(error), grpo_kwargs, sources)) from None
