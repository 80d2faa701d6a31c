"""Any causal LM loadable with `from_pretrained`: a hub name or a local folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from align_kit.components.base import Component
from align_kit.errors import ConfigError
from align_kit.models.tiny import LoadedPolicy

DTYPES = ("float32", "bfloat16", "float16", "auto")


def looks_like_local_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or Path(name).expanduser().exists()


@dataclass
class HFModel(Component):
    name_or_path: str | None = None
    dtype: str = "float32"
    trust_remote_code: bool = False

    def validate(self) -> None:
        if not self.name_or_path:
            raise ConfigError("model=hf needs model.name_or_path=<hub name or local folder>")
        if looks_like_local_path(self.name_or_path) and not Path(self.name_or_path).expanduser().is_dir():
            raise ConfigError(
                f"model.name_or_path={self.name_or_path} is not a folder; point it at a saved model "
                "(config.json + weights + tokenizer files)"
            )
        if self.dtype not in DTYPES:
            raise ConfigError(f"model.dtype={self.dtype!r} is not one of {list(DTYPES)}")

    def load(self, task, cache_dir, reward=None, max_new_tokens: int = 32) -> LoadedPolicy:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = (
            str(Path(self.name_or_path).expanduser()) if looks_like_local_path(self.name_or_path) else self.name_or_path
        )
        model = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype, trust_remote_code=self.trust_remote_code)
        tokenizer = AutoTokenizer.from_pretrained(
            path, padding_side="left", truncation_side="left", trust_remote_code=self.trust_remote_code
        )
        return LoadedPolicy(model=model, tokenizer=tokenizer, path=path, info={"source": path})
