"""The GGUF path of model=hf: the converted copy's cache key, the special tokens taken from the model's config, and
the checks made before anything loads. The conversion itself runs on the real file in the real_model tier
(tests/real_model/)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from align_kit.core.errors import ConfigError
from align_kit.models.gguf import align_special_tokens, converted_folder
from align_kit.models.hf import HFModel


def test_special_tokens_follow_the_models_config():
    from align_kit.models.char_tokenizer import build_char_tokenizer

    tokenizer = build_char_tokenizer()  # <pad>=0, <eos>=1, <unk>=2, <think>=3, </think>=4
    tokenizer.pad_token = None
    # As the converted SmolLM2: the tokenizer's EOS is the model's BOS, and it has no pad token.
    tokenizer.eos_token, tokenizer.bos_token = "<unk>", "<unk>"
    changed = align_special_tokens(tokenizer, SimpleNamespace(eos_token_id=4, pad_token_id=4, bos_token_id=2))
    assert (tokenizer.eos_token, tokenizer.eos_token_id) == ("</think>", 4)
    assert (tokenizer.pad_token, tokenizer.pad_token_id) == ("</think>", 4)
    assert tokenizer.bos_token_id == 2
    assert changed == ["eos=</think>", "pad=</think>"]  # bos already agreed
    assert align_special_tokens(tokenizer, SimpleNamespace(eos_token_id=None)) == []


def test_the_cache_key_follows_the_files_path_size_and_time(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 10)
    first = converted_folder(gguf, tmp_path / "cache")
    assert first.parent == tmp_path / "cache" / "gguf" and first.name.startswith("m-")
    assert converted_folder(gguf, tmp_path / "cache") == first
    os.utime(gguf, ns=(1, 1))  # a replaced file converts again
    assert converted_folder(gguf, tmp_path / "cache") != first


def test_a_missing_gguf_file_names_the_ones_there(tmp_path):
    (tmp_path / "a.gguf").write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match=r"^model\.gguf_file=b\.gguf: .* is not a file; GGUF files in .*: a\.gguf$"):
        HFModel(name_or_path=str(tmp_path), gguf_file="b.gguf").validate()


def test_missing_gguf_package_names_the_install_command(tmp_path, monkeypatch):
    import importlib.util

    (tmp_path / "a.gguf").write_bytes(b"GGUF")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    with pytest.raises(ConfigError, match="needs the gguf package .*make install-real-model"):
        HFModel(name_or_path=str(tmp_path), gguf_file="a.gguf").validate()


def test_the_completion_budget_must_fit_the_models_context():
    node = HFModel(name_or_path="Qwen/Qwen3-0.6B")
    node.max_position_embeddings = 64
    plan = SimpleNamespace(effective=lambda name: {"max_completion_length": 64}[name])
    with pytest.raises(ConfigError, match=r"trainer\.max_completion_length=64 does not fit the model's context of 64"):
        node.check(plan)
    node.max_position_embeddings = 65
    node.check(plan)


def test_the_header_names_the_architecture_and_context(tmp_path):
    gguf = pytest.importorskip("gguf")
    from align_kit.models.gguf import metadata

    path = tmp_path / "moe.gguf"
    writer = gguf.GGUFWriter(str(path), "qwen3moe")  # llama.cpp's name for transformers' qwen3_moe
    writer.add_context_length(4096)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    assert metadata(path) == {"model_type": "qwen3_moe", "context_length": 4096}
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf")
    assert metadata(tmp_path / "junk.gguf") == {}
