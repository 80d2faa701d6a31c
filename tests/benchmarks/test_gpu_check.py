"""benchmarks/gpu_check.sh, the check run on a lent GPU machine: its shell parses, its dry run lists every section and
writes nothing, every training command in it composes into a valid plan (a bf16 GPU faked present), the FP8 layer it
times computes the W8A8 product, and the carried wheels are the complete list: installed into an empty folder for
the device's Python (3.12) they import beside the packages that machine has, and the training path then imports no
wandb."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from align_kit import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "benchmarks" / "gpu_check.sh"
WHEELS = PROJECT_ROOT / ".whl"
# The device's Python distributions, from this workplace's list of the lent machine's image (nvidia-h200, read on
# 2026-11-17), less the GPU-only and unrelated ones align_kit never imports.
DEVICE_PACKAGES = """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs certifi charset-normalizer
click cloudpickle colorama contourpy cycler einops filelock fonttools frozenlist fsspec h11 hf-xet httpcore httpx
huggingface-hub idna jinja2 joblib kiwisolver markdown-it-py markupsafe matplotlib mdurl mpmath multidict networkx
numpy packaging pandas peft pillow pluggy propcache protobuf psutil pyarrow pygments pyparsing python-dateutil
pyyaml regex requests rich safetensors shellingham six sympy tabulate tokenizers torch tqdm transformers triton typer
typing-extensions urllib3 xxhash yarl
""".split()


def dry_run(tmp_path) -> list[list[str]]:
    result = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHON=sys.executable, GPU_CHECK_WORK=str(tmp_path / "work")),
        check=True,
        cwd=PROJECT_ROOT,
    )
    assert "does not compose" not in result.stdout, result.stdout
    return [shlex.split(line[2:]) for line in result.stdout.splitlines() if line.startswith("+ ")]


def test_the_script_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.mark.slow
def test_dry_run_lists_each_section_and_writes_nothing(tmp_path):
    commands = dry_run(tmp_path)
    sections = [c[c.index("--cache-dir") + 2] for c in commands if "benchmarks/gpu_check.py" in c]
    sections = [name if name != "--name" else "run-report" for name in sections]
    assert sections == ["env", "build-models", "overhead", "fp8", "sampler-gap", "run-report"]
    assert sum("align_kit.train" in c for c in commands) == 3
    assert commands[0][1:4] == ["-m", "pip", "install"] and "--no-index" in commands[0]
    assert not (tmp_path / "out").exists() and not (tmp_path / "work").exists()


@pytest.mark.slow
def test_every_training_command_composes_on_a_gpu(tmp_path, monkeypatch):
    """The models the check builds (here at their tiny size, same code) load as model=hf folders, and each training
    command is a valid plan for a bf16 GPU: the embedded default, R3 with the FP8 sampler on the MoE, the dense."""
    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan
    from align_kit.train import component_choices

    models = tmp_path / "work" / "models"
    subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "benchmarks" / "gpu_check.py"), "--parts", str(tmp_path / "parts.jsonl"),
         "build-models", "--dir", str(models), "--size", "tiny"],
        check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)),
    )  # fmt: skip
    monkeypatch.setattr("align_kit.experiment.trainer_needs._gpu_available", lambda: True)
    commands = [c for c in dry_run(tmp_path) if "align_kit.train" in c]
    plans = []
    for command in commands:
        overrides = command[command.index("align_kit.train") + 1 : command.index("--cfg")]
        plans.append(build_plan(compose(overrides), component_choices(), str(tmp_path / "run")))
    for plan in plans:
        assert plan.grpo_kwargs["use_cpu"] is False and plan.grpo_kwargs["bf16"] is True
    default, moe, dense = plans
    assert default.choices["model"] == "tiny"
    assert moe.components["routing_replay"].mode == "r3"
    assert moe.components["rollout"].quantization == "fp8" and moe.model.declared_model_type() == "qwen3_moe"
    assert dense.model.declared_model_type() == "qwen3"


def test_scaled_mm_linear_is_the_w8a8_product():
    """ScaledMMLinear against the product worked out by hand: activations per row and weights per output channel
    rounded to E4M3 (value = fp8 * amax / 448), multiplied in float64; and close to the unquantized product."""
    from benchmarks.fp8_matmul import ScaledMMLinear, swap_in_scaled_mm

    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 48, bias=True)
    x = torch.randn(3, 5, 64).to(torch.bfloat16)
    out = ScaledMMLinear(linear)(x)
    assert out.shape == (3, 5, 48) and out.dtype == torch.bfloat16

    def on_grid(m):
        scale = m.double().abs().amax(dim=-1, keepdim=True) / 448
        return (m.double() / scale).to(torch.float8_e4m3fn).double() * scale

    expected = on_grid(x.reshape(15, 64).float()) @ on_grid(linear.weight.detach()).t() + linear.bias.double()
    got = out.reshape(15, 48).double()
    assert ((got - expected).norm() / expected.norm()).item() < 1e-2  # bf16 output and bias rounding
    exact = x.double() @ linear.weight.double().t() + linear.bias.double()
    error = ((out.double() - exact).norm() / exact.norm()).item()
    assert 1e-3 < error < 0.1  # the two FP8 roundings: visible, and a few percent at most

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    assert swap_in_scaled_mm(model, model, ["0.weight"]) == 1
    assert isinstance(model[0], ScaledMMLinear) and type(model[2]) is torch.nn.Linear


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _machine_like_site(folder: Path) -> Path:
    """A folder of links to this environment's installs of the device's packages (and only those)."""
    folder.mkdir()
    wanted = set(DEVICE_PACKAGES)
    for distribution in importlib.metadata.distributions():
        if _normalized(distribution.metadata["Name"]) not in wanted:
            continue
        site = Path(distribution.locate_file(""))
        tops = {Path(str(entry)).parts[0] for entry in distribution.files or ()}
        for top in tops - {"..", "__pycache__"}:
            source, target = site / top, folder / top
            if source.exists() and not target.exists() and not top.endswith(".pth"):
                target.symlink_to(source)
    return folder


@pytest.mark.skipif(not list(WHEELS.glob("*.whl")), reason="no wheels in .whl/ (the download in gpu_check.sh's header)")
def test_the_carried_wheels_install_and_import_beside_the_device_packages(tmp_path):
    target = tmp_path / "site"
    platforms = [a for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
                 for a in ("--platform", p)]  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target",
         str(target), "--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:", *platforms,
         *map(str, sorted(WHEELS.glob("*.whl")))],
        check=True, capture_output=True,
    )  # fmt: skip
    names = sorted(_normalized(path.name.split("-")[0]) for path in WHEELS.glob("*.whl"))
    assert len(names) == len(set(names)), f"two versions of one package in .whl/: {names}"
    machine = _machine_like_site(tmp_path / "machine")
    probe = (
        "import sys; sys.path[:0] = sys.argv[1:]\n"
        "import trl, hydra, omegaconf, datasets\n"
        "import hydra_plugins.hydra_joblib_launcher, hydra_plugins.hydra_submitit_launcher\n"
        "import align_kit.train\n"
        "from align_kit.trainer import AlignTrainer\n"
        "from align_kit.tracking.wandb_logger import NoLogger\n"
        "print('wandb' in sys.modules)\n"
    )
    # -S: no site-packages of this environment; only the carried target, the device's packages and the project.
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe, str(target), str(machine), str(PROJECT_ROOT)],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "False"  # logger=none's path imports no wandb, so no wandb wheel travels
