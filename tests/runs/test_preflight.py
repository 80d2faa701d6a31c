"""The pre-flight (every job validated before Hydra runs any), the `_target_` allowlist, the schema
read from TRL's source, and the data readers."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.experiment.schema import kind_of_annotation
from align_kit.runs.preflight import check_command
from align_kit.tasks.hf_dataset import read_csv_rows, read_json_rows
from align_kit.train import component_choices
from tests.conftest import ROOT, cli_env


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


@pytest.mark.parametrize(
    ("annotation", "types", "choice"),
    [
        ("int | None", {"int", "none"}, None),
        ("SchedulerType | str", {"str"}, "cosine"),
        ("OptimizerNames | str", {"str"}, "adamw_torch"),
        ("dict[str, Any] | str | None", {"dict", "str", "none"}, None),
        ("list[float] | None", {"list", "none"}, None),
        ("Optional[int]", {"int", "none"}, None),
        ("Literal['a', 'b']", {"str"}, "a"),
        ("ParallelismConfig | None", {"any", "none"}, None),
    ],
)
def test_annotations_from_trls_source_become_kinds(annotation, types, choice):
    kind = kind_of_annotation(ast.parse(annotation, mode="eval").body)
    assert set(kind.types) == types
    assert (choice in kind.choices) if choice else kind.choices is None


def test_csv_values_stay_text(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text('prompt,answer\n"1,2",007\n\nx,3\n')
    assert read_csv_rows(path, "F") == [{"prompt": "1,2", "answer": "007"}, {"prompt": "x", "answer": "3"}]


def test_json_reads_an_array_or_lines(tmp_path):
    array, lines = tmp_path / "a.json", tmp_path / "l.jsonl"
    array.write_text('[{"prompt": "p", "answer": 1}]')
    lines.write_text('\ufeff{"prompt": "p", "answer": 1}\n\n{"prompt": "q", "answer": "2"}\n')
    assert read_json_rows(array, "F") == [{"prompt": "p", "answer": 1}]
    assert read_json_rows(lines, "F") == [{"prompt": "p", "answer": 1}, {"prompt": "q", "answer": "2"}]
    lines.write_text('{"prompt": "p", "answer": 1}\n{"prompt": "q" "answer": 2}\n')
    with pytest.raises(ConfigError) as refused:
        read_json_rows(lines, "F")
    assert str(refused.value) == "F line 2: not valid JSON (Expecting ',' delimiter at column 16)"


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
        with pytest.raises(ConfigError, match="hydra.run.dir=.*/locked/run is not writable .*refuses a new file"):
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


USER_CALLBACK = """
from hydra.experimental.callback import Callback

class Announce(Callback):
    def __init__(self, word: str = "hello"):
        self.word = word
"""


@pytest.fixture
def user_callback(tmp_path, monkeypatch):
    package = tmp_path / "my_callbacks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "announce.py").write_text(USER_CALLBACK)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "+hydra.callbacks.announce={_target_: my_callbacks.announce.Announce, word: hi}"


def test_a_users_hydra_callback_runs_after_align_kits_own_through_the_allowlist(user_callback, tmp_path, monkeypatch):
    from hydra._internal import hydra as hydra_app

    import align_kit.train  # noqa: F401  (installs the app's callbacks)
    from align_kit.runs.hydra_tree import AppCallbacks
    from align_kit.runs.run_folder import RunFolderGuard
    from align_kit.runs.sweep_summary import SweepSummary

    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        ConfigError, match="hydra.callbacks.announce._target_=my_callbacks.announce.Announce is outside"
    ):
        check_command([user_callback], multirun=False)
    check_command([user_callback, "train.allowed_targets=[my_callbacks]"], multirun=False)

    from hydra.core.hydra_config import HydraConfig

    from align_kit.experiment.compose import compose as compose_job

    compose_job([user_callback, "train.allowed_targets=[my_callbacks]"])
    full = HydraConfig.instance().cfg.hydra._get_parent()  # the composed root, hydra node included
    built = hydra_app.Callbacks(full).callbacks
    assert hydra_app.Callbacks is AppCallbacks
    assert [type(c) for c in built[:2]] == [RunFolderGuard, SweepSummary] and built[2].word == "hi"
    assert [type(c) for c in AppCallbacks(None).callbacks] == [RunFolderGuard, SweepSummary]


def test_the_app_builds_no_callback_the_preflight_would_refuse(capsys):
    """Started without the pre-flight, a hostile hydra.callbacks entry is refused before anything is built."""
    from omegaconf import OmegaConf

    from align_kit.runs.hydra_tree import AppCallbacks

    config = OmegaConf.create({"hydra": {"callbacks": {"x": {"_target_": "os.makedirs", "name": "never"}}}})
    with pytest.raises(SystemExit) as exit_info:
        AppCallbacks(config)
    assert exit_info.value.code == 2 and not Path("never").exists()
    assert capsys.readouterr().err.startswith("align-kit: config error: hydra.callbacks.x._target_=os.makedirs")


@pytest.mark.parametrize(
    ("name", "subdir", "refused"),
    [
        ("train", ".hydra", None),
        ("a\0b", ".hydra", "hydra.job.name="),
        ("..", ".hydra", "hydra.job.name=.."),
        ("x" * 201, ".hydra", "hydra.job.name=xxx"),
        ("train", "/etc", "hydra.output_subdir=/etc"),
        ("train", "a/../../b", "hydra.output_subdir=a/../../b"),
        ("train", None, None),
    ],
)
def test_the_jobs_files_stay_in_the_run_folder(name, subdir, refused):
    from align_kit.runs.hydra_tree import check_job_files

    if refused is None:
        check_job_files(name, subdir)
        return
    with pytest.raises(ConfigError) as error:
        check_job_files(name, subdir)
    assert str(error.value).startswith(refused)


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
