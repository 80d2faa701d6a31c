"""The environment variables a config may set for its jobs (`hydra.job.env_set`): a short list of names that tune
threads, the GPU's allocator and libraries' log levels, and nothing else.

A config is what users share (a recipe, a sweep file, a `--config-dir` folder), and a variable can redirect where a
run's data goes or whose account it uses: W&B's base URL received the user's W&B API key and the run's config from a
recipe that set it; `WANDB_API_KEY` or `HF_TOKEN` logged the user's runs into another account; `PYTHONPATH` or
`LD_PRELOAD` change what code runs. So the names are an allowlist, not a blocklist: a name not listed, on the command
line too, is refused with the advice to set it in the environment align-kit starts from, where the user sees it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from align_kit.core.errors import ConfigError

# Names a config may set: thread counts, CUDA's and PyTorch's allocator and debugging switches, libraries' log levels.
ALLOWED_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "TOKENIZERS_PARALLELISM",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING",
    "CUBLAS_WORKSPACE_CONFIG",
    "PYTORCH_CUDA_ALLOC_CONF",
    "NCCL_DEBUG",
    "TORCH_DISTRIBUTED_DEBUG",
    "TRANSFORMERS_VERBOSITY",
)
# Names that authenticate or redirect: a config never sets them (named apart so the refusal says why).
CREDENTIAL_OR_ENDPOINT = re.compile(r"(_API_KEY|_TOKEN|_BASE_URL|_ENDPOINT|_HOST|_URL)$|^(HF_|HUGGING_FACE_|WANDB_)")
# Names that change what code runs or how align_kit isolates it.
CODE_PATHS = re.compile(r"^(ALIGN_KIT_|HYDRA_|LD_|PYTHON)|^PATH$")


def check_job_environment(names: Iterable, key: str = "hydra.job.env_set") -> None:
    """Each name in `key` (`hydra.job.env_set`, or `hydra.job.env_copy`, whose names Hydra copies into env_set) is
    one of ALLOWED_ENV; one ConfigError line naming the first that is not."""
    for name in names:
        name = str(name)
        if name in ALLOWED_ENV:
            continue
        # upper-cased: environment names are case-sensitive, but a lower-case credential is still one
        if CREDENTIAL_OR_ENDPOINT.search(name.upper()):
            why = "it authenticates or redirects where a run's data goes: a shared file could send your keys elsewhere"
        elif CODE_PATHS.search(name.upper()):
            why = "it changes what code runs or how align_kit isolates it"
        else:
            why = f"a config sets only {', '.join(ALLOWED_ENV)}"
        raise ConfigError(
            f"{key}.{name}: a config may not set {name} ({why}); set it in the environment you start align-kit from"
        )
