"""Any causal LM loadable with `from_pretrained`: a hub name, a local folder, or a GGUF file in a local folder
(converted once into the cache, align_kit/models/gguf.py)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from align_kit.core.contracts import ModelNode
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.models.lm_head import CompletionOnlyHead
from align_kit.models.tiny import LoadedPolicy

# What a folder saved with save_pretrained holds besides config.json: any one of each.
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


Dtype = Literal["float32", "bfloat16", "float16", "auto", "by_device"]
HeadRows = Literal["completion", "all"]


def looks_like_local_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or Path(name).expanduser().exists()


@dataclass
class HFModel(ModelNode):
    name_or_path: str | None = knob(
        None,
        help="A hub name (Qwen/Qwen3-0.6B) or a local folder saved with save_pretrained (config.json, weights, "
        "tokenizer files); required.",
    )
    gguf_file: str | None = knob(
        None,
        help="A GGUF file inside the folder model.name_or_path (transformers' gguf_file): dequantized once into "
        "paths.cache_dir/gguf as a regular transformers folder, which later runs load in seconds; needs the gguf "
        "package. null: name_or_path is a transformers model.",
    )
    dtype: Dtype = knob(
        "float32",
        help="The dtype the weights load in (from_pretrained's dtype); float32 trains as the tiny models do, auto "
        "takes the checkpoint's own, by_device is bfloat16 when a GPU is visible and float32 on a CPU.",
    )
    lm_head_rows: HeadRows = knob(
        "completion",
        help="The positions TRL's fused LM head projects in the trainer's forwards: completion (the tokens scored, "
        "as TRL does on a GPU) or all (TRL's path on a CPU: every prompt and padding position too, then discarded; "
        "the same log-probs for more work, and TRL's gradients bit for bit).",
    )
    trust_remote_code: bool = knob(
        False,
        help="Let from_pretrained run the model's own code (its auto_map Python); only for models you trust, and only "
        "from the command line (a recipe, --config-dir or sweep file that sets it is refused).",
    )

    def validate(self) -> None:
        if not self.name_or_path:
            raise ConfigError("model=hf needs model.name_or_path=<hub name or local folder>")
        if self.gguf_file:
            self._check_gguf()
            return
        if looks_like_local_path(self.name_or_path) and not Path(self.name_or_path).expanduser().is_dir():
            raise ConfigError(
                f"model.name_or_path={self.name_or_path} is not a folder; point it at a saved model "
                "(config.json + weights + tokenizer files)"
            )
        if looks_like_local_path(self.name_or_path):
            self._check_saved_folder(Path(self.name_or_path).expanduser())

    def _check_gguf(self) -> None:
        key = f"model.gguf_file={self.gguf_file}"
        inside = Path(os.path.normpath(self.gguf_file))
        if inside.is_absolute():  # transformers joins it to the folder; an absolute name replaces the folder
            raise ConfigError(
                f"{key} is an absolute path; transformers reads model.gguf_file inside model.name_or_path="
                f"{self.name_or_path}: name the file relative to that folder"
            )
        if inside.parts[:1] == ("..",):
            raise ConfigError(
                f"{key} leaves the folder model.name_or_path={self.name_or_path}; name a file inside it (or point "
                "model.name_or_path at the folder that holds the GGUF)"
            )
        path = self.gguf_path()
        if not path.is_file():
            folder = Path(self.name_or_path).expanduser()  # the listing is of the model folder, where the name is read
            present = sorted(p.name for p in folder.glob("*.gguf")) if folder.is_dir() else []
            # the name reaches transformers as written: a shell's `~` or `$NAME` is never expanded in it
            unexpanded = (
                " (~ and $VARIABLES are not expanded here)" if "$" in self.gguf_file or "~" in self.gguf_file else ""
            )
            raise ConfigError(
                f"{key}: {path} is not a file{unexpanded}; GGUF files in model.name_or_path={self.name_or_path}: "
                f"{', '.join(present) or 'none'}"
            )
        from align_kit.models.gguf import read_model_header, require_gguf_package

        require_gguf_package(key)
        self._gguf_header = read_model_header(path, key)
        self.max_position_embeddings = self._gguf_header.context_length

    def gguf_path(self) -> Path:
        return Path(self.name_or_path).expanduser() / self.gguf_file

    def check(self, plan) -> None:
        budget = plan.effective("max_completion_length")
        positions = (
            self.max_position_embeddings if self.max_position_embeddings is not None else self._saved_positions()
        )
        if positions is not None and budget >= positions:
            raise ConfigError(
                f"trainer.max_completion_length={budget} does not fit the model's context of {positions} positions "
                "(prompt included); use a smaller budget"
            )

    def _saved_positions(self) -> int | None:
        """config.json's max_position_embeddings of a local folder (None for a hub name, a GGUF, or a config that
        does not say); a value that is not a whole number > 0 is refused, as it would skip the context checks."""
        if self.gguf_file or not looks_like_local_path(self.name_or_path):
            return None
        config = Path(self.name_or_path).expanduser() / "config.json"
        positions = json.loads(config.read_text()).get("max_position_embeddings") if config.is_file() else None
        if positions is not None and (isinstance(positions, bool) or not isinstance(positions, int) or positions < 1):
            raise ConfigError(
                f"model.name_or_path={self.name_or_path}: {config} says max_position_embeddings={positions!r}, not a "
                "whole number > 0; restore it from the saved model"
            )
        return positions

    def _check_saved_folder(self, folder: Path) -> None:
        """A local folder holds what from_pretrained reads (it failed at step 0 with a traceback otherwise)."""
        key = f"model.name_or_path={self.name_or_path}"
        fix = "point it at a folder saved with save_pretrained (config.json + weights + tokenizer files)"
        config = folder / "config.json"
        if not config.is_file():
            raise ConfigError(f"{key}: {folder} holds no config.json; {fix}")
        try:
            loaded = json.loads(config.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            where = f"line {error.lineno}: {error.msg}" if isinstance(error, json.JSONDecodeError) else "not UTF-8"
            raise ConfigError(f"{key}: {config} is not valid JSON ({where}); restore it from the saved model") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{key}: {config} holds a JSON {type(loaded).__name__}, not an object; {fix}")
        if not isinstance(loaded.get("model_type"), str):
            raise ConfigError(f"{key}: {config} names no model_type, so no architecture can load it; {fix}")
        for kind, names in (("weights", WEIGHT_FILES), ("tokenizer", TOKENIZER_FILES)):
            if not any((folder / name).is_file() for name in names):
                raise ConfigError(f"{key}: {folder} holds no {kind} (none of {', '.join(names)}); {fix}")

    def declared_model_type(self) -> str | None:
        """config.json's model_type of a local folder, or the GGUF's architecture; a hub name is known only when the
        model loads."""
        if self.gguf_file:
            header = getattr(self, "_gguf_header", None)
            return header.model_type if header is not None else None
        config_file = Path(self.name_or_path).expanduser() / "config.json"
        if config_file.is_file():
            return json.loads(config_file.read_text()).get("model_type")
        return None

    def prompt_problem(self, prompt: str | list, completion_budget: int) -> str | None:
        """Why the saved tokenizer cannot take a text `prompt` as written: a character it maps to its unknown token,
        or more tokens than config.json's max_position_embeddings leaves beside the completion. Read cheaply from a
        local folder's tokenizer.json (no model, no transformers); a hub model, another tokenizer format or a
        message list (the chat template renders it) is not checked here. A GGUF's prompts are checked against its
        header: chat template and context (align_kit/models/gguf_header.py)."""
        if self.gguf_file and getattr(self, "_gguf_header", None) is not None:
            from align_kit.models.gguf_header import prompt_problem

            key = f"model.gguf_file={self.gguf_file}"
            return prompt_problem(self._gguf_header, self.gguf_path(), prompt, completion_budget, key)
        saved = self._saved_tokenizer() if isinstance(prompt, str) and not self.gguf_file else None
        if saved is None:
            return None
        tokenizer, unknown, positions = saved
        encoding = tokenizer.encode(prompt, add_special_tokens=False)
        if unknown is not None and unknown in encoding.ids:
            start, end = encoding.offsets[encoding.ids.index(unknown)]
            return (
                f"holds {prompt[start:end]!r}, which the tokenizer of model.name_or_path={self.name_or_path} maps to "
                "its unknown token; rewrite the prompt or use a model whose tokenizer covers it"
            )
        if isinstance(positions, int) and len(encoding.ids) > positions - completion_budget:
            return (
                f"is {len(encoding.ids)} tokens, more than the {positions - completion_budget} positions the model's "
                f"max_position_embeddings={positions} leaves after trainer.max_completion_length={completion_budget}; "
                "shorten it or lower trainer.max_completion_length"
            )
        return None

    def _saved_tokenizer(self):
        """(tokenizer, its unknown token's id or None, config.json's max_position_embeddings), once; None when
        the model is not a local folder with a tokenizer.json."""
        if not hasattr(self, "_tokenizer_cache"):
            folder = Path(self.name_or_path).expanduser()
            self._tokenizer_cache = None
            if looks_like_local_path(self.name_or_path) and (folder / "tokenizer.json").is_file():
                from tokenizers import Tokenizer

                try:
                    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
                    unknown = json.loads((folder / "tokenizer.json").read_text()).get("model", {}).get("unk_token")
                except Exception as error:  # tokenizers' own parse errors: AutoTokenizer would fail the same way
                    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                    raise ConfigError(
                        f"model.name_or_path={self.name_or_path}: {folder / 'tokenizer.json'} cannot be read ({text}); "
                        "restore it from the saved model"
                    ) from None
                config = json.loads((folder / "config.json").read_text())
                unknown_id = tokenizer.token_to_id(unknown) if isinstance(unknown, str) else None
                self._tokenizer_cache = (tokenizer, unknown_id, config.get("max_position_embeddings"))
        return self._tokenizer_cache

    def load(self, task, cache_dir, reward=None, max_new_tokens: int = 32) -> LoadedPolicy:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        info: dict = {}
        if self.gguf_file:
            from align_kit.models.gguf import ensure_converted

            path = str(ensure_converted(self.gguf_path(), cache_dir))
            info["gguf_file"] = str(self.gguf_path())
        elif looks_like_local_path(self.name_or_path):
            path = str(Path(self.name_or_path).expanduser())
        else:
            path = self.name_or_path
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=self.load_dtype(), trust_remote_code=self.trust_remote_code
        )
        tokenizer = AutoTokenizer.from_pretrained(
            path, padding_side="left", truncation_side="left", trust_remote_code=self.trust_remote_code
        )
        if tokenizer.pad_token is None:  # TRL pads with the EOS then; say so in the policy's info
            info["pad_token"] = "eos"
        info.update(source=path, parameters=sum(p.numel() for p in model.parameters()), dtype=str(model.dtype))
        return LoadedPolicy(model=model, tokenizer=tokenizer, path=path, info=info)

    def trainer_hooks(self) -> list:
        return [CompletionOnlyHead()] if self.lm_head_rows == "completion" else []

    def load_dtype(self) -> str:
        if self.dtype != "by_device":
            return self.dtype
        import torch

        return "bfloat16" if torch.cuda.is_available() else "float32"
