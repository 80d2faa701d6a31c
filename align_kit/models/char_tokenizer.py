"""A character-level tokenizer built with `tokenizers`, saved and reloaded in Hugging Face format.

`<think>` and `</think>` are single, non-special tokens: TRL decodes completions with
`skip_special_tokens=True`, and the format reward must still see the tags.
"""

from __future__ import annotations

SPECIAL_TOKENS = ["<pad>", "<eos>", "<unk>"]
TAG_TOKENS = ["<think>", "</think>"]
CHARACTERS = ["\n"] + [chr(code) for code in range(32, 127)]
_KNOWN = frozenset(CHARACTERS)


def unencodable(text: str) -> str | None:
    """The first character of `text` the tokenizer maps to <unk> (it knows printable ASCII and the newline)."""
    return next((character for character in text if character not in _KNOWN), None)


def token_count(text: str) -> int:
    """Tokens of an encodable `text`: one per character, a think tag one in all."""
    return len(text) - sum(text.count(tag) * (len(tag) - 1) for tag in TAG_TOKENS)


def build_char_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS + TAG_TOKENS + CHARACTERS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens(SPECIAL_TOKENS)
    core.add_tokens(TAG_TOKENS)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
        truncation_side="left",
    )
