"""The Hydra app's callbacks: align_kit's own always run first, a user's runs through the allowlist, a hostile
one is never built; the job's files stay in the run folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from align_kit.core.errors import ConfigError
from align_kit.runs.preflight import check_command

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
