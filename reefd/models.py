"""The models reefd serves and trains, built or loaded offline, and what both ends agree on.

``tiny`` is a random-init Llama small enough for CI (seeded, so the engine and the trainer
build the same weights); ``smollm2-sized`` has SmolLM2-135M's shape for the GPU check (the
98 MB GGUF does not travel); ``smollm2`` is the embedded GGUF that ``reef`` already ships;
anything else is a local Hugging Face checkpoint directory. Nothing here touches the
network. ``state_checksum`` is the engine's ``/weights_checker`` definition, so a trainer or
a test can compute the checksum the engine will report.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reef_cli.core.errors import ConfigError, ModelError
from reef_cli.server.translate_request import text_of
from reefd._torch import require

TINY = "tiny"
SMOLLM2 = "smollm2"
SMOLLM2_SIZED = "smollm2-sized"
EMBEDDED_NAME = "smollm2-135m"

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
EOT = "<|endoftext|>"

# ChatML, as SmolLM2-Instruct writes it (its own template adds a default system turn; this
# one does not, so a prompt is exactly the messages it was given).
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

DTYPES = ("float32", "bfloat16", "float16")


@dataclass
class Loaded:
    model: Any  # a transformers causal LM (eval mode)
    tokenizer: Any  # a transformers tokenizer with a chat template
    name: str  # the spec it was loaded from: ``load(name)`` builds the same model again
    kind: str  # tiny | smollm2-sized | smollm2 | hf


# --- tokenizer ---------------------------------------------------------------------------


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map, the alphabet of the ByteLevel pre-tokenizer."""
    keep = list(range(ord("!"), ord("~") + 1))
    keep += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = keep[:]
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(keep, (chr(c) for c in chars), strict=True))


def byte_tokenizer() -> Any:
    """A byte-level tokenizer built in code: id = byte value (0-255), then the ChatML
    specials. No merges, so every text round-trips and any model vocab >= 259 fits."""
    transformers = require("transformers")
    tokenizers = require("tokenizers")
    mapping = _bytes_to_unicode()
    vocab = {mapping[b]: b for b in range(256)}
    core = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(
        add_prefix_space=False, use_regex=False
    )
    core.decoder = tokenizers.decoders.ByteLevel()
    core.add_special_tokens([IM_START, IM_END, EOT])  # ids 256, 257, 258
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token=IM_END, pad_token=EOT
    )
    tok.chat_template = CHATML_TEMPLATE
    return tok


# --- configs -----------------------------------------------------------------------------


def tiny_config(**overrides: Any) -> Any:
    """The CI model: 2 layers of 64, vocab of the byte tokenizer (259)."""
    transformers = require("transformers")
    tok_len = 259  # 256 bytes + <|im_start|> <|im_end|> <|endoftext|>
    values: dict[str, Any] = {
        "vocab_size": tok_len,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        "tie_word_embeddings": False,
        "bos_token_id": None,
        "eos_token_id": 257,
        "pad_token_id": 258,
    }
    values.update(overrides)
    return transformers.LlamaConfig(**values)


def smollm2_sized_config(**overrides: Any) -> Any:
    """SmolLM2-135M's shape (134.5M parameters), for a random-init model on a GPU host."""
    transformers = require("transformers")
    values: dict[str, Any] = {
        "vocab_size": 49152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "max_position_embeddings": 8192,
        "rope_theta": 100000.0,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": True,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 2,
    }
    values.update(overrides)
    return transformers.LlamaConfig(**values)


# --- loading -----------------------------------------------------------------------------


def _torch_dtype(torch: Any, name: str) -> Any:
    if name not in DTYPES:
        raise ConfigError(f"unknown model dtype {name!r}", f"one of: {', '.join(DTYPES)}")
    return getattr(torch, name)


def _random_init(config: Any, seed: int) -> Any:
    torch = require("torch")
    transformers = require("transformers")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return transformers.LlamaForCausalLM(config)


def _embedded_gguf() -> Path:
    from reef_cli.core import embedded

    spec = embedded.spec_named(EMBEDDED_NAME)
    path = embedded.model_path(spec)
    if path is None:
        raise ModelError(
            f"the embedded model {EMBEDDED_NAME} is not installed",
            f"reef model install {EMBEDDED_NAME}",
        )
    embedded.verify(spec, path)
    return path


def _gguf_tokenizer(path: Path) -> Any:
    transformers = require("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(
        str(path.parent), gguf_file=path.name, local_files_only=True
    )
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if not getattr(tok, "chat_template", None):
        tok.chat_template = CHATML_TEMPLATE
    return tok


def _finish(model: Any, tokenizer: Any, name: str, kind: str, device: str, dtype: str) -> Loaded:
    torch = require("torch")
    model = model.to(device=device, dtype=_torch_dtype(torch, dtype))
    model.eval()
    if getattr(model, "generation_config", None) is not None and tokenizer.eos_token_id is not None:
        model.generation_config.eos_token_id = tokenizer.eos_token_id
    return Loaded(model, tokenizer, name, kind)


