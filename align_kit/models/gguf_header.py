"""What a GGUF file declares, read from its header without loading a tensor, and refused in one line when it cannot
be what model=hf / model=smollm2 loads.

Every field the run relies on is checked here, before the model loads: the file is a whole GGUF (magic, header,
every tensor's bytes inside the file) with at least one tensor (a header alone converted into a randomly initialised
model and trained with exit 0); `general.architecture` is one transformers converts from GGUF into a causal LM;
`<arch>.context_length` is a whole number > 0 (the completion budget and the prompts are checked against it); the
tokenizer's vocabulary (`tokenizer.ggml.tokens`) is present and its end, start and padding ids
(`tokenizer.ggml.eos_token_id` and the others) lie inside it (sampling stops at the EOS: one outside was silently
kept wrong); `tokenizer.chat_template`, when present, renders a conversation (a message-list task needs one: see
HFModel.prompt_problem).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from align_kit.core.errors import ConfigError

MAGIC = b"GGUF"
# The special-token ids the tokenizer conversion reads, by the role the converted tokenizer gives them.
SPECIAL_IDS = {
    "eos": "tokenizer.ggml.eos_token_id",
    "bos": "tokenizer.ggml.bos_token_id",
    "pad": "tokenizer.ggml.padding_token_id",
}
# A conversation every usable chat template renders (a system message is not: some templates refuse one).
SAMPLE_CHAT = [{"role": "user", "content": "1 + 2 ="}]


@dataclass(frozen=True)
class GGUFHeader:
    model_type: str  # transformers' name of the architecture (llama.cpp's qwen3moe is qwen3_moe)
    context_length: int
    tokens: tuple[str, ...]
    special_ids: dict[str, int]  # eos, and bos / pad when the file names them
    chat_template: str | None
    tensors: int

    def special_token(self, role: str) -> str | None:
        index = self.special_ids.get(role)
        return None if index is None else self.tokens[index]


def read_header(path: Path, key: str) -> GGUFHeader:
    """The header of the GGUF at `path`, checked (see the module); `key` names the setting in the one-line error."""
    fix = "point it at a complete GGUF (llama.cpp's convert_hf_to_gguf.py writes one), or download it again"
    where = f"{key}: {path}"
    size = path.stat().st_size
    if size == 0:
        raise ConfigError(f"{where} is empty (0 bytes); {fix}")
    with open(path, "rb") as file:
        start = file.read(len(MAGIC))
    if start != MAGIC:
        raise ConfigError(f"{where} is not a GGUF file (it starts with {start!r}, not {MAGIC!r}); {fix}")
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
    except Exception as error:  # GGUFReader meets a cut or damaged file with ValueError, IndexError, struct errors
        reason = str(error).strip().splitlines()[0][:120] if str(error).strip() else type(error).__name__
        raise ConfigError(f"{where} cannot be read as GGUF (truncated or damaged: {reason}); {fix}") from None
    for tensor in reader.tensors:
        if tensor.data_offset + tensor.n_bytes > size:
            raise ConfigError(f"{where} is truncated: tensor {tensor.name} ends past the file's {size} bytes; {fix}")
    if not reader.tensors:
        raise ConfigError(f"{where} holds a header and no tensors, so nothing would load but random weights; {fix}")
    fields = reader.fields
    arch = _text(fields, "general.architecture", where, fix)
    model_type = supported_model_type(arch, where)
    context = _whole_number(fields, f"{arch}.context_length", where, fix)
    if context < 1:
        raise ConfigError(f"{where} says {arch}.context_length={context}: a model needs at least 1 position; {fix}")
    tokens = _tokens(fields, where, fix)
    if "tokenizer.ggml.merges" not in fields and "tokenizer.ggml.scores" not in fields:
        raise ConfigError(
            f"{where} has neither tokenizer.ggml.merges nor tokenizer.ggml.scores: no tokenizer can be built; {fix}"
        )
    special_ids = {}
    for role, name in SPECIAL_IDS.items():
        if name not in fields:
            if role == "eos":
                raise ConfigError(f"{where} names no end-of-sequence token ({name}), so sampling could not stop; {fix}")
            continue
        index = _whole_number(fields, name, where, fix)
        if not 0 <= index < len(tokens):
            raise ConfigError(f"{where} says {name}={index}, outside its vocabulary of {len(tokens)} tokens; {fix}")
        special_ids[role] = index
    template = _text(fields, "tokenizer.chat_template", where, fix) if "tokenizer.chat_template" in fields else None
    header = GGUFHeader(model_type, context, tuple(tokens), special_ids, template, len(reader.tensors))
    if template is not None:
        problem = render_problem(header, SAMPLE_CHAT)
        if problem is not None:
            raise ConfigError(
                f"{where}: its chat template (tokenizer.chat_template) cannot render a conversation ({problem}); {fix}"
            )
    return header


def render(header: GGUFHeader, messages: list) -> str:
    """`messages` as TRL will render them: transformers' own chat-template renderer, with a generation prompt."""
    from transformers.utils.chat_template_utils import render_jinja_template

    specials = {f"{role}_token": header.special_token(role) for role in ("bos", "eos", "pad")}
    rendered, _ = render_jinja_template(
        [messages], chat_template=header.chat_template, add_generation_prompt=True, **specials
    )
    return rendered[0]


