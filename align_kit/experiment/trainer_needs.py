"""GRPOConfig values that need something outside the config: a package, a file, an eval split, a device.

transformers and TRL check these only once the model has loaded (an ImportError or ValueError at step 0, after
the run folder exists). Each rule here was found by training one step with the value on a CPU-only machine;
none imports TRL. `check_trainer_config` reads only the config (run by `build_plan`); `check_machine` asks this
machine for packages and a GPU (run by the pre-flight; torch is imported only when trainer.use_cpu=false).
"""

from __future__ import annotations

import fnmatch
import importlib.util
from dataclasses import fields, is_dataclass
from pathlib import Path

from align_kit.core.contracts import Task
from align_kit.core.errors import ConfigError

# trainer.optim -> (module the optimizer is imported from, pip name): transformers' trainer_optimizer.py.
OPTIMIZER_PACKAGES = {
    "adamw_bnb_8bit": ("bitsandbytes", "bitsandbytes"),
    "adamw_8bit": ("bitsandbytes", "bitsandbytes"),
    "ademamix*": ("bitsandbytes", "bitsandbytes"),
    "lion_*": ("bitsandbytes", "bitsandbytes"),
    "paged_*": ("bitsandbytes", "bitsandbytes"),
    "rmsprop_bnb*": ("bitsandbytes", "bitsandbytes"),
    "galore_*": ("galore_torch", "galore-torch"),
    "apollo_*": ("apollo_torch", "apollo-torch"),
    "adamw_torch_4bit": ("torchao", "torchao"),
    "adamw_torch_8bit": ("torchao", "torchao"),
    "schedule_free_*": ("schedulefree", "schedulefree"),
    "lomo": ("lomo_optim", "lomo-optim"),
    "adalomo": ("lomo_optim", "lomo-optim"),
    "grokadamw": ("grokadamw", "grokadamw"),
    "stable_adamw": ("optimi", "torch-optimi"),
    "adamw_anyprecision": ("torchdistx", "torchdistx"),
    "adamw_torch_xla": ("torch_xla", "torch_xla"),
    "adamw_torch_npu_fused": ("torch_npu", "torch_npu"),
}
# Schedulers whose lr_scheduler_kwargs must name exactly one of these (transformers' optimization.py).
MIN_LR_SCHEDULERS = ("cosine_with_min_lr", "cosine_warmup_with_min_lr")
MIN_LR_KEYS = ("min_lr", "min_lr_rate")
POLYNOMIAL_LR_END = 1e-7  # transformers' default lr_end, which must stay below the learning rate


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def has_eval_data(task: Task) -> bool:
    """Whether the trainer gets an eval dataset: AlignTrainer passes one for a task with num_eval > 0."""
    return bool(task.num_eval)


def _eval_rows_are_a_knob(task: Task) -> bool:
    """Whether the task's num_eval is one of its keys (a field), not the task base's fixed 0."""
    return is_dataclass(task) and any(field.name == "num_eval" for field in fields(task))


def _gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _check_packages(effective) -> None:
    optim = str(effective("optim"))
    for pattern, (module, pip_name) in OPTIMIZER_PACKAGES.items():
        if fnmatch.fnmatchcase(optim, pattern) and not installed(module):
            raise ConfigError(
                f"trainer.optim={optim} needs the {pip_name} package, which is not installed: "
                f"pip install {pip_name}, or use trainer.optim=adamw_torch"
            )
    if effective("use_liger_kernel") and not installed("liger_kernel"):
        raise ConfigError(
            "trainer.use_liger_kernel=true needs the liger-kernel package, which is not installed: "
            "pip install liger-kernel, or set trainer.use_liger_kernel=false"
        )
    deepspeed = effective("deepspeed")
    if deepspeed is not None:
        if not installed("deepspeed"):
            raise ConfigError(
                f"trainer.deepspeed={deepspeed} needs the deepspeed package, which is not installed: "
                "pip install deepspeed, or remove trainer.deepspeed"
            )
        if isinstance(deepspeed, str) and not deepspeed.lstrip().startswith("{") and not Path(deepspeed).is_file():
            raise ConfigError(f"trainer.deepspeed={deepspeed}: no such file; point it at a DeepSpeed JSON config")


