"""GRPOConfig values that need a package, a file, an eval split or a GPU: each rule on its own, with this
machine's answers (packages installed, a GPU present) stubbed so the test means the same everywhere."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from align_kit.core.errors import ConfigError
from align_kit.experiment import trainer_needs
from align_kit.experiment.grpo_fields import grpo_config_fields
from align_kit.experiment.trainer_needs import (
    OPTIMIZER_PACKAGES,
    check_machine,
    check_trainer_config,
    cpu_fallback_warning,
)

ARITHMETIC = SimpleNamespace(num_eval=0)


def effective(**values):
    """A GRPOConfig field as TRL sees it: these values over TRL's defaults (use_cpu as align_kit's default)."""
    fields = {**grpo_config_fields(), "use_cpu": True, **values}
    return fields.get


@pytest.fixture
def machine(monkeypatch):
    """Stub this machine: `machine(gpu=..., installed={...})`."""

    def stub(gpu: bool = False, installed: frozenset = frozenset()):
        monkeypatch.setattr(trainer_needs, "_gpu_available", lambda: gpu)
        monkeypatch.setattr(trainer_needs, "installed", lambda module: module in installed)

    return stub


@pytest.mark.parametrize("use_cpu", [True, False])
def test_fp16_off_a_gpu_is_refused_because_it_would_train_fp32(machine, use_cpu):
    machine(gpu=False)
    with pytest.raises(ConfigError, match=r"trainer.fp16=true has no effect on the CPU .*so training would be fp32"):
        check_machine(effective(fp16=True, use_cpu=use_cpu))


def test_fp16_and_tf32_on_a_gpu_pass(machine):
    machine(gpu=True)
    check_machine(effective(fp16=True, tf32=True, use_cpu=False))


def test_fp16_with_use_cpu_is_refused_even_on_a_gpu_machine(machine):
    machine(gpu=True)
    with pytest.raises(ConfigError, match=r"\(trainer.use_cpu=true\)"):
        check_machine(effective(fp16=True))


def test_tf32_off_a_gpu_is_refused(machine):
    machine(gpu=False)
    with pytest.raises(ConfigError, match="trainer.tf32=true needs an Ampere or newer GPU"):
        check_machine(effective(tf32=True, use_cpu=False))


def test_bf16_acts_on_the_cpu_but_not_with_use_cpu_false_and_no_gpu(machine):
    machine(gpu=False)
    check_machine(effective(bf16=True))  # CPU autocast: allowed
    with pytest.raises(ConfigError, match="trainer.bf16=true with trainer.use_cpu=false needs a GPU"):
        check_machine(effective(bf16=True, use_cpu=False))


def test_use_cpu_false_without_a_gpu_is_a_warning_once(machine):
    machine(gpu=False)
    assert cpu_fallback_warning(effective(use_cpu=False)) == (
        "warning: trainer.use_cpu=false, but this machine has no GPU: training runs on the CPU"
    )
    assert cpu_fallback_warning(effective(use_cpu=True)) is None
    machine(gpu=True)
    assert cpu_fallback_warning(effective(use_cpu=False)) is None


OPTIMIZERS = {  # trainer.optim -> the pip name its error names (transformers' trainer_optimizer.py)
    "adamw_bnb_8bit": "bitsandbytes",
    "adamw_8bit": "bitsandbytes",
    "paged_adamw_32bit": "bitsandbytes",
    "lion_32bit": "bitsandbytes",
    "ademamix_8bit": "bitsandbytes",
    "rmsprop_bnb_8bit": "bitsandbytes",
    "galore_adafactor": "galore-torch",
    "apollo_adamw_layerwise": "apollo-torch",
    "adamw_torch_8bit": "torchao",
    "schedule_free_radam": "schedulefree",
    "lomo": "lomo-optim",
    "grokadamw": "grokadamw",
    "stable_adamw": "torch-optimi",
    "adamw_anyprecision": "torchdistx",
    "adamw_torch_xla": "torch_xla",
    "adamw_torch_npu_fused": "torch_npu",
}


@pytest.mark.parametrize(("optim", "pip_name"), OPTIMIZERS.items())
def test_an_optimizer_whose_package_is_missing_is_named_with_its_install(machine, optim, pip_name):
    machine(installed=frozenset())
    with pytest.raises(
        ConfigError, match=f"trainer.optim={optim} needs the {pip_name} package.*pip install {pip_name}"
    ):
        check_machine(effective(optim=optim))
    module = next(module for pattern, (module, name) in OPTIMIZER_PACKAGES.items() if name == pip_name)
    machine(installed=frozenset({module}))
    check_machine(effective(optim=optim))


@pytest.mark.parametrize("optim", ["adamw_torch", "adamw_torch_fused", "adafactor", "sgd", "adagrad", "rmsprop"])
def test_optimizers_in_torch_need_no_package(machine, optim):
    machine(installed=frozenset())  # adamw_torch_fused trains on the CPU with torch 2.13 (measured)
    check_machine(effective(optim=optim))


def test_liger_and_deepspeed_need_their_packages_and_deepspeed_its_file(machine, tmp_path):
    machine(installed=frozenset())
    with pytest.raises(ConfigError, match="use_liger_kernel=true needs the liger-kernel package"):
        check_machine(effective(use_liger_kernel=True))
    with pytest.raises(ConfigError, match="trainer.deepspeed=zero3.json needs the deepspeed package"):
        check_machine(effective(deepspeed="zero3.json"))
    machine(installed=frozenset({"deepspeed"}))
    with pytest.raises(ConfigError, match=f"trainer.deepspeed={tmp_path}/zero3.json: no such file"):
        check_machine(effective(deepspeed=str(tmp_path / "zero3.json")))
    (tmp_path / "zero3.json").write_text("{}")
    check_machine(effective(deepspeed=str(tmp_path / "zero3.json")))
    check_machine(effective(deepspeed='{"zero_optimization": {"stage": 3}}'))  # inline JSON: no file to find


@pytest.mark.parametrize("strategy", ["steps", "epoch"])
def test_evaluation_needs_eval_rows_from_the_task(strategy):
    with pytest.raises(ConfigError, match=f"trainer.eval_strategy={strategy} evaluates on eval data, but task="):
        check_trainer_config(effective(eval_strategy=strategy), ARITHMETIC, "arithmetic")
    check_trainer_config(effective(eval_strategy=strategy), SimpleNamespace(num_eval=8), "arithmetic")


def test_plateau_scheduler_needs_evaluation_and_best_model_needs_matching_strategies():
    with pytest.raises(ConfigError, match="reduce_lr_on_plateau steps on an eval metric"):
        check_trainer_config(effective(lr_scheduler_type="reduce_lr_on_plateau"), ARITHMETIC, "arithmetic")
    with pytest.raises(
        ConfigError, match=r"needs trainer.eval_strategy \(no\) to match trainer.save_strategy \(steps\)"
    ):
        check_trainer_config(effective(load_best_model_at_end=True, save_strategy="steps"), ARITHMETIC, "arithmetic")
    check_trainer_config(effective(load_best_model_at_end=True, save_strategy="no"), ARITHMETIC, "arithmetic")
    check_trainer_config(effective(load_best_model_at_end=True, save_strategy="best"), ARITHMETIC, "arithmetic")


@pytest.mark.parametrize(
    ("kwargs", "refused"),
    [
        ({}, True),
        ({"min_lr": 1e-6}, False),
        ({"min_lr_rate": 0.1}, False),
        ({"min_lr": 1e-6, "min_lr_rate": 0.1}, True),
    ],
)
@pytest.mark.parametrize("scheduler", ["cosine_with_min_lr", "cosine_warmup_with_min_lr"])
def test_min_lr_schedulers_need_exactly_one_floor(scheduler, kwargs, refused):
    values = effective(lr_scheduler_type=scheduler, lr_scheduler_kwargs=kwargs)
    if refused:
        with pytest.raises(ConfigError, match="needs exactly one of min_lr / min_lr_rate"):
            check_trainer_config(values, ARITHMETIC, "arithmetic")
    else:
        check_trainer_config(values, ARITHMETIC, "arithmetic")


@pytest.mark.parametrize(
    ("rate", "lr_end", "refused"),
    [(1e-8, None, True), (1e-7, None, True), (2e-7, None, False), (1e-3, 1e-3, True), (1e-3, 1e-4, False)],
)
def test_polynomial_decay_ends_below_the_learning_rate(rate, lr_end, refused):
    kwargs = {} if lr_end is None else {"lr_end": lr_end}  # transformers' lr_end defaults to 1e-7
    values = effective(lr_scheduler_type="polynomial", learning_rate=rate, lr_scheduler_kwargs=kwargs)
    if refused:
        with pytest.raises(ConfigError, match="which must be below trainer.learning_rate"):
            check_trainer_config(values, ARITHMETIC, "arithmetic")
    else:
        check_trainer_config(values, ARITHMETIC, "arithmetic")


def test_torch_compile_backend_and_mode_must_be_known():
    # The values accelerate's DynamoBackend and torch's list_mode_options accept (a bogus one failed at step 0).
    with pytest.raises(ConfigError, match="trainer.torch_compile_backend=bogus is not a backend accelerate knows"):
        check_machine(effective(torch_compile_backend="bogus"))
    with pytest.raises(ConfigError, match="trainer.torch_compile_mode=fastest is not a torch.compile mode"):
        check_machine(effective(torch_compile_mode="fastest"))
    check_machine(effective(torch_compile_backend="inductor", torch_compile_mode="reduce-overhead"))
    check_machine(effective(torch_compile_backend="eager"))


def test_the_cpu_fallback_warning_is_one_plan_note(machine, tmp_path):
    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan
    from align_kit.train import component_choices

    machine(gpu=False)
    plan = build_plan(compose(["trainer.use_cpu=false"]), component_choices(), str(tmp_path))
    assert [note for note in plan.notes if "use_cpu" in note] == [
        "warning: trainer.use_cpu=false, but this machine has no GPU: training runs on the CPU"
    ]
