"""The real-model tier (`pytest -m real_model`, `make test-real-model`): SmolLM2-135M-Instruct, a pretrained BPE model
with a chat template, trained through `align-kit train` on reasoning-gym tasks for two GRPO steps per run, every
stability component in one of three runs, the doctor on a result, and the components a dense model cannot take
refused before anything loads.

Sizes: 2 prompts x 2 completions of at most 16 tokens, 2 mini-steps per generation (so clipping acts). The GGUF is
converted into the cache on the first run (about a minute on 2 cores) and loaded in seconds after that.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from align_kit.core.errors import ConfigError
from tests.conftest import ROOT

pytestmark = pytest.mark.real_model

MODEL_AND_TASK = [
    "model=smollm2",
    "task=reasoning_gym",
    "reward=[gym_correctness,gym_format]",
    "task.datasets=[chain_sum,basic_arithmetic]",  # two domains: per-domain metrics and KL have something to split
    "task.options={chain_sum:{max_terms:2,max_digits:1},basic_arithmetic:{max_terms:2,max_digits:1}}",
    "task.num_train=64",
]
SMALL = [
    "trainer.max_steps=2",
    "trainer.per_device_train_batch_size=4",
    "trainer.num_generations=2",
    "trainer.steps_per_generation=2",
    "trainer.max_completion_length=16",
    "trainer.save_strategy=no",
    "trainer.disable_tqdm=true",
    "logger=none",
]
# Every stability component in three runs (a group's nodes exclude each other, so each run takes one of each).
RUNS = {
    "gdpo_gspo_dynamic": [
        "advantage=gdpo",
        "clip=gspo",
        "kl=constant",
        "kl.beta=0.01",
        "overlong=filter_and_punish",
        "format_schedule=linear",
        "sampling=dynamic",
        "sampling.max_gen_batches=2",  # at most one more generation round when groups come back flat
    ],
    "dr_grpo_reweighted_filter": [
        "advantage=dr_grpo",
        "kl=reweighted",
        "overlong=filter",
        "format_schedule=step",
    ],
    "batch_advantage": ["advantage=batch", "trainer.max_steps=1"],
    "ngrpo_clip_higher_per_domain": [
        "advantage=ngrpo",
        "clip=clip_higher",
        "kl=per_domain",
        "kl.default_beta=0.01",
        "+kl.betas.chain_sum=0.0",
        "overlong=soft_punish",
        "format_schedule=adaptive",
        "monitor=strict",
    ],
}
# What each run must have logged: the metric that shows its components engaged.
ENGAGED = {
    "ngrpo_clip_higher_per_domain": ["kl/basic_arithmetic", "clip_ratio/high_mean", "reward/chain_sum"],
    "gdpo_gspo_dynamic": ["kl", "clip_ratio/region_mean", "sampling/gen_batches"],
    "dr_grpo_reweighted_filter": ["kl"],
    "batch_advantage": ["reward"],
}


def env() -> dict:
    # Two torch threads: the tier's time is stated for 2 cores; the cache is the user's, so the conversion is paid once.
    return dict(os.environ, OMP_NUM_THREADS="2", WANDB_SILENT="true", PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))


def train(run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "align_kit.cli", "train", *MODEL_AND_TASK, *SMALL, *overrides]
    return subprocess.run(
        [*command, f"hydra.run.dir={run_dir}"], capture_output=True, text=True, env=env(), cwd=ROOT, timeout=3600
    )


@pytest.fixture(scope="module", autouse=True)
def installed():
    from align_kit.models.smollm2 import INSTALL, wheel_folder

    if wheel_folder() is None:
        pytest.fail(f"the real-model tier needs SmolLM2: {INSTALL}")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("real_model_runs")
    folders = {}
    for name, overrides in RUNS.items():
        result = train(root / name, *overrides)
        assert result.returncode == 0, f"{name}: exit {result.returncode}\n{result.stderr[-4000:]}"
        folders[name] = root / name
    return folders


def metrics(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("name", list(RUNS))
def test_every_component_trains_the_real_model(runs, name):
    rows = [row for row in metrics(runs[name]) if "loss" in row]  # the last line is the run's summary
    expected_steps = 1 if "trainer.max_steps=1" in RUNS[name] else 2
    assert [row["step"] for row in rows] == list(range(1, expected_steps + 1))
    for row in rows:
        assert math.isfinite(row["loss"]) and math.isfinite(row["entropy"])
    logged = {key for row in rows for key in row}  # rewards are logged on a generation's first step only
    missing = [key for key in ENGAGED[name] if key not in logged]
    assert not missing, f"{name}: {missing} not logged; logged: {sorted(logged)}"
    policy = json.loads((runs[name] / "summary.json").read_text())["policy"]
    assert policy["parameters"] == 134_515_008 and policy["dtype"] == "torch.float32"  # 134.5 M, float32 on a CPU
    assert "start_success_rate" not in policy  # pretrained: no warm start


def converted_tokenizer():
    from transformers import AutoTokenizer

    from align_kit.models.gguf import ensure_converted
    from align_kit.models.smollm2 import SmolLM2

    node = SmolLM2()
    node.validate()
    cache = os.environ.get("ALIGN_KIT_CACHE", str(Path.home() / ".cache" / "align_kit"))
    return AutoTokenizer.from_pretrained(ensure_converted(node.gguf_path(), cache))  # converted by the runs


def test_completions_stop_at_the_chat_end_token_and_re_encode_to_the_same_text(runs):
    # With the converted tokenizer's EOS (<|im_start|>, transformers' GGUF conversion) no completion ever ended:
    # each ran into a new chat turn up to the budget. With <|im_end|> some stop early.
    rows = [row for name in RUNS for row in metrics(runs[name]) if "completions/mean_terminated_length" in row]
    assert any(row["completions/clipped_ratio"] < 1.0 for row in rows)
    assert any("mismatch/retokenize_rate" in row for row in rows)
    # A rollout may still re-encode to other ids: sampling at temperature 1 can pick a split BPE never makes (e.g.
    # "\n\n" as one token before a digit, which the pre-tokenizer encodes as two "\n"), the mismatch the check is
    # for (the training-stability chapter, 16.6.1 (3)). What the chat rendering must not do is change the text: each
    # saved example decodes to the same string both ways.
    tokenizer = converted_tokenizer()
    for name in RUNS:
        example_file = runs[name] / "retokenize_mismatch.json"
        if example_file.exists():
            example = json.loads(example_file.read_text())
            assert example["sampled_ids"] != example["reencoded_ids"]
            assert tokenizer.decode(example["sampled_ids"]) == tokenizer.decode(example["reencoded_ids"]), name


def test_the_doctor_reads_the_real_models_run(runs):
    folder = runs["ngrpo_clip_higher_per_domain"]
    result = subprocess.run(
        [sys.executable, "-m", "align_kit.cli", "doctor", str(folder)], capture_output=True, text=True, env=env()
    )
    # Never bad input (2). Two steps log one reward point: too few to judge whether the run learns, so it is never
    # healthy (0); with no alert it is unjudged (4) and says which question it could not answer.
    assert result.returncode in (1, 3, 4), result.stderr[-2000:]
    assert "verdict:" in result.stdout
    rewards = [row for row in metrics(folder) if "reward" in row and "loss" in row]
    if result.returncode == 4:
        assert f"the run has {len(rewards)}" in result.stdout, result.stdout


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["routing_replay=r2"], r"^routing_replay=r2 needs a Mixture-of-Experts model but model=smollm2 is 'llama'"),
        (["routing_replay=r3"], r"^routing_replay=r3 needs a Mixture-of-Experts model"),
        (["trainer.max_completion_length=8192"], r"does not fit the model's context of 8192 positions"),
        (["step_mask=on"], r"^step_mask=on masks the steps of task=tool_calls episodes"),
    ],
)
def test_what_a_dense_chat_model_cannot_take_is_refused_before_it_loads(overrides, message, tmp_path):
    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan, validate_dataset
    from align_kit.train import component_choices

    with pytest.raises(ConfigError, match=message):
        plan = build_plan(compose([*MODEL_AND_TASK, *SMALL, *overrides]), component_choices(), str(tmp_path))
        validate_dataset(plan, plan.task.dataset("train"))


def test_the_converted_tokenizer_ends_a_turn_where_the_chat_template_does(runs):
    tokenizer = converted_tokenizer()
    assert (tokenizer.eos_token, tokenizer.pad_token, tokenizer.bos_token) == (
        "<|im_end|>",
        "<|im_end|>",
        "<|im_start|>",
    )
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "1 + 2 ="}], tokenize=False)
    assert rendered.endswith("1 + 2 =<|im_end|>\n")  # the template closes a turn with the token sampling stops at
    ids = tokenizer.encode("<answer>3</answer><|im_end|>", add_special_tokens=False)
    assert ids[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(ids, skip_special_tokens=True) == "<answer>3</answer>"  # what the rewards read
