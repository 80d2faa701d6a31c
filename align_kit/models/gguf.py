"""A GGUF checkpoint (llama.cpp's single-file format) turned once into a regular transformers folder.

transformers reads a GGUF with `from_pretrained(folder, gguf_file=name)`, dequantizing every tensor and converting
the tokenizer: about a minute for a 135 M model on 2 cores. The result is saved with `save_pretrained` (safetensors
and tokenizer files) under the cache, keyed by the file's path, size and modification time, so later loads take
seconds and a replaced file converts again.

An entry of the cache is trusted only when it proves whole: its marker (written last) lists every file with its size
and SHA-256, and each is checked before the folder is loaded. A folder that fails (a file cut short, changed, missing,
or a marker from before the digests) is named in the log and converted again, never loaded.
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
    return damage(folder) is None


def damage(folder: Path) -> str | None:
    """Why the cache entry `folder` cannot be trusted (None when every file its marker lists is there, whole)."""
    marker = folder / CONVERTED_MARKER
    if not marker.is_file():
        return f"{folder} holds no {CONVERTED_MARKER} (a conversion that did not finish)"
    try:
        files = json.loads(marker.read_text(encoding="utf-8"))["files"]
        listed = {str(name): (int(entry["bytes"]), str(entry["sha256"])) for name, entry in files.items()}
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        return f"{marker} does not list the files with their sizes and digests"
    if not listed:
        return f"{marker} lists no file"
    for name, (size, digest) in sorted(listed.items()):
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        if path.stat().st_size != size:
            return f"{path} is {path.stat().st_size} bytes, not the {size} written"
        if sha256(path) != digest:
            return f"{path} changed since it was written (its SHA-256 differs)"
    return None


def seal(folder: Path, facts: dict) -> None:
    """Write the marker that makes `folder` a cache entry: `facts` and every file's size and SHA-256."""
    files = {
        str(path.relative_to(folder)): {"bytes": path.stat().st_size, "sha256": sha256(path)}
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != CONVERTED_MARKER
    }
    (folder / CONVERTED_MARKER).write_text(json.dumps({**facts, "files": files}, indent=2))


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
        if token is None:  # the header check refuses such a file; never keep a wrong EOS silently
            raise ConfigError(f"the model's {role}_token_id={wanted} is outside its tokenizer's vocabulary")
        setattr(tokenizer, f"{role}_token", token)
        changed.append(f"{role}={token}")
    return changed


def convert(gguf_path: Path, folder: Path, dtype: str = "float32") -> Path:
    """Dequantize `gguf_path` into `folder` (written beside it, then renamed, so a killed conversion leaves no
    half folder that a later run would take as done)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s into %s (once; about a minute for a small model)", gguf_path, folder)
    source, name = str(gguf_path.parent), gguf_path.name
    try:
        model, loading = AutoModelForCausalLM.from_pretrained(
            source, gguf_file=name, dtype=dtype, output_loading_info=True
        )
        tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=name)
    except (ValueError, KeyError, TypeError, NotImplementedError, OSError) as error:
        # what the header check cannot see: a tensor type or layout transformers' converter does not take
        reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else type(error).__name__
        raise ConfigError(
            f"transformers cannot convert {gguf_path} ({type(error).__name__}: {reason}); point model.gguf_file at a "
            "GGUF it converts"
        ) from None
    if loading["missing_keys"]:  # they would train from random values
        missing = sorted(loading["missing_keys"])
        raise ConfigError(
            f"{gguf_path} lacks {len(missing)} of the model's weights ({', '.join(missing[:3])}...); point "
            "model.gguf_file at a complete GGUF"
        )
    changed = align_special_tokens(tokenizer, model.config)
    # The weights are dequantized already: what remains of the GGUF quantizer only blocks save_pretrained.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    seal(partial, {"gguf_file": str(gguf_path.resolve()), "special_tokens_fixed": changed})
    if is_converted(folder):  # another process converted it meanwhile: keep theirs
        shutil.rmtree(partial, ignore_errors=True)
    else:
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    return folder


def ensure_converted(gguf_path: Path, cache_dir: str | Path) -> Path:
    """The converted folder of `gguf_path`, converting it on first use and again when the entry is damaged."""
    folder = converted_folder(gguf_path, cache_dir)
    problem = damage(folder)
    if problem is not None:
        if folder.exists():
            log.warning("the cached conversion cannot be trusted (%s): converting %s again", problem, gguf_path)
        folder.parent.mkdir(parents=True, exist_ok=True)
        convert(gguf_path, folder)
    return folder


def read_model_header(gguf_path: Path, key: str):
    """The GGUF's checked header (align_kit/models/gguf_header.py), read once per file version in this process."""
    from align_kit.models.gguf_header import read_header

    stat = gguf_path.stat()
    identity = (str(gguf_path.resolve()), stat.st_size, stat.st_mtime_ns)
    if identity not in _HEADERS:
        _HEADERS[identity] = read_header(gguf_path, key)
    return _HEADERS[identity]


_HEADERS: dict = {}
