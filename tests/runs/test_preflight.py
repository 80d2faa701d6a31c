"""The pre-flight (every job validated before Hydra runs any), the `_target_` allowlist, the writable-folder checks
and what a config can make Hydra build or write."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.experiment.shared_compose import SweepComposer
from align_kit.runs.preflight import SharedWork, check_command, progress, sweep_jobs, validate_job
from align_kit.train import component_choices
from tests.conftest import ROOT, cli_env
from tests.experiment.test_shared_compose import mixed_config_dir


def test_a_hostile_target_is_refused_by_the_real_command_and_the_file_is_untouched(tmp_path, cache_dir):
    victim = tmp_path / "F"
    victim.write_text("keep me\n")
    work = tmp_path / "work"
    work.mkdir()
    command = ["train", "logger=none", "logger._target_=builtins.open", f"+logger.file={victim}", "+logger.mode=w"]
    result = subprocess.run(
        [str(Path(sys.executable).parent / "align-kit"), *command],
        cwd=work,
        capture_output=True,
        text=True,
        env=cli_env(cache_dir),
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "align-kit: config error: logger._target_=builtins.open is outside align_kit; a config builds only "
        "align_kit's component classes (list your own package in train.allowed_targets=[my_package] to build its "
        "classes)"
    ]
    assert victim.read_text() == "keep me\n"
    assert list(work.iterdir()) == []


@pytest.mark.slow
def test_every_job_of_a_sweep_is_validated_before_any_runs(tmp_path, monkeypatch, cache_dir):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ALIGN_KIT_CACHE", cache_dir)
    plans = check_command(["sweep=clip_higher"], multirun=True)
    # sweeps/clip_higher.yaml: eps_high 0.2, 0.28, 0.4 x seeds 1..5, in Hydra's order (first key outermost).
    expected = [(eps, seed) for eps in (0.2, 0.28, 0.4) for seed in (1, 2, 3, 4, 5)]
    assert [(p.grpo_kwargs["epsilon_high"], p.grpo_kwargs["seed"]) for p in plans] == expected
    assert [Path(p.grpo_kwargs["output_dir"]).name for p in plans] == [str(i) for i in range(15)]
    assert list(tmp_path.iterdir()) == []


def test_a_valid_single_run_passes_and_writes_nothing(tmp_path, monkeypatch, cache_dir):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ALIGN_KIT_CACHE", cache_dir)
    [plan] = check_command(["seed=7", "hydra.run.dir=somewhere"], multirun=False)
    assert plan.grpo_kwargs["seed"] == 7 and plan.grpo_kwargs["output_dir"] == "somewhere"
    assert list(tmp_path.iterdir()) == []


USER_REWARD = """
from dataclasses import dataclass
from align_kit.rewards.base import RewardNode

@dataclass
class Length(RewardNode):
    unit: int = 4

    def __call__(self, completions, **kwargs):
        return [0.0 for _ in completions]
