"""The embedded default policy: a tiny Qwen3 (or Qwen3-MoE) with a character tokenizer.

Built locally (no download), warm-started on the task's demonstrations, saved in Hugging Face
format and cached under a hash of everything that shapes it; a changed config rebuilds it.
Attention head_dim is 32 because vLLM's CPU backend accepts 32 and rejects 16.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from align_kit.core.build_lock import building
from align_kit.core.contracts import ModelNode
from align_kit.core.errors import ConfigError
from align_kit.core.fields import SEED, knob
from align_kit.models.warm_start import WarmStartConfig

log = logging.getLogger(__name__)

WARM_START_FILE = "warm_start.json"


@dataclass
class LoadedPolicy:
    model: Any
    tokenizer: Any
    path: str
    info: dict


def _dimension(default: int, help: str) -> Any:
    """A size of the tiny model: built in memory on a CPU, so a dimension beyond 65536 is a typo, not a model."""
    return knob(default, help=help, ge=1, le=2**16, text="an integer in [1, 65536]")


@dataclass
class TinyModel(ModelNode):
    architecture: Literal["qwen3", "qwen3_moe"] = knob(
        "qwen3",
        help="qwen3: a dense Qwen3; qwen3_moe: Qwen3-MoE blocks (model=tiny_moe) for routing drift and Routing Replay.",
        source="16.6.1 (1)",
    )
    hidden_size: int = _dimension(128, "Width of the residual stream.")
    num_layers: int = _dimension(4, "Decoder layers.")
    num_heads: int = _dimension(4, "Attention heads, a multiple of num_kv_heads.")
    num_kv_heads: int = _dimension(2, "Key/value heads (grouped-query attention).")
    head_dim: int = _dimension(32, "Width of one attention head; 32, because vLLM's CPU backend rejects 16.")
    intermediate_size: int = _dimension(256, "Width of the dense MLP.")
    num_experts: int = _dimension(8, "qwen3_moe: experts per MoE layer.")
    experts_per_token: int = _dimension(2, "qwen3_moe: experts each token is routed to (top-k), at most num_experts.")
    moe_intermediate_size: int = _dimension(64, "qwen3_moe: width of one expert's MLP.")
    max_position_embeddings: int = _dimension(
        256, "Positions the model attends over: the prompt plus trainer.max_completion_length must fit."
    )
    init_seed: int = knob(0, within=SEED, help="Seed of the random initial weights, before the warm start.")
    warm_start: dict = knob(
        default_factory=dict,
        help="The warm-start SFT's settings (WarmStartConfig: steps, batch_size, learning_rate, eval_prompts, seed), "
        "checked per key.",
        metadata={"schema": WarmStartConfig},
    )

    def validate(self) -> None:
        if self.architecture == "qwen3_moe" and not 1 <= self.experts_per_token <= self.num_experts:
            raise ConfigError(
                f"model.experts_per_token={self.experts_per_token} must be between 1 and "
                f"model.num_experts={self.num_experts}"
            )
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(
                f"model.num_heads={self.num_heads} must be a multiple of model.num_kv_heads={self.num_kv_heads}"
            )
        unknown = set(self.warm_start) - set(WarmStartConfig.__dataclass_fields__)
        if unknown:
            raise ConfigError(
                f"model.warm_start has unknown key(s) {sorted(unknown)}; "
                f"known: {sorted(WarmStartConfig.__dataclass_fields__)}"
            )

    def check(self, plan) -> None:
        budget = plan.effective("max_completion_length")
        if budget >= self.max_position_embeddings:
            raise ConfigError(
                f"trainer.max_completion_length={budget} does not fit the model's {self.max_position_embeddings} "
                "positions (model.max_position_embeddings, prompt included); use a smaller budget"
            )

    def declared_model_type(self) -> str:
        return self.architecture

    def prompt_problem(self, prompt: str | list, completion_budget: int) -> str | None:
        """Why the character tokenizer cannot take `prompt` as written; known from the config, before any build."""
        from align_kit.models.char_tokenizer import token_count, unencodable

        if not isinstance(prompt, str):
            return (
                "is a message list, but model=tiny's character tokenizer has no chat template; use text prompts or "
                "model=hf"
            )
        character = unencodable(prompt)
        if character is not None:
            return (
                f"holds {character!r} (U+{ord(character):04X}), which model=tiny's character tokenizer cannot encode "
                "(it knows printable ASCII and the newline), so it would train as <unk>; write the prompt in ASCII "
                "or use model=hf"
            )
        room = self.max_position_embeddings - completion_budget
        if token_count(prompt) > room:
            return (
                f"is {token_count(prompt)} tokens, more than the {room} positions model.max_position_embeddings="
                f"{self.max_position_embeddings} leaves after trainer.max_completion_length={completion_budget}; "
                "shorten it, lower trainer.max_completion_length or raise model.max_position_embeddings"
            )
        return None

    @property
    def warm_start_config(self) -> WarmStartConfig:
        return WarmStartConfig(**self.warm_start)

    def hf_config(self, vocab_size: int, pad_id: int, eos_id: int):
        common = dict(
            vocab_size=vocab_size,
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_layers,
            num_attention_heads=self.num_heads,
            num_key_value_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            max_position_embeddings=self.max_position_embeddings,
            tie_word_embeddings=True,
            pad_token_id=pad_id,
            eos_token_id=eos_id,
            bos_token_id=None,
        )
        if self.architecture == "qwen3":
            from transformers import Qwen3Config

            return Qwen3Config(intermediate_size=self.intermediate_size, **common)
        from transformers import Qwen3MoeConfig

        return Qwen3MoeConfig(
            intermediate_size=self.intermediate_size,
            moe_intermediate_size=self.moe_intermediate_size,
            num_experts=self.num_experts,
            num_experts_per_tok=self.experts_per_token,
            decoder_sparse_step=1,
            norm_topk_prob=True,
            **common,
        )

    def cache_path(self, task, cache_dir: str | Path) -> Path:
        import torch
        import transformers

        # The demonstrations themselves, not only the task's settings: every setting that feeds them (the seed,
        # num_train, a task's own knobs) then changes the key, and no two warm starts share a cached model.
        demonstrations = hashlib.sha256(json.dumps(task.demonstrations()).encode()).hexdigest()
        recipe = {
            "model": {k: v for k, v in asdict(self).items() if k != "group"},
            "task": task.cache_key(),
            "demonstrations": demonstrations,
            "versions": [transformers.__version__, torch.__version__.split("+")[0]],
        }
        digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
        return Path(cache_dir).expanduser() / f"tiny-{self.architecture}-{digest}"

    def load(self, task, cache_dir: str | Path, reward=None, max_new_tokens: int = 32) -> LoadedPolicy:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = self.cache_path(task, cache_dir)
        if not (path / WARM_START_FILE).exists():
            with building(path):
                if not (path / WARM_START_FILE).exists():  # else another process built it while this one waited
                    self._build(path, task, reward, max_new_tokens)
        info = json.loads((path / WARM_START_FILE).read_text())
        info["cached_at"] = str(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
        tokenizer = AutoTokenizer.from_pretrained(path)
        return LoadedPolicy(model=model, tokenizer=tokenizer, path=str(path), info=info)

    def _build(self, path: Path, task, reward, max_new_tokens: int) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        from align_kit.models.char_tokenizer import build_char_tokenizer
        from align_kit.models.warm_start import sampled_success_rate, supervised_warm_start

        tokenizer = build_char_tokenizer()
        config = self.hf_config(len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id)
        torch.manual_seed(self.init_seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.bos_token_id = None

        settings = self.warm_start_config
        pairs = task.demonstrations()
        info: dict[str, Any] = {"parameters": sum(p.numel() for p in model.parameters()), **asdict(settings)}
        if pairs and settings.steps > 0:
            log.info("warm-starting %s on %d demonstrations (%d steps)", path.name, len(pairs), settings.steps)
            losses = supervised_warm_start(model, tokenizer, pairs, settings)
            info["final_sft_loss"] = losses[-1]
        else:
            log.warning("no demonstrations for the warm start of %s: RL starts from random weights", path.name)
        probe = task.probe_pairs(settings.eval_prompts) if reward is not None else []
        torch.manual_seed(settings.seed)
        measured = task.warm_start_success_rate(model, tokenizer, settings.eval_prompts, max_new_tokens)
        if measured is not None:  # a multi-turn task measures its own episodes
            info.update(measured)
        elif probe:
            prompts, answers = zip(*probe, strict=True)
            info["start_success_rate"] = sampled_success_rate(
                model, tokenizer, list(prompts), list(answers), reward, max_new_tokens
            )

        # Build beside the final folder and rename, so an interrupted build never looks complete. The staging
        # folder is per process: parallel sweep jobs may build the same model at once, and the first rename wins.
        staging = path.with_name(f"{path.name}.partial-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / WARM_START_FILE).write_text(json.dumps(info, indent=2))
        if (path / WARM_START_FILE).exists():
            shutil.rmtree(staging)
            return
        shutil.rmtree(path, ignore_errors=True)
        try:
            staging.rename(path)
        except OSError:  # another process renamed its complete build into place first
            if not (path / WARM_START_FILE).exists():
                raise
            shutil.rmtree(staging)
