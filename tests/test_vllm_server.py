"""rollout.mode=server: the wait for a server (on 127.0.0.1 only), its error naming host and port, and the
`align-kit vllm-serve` command line."""

from __future__ import annotations

import http.server
import socket
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from align_kit.core.errors import ConfigError
from align_kit.vllm_server import host_and_port, serve_command, wait_for_server


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def health_server():
    """A loopback HTTP server whose /health answers with the status in `status[0]`, or with 503 to the first
    `status[1]` requests; `status[2]` counts the requests."""
    status = [200, 0, 0]

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the handler's protocol name
            status[2] += 1
            answer = 503 if status[2] <= status[1] else status[0]
            self.send_response(answer if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", status
    server.shutdown()


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    """The wait's clock made a fake one that moves only when it sleeps (the sleeps are recorded): how long it
    waits is then decided by its own arithmetic, never by how loaded the machine is."""
    now, slept = [0.0], []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    monkeypatch.setattr("align_kit.vllm_server.time", SimpleNamespace(monotonic=lambda: now[0], sleep=sleep))
    return slept


def test_nothing_listening_names_host_and_port_after_the_timeout(waits):
    port = free_port()
    with pytest.raises(ConfigError) as error:
        wait_for_server(f"http://127.0.0.1:{port}", timeout_s=1.0, poll_s=0.25)
    assert waits == [0.25] * 4  # asked at 0, 0.25, 0.5, 0.75 and 1.0 s: a fifth wait would pass the timeout
    message = str(error.value)
    assert message.startswith(f"rollout.mode=server: no vLLM server answered at 127.0.0.1:{port} ")
    assert "within 1 s (rollout.server_timeout_s)" in message and "align-kit vllm-serve" in message


def test_a_healthy_server_is_found(health_server, waits):
    url, status = health_server
    wait_for_server(url, timeout_s=2.0, poll_s=0.1)
    assert waits == [] and status[2] == 1


def test_an_unhealthy_server_is_reported_with_its_status(health_server, waits):
    url, status = health_server
    status[0] = 503
    with pytest.raises(ConfigError, match=r"/health: HTTP 503\) within 0.5 s"):
        wait_for_server(url, timeout_s=0.5, poll_s=0.25)
    assert status[2] == 3  # at 0, 0.25 and 0.5 s


def test_a_server_that_comes_up_late_is_waited_for(health_server, waits):
    url, status = health_server
    status[1] = 3  # 503 to the first three requests, then 200
    wait_for_server(url, timeout_s=3.0, poll_s=0.25)
    assert waits == [0.25] * 3 and status[2] == 4


def test_address_defaults_to_trls_and_bad_urls_are_refused():
    assert host_and_port(None) == ("0.0.0.0", 8000)
    assert host_and_port("http://10.0.0.5:8011/") == ("10.0.0.5", 8011)
    with pytest.raises(ConfigError, match=r"rollout.server_base_url='10.0.0.5:8011' is not an http\(s\)://host:port"):
        host_and_port("10.0.0.5:8011")


def test_serve_command_runs_trl_on_the_runs_model_at_its_address():
    from align_kit.components.rollout import VLLMRollout

    rollout = VLLMRollout(mode="server", server_base_url="http://127.0.0.1:8011", gpu_memory_utilization=0.3)
    assert serve_command("/cache/tiny-qwen3-abc", rollout, 256) == [
        "trl", "vllm-serve", "--model", "/cache/tiny-qwen3-abc", "--host", "127.0.0.1", "--port", "8011",
        "--gpu_memory_utilization", "0.3", "--tensor_parallel_size", "1", "--max_model_len", "256",
    ]  # fmt: skip


@pytest.mark.usefixtures("vllm_importable")
def test_a_bad_server_address_is_refused_with_the_config():
    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan
    from align_kit.train import component_choices

    overrides = ["rollout=vllm", "rollout.mode=server", "rollout.server_base_url=foo", "trainer.use_cpu=false"]
    with pytest.raises(ConfigError, match=r"rollout.server_base_url='foo' is not an http\(s\)://host:port address"):
        build_plan(compose(overrides), component_choices(), "/tmp/align_kit_validation")


@pytest.mark.usefixtures("vllm_importable")
def test_training_in_server_mode_stops_before_the_model_loads(overrides_for, tmp_path, monkeypatch):
    from align_kit.experiment.compose import compose
    from align_kit.models.tiny import TinyModel
    from align_kit.train import component_choices, run

    monkeypatch.setattr(TinyModel, "load", lambda *args, **kwargs: pytest.fail("the policy loaded"))
    port = free_port()
    cfg = compose(
        overrides_for(
            "logger=none",
            "rollout=vllm",
            "rollout.mode=server",
            f"rollout.server_base_url=http://127.0.0.1:{port}",
            "rollout.server_timeout_s=0.5",
            "trainer.use_cpu=false",
        )
    )
    with pytest.raises(ConfigError, match=f"no vLLM server answered at 127.0.0.1:{port}"):
        run(cfg, component_choices(), str(tmp_path / "run"))


@pytest.mark.usefixtures("vllm_importable")
def test_vllm_serve_serves_the_local_folder_training_would_load(overrides_for, monkeypatch, capsys):
    from align_kit import vllm_server

    launched = []
    monkeypatch.setattr(vllm_server.os, "execvp", lambda program, command: launched.append(command))
    overrides = overrides_for("trainer.use_cpu=false", "rollout.server_base_url=http://127.0.0.1:8011")
    vllm_server.main(overrides)
    (command,) = launched
    folder = command[command.index("--model") + 1]
    assert (Path(folder) / "config.json").exists() and Path(folder).name.startswith("tiny-qwen3-")
    assert command[:2] == ["trl", "vllm-serve"] and command[-2:] == ["--max_model_len", "256"]
    assert "--port 8011" in " ".join(command)
    assert "align-kit: trl vllm-serve --model" in capsys.readouterr().err
