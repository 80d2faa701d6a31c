"""The character tokenizer of the tiny models: it round-trips through a save, keeps the think tags one token each, and
the prompt check (which character it cannot encode, how many tokens) agrees with it."""

from __future__ import annotations

import pytest

from align_kit.models.char_tokenizer import build_char_tokenizer


def test_char_tokenizer_round_trips_and_keeps_the_tags(tmp_path):
    from transformers import AutoTokenizer

    build_char_tokenizer().save_pretrained(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    text = "37+45=<think>37+40=77,77+5=82</think>82"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len("37+45=") + 1 + len("37+40=77,77+5=82") + 1 + 2  # one id per char, one per tag
    assert tokenizer.decode(ids + [tokenizer.eos_token_id], skip_special_tokens=True) == text
    assert tokenizer.padding_side == "left"


@pytest.mark.parametrize("text", ["37+45=", "a\nb", "<think>1+1=2</think>2", "¿3+1?", "4\t+1=", "数", "x🙂", "\u2028"])
def test_the_tokenizer_check_agrees_with_the_real_character_tokenizer(text):
    from align_kit.models.char_tokenizer import token_count, unencodable

    tokenizer = build_char_tokenizer()
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    first_unknown = next((ch for ch in text if tokenizer.convert_tokens_to_ids(ch) == tokenizer.unk_token_id), None)
    assert unencodable(text) == first_unknown
    if first_unknown is None:
        assert token_count(text) == len(ids)  # a think tag is one token
    else:
        assert tokenizer.unk_token_id in ids
