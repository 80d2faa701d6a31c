"""vLLM server mode (rollout=vllm rollout.mode=server): starting a server on the run's own model, and checking
that one answers before any model loads.

`align-kit vllm-serve <the run's overrides>` resolves the policy's local folder as training would (the tiny
models are built and warm-started into the cache first) and runs TRL's `trl vllm-serve` on it, at the host and
port of rollout.server_base_url. Training with rollout.mode=server waits up to rollout.server_timeout_s for
that address to answer `/health` and otherwise stops with an error naming the host and port.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.error
import urllib.request

from align_kit.components.rollout import host_and_port, server_url
from align_kit.core.errors import ConfigError


def wait_for_server(base_url: str | None, timeout_s: float, poll_s: float = 1.0) -> None:
    """Return once GET <url>/health answers 200; ConfigError naming host and port after `timeout_s`."""
    url = server_url(base_url)
    host, port = host_and_port(base_url)
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=max(0.1, min(5.0, timeout_s))) as response:
                if response.status == 200:
                    return
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as error:
            last = f"HTTP {error.code}"
        except (urllib.error.URLError, OSError) as error:
            last = str(getattr(error, "reason", error))
        if time.monotonic() + poll_s > deadline:
            raise ConfigError(
                f"rollout.mode=server: no vLLM server answered at {host}:{port} ({url}/health: {last}) within "
                f"{timeout_s:g} s (rollout.server_timeout_s); start one with `align-kit vllm-serve <this run's "
                "overrides>`, or point rollout.server_base_url at a running one"
            )
        time.sleep(poll_s)


def serve_command(model_folder: str, rollout, max_model_length: int | None) -> list[str]:
    """TRL's server on `model_folder` at the rollout node's address and engine settings."""
    host, port = host_and_port(rollout.server_base_url)
    command = ["trl", "vllm-serve", "--model", model_folder, "--host", host, "--port", str(port)]
    command += ["--gpu_memory_utilization", str(rollout.gpu_memory_utilization)]
    command += ["--tensor_parallel_size", str(rollout.tensor_parallel_size)]
    if max_model_length:
        command += ["--max_model_len", str(max_model_length)]
    return command


def main(overrides: list[str]) -> None:
    """`align-kit vllm-serve [overrides]`: serve the policy these overrides would train."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan, tagged_choices
    from align_kit.runs.preflight import check_buildable, check_override_keys, one_line

    try:
        check_override_keys(overrides)
        try:
            cfg = compose(["rollout=vllm", "rollout.mode=server", *overrides])
        except (HydraException, OmegaConfBaseException) as error:  # an unknown node or key: Hydra's own words
            raise ConfigError(one_line(error)) from None
        check_buildable(cfg)  # Hydra's tree, and train.allowed_targets named on the command line
        plan = build_plan(cfg, tagged_choices(HydraConfig.get().runtime.choices), run_dir=os.devnull)
    except ConfigError as error:
        print(f"align-kit: config error: {error}", file=sys.stderr)
        sys.exit(2)
    policy = plan.model.load(plan.task, cfg.paths.cache_dir, max_new_tokens=plan.effective("max_completion_length"))
    rollout = plan.components["rollout"]
    positions = rollout.max_model_length or plan.model.max_position_embeddings
    command = serve_command(policy.path, rollout, positions)
    print("align-kit: " + " ".join(command), file=sys.stderr)
    os.execvp(command[0], command)