def _check_evaluation(effective, task: Task, task_choice: str | None) -> None:
    strategy = str(effective("eval_strategy"))
    scheduler = str(effective("lr_scheduler_type"))
    if scheduler == "reduce_lr_on_plateau" and strategy == "no":
        raise ConfigError(
            "trainer.lr_scheduler_type=reduce_lr_on_plateau steps on an eval metric, but trainer.eval_strategy=no; "
            "set trainer.eval_strategy=steps (with eval data) or use another scheduler"
        )
    saving = str(effective("save_strategy"))
    if effective("load_best_model_at_end") and saving != "best" and strategy != saving:
        raise ConfigError(
            f"trainer.load_best_model_at_end=true needs trainer.eval_strategy ({strategy}) to match "
            f"trainer.save_strategy ({saving}), or trainer.save_strategy=best"
        )
    if strategy != "no" and not has_eval_data(task):
        # The trainer evaluates the rows of a generated task's num_eval; task=hf_dataset's eval_split is only checked.
        where = "set task.num_eval=<rows> or" if _eval_rows_are_a_knob(task) else "use a task with num_eval, or set"
        raise ConfigError(
            f"trainer.eval_strategy={strategy} evaluates on eval data, but task={task_choice} gives the trainer none; "
            f"{where} trainer.eval_strategy=no"
        )


def _check_scheduler(effective) -> None:
    scheduler = str(effective("lr_scheduler_type"))
    kwargs = effective("lr_scheduler_kwargs") or {}
    if not isinstance(kwargs, dict):
        return  # a JSON string: transformers parses it; nothing to read here
    if scheduler in MIN_LR_SCHEDULERS and sum(key in kwargs for key in MIN_LR_KEYS) != 1:
        raise ConfigError(
            f"trainer.lr_scheduler_type={scheduler} needs exactly one of min_lr / min_lr_rate in "
            f"trainer.lr_scheduler_kwargs (got {sorted(kwargs) or 'none'}); e.g. "
            "'trainer.lr_scheduler_kwargs={min_lr_rate:0.1}'"
        )
    if scheduler == "polynomial":
        lr_end, rate = kwargs.get("lr_end", POLYNOMIAL_LR_END), effective("learning_rate")
        if isinstance(lr_end, int | float) and lr_end >= rate:
            raise ConfigError(
                f"trainer.lr_scheduler_type=polynomial decays to lr_end={lr_end:g}, which must be below "
                f"trainer.learning_rate={rate:g}; lower trainer.lr_scheduler_kwargs.lr_end"
            )


def _check_precision(effective) -> None:
    """fp16 on a CPU trains in fp32 without a word (accelerate enables fp16 autocast only on accelerators); tf32
    is refused by TrainingArguments off an Ampere GPU; bf16 acts on a CPU (CPU autocast) and is allowed, but
    TrainingArguments refuses it with use_cpu=false and no bf16 GPU."""
    on_cpu = bool(effective("use_cpu")) or not _gpu_available()
    device = "trainer.use_cpu=true" if effective("use_cpu") else "this machine has no GPU"
    if on_cpu:
        if effective("fp16"):
            raise ConfigError(
                f"trainer.fp16=true has no effect on the CPU ({device}): accelerate runs fp16 only on a GPU, so "
                "training would be fp32; set trainer.fp16=false, or trainer.bf16=true for CPU autocast"
            )
        if effective("tf32"):
            raise ConfigError(f"trainer.tf32=true needs an Ampere or newer GPU ({device}); set trainer.tf32=false")
    if not effective("use_cpu") and on_cpu and (effective("bf16") or effective("bf16_full_eval")):
        raise ConfigError(
            "trainer.bf16=true with trainer.use_cpu=false needs a GPU with bf16 (this machine has none); "
            "set trainer.use_cpu=true to use CPU bf16 autocast"
        )


def _check_compile(effective) -> None:
    """A torch.compile backend or mode that accelerate or torch does not know fails when the model is wrapped."""
    backend, mode = effective("torch_compile_backend"), effective("torch_compile_mode")
    if backend is not None:
        from accelerate.utils import DynamoBackend

        known = [member.value for member in DynamoBackend]
        if str(backend).upper() not in known:
            raise ConfigError(
                f"trainer.torch_compile_backend={backend} is not a backend accelerate knows "
                f"({', '.join(name.lower() for name in known)}); e.g. inductor"
            )
    if mode is not None:
        from torch._inductor import list_mode_options

        if mode not in list_mode_options():
            raise ConfigError(
                f"trainer.torch_compile_mode={mode} is not a torch.compile mode ({', '.join(list_mode_options())})"
            )


def cpu_fallback_warning(effective) -> str | None:
    """trainer.use_cpu=false on a machine without a GPU is a legitimate no-op (it trains on the CPU): said once."""
    if effective("use_cpu") or _gpu_available():
        return None
    return "warning: trainer.use_cpu=false, but this machine has no GPU: training runs on the CPU"


def check_trainer_config(effective, task: Task, task_choice: str | None) -> None:
    """The rules that read only the config; `effective(name)` is a GRPOConfig field as TRL will see it."""
    _check_evaluation(effective, task, task_choice)
    _check_scheduler(effective)


def check_machine(effective) -> None:
    """The rules that ask this machine: installed packages, files, a GPU."""
    _check_packages(effective)
    _check_precision(effective)
    _check_compile(effective)
