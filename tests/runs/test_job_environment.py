"""align_kit.runs.job_environment: the variables a config may set are a list; everything else is refused, saying why."""

from __future__ import annotations

import pytest

from align_kit.core.errors import ConfigError
from align_kit.runs.job_environment import check_job_environment


def test_the_listed_variables_are_accepted():
    check_job_environment(["OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG"])
    check_job_environment({})


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("WANDB_BASE_URL", "it authenticates or redirects"),
        ("WANDB_API_KEY", "it authenticates or redirects"),
        ("WANDB_ENTITY", "it authenticates or redirects"),
        ("HF_TOKEN", "it authenticates or redirects"),
        ("HF_ENDPOINT", "it authenticates or redirects"),
        ("HUGGING_FACE_HUB_TOKEN", "it authenticates or redirects"),
        ("OPENAI_API_KEY", "it authenticates or redirects"),
        ("OPENAI_BASE_URL", "it authenticates or redirects"),
        ("GITHUB_TOKEN", "it authenticates or redirects"),
        ("MLFLOW_TRACKING_URL", "it authenticates or redirects"),
        ("PYTHONPATH", "it changes what code runs"),
        ("LD_PRELOAD", "it changes what code runs"),
        ("PATH", "it changes what code runs"),
        ("HYDRA_FULL_ERROR", "it changes what code runs"),
        ("ALIGN_KIT_SANDBOX", "it changes what code runs"),
        ("MY_SETTING", "a config sets only OMP_NUM_THREADS, MKL_NUM_THREADS"),
        ("omp_num_threads", "a config sets only"),  # names are case-sensitive: not the listed one
    ],
)
def test_a_variable_outside_the_list_is_refused_with_its_reason(name, why):
    with pytest.raises(ConfigError) as refused:
        check_job_environment(["OMP_NUM_THREADS", name])
    message = str(refused.value)
    assert message.startswith(f"hydra.job.env_set.{name}: a config may not set {name} (")
    assert why in message
    assert message.endswith("set it in the environment you start align-kit from")