def render_problem(header: GGUFHeader, messages: list) -> str | None:
    """Why the chat template cannot render `messages` (its Jinja syntax, or an error it raises), or None."""
    try:
        render(header, messages)
    except Exception as error:  # jinja2's TemplateError kinds and whatever the template's own code raises
        reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else "no message"
        return f"{type(error).__name__}: {reason}"
    return None


def supported_model_type(arch: str, where: str) -> str:
    """transformers' name for the GGUF architecture `arch`, when transformers converts it into a causal LM."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    causal = sorted(a for a in GGUF_SUPPORTED_ARCHITECTURES if a in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    # llama.cpp writes qwen3moe, gpt-oss, minimax-m2 where transformers says qwen3_moe, gpt_oss, minimax_m2
    by_plain_name = {name.replace("_", ""): name for name in causal}
    found = by_plain_name.get(arch.replace("-", "").replace("_", ""))
    if found is None:
        raise ConfigError(
            f"{where} is a {arch} model, which transformers cannot convert from GGUF into a causal LM; "
            f"it converts: {', '.join(causal)}"
        )
    return found


def _text(fields, name: str, where: str, fix: str) -> str:
    value = _contents(fields, name, where, fix)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where} says {name}={value!r}, not a text; {fix}")
    return value


def _whole_number(fields, name: str, where: str, fix: str) -> int:
    value = _contents(fields, name, where, fix)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where} says {name}={value!r}, not a whole number; {fix}")
    return value


def _tokens(fields, where: str, fix: str) -> list[str]:
    value = _contents(fields, "tokenizer.ggml.tokens", where, fix)
    if not isinstance(value, list) or not value or not all(isinstance(token, str) for token in value):
        raise ConfigError(f"{where}: tokenizer.ggml.tokens is not a list of token texts; {fix}")
    return value


def _contents(fields, name: str, where: str, fix: str):
    field = fields.get(name)
    if field is None:
        raise ConfigError(f"{where} has no {name} in its header; {fix}")
    try:
        return field.contents()
    except Exception:  # a value the reader cannot decode (not UTF-8, a cut array)
        raise ConfigError(f"{where}: {name} cannot be decoded; {fix}") from None


def prompt_problem(header: GGUFHeader, path: Path, prompt: str | list, budget: int, key: str) -> str | None:
    """Why the GGUF's model cannot take `prompt`: a message list with no chat template, or one its template cannot
    render; or more tokens than the context leaves beside the completion. A prompt of at most that many bytes fits
    (a byte-level or byte-fallback tokenizer makes at most one token per byte, plus a leading space); a longer one
    is counted exactly with the tokenizer transformers builds from the file."""
    text = prompt
    if not isinstance(prompt, str):
        if header.chat_template is None:
            return (
                f"is a message list, but {key} has no chat template (tokenizer.chat_template) to render it; use text "
                "prompts or a GGUF that carries a chat template"
            )
        problem = render_problem(header, prompt)
        if problem is not None:
            return f"cannot be rendered by the chat template of {key} ({problem})"
        text = render(header, prompt)
    room = header.context_length - budget
    if len(text.encode("utf-8", "surrogatepass")) + 1 <= room:
        return None
    count = len(gguf_tokenizer(path).encode(text, add_special_tokens=False).ids)
    if count <= room:
        return None
    return (
        f"is {count} tokens{' as the chat template renders it' if text is not prompt else ''}, more than the {room} "
        f"positions the GGUF's context_length={header.context_length} leaves after "
        f"trainer.max_completion_length={budget}; shorten it or lower trainer.max_completion_length"
    )


def gguf_tokenizer(path: Path):
    """The tokenizer transformers converts from the GGUF (its own reader and converter), once per file."""
    key = str(Path(path).resolve())
    if key not in _TOKENIZERS:
        from transformers.integrations.ggml import convert_gguf_tokenizer
        from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

        try:
            parsed = load_gguf_checkpoint(str(path), return_tensors=False)
            _TOKENIZERS[key], _ = convert_gguf_tokenizer(parsed["config"]["model_type"], parsed["tokenizer"])
        except Exception as error:  # transformers' converters raise KeyError, ValueError, ... on what they lack
            reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else type(error).__name__
            raise ConfigError(
                f"{path}: transformers cannot build its tokenizer ({reason}); use a GGUF it converts"
            ) from None
    return _TOKENIZERS[key]


_TOKENIZERS: dict = {}
