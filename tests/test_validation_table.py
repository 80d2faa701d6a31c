"""A table of bad inputs through the real entry (`align_kit.cli.main`, in-process): each exits 2 with
exactly one stderr line naming the offending key or file, and leaves no folder or file behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from align_kit import cli

VICTIM = "precious contents\n"

# (argv after `align-kit`, a fragment the one error line must contain). `{data}` is the folder of
# data files below, `{victim}` a file a hostile `_target_` would overwrite, `{victim_dir}` a folder
# (holding one file) it would move, fill or remove.
TYPES = [
    (["train", "clip.eps_high=abc"], "clip.eps_high=abc"),
    (["train", "clip.eps_high=[0.2,0.3]"], "clip.eps_high=[0.2, 0.3]"),
    (["train", "clip.eps_high="], "clip.eps_high=''"),
    (["train", "clip.eps_high=nan"], "clip.eps_high=nan"),
    (["train", "clip.eps_high=inf"], "clip.eps_high=inf"),
    (["train", "clip.eps_low=-inf"], "clip.eps_low=-inf"),
    (["train", "clip.eps_high=true"], "clip.eps_high=true"),
    (["train", "clip.eps_high=null"], "clip.eps_high=null"),
    (["train", "clip.eps_low=0"], "clip.eps_low=0"),
    (["train", "clip=clip_higher", "clip.eps_high=0.1"], "clip.eps_high=0.1"),
    (["train", "seed=abc"], "seed=abc"),
    (["train", "seed=[1,2]"], "seed=[1, 2]"),
    (["train", "seed=-5"], "seed=-5"),
    (["train", "seed=1.5"], "seed=1.5"),
    (["train", "seed=true"], "seed=true"),
    (["train", "seed=4294967296"], "seed=4294967296"),
    (["train", "seed="], "seed=''"),
    (["train", "seed=nan"], "seed=nan"),
    (["train", "seed=null"], "seed=null"),
    (["train", "seed=1,2"], "seed=1,2"),
    (["train", "kl=constant", "kl.beta=nan"], "kl.beta=nan"),
    (["train", "kl=constant", "kl.beta=inf"], "kl.beta=inf"),
    (["train", "kl=constant", "kl.beta=abc"], "kl.beta=abc"),
    (["train", "kl=constant", "kl.beta=-0.01"], "kl.beta=-0.01"),
    (["train", "kl.bias_corrected=maybe"], "kl.bias_corrected=maybe"),
    (["train", "kl.bias_corrected=1"], "kl.bias_corrected=1"),
    (["train", "kl=constant", "kl.beta=0", "kl.bias_corrected=true"], "kl.bias_corrected=true"),
    (["train", "kl=per_domain", "kl.betas.addition=nan"], "kl.betas.addition=nan"),
    (["train", "kl=per_domain", "kl.betas.addition=-1"], "kl.betas.addition=-1"),
    (["train", "kl=per_domain", "kl.default_beta=abc"], "kl.default_beta=abc"),
    (["train", "kl=per_domain", "~kl.betas.subtraction"], "kl=per_domain has no beta for domain(s)"),
    (["train", "kl=reweighted", "kl.weighting=bogus"], "kl.weighting='bogus'"),
    (["train", "kl=reweighted", "kl.beta=0"], "kl.beta > 0"),
    (["train", "reward.correctness.weight=nan"], "reward.correctness.weight=nan"),
    (["train", "reward.format.weight=inf"], "reward.format.weight=inf"),
    (["train", "reward.format.weight=-0.2"], "reward.format.weight=-0.2"),
    (["train", "reward.correctness.weight=abc"], "reward.correctness.weight=abc"),
    (["train", "reward=[]"], "reward="),
    (["train", "reward=[correctness]"], "0.8*1 (correctness)"),
    (["train", "reward.correctness.checker=bogus"], "reward.correctness.checker='bogus'"),
    (["train", "reward.correctness.answer_column="], "reward.correctness.answer_column=''"),
    (["train", "reward=[coin_flip]", "reward.coin_flip.p_one=1.0"], "reward.coin_flip.p_one=1.0"),
    (["train", "reward=[coin_flip]", "reward.coin_flip.p_one=nan"], "reward.coin_flip.p_one=nan"),
    (["train", "reward=[coin_flip]", "reward.coin_flip.seed=-1"], "reward.coin_flip.seed=-1"),
    (["train", "reward.correctness.max_value=inf"], "reward.correctness.max_value=inf"),
    (["train", "reward=[nope]"], "reward/nope"),
    (["train", "format_schedule=linear", "format_schedule.start=nan"], "format_schedule.start=nan"),
    (["train", "format_schedule=step", "format_schedule.at_step=-5"], "format_schedule.at_step=-5"),
    (["train", "format_schedule=linear", "format_schedule.steps=0"], "format_schedule.steps=0"),
    (["train", "format_schedule=adaptive", "format_schedule.window=0"], "format_schedule.window=0"),
    (["train", "format_schedule=adaptive", "format_schedule.threshold=1.5"], "format_schedule.threshold=1.5"),
    (["train", "format_schedule=linear", "format_schedule.end=-1"], "format_schedule.end=-1"),
    (["train", "format_schedule.kind=bogus"], "format_schedule.kind='bogus'"),
    (["train", "format_schedule=adaptive", "format_schedule.floor=abc"], "format_schedule.floor=abc"),
    (["train", "format_schedule=linear", "reward=[correctness]", "reward.correctness.weight=1"], "format_schedule"),
    (["train", "advantage=ngrpo", "advantage.r_max=-1"], "advantage.r_max=-1"),
    (["train", "advantage=ngrpo", "advantage.r_max=0"], "advantage.r_max=0"),
    (["train", "advantage=ngrpo", "advantage.n_virtual=0"], "advantage.n_virtual=0"),
    (["train", "advantage=ngrpo", "advantage.n_virtual=1.5"], "advantage.n_virtual=1.5"),
    (["train", "advantage.scale_rewards=bogus"], "advantage.scale_rewards='bogus'"),
    (["train", "advantage.aggregation=bogus"], "advantage.aggregation='bogus'"),
    (["train", "advantage.loss_type=bogus"], "trainer.loss_type=bogus"),
    (["train", "clip=gspo", "advantage=dr_grpo"], "advantage=dr_grpo sets loss_type='dr_grpo'"),
    (["train", "clip=gspo", "trainer.loss_type=dapo"], "trainer.loss_type='dapo'"),
    (["train", "clip=clip_higher", "trainer.epsilon_high=0.3"], "trainer.epsilon_high=0.3"),
    (["train", "overlong=soft_punish", "overlong.cache_length=40"], "overlong.cache_length=40"),
    (["train", "overlong=soft_punish", "overlong.cache_length=0"], "overlong.cache_length=0"),
    (["train", "overlong.punish_weight=-1"], "overlong.punish_weight=-1"),
    (["train", "overlong.filter_truncated=yes"], "overlong.filter_truncated=yes"),
    (["train", "overlong.cache_length=2.5"], "overlong.cache_length=2.5"),
]
MODEL_TASK_ROLLOUT = [
    (["train", "model.hidden_size=-8"], "model.hidden_size=-8"),
    (["train", "model.hidden_size=0"], "model.hidden_size=0"),
    (["train", "model.hidden_size=abc"], "model.hidden_size=abc"),
    (["train", "model.hidden_size=1e9"], "model.hidden_size=1000000000.0"),
    (["train", "model.hidden_size=100000000"], "model.hidden_size=100000000"),
    (["train", "model.num_kv_heads=0"], "model.num_kv_heads=0"),
    (["train", "model.num_heads=3"], "model.num_heads=3"),
    (["train", "model.architecture=llama"], "model.architecture='llama'"),
    (["train", "model.warm_start.steps=-1"], "model.warm_start.steps=-1"),
    (["train", "model.warm_start.learning_rate=0"], "model.warm_start.learning_rate=0"),
    (["train", "model.warm_start.batch_size=0"], "model.warm_start.batch_size=0"),
    (["train", "model.warm_start.eval_prompts=0"], "model.warm_start.eval_prompts=0"),
    (["train", "+model.warm_start.foo=1"], "model.warm_start.foo"),
    (["train", "model.init_seed=-1"], "model.init_seed=-1"),
    (["train", "model=tiny_moe", "model.experts_per_token=9"], "model.experts_per_token=9"),
    (["train", "model=hf"], "model.name_or_path"),
    (["train", "model=hf", "model.name_or_path=./no/such/model"], "model.name_or_path=./no/such/model"),
    (["train", "model=hf", "model.name_or_path={data}", "model.dtype=int8"], "model.dtype='int8'"),
    (["train", "task.num_train=0"], "task.num_train=0"),
    (["train", "task.num_train=3"], "task.num_train=3"),
    (["train", "task.domains=[]"], "task.domains=[]"),
    (["train", "task.domains=[multiplication]"], "task.domains=['multiplication']"),
    (["train", "task.min_operand=50", "task.max_operand=10"], "task.min_operand=50"),
    (["train", "task.min_operand=-1"], "task.min_operand=-1"),
    (["train", "task.seed=abc"], "task.seed=abc"),
    (["train", "task=hf_dataset"], "task.path"),
    (["train", "rollout.temperature=0"], "rollout.temperature=0"),
    (["train", "rollout.temperature=nan"], "rollout.temperature=nan"),
    (["train", "rollout.top_p=1.5"], "rollout.top_p=1.5"),
    (["train", "rollout.dtype=float16"], "rollout.dtype='float16'"),
    (["train", "rollout.is_correction=bogus"], "rollout.is_correction='bogus'"),
    (["train", "rollout.is_correction=token_truncate"], "rollout.is_correction=token_truncate"),
    (["train", "rollout.is_cap_max=-1"], "rollout.is_cap_max=-1"),
    (["train", "rollout=vllm"], "rollout=vllm"),
    (["train", "sampling=dynamic", "sampling.max_gen_batches=0"], "sampling.max_gen_batches=0"),
    (["train", "routing_replay=r2"], "routing_replay=r2"),
    (["train", "routing_replay.mode=r4"], "routing_replay.mode='r4'"),
    (["train", "monitor.kl_rising.window=1"], "monitor.kl_rising.window=1"),
    (["train", "monitor.kl_rising.action=stop"], "monitor.kl_rising.action=stop"),
    (["train", "monitor.entropy_drop.fall=1.5"], "monitor.entropy_drop.fall=1.5"),
    (["train", "monitor.enabled=maybe"], "monitor.enabled=maybe"),
    (["train", "monitor.kl_rising.window=nan"], "monitor.kl_rising.window=nan"),
    (["train", "monitor.zero_std_groups.threshold=-1"], "monitor.zero_std_groups.threshold=-1"),
    (["train", "logger.mode=sideways"], "logger.mode='sideways'"),
    (["train", "logger.project="], "logger.project=''"),
]
TRAINER = [
    (["train", "trainer.learning_rate=-1"], "trainer.learning_rate=-1"),
    (["train", "trainer.learning_rate=0"], "trainer.learning_rate=0"),
    (["train", "trainer.learning_rate=nan"], "trainer.learning_rate=nan"),
    (["train", "trainer.learning_rate=abc"], "trainer.learning_rate=abc"),
    (["train", "trainer.max_steps=abc"], "trainer.max_steps=abc"),
    (["train", "trainer.max_steps=0"], "trainer.max_steps=0"),
    (["train", "trainer.max_steps=-1"], "trainer.max_steps=-1"),
    (["train", "trainer.max_steps=2.5"], "trainer.max_steps=2.5"),
    (["train", "trainer.max_steps=99999999999999999999"], "trainer.max_steps=99999999999999999999"),
    (["train", "trainer.per_device_train_batch_size=0"], "trainer.per_device_train_batch_size=0"),
    (["train", "trainer.gradient_accumulation_steps=0"], "trainer.gradient_accumulation_steps=0"),
    (["train", "trainer.steps_per_generation=0"], "trainer.steps_per_generation=0"),
    (["train", "trainer.max_completion_length=0"], "trainer.max_completion_length=0"),
    (["train", "trainer.max_completion_length=300"], "trainer.max_completion_length=300"),
    (["train", "trainer.logging_steps=0"], "trainer.logging_steps=0"),
    (["train", "trainer.logging_steps=-1"], "trainer.logging_steps=-1"),
    (["train", "trainer.save_steps=0"], "trainer.save_steps=0"),
    (["train", "trainer.lr_scheduler_type=bogus"], "trainer.lr_scheduler_type=bogus"),
    (["train", "trainer.optim=bogus"], "trainer.optim=bogus"),
    (["train", "trainer.num_iterations=0"], "trainer.num_iterations=0"),
    (["train", "trainer.num_generations=6"], "trainer.num_generations=6"),
    (["train", "trainer.num_generations=1"], "trainer.num_generations=1"),
    (["train", "trainer.learning_rte=1e-5"], "trainer.learning_rte"),
    (["train", "trainer.seed=3"], "trainer.seed"),
    (["train", "trainer.num_train_epochs=0"], "trainer.num_train_epochs=0"),
    (["train", "trainer.max_grad_norm=-1"], "trainer.max_grad_norm=-1"),
    (["train", "trainer.bf16=maybe"], "trainer.bf16=maybe"),
    (["train", "trainer.save_strategy=sometimes"], "trainer.save_strategy=sometimes"),
    (["train", "trainer.loss_type=bogus"], "trainer.loss_type=bogus"),
    (["train", "trainer.temperature=0"], "trainer.temperature=0"),
    (["train", "trainer.top_entropy_quantile=2"], "trainer.top_entropy_quantile=2"),
    (["train", "trainer.weight_decay=-0.1"], "trainer.weight_decay=-0.1"),
    (["train", "trainer.adam_beta2=1"], "trainer.adam_beta2=1"),
    (["train", "trainer.save_total_limit=0"], "trainer.save_total_limit=0"),
    (["train", "trainer.warmup_steps=-3"], "trainer.warmup_steps=-3"),
    (["train", "trainer.report_to=[tensorboard]"], "trainer.report_to"),
]
TOP_LEVEL = [
    (["train", "train.resume=true"], "train.resume=true"),
    (["train", "train.resume=maybe"], "train.resume=maybe"),
    (["train", "train.allow_reward_max_below_one=1"], "train.allow_reward_max_below_one=1"),
    (["train", "train.allowed_targets=abc"], "train.allowed_targets=abc"),
    (["train", "logger=none", "logger._target_=builtins.open", "+logger.file={victim}", "+logger.mode=w"], "open"),
    (["train", "clip._target_=os.makedirs", "+clip.name={victim}.d"], "clip._target_=os.makedirs"),
    (["train", "kl=per_domain", "+kl.betas.evil={_target_:shutil.copyfile,src:/etc/hosts,dst:{victim}}"], "shutil"),
    (["train", "reward.format._target_=os.system"], "reward.format._target_=os.system"),
    (["train", "train.allowed_targets=[mypkg]", "logger._target_=mypkg.Logger"], "logger._target_=mypkg.Logger"),
    (["train", "paths.cache_dir={victim}/cache"], "paths.cache_dir="),
    (["train", "paths.cache_dir="], "paths.cache_dir=''"),
    (["train", "paths.cache_dir=${oc.env:ALIGN_KIT_NO_SUCH_VARIABLE}"], "paths.cache_dir"),
    (["train", "hydra.run.dir={victim}/run"], "hydra.run.dir="),
    (["train", "clip=clip_highest"], "clip/clip_highest"),
    (["train", "clip.eps_hgh=0.3"], "clip.eps_hgh"),
    (["train", "+foo=1"], "foo is not a key"),
    (["train", "-m", "clip=clip_higher", "clip.eps_high=0.3,0.1,0.3"], "sweep job 1 of 3 (clip.eps_high=0.1)"),
    (["train", "-m", "seed=1,2", "trainer.max_steps=0"], "sweep job 0 of 2 (seed=1): trainer.max_steps=0"),
    (["sweep", "clip_higher", "seed=1", "clip.eps_low=0.5"], "sweep job 0 of 3 (clip.eps_high=0.2)"),
    (["sweep", "overlong", "seed=1", "overlong.cache_length=40"], "overlong.cache_length=40"),
    (["train", "-m", "seed=1,2", "train.resume=true"], "train.resume=true resumes one run, not a sweep"),
    (["sweep", "clip_higher", "train.resume=true"], "align-kit sweep --resume <sweep folder>"),
]
DATA = [
    (["train", "task=hf_dataset", "task.path={data}/empty.jsonl"], "{data}/empty.jsonl is empty"),
    (["train", "task=hf_dataset", "task.path={data}/blank.jsonl"], "{data}/blank.jsonl is empty"),
    (["train", "task=hf_dataset", "task.path={data}/latin1.jsonl"], "{data}/latin1.jsonl line 3: not UTF-8"),
    (["train", "task=hf_dataset", "task.path={data}/truncated.jsonl"], "{data}/truncated.jsonl line 9: not valid JSON"),
    (["train", "task=hf_dataset", "task.path={data}/list_row.jsonl"], "{data}/list_row.jsonl line 2"),
    (["train", "task=hf_dataset", "task.path={data}/header.csv"], "{data}/header.csv has a header but no rows"),
    (["train", "task=hf_dataset", "task.path={data}/ragged.csv"], "{data}/ragged.csv line 4"),
    (["train", "task=hf_dataset", "task.path={data}/no_prompt.jsonl"], "{data}/no_prompt.jsonl has no column"),
    (["train", "task=hf_dataset", "task.path={data}/empty_prompt.jsonl"], "{data}/empty_prompt.jsonl row 5: prompt"),
    (["train", "task=hf_dataset", "task.path={data}/null_prompt.jsonl"], "{data}/null_prompt.jsonl row 5: prompt"),
    (["train", "task=hf_dataset", "task.path={data}/list_prompt.jsonl"], "{data}/list_prompt.jsonl row 5: prompt"),
    (["train", "task=hf_dataset", "task.path={data}/number_prompt.jsonl"], "{data}/number_prompt.jsonl row 5"),
    (["train", "task=hf_dataset", "task.path={data}/null_answer.jsonl"], "{data}/null_answer.jsonl row 5: answer"),
    (["train", "task=hf_dataset", "task.path={data}/empty_answer.jsonl"], "{data}/empty_answer.jsonl row 5: answer"),
    (["train", "task=hf_dataset", "task.path={data}/list_answer.jsonl"], "{data}/list_answer.jsonl row 5: answer"),
    (["train", "task=hf_dataset", "task.path={data}/missing_answer.jsonl"], "{data}/missing_answer.jsonl row 5"),
    (["train", "task=hf_dataset", "task.path={data}/good.jsonl", "task.split=nonexistent"], "task.split=nonexistent"),
    (["train", "task=hf_dataset", "task.path={data}/good.jsonl", "task.eval_split=nonexistent"], "task.eval_split"),
    (["train", "task=hf_dataset", "task.path={data}/saved", "task.split=nonexistent"], "task.split=nonexistent"),
    (["train", "task=hf_dataset", "task.path={data}/saved", "task.eval_split=nonexistent"], "task.eval_split"),
    (["train", "task=hf_dataset", "task.path={data}/small.jsonl"], "{data}/small.jsonl has 3 rows"),
    (["train", "task=hf_dataset", "task.path={data}/rows.txt"], "task.path={data}/rows.txt"),
    (["train", "task=hf_dataset", "task.path={data}/broken.json"], "{data}/broken.json line"),
    (["train", "task=hf_dataset", "task.path={data}/scalars.json"], "{data}/scalars.json row 2"),
    (["train", "task=hf_dataset", "task.path={data}/chat.jsonl"], "{data}/chat.jsonl row 1: prompt is a message list"),
    (["train", "task=hf_dataset", "task.path={data}/good.jsonl", "task.domain_column=nope"], "good.jsonl has no"),
    (["train", "task=hf_dataset", "task.path={data}/empty_dir"], "task.path={data}/empty_dir"),
    (["train", "task=hf_dataset", "task.path={data}/null_domain.jsonl", "task.domain_column=topic"], "row 5: topic"),
]
# task=tool_calls, its step rewards and the step mask (the training-stability chapter, 16.6.2-16.6.3).
TOOLS = [
    (["train", "step_mask=on"], "use task=tool_calls or step_mask=off"),
    (["train", "task=tool_calls", "task.max_turns=2"], "task.max_turns=2 leaves no turn"),
    (["train", "recipe=tool_calls", "reward.tool_steps.weights.plan=-0.1"], "weights.plan=-0.1 is negative"),
    (["train", "recipe=tool_calls", "reward.tool_steps.weights.plan=0.0"], "= 0.9 < 1.0"),
    (["train", "recipe=tool_calls", "reward=[tool_choice,tool_params,tool_reasoning]"], "= 0.9 < 1.0"),
    (
        ["train", "recipe=tool_calls", "reward.tool_steps.penalties=[{tool:check_status,max_calls:1,value:0.3}]"],
        "penalties[0].value=0.3 is positive",
    ),
]
# The code_exec sandbox's limits (task.code_timeout_s, task.code_memory_mb): run_python's own bounds are checked
# in the pre-flight, not at the first code_exec call mid-run.
SANDBOX = [
    (["train", "task=tool_calls", "task.code_timeout_s=86401"], "task.code_timeout_s=86401: the sandbox takes at most"),
    (["train", "recipe=tool_calls", "task.code_timeout_s=1e6"], "task.code_timeout_s=1000000.0: the sandbox"),
    (["train", "task=tool_calls", "task.code_timeout_s=5e300"], "task.code_timeout_s=5e+300"),
    (["train", "task=tool_calls", "task.code_timeout_s=nan"], "task.code_timeout_s=nan"),
    (["train", "recipe=tool_calls", "task.code_timeout_s=-inf"], "task.code_timeout_s=-inf"),
    (["train", "task=tool_calls", "task.code_timeout_s=-0.5"], "task.code_timeout_s must be > 0"),
    (["train", "task=tool_calls", "task.code_timeout_s=yes"], "task.code_timeout_s=yes"),
    (["train", "task=tool_calls", "task.code_memory_mb=1048577"], "task.code_memory_mb=1048577: the sandbox takes"),
    (["train", "recipe=tool_calls", "task.code_memory_mb=9223372036854775807"], "code_memory_mb=9223372036854775807"),
    (["train", "task=tool_calls", "task.code_memory_mb=0"], "task.code_memory_mb"),
    (["train", "task=tool_calls", "task.code_memory_mb=128.0"], "task.code_memory_mb=128.0"),
    (["train", "task=tool_calls", "task.code_memory_mb=false"], "task.code_memory_mb=false"),
]
# The quantized sampler copy (rollout.quantization, quant_scale, quantize_router).
QUANTIZED_SAMPLER = [
    (["train", "rollout.dtype=bfloat16", "rollout.quantization=fp4"], "rollout.quantization='fp4'"),
    (["train", "rollout.dtype=bfloat16", "rollout.quantization=FP8"], "rollout.quantization='FP8'"),
    (["train", "rollout.dtype=bfloat16", "rollout.quantization="], "rollout.quantization=''"),
    (["train", "rollout.dtype=bfloat16", "rollout.quantization=8"], "rollout.quantization=8"),
    (["train", "rollout.quantization=fp8"], "rollout.quantization=fp8 quantizes the bf16 sampler copy"),
    (["train", "rollout.quantization=int8", "rollout.log_mismatch=true"], "set rollout.dtype=bfloat16"),
    (["train", "rollout.dtype=bfloat16", "rollout.quant_scale=row"], "rollout.quant_scale='row'"),
    (
        ["train", "rollout.dtype=bfloat16", "rollout.quantization=int8", "rollout.quant_scale=group"],
        "quant_scale='group'",
    ),
    (["train", "rollout.dtype=bfloat16", "rollout.quant_scale=null"], "rollout.quant_scale=null"),
    (["train", "rollout.quantize_router=maybe"], "rollout.quantize_router=maybe"),
    (["train", "model=tiny_moe", "rollout.dtype=bfloat16", "rollout.quantize_router=2"], "rollout.quantize_router=2"),
    (["train", "rollout=vllm", "rollout.quantization=fp8"], "rollout.quantization"),
]
CASES = TYPES + MODEL_TASK_ROLLOUT + TRAINER + TOP_LEVEL + DATA + TOOLS + SANDBOX + QUANTIZED_SAMPLER


def make_victims(folder: Path) -> tuple[Path, Path]:
    """A file and a folder (holding one file) beside the working folder, for a hostile config to touch."""
    victim = folder / "victim.txt"
    victim.write_text(VICTIM)
    victim_dir = folder / "victim_dir"
    victim_dir.mkdir()
    (victim_dir / "kept.txt").write_text(VICTIM)
    return victim, victim_dir


def victims_untouched(folder: Path) -> bool:
    victim_dir = folder / "victim_dir"
    return (
        (folder / "victim.txt").read_text() == VICTIM
        and sorted(p.name for p in victim_dir.iterdir()) == ["kept.txt"]
        and (victim_dir / "kept.txt").read_text() == VICTIM
    )


def _row(i: int) -> dict:
    return {"prompt": f"{i}+1=", "answer": str(i + 1), "topic": "math"}


def _jsonl(rows: list) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def _with_row_5(**changes) -> str:
    rows = [_row(i) for i in range(16)]
    rows[4] = {**rows[4], **changes}
    return _jsonl([{k: v for k, v in row.items() if v is not _DROP} for row in rows])


_DROP = object()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_data_files(tmp_path_factory.mktemp("data"))


def make_data_files(folder: Path) -> Path:
    """The data files the DATA cases name, in `folder`."""
    from datasets import Dataset, DatasetDict

    good = [_row(i) for i in range(16)]
    (folder / "good.jsonl").write_text(_jsonl(good))
    (folder / "empty.jsonl").write_text("")
    (folder / "blank.jsonl").write_text("\n  \n")
    latin1 = '{"prompt": "caf\xe9", "answer": "1"}\n'.encode("latin-1")
    (folder / "latin1.jsonl").write_bytes(_jsonl(good[:2]).encode() + latin1)
    (folder / "truncated.jsonl").write_text(_jsonl(good[:8]) + '{"prompt": "1+1=", "ans')
    (folder / "list_row.jsonl").write_text(_jsonl(good[:1]) + "[1, 2]\n")
    (folder / "header.csv").write_text("prompt,answer\n")
    (folder / "ragged.csv").write_text("prompt,answer\n1+1=,2\n2+1=,3\n3+1=,4,extra\n")
    (folder / "no_prompt.jsonl").write_text(_jsonl([{"q": "1+1=", "answer": "2"}] * 16))
    (folder / "empty_prompt.jsonl").write_text(_with_row_5(prompt="  "))
    (folder / "null_prompt.jsonl").write_text(_with_row_5(prompt=None))
    (folder / "list_prompt.jsonl").write_text(_with_row_5(prompt=["1+1=", "2+2="]))
    (folder / "number_prompt.jsonl").write_text(_with_row_5(prompt=12))
    (folder / "null_answer.jsonl").write_text(_with_row_5(answer=None))
    (folder / "empty_answer.jsonl").write_text(_with_row_5(answer=""))
    (folder / "list_answer.jsonl").write_text(_with_row_5(answer=[1, 2]))
    (folder / "missing_answer.jsonl").write_text(_with_row_5(answer=_DROP))
    (folder / "null_domain.jsonl").write_text(_with_row_5(topic=None))
    (folder / "small.jsonl").write_text(_jsonl(good[:3]))
    (folder / "rows.txt").write_text("1+1=\t2\n")
    (folder / "broken.json").write_text('[{"prompt": "1+1=", "answer": "2"},\n {"prompt": ')
    (folder / "scalars.json").write_text(json.dumps([good[0], 5]))
    (folder / "chat.jsonl").write_text(_jsonl([{"prompt": [{"role": "user", "content": "1+1="}], "answer": "2"}] * 16))
    (folder / "empty_dir").mkdir()
    DatasetDict({"train": Dataset.from_list(good), "test": Dataset.from_list(good)}).save_to_disk(str(folder / "saved"))
    return folder


@pytest.fixture
def entry(tmp_path, monkeypatch, capsys, cache_dir):
    """Run `align-kit <argv>` in-process from an empty folder; returns (exit status, stderr lines,
    what the folder holds afterwards). An accepted config would reach Hydra's job: that fails."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("ALIGN_KIT_CACHE", cache_dir)

    def accepted():
        raise AssertionError("the config was accepted and Hydra's job would start")

    monkeypatch.setattr("align_kit.train.main", accepted)

    def run(argv: list[str]) -> tuple[int, list[str], list[str]]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        return exit_info.value.code, capsys.readouterr().err.splitlines(), sorted(p.name for p in work.iterdir())

    return run


def test_the_table_holds_at_least_120_distinct_bad_inputs():
    assert len({" ".join(argv) for argv, _ in CASES}) == len(CASES) >= 120


@pytest.mark.parametrize(("argv", "fragment"), CASES, ids=[" ".join(argv[1:]) for argv, _ in CASES])
def test_bad_input_exits_2_with_one_line_and_leaves_nothing(argv, fragment, entry, data, tmp_path):
    victim, victim_dir = make_victims(tmp_path)
    fill = {"{data}": str(data), "{victim_dir}": str(victim_dir), "{victim}": str(victim)}
    for placeholder, value in fill.items():
        argv = [arg.replace(placeholder, value) for arg in argv]
        fragment = fragment.replace(placeholder, value)

    status, stderr, left = entry(argv)

    assert status == 2
    assert len(stderr) == 1, stderr
    assert stderr[0].startswith("align-kit: config error: ")
    assert fragment in stderr[0]
    assert left == []  # no run folder, no sweep folder, no file
    assert victims_untouched(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt", "victim_dir", "work"]