"""


@pytest.fixture
def user_package(tmp_path, monkeypatch):
    package = tmp_path / "my_rewards"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "length.py").write_text(textwrap.dedent(USER_REWARD))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "+reward.length={_target_: my_rewards.length.Length, weight: 0.0, unit: 2}"


def plan_for(*overrides: str):
    return build_plan(compose(list(overrides)), component_choices(), "/tmp/align_kit_preflight")


def test_a_users_component_needs_its_module_in_the_allowlist(user_package):
    with pytest.raises(ConfigError) as refused:
        plan_for(user_package)
    assert str(refused.value).startswith("reward.length._target_=my_rewards.length.Length is outside align_kit")

    plan = plan_for(user_package, "train.allowed_targets=[my_rewards]")
    assert [spec.name for spec in plan.rewards] == ["correctness", "format", "length"]


def test_a_users_component_is_type_checked_like_ours(user_package):
    with pytest.raises(ConfigError) as refused:
        plan_for(user_package, "train.allowed_targets=[my_rewards]", "reward.length.unit=2.5")
    assert str(refused.value) == "reward.length.unit=2.5: expected an integer, got a float"


def test_an_allowlist_prefix_matches_whole_module_names_only(user_package):
    with pytest.raises(ConfigError, match="is outside align_kit"):
        plan_for(user_package, "train.allowed_targets=[my_rew]")


def test_a_writable_folder_is_proven_by_a_file_created_and_removed_in_its_nearest_existing_ancestor(tmp_path):
    from align_kit.runs.preflight import check_writable

    check_writable("hydra.run.dir", str(tmp_path / "runs" / "a"))
    assert list(tmp_path.iterdir()) == []  # neither the run folder nor the probe file is left


@pytest.mark.parametrize("folder", ["/proc/align_kit_run", "/proc/self", "/sys/kernel/align_kit", "/proc"])
def test_kernel_file_systems_are_refused_though_os_access_calls_them_writable(folder):
    from align_kit.runs.preflight import check_writable

    with pytest.raises(ConfigError, match=f"paths.cache_dir={folder} is under /(proc|sys), the kernel's own"):
        check_writable("paths.cache_dir", folder)


def test_a_folder_that_refuses_a_new_file_is_refused_even_for_root(tmp_path):
    from align_kit.runs.preflight import check_writable

    locked = tmp_path / "locked"
    locked.mkdir()
    # root passes every permission bit; an immutable folder refuses even root (needs chattr and CAP_LINUX_IMMUTABLE).
    if subprocess.run(["chattr", "+i", str(locked)], capture_output=True).returncode != 0:
        locked.chmod(0o555)
    try:
        if _can_create(locked):
            pytest.skip("this user can write in the locked folder")
        # (the value may be shown shortened when the path is long; the folder that refused is named whole)
        with pytest.raises(ConfigError, match="hydra.run.dir=.* is not writable \\(.*/locked refuses a new file"):
            check_writable("hydra.run.dir", str(locked / "run"))
    finally:
        subprocess.run(["chattr", "-i", str(locked)], capture_output=True)
        locked.chmod(0o755)


def _can_create(folder: Path) -> bool:
    try:
        (folder / "probe").touch()
    except OSError:
        return False
    (folder / "probe").unlink()
    return True


@pytest.mark.parametrize("override", ["=0.3", "+=1", "++=x", "~=y"])
def test_an_override_without_a_key_is_one_line(override):
    with pytest.raises(ConfigError, match="sets no key; write key=value"):
        check_command([override], multirun=False)


def test_a_folder_name_longer_than_the_file_system_allows_is_one_line(tmp_path):
    from align_kit.runs.preflight import check_writable

    name = "n" * 256  # one byte over NAME_MAX (255 on ext4, tmpfs, xfs)
    too_long = "the name " + "n" * 40 + r"\.\.\. is 256 bytes long, and the file system of .* allows at most 255"
    with pytest.raises(ConfigError, match=too_long):
        check_writable("hydra.run.dir", str(tmp_path / name / "run"))
    check_writable("hydra.run.dir", str(tmp_path / ("n" * 255) / "run"))
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ what a config can make Hydra build or write


def run_module(cache_dir: str, cwd: Path, *args: str, code: str | None = None) -> subprocess.CompletedProcess:
    """`python -m align_kit.train <args>` (or `python -c <code> <args>`) from `cwd`."""
    entry = ["-c", code] if code else ["-m", "align_kit.train"]
    env = dict(cli_env(cache_dir), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, *entry, *args], cwd=cwd, capture_output=True, text=True, env=env)


def test_python_m_align_kit_train_refuses_a_hostile_shared_preset_before_anything_runs(tmp_path, cache_dir):
    """The module entry runs the same pre-flight as `align-kit train`: a preset from another folder that adds
    a Hydra callback copying a file over the victim is refused, and nothing is written."""
    victim, work, presets = tmp_path / "victim.txt", tmp_path / "work", tmp_path / "my" / "recipe"
    victim.write_text("keep me\n")
    work.mkdir()
    presets.mkdir(parents=True)
    (presets / "shared.yaml").write_text(
        "# @package _global_\nhydra:\n  callbacks:\n    telemetry:\n"
        f"      {{_target_: shutil.copyfile, src: /etc/hostname, dst: {victim}}}\n"
    )
    result = run_module(cache_dir, work, "--config-dir", str(tmp_path / "my"), "recipe=shared")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "align-kit: config error: hydra.callbacks.telemetry._target_=shutil.copyfile is outside align_kit; a config "
        "builds only align_kit's component classes (list your own package in train.allowed_targets=[my_package] to "
        "build its classes)"
    ]
    assert victim.read_text() == "keep me\n" and list(work.iterdir()) == []


def write_old_run(folder: Path) -> bytes:
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text("- seed=5\n")
    (folder / "config.yaml").write_text("seed: 5\n")
    (folder / "metrics.jsonl").write_text('{"step": 1, "loss": 0.1}\n')
    return (folder / ".hydra" / "overrides.yaml").read_bytes()


def test_removing_the_run_folder_guard_is_refused_before_hydra_writes(tmp_path, cache_dir):
    old = tmp_path / "old_run"
    record = write_old_run(old)
    result = run_module(cache_dir, tmp_path, "~hydra.callbacks.run_folder", f"hydra.run.dir={old}", "seed=6")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "align-kit: config error: ~hydra.callbacks.run_folder: align_kit's own Hydra callbacks (the run-folder guard, "
        "the sweep summary) always run; a config cannot remove them"
    ]
    assert (old / ".hydra" / "overrides.yaml").read_bytes() == record


def test_the_run_folder_guard_runs_without_the_preflight_and_without_any_config_entry(tmp_path, cache_dir):
    """Hydra's app builds align_kit's callbacks itself (conf/ names none): a job started straight through
    `align_kit.train.main`, with no pre-flight, is still refused by the guard before Hydra writes .hydra/."""
    old = tmp_path / "old_run"
    record = write_old_run(old)
    code = "import sys\nfrom align_kit.train import main\nsys.argv = ['align-kit train', *sys.argv[1:]]\nmain()\n"
    result = run_module(cache_dir, tmp_path, f"hydra.run.dir={old}", "seed=6", code=code)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith(
        f"align-kit: config error: hydra.run.dir={old} already holds a run"
    )
    assert (old / ".hydra" / "overrides.yaml").read_bytes() == record


def test_a_users_class_named_on_the_command_line_passes_and_from_a_preset_does_not(user_package, tmp_path):
    presets = tmp_path / "presets" / "recipe"
    presets.mkdir(parents=True)
    (presets / "mine.yaml").write_text("# @package _global_\ntrain:\n  allowed_targets: [my_rewards]\n")
    with pytest.raises(ConfigError, match="train.allowed_targets lists my_rewards from a config file"):
        check_command([user_package, "recipe=mine"], False, str(tmp_path / "presets"))
    [plan] = check_command(
        [user_package, "recipe=mine", "train.allowed_targets=[my_rewards]"], False, str(tmp_path / "presets")
    )
    assert [spec.name for spec in plan.rewards] == ["correctness", "format", "length"]


def test_slurm_setup_lines_come_from_the_site_file_or_the_command_line(tmp_path):
    from align_kit.runs.preflight import check_buildable

    site = tmp_path / "hydra" / "launcher" / "site" / "slurm_local.yaml"
    site.parent.mkdir(parents=True)
    site.write_text("setup: [source ~/venv/bin/activate]\n")
    check_buildable(compose(["hydra/launcher=slurm"], config_dir=str(tmp_path)))  # the site's own lines
    check_buildable(compose(["hydra/launcher=slurm", "hydra.launcher.setup=[echo typed]"]))
    with pytest.raises(ConfigError, match=r'hydra.launcher.setup=\["echo preset"\]: shell lines'):
        check_buildable(compose(["hydra/launcher=slurm", "recipe=x"], config_dir=str(_preset(tmp_path))))


def _preset(folder: Path) -> Path:
    recipe = folder / "presets" / "recipe" / "x.yaml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text("# @package _global_\nhydra:\n  launcher:\n    setup: [echo preset]\n")
    return folder / "presets"


def _outcome(*job) -> tuple[str, object]:
    """validate_job(*job): the plan, or the line that refuses the job."""
    try:
        return "plan", validate_job(*job)
    except ConfigError as error:
        return "refused", str(error)


@pytest.mark.slow
def test_shared_compositions_validate_every_job_as_its_own_full_composition_does(tmp_path, monkeypatch, cache_dir):
    monkeypatch.setenv("ALIGN_KIT_CACHE", cache_dir)
    config_dir = mixed_config_dir(tmp_path / "conf")
    # clip from the sweep file (the user's own node among them) x num_generations, 3 of which cannot divide 64
    command = ["sweep=mixed", "seed=1", "trainer.num_generations=4,3", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    jobs = sweep_jobs(command, config_dir)
    shared = SharedWork(SweepComposer(config_dir))
    outcomes = []
    for index, job in enumerate(jobs):
        fast = _outcome(job, index, config_dir, shared)
        assert fast == _outcome(job, index, config_dir), job
        outcomes.append(fast)
    assert [kind for kind, _ in outcomes] == ["plan", "refused", "plan", "refused"], outcomes
    assert [plan.grpo_kwargs["epsilon_high"] for kind, plan in outcomes if kind == "plan"] == [0.2, 0.35]
    assert outcomes[1][1].startswith("trainer.num_generations=3 does not divide the generation batch of 64")


@pytest.mark.slow
def test_a_sweeps_last_job_is_refused_as_its_full_composition_is_and_named(tmp_path, monkeypatch, cache_dir):
    monkeypatch.setenv("ALIGN_KIT_CACHE", cache_dir)
    config_dir = mixed_config_dir(tmp_path / "conf")
    command = ["recipe=dapo", "clip=symmetric,wide,broken", "trainer.learning_rate=1e-5", "seed=7"]
    command.append(f"hydra.sweep.dir={tmp_path / 'sweep'}")
    with pytest.raises(ConfigError) as refused:
        check_command(command, True, config_dir)
    last = sweep_jobs(command, config_dir)[2]
    kind, alone = _outcome(last, 2, config_dir)
    assert kind == "refused" and alone.startswith("clip.eps_high=-1.0: expected a number > 0")
    assert str(refused.value) == f"sweep job 2 of 3 (clip=broken): {alone}"
    assert not (tmp_path / "sweep").exists()


def test_a_large_sweeps_preflight_says_so_in_one_line_off_a_terminal(tmp_path, monkeypatch, cache_dir, capsys):
    from align_kit.runs import preflight

    monkeypatch.setenv("ALIGN_KIT_CACHE", cache_dir)
    monkeypatch.setattr(preflight, "PROGRESS_FROM_JOBS", 3)  # the real threshold's sweep takes seconds to check
    plans = check_command(["seed=range(0,3)", f"hydra.sweep.dir={tmp_path}"], multirun=True)
    assert [plan.grpo_kwargs["seed"] for plan in plans] == [0, 1, 2]
    assert capsys.readouterr().err == "align-kit: pre-flight: validating 3 sweep jobs before any runs\n"
    check_command(["seed=range(0,2)", f"hydra.sweep.dir={tmp_path}"], multirun=True)
    assert capsys.readouterr().err == ""


def test_a_large_sweeps_preflight_shows_a_bar_with_the_time_left_on_a_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress(60) as advance:
        for _ in range(60):
            advance()
    shown = terminal.getvalue()
    assert "align-kit: pre-flight:" in shown and "0/60 [00:00<?, ?job/s]" in shown


def test_code_from_a_model_folder_is_switched_on_only_from_the_command_line(tmp_path):
    from align_kit.runs.preflight import check_buildable

    presets = tmp_path / "recipe"
    presets.mkdir()
    (presets / "code.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /model: hf\nmodel:\n  trust_remote_code: true\n"
    )
    refused = "model.trust_remote_code=true comes from a config file; .* add model.trust_remote_code=true to the"
    with pytest.raises(ConfigError, match=refused):
        check_buildable(compose(["recipe=code"], config_dir=str(tmp_path)))
    check_buildable(compose(["recipe=code", "model.trust_remote_code=true"], config_dir=str(tmp_path)))
    # TRL's own switch, and the one inside the keyword arguments TRL passes to from_pretrained
    check_buildable(compose(["trainer.trust_remote_code=true"]))
    check_buildable(compose(["+trainer.model_init_kwargs={trust_remote_code: true}"]))
    (presets / "trl.yaml").write_text("# @package _global_\ntrainer:\n  model_init_kwargs: {trust_remote_code: 1}\n")
    with pytest.raises(ConfigError, match=r"^trainer.model_init_kwargs.trust_remote_code=1 comes from a config file"):
        check_buildable(compose(["recipe=trl"], config_dir=str(tmp_path)))
    # false from a file switches nothing on
    (presets / "off.yaml").write_text("# @package _global_\ntrainer:\n  trust_remote_code: false\n")
    check_buildable(compose(["recipe=off"], config_dir=str(tmp_path)))


def test_a_sweep_file_may_not_switch_on_a_model_folders_code(tmp_path):
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "code.yaml").write_text(
        "# @package _global_\nhydra:\n  sweeper:\n    params:\n      +trainer.trust_remote_code: 'true'\n"
    )
    with pytest.raises(ConfigError, match=r"hydra.sweeper.params.\+trainer.trust_remote_code: a sweep file may not"):
        sweep_jobs(["sweep=code"], str(tmp_path))


def test_hydras_flags_move_before_the_overrides_with_their_values():
    from align_kit.runs.preflight import flags_first

    assert flags_first(["seed=1", "--config-dir", "d", "recipe=x", "-m"]) == [
        "--config-dir",
        "d",
        "-m",
        "seed=1",
        "recipe=x",
    ]
    assert flags_first(["a=1", "--cfg", "job", "--info", "b=2"]) == ["--cfg", "job", "--info", "a=1", "b=2"]
    assert flags_first(["a=1", "--info", "defaults", "--config-dir=d"]) == [
        "--info",
        "defaults",
        "--config-dir=d",
        "a=1",
    ]
    assert flags_first(["a=1", "--bogus", "b=2"]) == ["--bogus", "a=1", "b=2"]


@pytest.mark.slow
def test_a_sweep_job_folder_outside_the_sweep_folder_is_refused():
    for subdir, shown in (("../../x_${hydra.job.num}", "../../x_0"), ("/tmp/x${hydra.job.num}", "/tmp/x0"), (".", ".")):
        with pytest.raises(ConfigError, match=f"^sweep job 0 of 2: hydra.sweep.subdir={re.escape(shown)} puts its"):
            check_command(["seed=1,2", f"hydra.sweep.subdir={subdir}"], True)
    check_command(["seed=1,2", "hydra.sweep.subdir=a/../b${hydra.job.num}"], True)  # inside, however written


def test_a_value_its_node_ignores_is_refused_and_counts_once_the_node_uses_it():
    with pytest.raises(ConfigError, match=r"^sweep job 0 of 2 \(rollout.quant_scale=channel\): rollout.quant_scale=ch"):
        check_command(["rollout.quant_scale=channel,tensor"], True)
    quantized = ["rollout.dtype=bfloat16", "rollout.quantization=int8"]
    plans = check_command([*quantized, "rollout.quant_scale=channel,tensor"], True)
    assert [plan.components["rollout"].quant_scale for plan in plans] == ["channel", "tensor"]
