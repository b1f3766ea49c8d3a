"""A record as token ids: the engine's own when it returned them, else re-tokenized.

Non-streamed answers from the engine carry ``token_ids`` ({"prompt", "response"}) and the
response tokens' logprobs: those are exactly what was sampled, and the logprobs can serve
as π_old. Agents stream, and a stream carries text only: such a record is re-tokenized
the way the engine tokenizes a request (``models.prompt_ids`` of the request's messages)
plus the assembled response text, with the end-of-turn token when the answer stopped on
its own; π_old is then recomputed by the trainer (as Slime does by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reef_cli.core.errors import ConfigError
from reef_cli.core.records import Record


@dataclass
class Tokens:
    prompt_ids: list[int]
    response_ids: list[int]
    old_logprobs: list[float] | None
    source: str  # engine | retokenized


def request_messages(record: Record) -> list[dict[str, str]] | None:
    """The record's request as plain-text chat messages (OpenAI dialect only)."""
    from reefd.models import messages_of

    if record.client_dialect != "openai" or not isinstance(record.request, dict):
        return None
    messages = messages_of(record.request)
    return messages or None


def _choice(record: Record) -> dict[str, Any] | None:
    response = record.response
    if not isinstance(response, dict):
        return None
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    return choices[0]


def response_text(record: Record) -> str | None:
    """The assistant's answer as text (tool calls as JSON lines, as the prompt writes them)."""
    from reefd.models import messages_of

    if record.client_dialect != "openai":
        return None
    choice = _choice(record)
    message = choice.get("message") if choice else None
    if not isinstance(message, dict):
        return None
    return messages_of({"messages": [{**message, "role": "assistant"}]})[0]["content"]


def _ints(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return list(value)
    return None


def engine_tokens(record: Record, *, logprobs: bool = True) -> Tokens | None:
    """The engine's token ids (and logprobs when they fit the response), if it sent them."""
    ids = record.token_ids if isinstance(record.token_ids, dict) else None
    prompt = _ints(ids.get("prompt")) if ids else None
    response = _ints(ids.get("response")) if ids else None
    if not prompt or not response:
        return None
    old = record.logprobs if logprobs else None
    fits = isinstance(old, list) and len(old) == len(response)
    return Tokens(prompt, response, [float(v) for v in old] if fits and old else None, "engine")


def retokenize(record: Record, tokenizer: Any) -> Tokens | None:
    """Re-tokenize a record (a streamed one, or any without engine ids); None if it has no
    chat request or no answer text."""
    from reefd.models import prompt_ids

    messages = request_messages(record)
    text = response_text(record)
    if messages is None or not text:
        return None
    response = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    choice = _choice(record) or {}
    end = end_of_turn(tokenizer)
    if choice.get("finish_reason") == "stop" and end is not None:
        response.append(end)
    return Tokens(prompt_ids(tokenizer, messages), response, None, "retokenized")


def end_of_turn(tokenizer: Any) -> int | None:
    """The id the model ends an answer with: ChatML's ``<|im_end|>``, else the eos."""
    token = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(token, int) and token != getattr(tokenizer, "unk_token_id", None):
        return token
    eos = getattr(tokenizer, "eos_token_id", None)
    return eos if isinstance(eos, int) else None


def tokens_of(record: Record, tokenizer: Any | None, *, logprobs: bool = True) -> Tokens | None:
    """The engine's tokens when present, else the record re-tokenized; None when neither
    can be had (no chat request, no answer)."""
    tokens = engine_tokens(record, logprobs=logprobs)
    if tokens is not None:
        return tokens
    if tokenizer is None:
        raise ConfigError(
            f"record {record.id} has no engine token ids and the recipe has no tokenizer",
            "pass tokenizer= (the trainer's) to the recipe",
        )
    return retokenize(record, tokenizer)
