"""A GGUF checkpoint (llama.cpp's single-file format) turned once into a regular transformers folder.

transformers reads a GGUF with `from_pretrained(folder, gguf_file=name)`, dequantizing every tensor and converting
the tokenizer: about a minute for a 135 M model on 2 cores. The result is saved with `save_pretrained` (safetensors
and tokenizer files) under the cache, keyed by the file's path, size and modification time, so later loads take
seconds and a replaced file converts again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
from pathlib import Path

from align_kit.core.errors import ConfigError

log = logging.getLogger(__name__)

CONVERTED_MARKER = "converted_from.json"


def require_gguf_package(key: str) -> None:
    """transformers needs the `gguf` package to read the file; without it the failure came mid-load."""
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError(f"{key} needs the gguf package to read it: make install-real-model (or pip install gguf)")


def converted_folder(gguf_path: Path, cache_dir: str | Path) -> Path:
    """Where the converted copy of `gguf_path` lives in the cache (whether or not it exists yet)."""
    stat = gguf_path.stat()
    identity = f"{gguf_path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return Path(cache_dir).expanduser() / "gguf" / f"{gguf_path.stem}-{digest}"


def is_converted(folder: Path) -> bool:
    return (folder / CONVERTED_MARKER).is_file()


def align_special_tokens(tokenizer, config) -> list[str]:
    """Take the model's own end and padding tokens (config.json, read from the GGUF's metadata) into the tokenizer.

    transformers 5.17's GGUF tokenizer conversion of a gpt2-style vocabulary names the BOS token as EOS and no pad
    token: SmolLM2's file says eos 2 (`<|im_end|>`), pad 2, while the converted tokenizer says eos 1
    (`<|im_start|>`). TRL stops sampling and ends the completion mask at the tokenizer's EOS, so each completion ran
    past `<|im_end|>` into a new chat turn until the length budget. Returns what was changed, for the log."""
    changed = []
    for role in ("eos", "pad", "bos"):
        wanted = getattr(config, f"{role}_token_id", None)
        if not isinstance(wanted, int) or getattr(tokenizer, f"{role}_token_id") == wanted:
            continue
        token = tokenizer.convert_ids_to_tokens(wanted)
        if token is None:
            continue
        setattr(tokenizer, f"{role}_token", token)
        changed.append(f"{role}={token}")
    return changed


def convert(gguf_path: Path, folder: Path, dtype: str = "float32") -> Path:
    """Dequantize `gguf_path` into `folder` (written beside it, then renamed, so a killed conversion leaves no
    half folder that a later run would take as done)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s into %s (once; about a minute for a small model)", gguf_path, folder)
    source, name = str(gguf_path.parent), gguf_path.name
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=name, dtype=dtype)
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=name)
    changed = align_special_tokens(tokenizer, model.config)
    # The weights are dequantized already: what remains of the GGUF quantizer only blocks save_pretrained.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    marker = {"gguf_file": str(gguf_path.resolve()), "special_tokens_fixed": changed}
    (partial / CONVERTED_MARKER).write_text(json.dumps(marker, indent=2))
    if is_converted(folder):  # another process converted it meanwhile: keep theirs
        shutil.rmtree(partial, ignore_errors=True)
    else:
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    return folder


def ensure_converted(gguf_path: Path, cache_dir: str | Path) -> Path:
    """The converted folder of `gguf_path`, converting it on first use."""
    folder = converted_folder(gguf_path, cache_dir)
    if not is_converted(folder):
        folder.parent.mkdir(parents=True, exist_ok=True)
        convert(gguf_path, folder)
    return folder


def metadata(gguf_path: Path) -> dict:
    """What the GGUF's header says, read without loading any tensor: `model_type` (transformers' name of its
    architecture: llama.cpp's `qwen3moe` is `qwen3_moe`) and `context_length` (`<arch>.context_length`). Empty
    when the gguf package is missing or the file is no GGUF (the load names it)."""
    if importlib.util.find_spec("gguf") is None:
        return {}
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(gguf_path))
    except Exception:  # a truncated or foreign file: GGUFReader raises several kinds
        return {}
    arch = reader.fields.get("general.architecture")
    if arch is None:
        return {}
    name = bytes(arch.parts[arch.data[0]]).decode()
    facts = {"model_type": name[: -len("moe")] + "_moe" if name.endswith("moe") else name}
    field = reader.fields.get(f"{name}.context_length")
    if field is not None:
        facts["context_length"] = int(field.parts[field.data[0]][0])
    return facts
