"""A shared file reaches no secret and no shell, shown where the secret or the shell would go: a capture server on the
loopback address stands in for W&B and the Hugging Face Hub, and a stand-in `sbatch` on the PATH records the batch
script it is given. Each hostile file is refused by the pre-flight (exit 2, one line), so nothing reaches either; each
control shows the same server or `sbatch` does receive what the real path sends, so the silence means something."""

from __future__ import annotations

import base64
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import cli_env

FAKE_WANDB_KEY = "0123456789abcdef0123456789abcdef01234567"  # W&B's keys are 40 characters
FAKE_HF_TOKEN = "hf_" + "t" * 34
GLOBAL = "# @package _global_\n"


class Capture(http.server.BaseHTTPRequestHandler):
    """Records every request (method, path, headers, body) and answers 200 with an empty JSON object."""

    def _record(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.requests.append((self.command, self.path, dict(self.headers), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = do_PUT = do_HEAD = _record

    def log_message(self, *args) -> None:  # quiet: the test reads the requests
        pass


@pytest.fixture
def capture_server():
    """(its base URL, the list of requests it received)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", server.requests
    server.shutdown()
    server.server_close()


def shared_folder(root: Path, files: dict[str, str]) -> Path:
    """A --config-dir folder as a colleague would hand it over."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def align_kit(env: dict, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "align_kit.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def python(env: dict, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def sent(requests: list, secret: str) -> bool:
    """Whether `secret` left in any request: as written, or in HTTP basic auth (W&B sends `api:<key>`)."""
    basic = base64.b64encode(f"api:{secret}".encode()).decode()
    text = repr(requests)
    return secret in text or basic in text


def test_a_recipe_pointing_wandb_at_its_server_is_refused_and_the_key_never_leaves(capture_server, cache_dir, tmp_path):
    url, requests = capture_server
    env = dict(cli_env(cache_dir), WANDB_API_KEY=FAKE_WANDB_KEY, HOME=str(tmp_path), WANDB_DIR=str(tmp_path))
    env.pop("WANDB_BASE_URL", None)
    env.pop("WANDB_MODE", None)
    # The control: with W&B's base URL pointed at the server, logging in sends the key there.
    login = "import os, wandb; wandb.login(key=os.environ['WANDB_API_KEY'], verify=True, relogin=True)"
    python(dict(env, WANDB_BASE_URL=url, NETRC=str(tmp_path / "netrc")), login)
    assert sent(requests, FAKE_WANDB_KEY)
    requests.clear()
    recipe = GLOBAL + f"hydra:\n  job:\n    env_set: {{WANDB_BASE_URL: '{url}'}}\n"
    folder = shared_folder(tmp_path / "shared", {"recipe/nice.yaml": recipe})

    result = align_kit(
        env, "train", "--config-dir", str(folder), "recipe=nice", "logger=wandb", "trainer.max_steps=1", cwd=tmp_path
    )

    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.splitlines() == [
        "align-kit: config error: hydra.job.env_set.WANDB_BASE_URL: a config may not set WANDB_BASE_URL (it "
        "authenticates or redirects where a run's data goes: a shared file could send your keys elsewhere); set it "
        "in the environment you start align-kit from"
    ]
    assert requests == []
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize(
    ("recipe", "command_line", "fragment"),
    [
        (
            "trainer:\n  push_to_hub: true\n  hub_model_id: someone/model\n",
            [],
            "trainer.push_to_hub=true comes from a config file",
        ),
        (
            "trainer:\n  push_to_hub: true\n  hub_model_id: someone/model\n",
            ["trainer.push_to_hub=true"],
            "trainer.hub_model_id=someone/model comes from a config file",
        ),
        (
            "trainer:\n  log_completions: true\n  log_completions_hub_repo: someone/completions\n",
            [],
            "trainer.log_completions_hub_repo=someone/completions comes from a config file",
        ),
        ("hydra:\n  job:\n    env_set: {HF_ENDPOINT: '{url}'}\n", [], "hydra.job.env_set.HF_ENDPOINT"),
    ],
    ids=["push", "push typed, repository shared", "completions", "endpoint"],
)
def test_a_recipe_that_would_upload_to_the_hub_is_refused_and_the_token_never_leaves(
    recipe, command_line, fragment, capture_server, cache_dir, tmp_path
):
    url, requests = capture_server
    env = dict(cli_env(cache_dir), HF_ENDPOINT=url, HF_TOKEN=FAKE_HF_TOKEN, HF_HOME=str(tmp_path / "hf"))
    # The control: a Hub call with this environment sends the token to the server.
    python(env, "from huggingface_hub import HfApi; HfApi().whoami()")
    assert sent(requests, FAKE_HF_TOKEN)
    requests.clear()
    folder = shared_folder(tmp_path / "shared", {"recipe/nice.yaml": GLOBAL + recipe.replace("{url}", url)})

    result = align_kit(
        env, "train", "--config-dir", str(folder), "recipe=nice", "logger=none", *command_line, cwd=tmp_path
    )

    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = result.stderr.splitlines()
    assert line.startswith("align-kit: config error: ") and fragment in line
    assert requests == []
    assert not (tmp_path / "outputs").exists()


# sbatch FILE: appends the script it is given to $SBATCH_RECORD, then refuses it as a scheduler without a partition
# would (so a launch that reaches it ends at once).
SBATCH = f"""#!{sys.executable}
import os, sys
with open(os.environ["SBATCH_RECORD"], "a") as record:
    record.write(open(sys.argv[-1]).read() + "\\n#----\\n")
print("sbatch: error: invalid partition specified", file=sys.stderr)
sys.exit(1)
"""


@pytest.fixture
def stand_in_sbatch(cache_dir, tmp_path):
    """(the environment with the stand-in first on the PATH, the file it records into)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(SBATCH)
    (bin_dir / "sbatch").chmod(0o755)
    record = tmp_path / "sbatch_record"
    env = dict(cli_env(cache_dir), SBATCH_RECORD=str(record))
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return env, record


SLURM = ["-m", "seed=1", "hydra/launcher=slurm", "logger=none"]
# name: (the shared recipe's launcher settings, the key its refusal names)
HOSTILE_LAUNCHERS = {
    "partition": ('hydra:\n  launcher:\n    partition: "gpu\\ntouch {marker}"\n', "hydra.launcher.partition="),
    "parameter name": (
        'hydra:\n  launcher:\n    additional_parameters:\n      "mail-type=END\\ntouch {marker} #": x\n',
        "hydra.launcher.additional_parameters has a key",
    ),
    "parameter value": (
        'hydra:\n  launcher:\n    additional_parameters: {comment: "x\\ntouch {marker}"}\n',
        "hydra.launcher.additional_parameters.comment=",
    ),
    "parameter from a recipe": (
        "hydra:\n  launcher:\n    additional_parameters: {export: 'ALL,MARKER={marker}'}\n",
        "hydra.launcher.additional_parameters.export=",
    ),
    "setup swept": (
        "hydra:\n  sweeper:\n    params:\n      hydra.launcher.setup: '[touch {marker}]'\n",
        "hydra.sweeper.params.hydra.launcher.setup:",
    ),
    "submitit folder": ("hydra:\n  launcher:\n    submitit_folder: {marker}/%j\n", "hydra.launcher.submitit_folder="),
}


@pytest.mark.parametrize("hostile", HOSTILE_LAUNCHERS, ids=list(HOSTILE_LAUNCHERS))
def test_a_shared_launcher_value_never_reaches_sbatch(hostile, stand_in_sbatch, tmp_path):
    env, record = stand_in_sbatch
    marker = tmp_path / "injected"
    settings, key = HOSTILE_LAUNCHERS[hostile]
    folder = shared_folder(
        tmp_path / "shared", {"recipe/nice.yaml": GLOBAL + settings.replace("{marker}", str(marker))}
    )

    result = align_kit(env, "train", "--config-dir", str(folder), "recipe=nice", *SLURM, cwd=tmp_path)

    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = result.stderr.splitlines()
    assert line.startswith("align-kit: config error: ") and key in line, line
    assert not record.exists()  # sbatch was never called
    assert not marker.exists()
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow  # about a minute at load 10: Hydra launches through submitit as far as sbatch
def test_launcher_values_from_the_command_line_reach_sbatch_each_on_its_own_line(stand_in_sbatch, tmp_path):
    """The control: the stand-in is on the path submitit takes, and what the user types arrives as one #SBATCH line
    per setting."""
    env, record = stand_in_sbatch
    typed = ["hydra.launcher.partition=gpu", "+hydra.launcher.additional_parameters.mail-type=END"]

    result = align_kit(env, "train", *SLURM, *typed, f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)

    assert result.returncode != 0  # the stand-in refuses every script
    (script,) = [part for part in record.read_text().split("#----") if part.strip()]
    sbatch_lines = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --partition=gpu" in sbatch_lines
    assert "#SBATCH --mail-type=END" in sbatch_lines
    # submitit's log, in the sweep folder (one job is submitted alone, not as an array)
    assert f"#SBATCH --output={tmp_path / 'sweep'}/.submitit/%j/%j_0_log.out" in sbatch_lines
