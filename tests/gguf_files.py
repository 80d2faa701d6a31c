"""Small GGUF files written with the `gguf` package, standing in for a real model's file where only its header is
read (the pre-flight's checks): a llama-architecture header, a byte-level vocabulary (every byte one token; the only
merges join runs of spaces, so a text without double spaces is as many tokens as its UTF-8 bytes), special tokens,
a chat template and one small tensor. `changes` replaces or drops (None) any header field; `tensors=False` writes
none."""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def byte_tokens() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes (bytes_to_unicode), so the vocabulary is byte-level."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, extra = [], 0
    for byte in range(256):
        if byte in printable:
            chars.append(chr(byte))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def write_gguf(path: Path, arch: str = "llama", tensors: bool = True, **changes) -> Path:
    import gguf
    import numpy as np

    tokens = [*SPECIALS, *byte_tokens(), "ĠĠ", "ĠĠĠĠ"]
    fields = {
        "context_length": 8192,  # as SmolLM2's: room for any shipped task's prompts
        "tokens": tokens,
        "eos_token_id": 2,
        "bos_token_id": 1,
        "pad_token_id": 2,
        "chat_template": CHAT_TEMPLATE,
        **changes,
    }
    writer = gguf.GGUFWriter(str(path), arch)
    if isinstance(fields["context_length"], str):  # a damaged header: the number written as text
        writer.add_string(f"{arch}.context_length", fields["context_length"])
    elif fields["context_length"] is not None:
        writer.add_context_length(fields["context_length"])
    writer.add_tokenizer_model("gpt2")
    if fields["tokens"] is not None:
        writer.add_token_list(fields["tokens"])
        writer.add_token_merges(["Ġ Ġ", "ĠĠ ĠĠ"])  # (transformers reads a one-item array as a scalar)
    for name in ("eos_token_id", "bos_token_id", "pad_token_id"):
        if fields[name] is not None:
            getattr(writer, f"add_{name}")(fields[name])
    if fields["chat_template"] is not None:
        writer.add_chat_template(fields["chat_template"])
    if tensors:
        writer.add_tensor("token_embd.weight", np.zeros((len(tokens), 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
