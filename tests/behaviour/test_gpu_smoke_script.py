"""benchmarks/gpu_smoke.sh, which no machine here can run: its shell parses, its dry run lists every step,
and every training command it would run composes into a valid plan (vLLM's GPU build faked present)."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from align_kit import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "benchmarks" / "gpu_smoke.sh"


def dry_run(gpus: int, tmp_path) -> list[list[str]]:
    result = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=dict(os.environ, GPUS=str(gpus)),
        check=True,
    )
    return [shlex.split(line[2:]) for line in result.stdout.splitlines() if line.startswith("+ ")]


def test_the_script_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_dry_run_lists_each_step_and_the_two_process_run_only_with_two_gpus(tmp_path):
    one, two = dry_run(1, tmp_path), dry_run(2, tmp_path)
    assert len(one) == 3 and len(two) == 4
    assert any("accelerate.commands.launch" in command for command in two)
    assert not any("accelerate.commands.launch" in command for command in one)
    assert two[-1][1] == "benchmarks/trainer_overhead.py"
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


@pytest.mark.usefixtures("vllm_importable")
def test_every_training_command_composes(tmp_path):
    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan
    from align_kit.train import component_choices

    commands = [c for c in dry_run(2, tmp_path) if "align_kit.train" in c]
    assert len(commands) == 3
    for command in commands:
        overrides = command[command.index("align_kit.train") + 1 :]
        plan = build_plan(compose(overrides), component_choices(), str(tmp_path / "run"))
        assert plan.grpo_kwargs["use_vllm"] is True and plan.grpo_kwargs["use_cpu"] is False
        if "routing_replay=r3" in overrides:
            assert plan.components["routing_replay"].mode == "r3"