def load(spec: str, *, device: str = "cpu", seed: int = 0, dtype: str = "float32") -> Loaded:
    """Build or load ``spec``: ``tiny`` / ``tiny:<seed>``, ``smollm2-sized``, ``smollm2``
    (the embedded GGUF, dequantized), or a local Hugging Face checkpoint directory."""
    base, _, tail = spec.partition(":")
    if base == TINY:
        if tail:
            try:
                seed = int(tail)
            except ValueError:
                raise ConfigError(
                    f"bad tiny model spec {spec!r}", "tiny or tiny:<seed>, e.g. tiny:3"
                ) from None
        _torch_dtype(require("torch"), dtype)
        return _finish(
            _random_init(tiny_config(), seed), byte_tokenizer(), spec, TINY, device, dtype
        )
    if spec == SMOLLM2_SIZED:
        try:
            tokenizer = _gguf_tokenizer(_embedded_gguf())
        except Exception:  # the GGUF does not travel to GPU hosts: bytes are enough there
            tokenizer = byte_tokenizer()
        model = _random_init(smollm2_sized_config(), seed)
        return _finish(model, tokenizer, spec, SMOLLM2_SIZED, device, dtype)
    if spec in (SMOLLM2, EMBEDDED_NAME):
        path = _embedded_gguf()
        transformers = require("transformers")
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(
                str(path.parent), gguf_file=path.name, local_files_only=True
            )
        except Exception as exc:
            raise ModelError(
                f"could not load {path.name} with transformers: {exc}".splitlines()[0],
                "pip install 'reef[reefd]' (needs the gguf package)",
            ) from exc
        return _finish(model, _gguf_tokenizer(path), spec, SMOLLM2, device, dtype)
    directory = Path(spec).expanduser()
    if (directory / "config.json").is_file():
        transformers = require("transformers")
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(directory), local_files_only=True
        )
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            str(directory), local_files_only=True
        )
        if not getattr(tokenizer, "chat_template", None):
            tokenizer.chat_template = CHATML_TEMPLATE
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        return _finish(model, tokenizer, str(directory.resolve()), "hf", device, dtype)
    raise ConfigError(
        f"unknown model {spec!r}",
        "tiny, tiny:<seed>, smollm2, smollm2-sized, or a Hugging Face checkpoint directory "
        "(with config.json)",
    )


# --- prompts -----------------------------------------------------------------------------


def messages_of(request: Mapping[str, Any]) -> list[dict[str, str]]:
    """An OpenAI chat request's messages as plain ``{role, content}`` text: content parts
    joined by newlines, ``developer`` as ``system``, assistant tool calls as JSON lines."""
    out: list[dict[str, str]] = []
    for message in request.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        role = str(message.get("role") or "user")
        if role == "developer":
            role = "system"
        text = text_of(message.get("content"))
        calls = message.get("tool_calls")
        if role == "assistant" and isinstance(calls, list):
            lines = [
                json.dumps(
                    {
                        "tool": (c.get("function") or {}).get("name"),
                        "arguments": (c.get("function") or {}).get("arguments"),
                    }
                )
                for c in calls
                if isinstance(c, Mapping)
            ]
            text = "\n".join(filter(None, [text, *lines]))
        out.append({"role": role, "content": text})
    return out


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """The token ids the engine generates from: the chat template with the assistant turn
    opened. The trainer re-tokenizes streamed records the same way."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


# --- the served state --------------------------------------------------------------------


def _base_of(model: Any) -> Any:
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def _is_lora_layer(module: Any) -> bool:
    return hasattr(module, "get_delta_weight") and hasattr(module, "lora_A")


def param_map(model: Any) -> dict[str, Any]:
    """Engine name -> the live tensor (parameter or buffer) holding it: what a weight
    update writes into. LoRA-wrapped layers answer with their base layer's tensors."""
    base = _base_of(model)
    out: dict[str, Any] = {}
    for key, value in base.state_dict(keep_vars=True).items():
        if ".lora_" in key:
            continue
        out[key.replace(".base_layer.", ".")] = value
    return out


def served_state_dict(model: Any) -> dict[str, Any]:
    """The weights a request is answered with, by engine name: LoRA adapters that are
    active are merged in (out of place: the model is not changed)."""
    torch = require("torch")
    with torch.no_grad():
        state = {name: t.detach() for name, t in param_map(model).items()}
        for mod_name, module in _base_of(model).named_modules():
            if not _is_lora_layer(module) or getattr(module, "merged", False):
                continue
            if getattr(module, "disable_adapters", False):
                continue
            key = f"{mod_name}.weight"
            if key not in state:
                continue
            weight = state[key]
            for adapter in getattr(module, "active_adapters", []):
                if adapter in module.lora_A:
                    weight = weight + module.get_delta_weight(adapter).to(weight.dtype)
            state[key] = weight
    return state


def state_checksum(model_or_tensors: Any) -> str:
    """sha256 over (name, dtype, shape, bytes) of every tensor, in name order; a model
    counts with its LoRA adapters merged. Same definition as the engine's /weights_checker."""
    torch = require("torch")
    if isinstance(model_or_tensors, Mapping):
        state = dict(model_or_tensors)
    else:
        state = served_state_dict(model_or_tensors)
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().to("cpu").contiguous()
        dtype = str(tensor.dtype).removeprefix("torch.")
        shape = ",".join(str(int(d)) for d in tensor.shape)
        digest.update(f"{name}\0{dtype}\0{shape}\0".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
