"""The GGUF path of model=hf: the converted copy's cache key, the special tokens taken from the model's config, and
the checks made before anything loads. The conversion itself runs on the real file in the real_model tier
(tests/real_model/)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from align_kit.core.errors import ConfigError
from align_kit.models.gguf import (
    CONVERTED_MARKER,
    align_special_tokens,
    converted_folder,
    damage,
    ensure_converted,
    seal,
)
from align_kit.models.gguf_header import prompt_problem, read_header
from align_kit.models.hf import HFModel
from tests.gguf_files import write_gguf


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
    write_gguf(tmp_path / "a.gguf")
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


def test_the_header_names_the_architecture_context_and_special_tokens(tmp_path):
    path = write_gguf(tmp_path / "moe.gguf", arch="qwen3moe", context_length=4096)  # llama.cpp's name for qwen3_moe
    header = read_header(path, "K")
    assert (header.model_type, header.context_length, header.tensors) == ("qwen3_moe", 4096, 1)
    assert header.special_ids == {"eos": 2, "bos": 1, "pad": 2}
    assert header.special_token("eos") == "<|im_end|>" and header.special_token("pad") == "<|im_end|>"


def test_a_text_prompt_is_counted_with_the_files_own_tokenizer(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", context_length=256)
    header = read_header(path, "K")
    # a byte-level vocabulary whose only merges join spaces: "x" * n is n tokens; the room is 256 - 32 = 224
    assert prompt_problem(header, path, "x" * 224, 32, "K") is None
    assert prompt_problem(header, path, "x" * 225, 32, "K") == (
        "is 225 tokens, more than the 224 positions the GGUF's context_length=256 leaves after "
        "trainer.max_completion_length=32; shorten it or lower trainer.max_completion_length"
    )


def test_a_message_list_needs_a_chat_template_that_renders_it(tmp_path):
    chat = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "1+1="}]
    bare = write_gguf(tmp_path / "bare.gguf", chat_template=None)
    assert "is a message list, but K has no chat template" in prompt_problem(
        read_header(bare, "K"), bare, chat, 32, "K"
    )
    refusing = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('no system role') }}{% endif %}x"
    strict = write_gguf(tmp_path / "strict.gguf", chat_template=refusing)
    problem = prompt_problem(read_header(strict, "K"), strict, chat, 32, "K")
    assert problem == "cannot be rendered by the chat template of K (TemplateError: no system role)"
    fine = write_gguf(tmp_path / "fine.gguf")
    assert prompt_problem(read_header(fine, "K"), fine, chat, 32, "K") is None


def test_the_marker_lists_every_file_so_a_damaged_entry_is_named(tmp_path):
    folder = tmp_path / "entry"
    (folder / "sub").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"w" * 100)
    (folder / "sub" / "tokenizer.json").write_text("{}")
    assert "holds no converted_from.json" in damage(folder)
    seal(folder, {"gguf_file": "m.gguf"})
    assert damage(folder) is None
    (folder / "model.safetensors").write_bytes(b"w" * 40)  # cut short
    assert damage(folder) == f"{folder / 'model.safetensors'} is 40 bytes, not the 100 written"
    (folder / "model.safetensors").write_bytes(b"v" * 100)  # same size, other bytes
    assert damage(folder) == f"{folder / 'model.safetensors'} changed since it was written (its SHA-256 differs)"
    (folder / "model.safetensors").unlink()
    assert damage(folder) == f"{folder / 'model.safetensors'} is missing"
    (folder / CONVERTED_MARKER).write_text('{"gguf_file": "m.gguf", "special_tokens_fixed": []}')  # an old marker
    assert damage(folder).endswith("does not list the files with their sizes and digests")


def test_a_damaged_cache_entry_is_converted_again_never_loaded(tmp_path, monkeypatch):
    gguf_path = write_gguf(tmp_path / "m.gguf")
    converted = []

    def fake_convert(path, folder):
        converted.append(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model.safetensors").write_bytes(b"w" * 100)
        seal(folder, {"gguf_file": str(path)})
        return folder

    monkeypatch.setattr("align_kit.models.gguf.convert", fake_convert)
    folder = ensure_converted(gguf_path, tmp_path / "cache")
    assert ensure_converted(gguf_path, tmp_path / "cache") == folder and len(converted) == 1  # whole: reused
    (folder / "model.safetensors").write_bytes(b"w" * 10)
    assert ensure_converted(gguf_path, tmp_path / "cache") == folder and len(converted) == 2


def test_an_eos_outside_the_tokenizers_vocabulary_is_refused_not_kept():
    from align_kit.models.char_tokenizer import build_char_tokenizer

    tokenizer = build_char_tokenizer()
    with pytest.raises(ConfigError, match=r"eos_token_id=100000 is outside its tokenizer's vocabulary"):
        align_special_tokens(tokenizer, SimpleNamespace(eos_token_id=100000))


@pytest.mark.parametrize(
    ("loaded", "message"),
    [
        (ValueError("GGUF model with architecture x is not supported yet."), "transformers cannot convert .*m.gguf "
         r"\(ValueError: GGUF model with architecture x is not supported yet\.\); point model.gguf_file at a GGUF"),
        (({"missing_keys": ["model.layers.0.mlp.up_proj.weight"]}), r"m\.gguf lacks 1 of the model's weights "
         r"\(model\.layers\.0\.mlp\.up_proj\.weight\.\.\.\); point model\.gguf_file at a complete GGUF"),
    ],
)  # fmt: skip
def test_a_conversion_transformers_refuses_or_leaves_weights_missing_is_one_line_and_caches_nothing(
    loaded, message, tmp_path, monkeypatch
):
    import transformers

    def from_pretrained(*args, **kwargs):
        if isinstance(loaded, Exception):
            raise loaded
        return SimpleNamespace(config=SimpleNamespace()), loaded

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: object())
    gguf_path = write_gguf(tmp_path / "m.gguf")
    with pytest.raises(ConfigError, match=message):
        ensure_converted(gguf_path, tmp_path / "cache")
    assert list((tmp_path / "cache" / "gguf").iterdir()) == []
