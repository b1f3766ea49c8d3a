"""One model client for recipes and judges.

``ModelClient("ollama/llama3.2")``, ``ModelClient("openai/gpt-4o-mini", api_base=…)``,
``ModelClient("anthropic/claude-…")`` go through LiteLLM (imported here, lazily, only);
``ModelClient(None)`` or ``"embedded"`` runs the embedded model in-process. Every call is
charged to the job's ``Budget``, retried with backoff on transient failures and bounded
by a timeout. ``structured()`` asks for JSON matching a pydantic model — grammar- or
schema-constrained where the backend supports it — validates it, and retries with the
validation error when it does not fit.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from reef_cli.core.budget import Budget
from reef_cli.core.errors import BudgetExceeded, ModelError

T = TypeVar("T", bound=BaseModel)
EMBEDDED = "embedded"


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str


def default_model() -> tuple[str, str | None]:
    """The configured model (``REEF_MODEL`` / ``reef config set model``) or the embedded one."""
    from reef_cli.core.config import load_settings

    settings = load_settings()
    return settings.model or EMBEDDED, settings.api_base


def _keep_uvicorn_logs_ours() -> None:
    """LiteLLM's import puts its proxy server's filters on uvicorn's loggers for the whole
    process; in `reef serve` they would rewrite (or, by its settings, drop) Reef's access
    lines. Reef redacts its own logs (``server/log_redaction.py``), so they come off."""
    for name in ("uvicorn", "uvicorn.access", "uvicorn.error"):
        logger = logging.getLogger(name)
        for stray in [f for f in logger.filters if type(f).__module__.startswith("litellm")]:
            logger.removeFilter(stray)


def describe_model(model: str | None = None, api_base: str | None = None) -> str:
    """``embedded SmolLM2-…`` or ``openai/x at URL``; ``None``: the configured default."""
    if model is None:
        model, api_base = default_model()
    if model == EMBEDDED:
        from reef_cli.core.embedded import current_name

        return f"embedded {current_name()}"
    return model + (f" at {api_base}" if api_base else "")


EMBEDDED_SECONDS_PER_TOKEN = 0.25  # 4 tokens/s: a 1.5B model on two busy cores


class ModelClient:
    def __init__(
        self,
        model: str | None = None,
        *,
        api_base: str | None = None,
        budget: Budget | None = None,
        timeout: float = 120.0,
        retries: int = 2,
        cache: bool = True,
    ) -> None:
        if model is None:
            model, configured_base = default_model()
            api_base = api_base or configured_base
        self.model = model
        self.api_base = api_base
        self.budget = budget or Budget()
        self.timeout = timeout
        self.retries = retries
        self.cache = cache  # reuse greedy answers of the embedded model (``answer_cache``)
        self.reused = 0  # answers this client took from the cache instead of the model

    @property
    def embedded(self) -> bool:
        return self.model == EMBEDDED

    @property
    def parallelism(self) -> int:
        """How many calls are worth sending at once: the embedded model's slots (calls
        decoded together, ``embedded_slots``); 1 for a hosted model, whose rate limits
        Reef does not know."""
        if not self.embedded:
            return 1
        from reef_cli.core import embedded_engine

        return embedded_engine.slots()

    def call_seconds(self, max_tokens: int) -> float:
        """How long one call may take: ``timeout``, or for the embedded model on a small
        CPU long enough to write ``max_tokens`` at a slow pace (a 1,600-token structured
        answer must not be cut at 120 s when two other jobs share the cores). The job's
        wall-time budget still bounds it."""
        if not self.embedded:
            return self.timeout
        return max(self.timeout, max_tokens * EMBEDDED_SECONDS_PER_TOKEN)

    def describe(self) -> str:
        return describe_model(self.model, self.api_base)

    # ------------------------------------------------------------ plain chat

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.2,
        schema: dict[str, Any] | None = None,
    ) -> Completion:
        if not self.embedded:
            missing = missing_key(self.model, self.api_base)
            if missing is not None:  # no try can succeed: say which variable, not a retry count
                raise ModelError(
                    f"no {missing} set for model {self.model}",
                    f"export {missing}=… or reef model use …",
                )
        address = self._cache_address(messages, max_tokens, temperature, schema)
        if address is not None and self.cache:  # without it: computed afresh, then stored
            from reef_cli.core import answer_cache

            hit = answer_cache.get(address)
            if hit is not None:  # no model call: nothing to charge but the time, as ever
                self.budget.check_time()
                self.reused += 1
                return Completion(**asdict(hit))
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            self.budget.before_call()
            try:
                completion = self._call(messages, max_tokens, temperature, schema)
            except ModelError:
                self.budget.charge(tokens=0)  # a call cut off at the deadline: stopped
                raise
            except Exception as exc:  # transport errors differ per backend
                last = exc
                self.budget.charge(tokens=0)  # raises BudgetExceeded once time is up
                if attempt < self.retries:  # a backoff, never past the wall time left
                    backoff = min(8.0, 0.5 * 2**attempt) * (0.5 + random.random())
                    time.sleep(self.budget.bounded(backoff))
                continue
            self.budget.charge(tokens=completion.prompt_tokens + completion.completion_tokens)
            if address is not None:
                from reef_cli.core import answer_cache

                answer_cache.put(address, answer_cache.Cached(**asdict(completion)))
            return completion
        kind = type(last).__name__ if last else "error"
        raise ModelError(
            f"model {self.describe()} failed after {self.retries + 1} tries ({kind})",
            "check the model is running and reachable (reef doctor), or set another with "
            "`reef config set model …`",
        ) from last

    def _cache_address(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int,
        temperature: float,
        schema: dict[str, Any] | None,
    ) -> str | None:
        """The answer cache's key for this call, or None when its answer is not reused:
        the model is hosted or the decoding samples (temperature > 0)."""
        if not (self.embedded and temperature == 0.0):
            return None
        from reef_cli.core import answer_cache, embedded_engine

        identity = embedded_engine.identity()
        if identity is None:
            return None
        request = {"messages": messages, "max_tokens": max_tokens, "schema": schema}
        return answer_cache.key(identity, request)

    def _call(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int,
        temperature: float,
        schema: dict[str, Any] | None,
    ) -> Completion:
        if self.embedded:
            from reef_cli.core import embedded_engine

            raw = embedded_engine.chat(
                messages,
                max_tokens=max_tokens,
                temperature=temperature,
                schema=schema,
                deadline=time.monotonic() + self.budget.bounded(self.call_seconds(max_tokens)),
            )
        else:
            raw = self._litellm(messages, max_tokens, temperature, schema)
        choice = raw["choices"][0]
        usage = raw.get("usage") or {}
        return Completion(
            text=(choice.get("message") or {}).get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            model=str(raw.get("model") or self.model),
        )

    def _litellm(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int,
        temperature: float,
        schema: dict[str, Any] | None,
    ) -> dict[str, Any]:
        # LiteLLM fetches a price list from the internet on import unless told not to.
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.telemetry = False
        litellm.suppress_debug_info = True
        # Its debug log holds whole prompts and answers, which may hold secrets.
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
            logging.getLogger(name).setLevel(logging.WARNING)
        _keep_uvicorn_logs_ours()

        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "timeout": self.budget.bounded(self.timeout),
            "num_retries": 0,  # retries are ours, so the budget sees each call
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
            if endpoint_for(self.model, self.api_base).key_env is None:
                kwargs["api_key"] = "no-key"  # local OpenAI-compatible servers need none
        if schema is not None:
            if litellm.supports_response_schema(model=self.model):
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": schema},
                }
            else:
                kwargs["response_format"] = {"type": "json_object"}
        response = litellm.completion(**kwargs)
        return response.model_dump() if hasattr(response, "model_dump") else dict(response)

    # ------------------------------------------------------------ structured output

    def structured(
        self,
        messages: list[dict[str, Any]],
        model_cls: type[T],
        *,
        max_tokens: int = 600,
        temperature: float = 0.2,
        attempts: int = 3,
    ) -> T:
        """JSON that validates against ``model_cls``; retried with the error as feedback."""
        schema = model_cls.model_json_schema()
        # llama.cpp unrolls length bounds into grammar repetitions and refuses long ones;
        # max_tokens bounds the output instead, and long strings are cut to fit below.
        wire_schema = _without_long_bounds(schema) if self.embedded else schema
        conversation = list(messages)
        problem = "no answer"
        for _ in range(attempts):
            completion = self.chat(
                conversation, max_tokens=max_tokens, temperature=temperature, schema=wire_schema
            )
            try:
                data = parse_json(completion.text)
            except ValueError:
                problem = "the answer is not JSON"
            else:
                try:
                    return model_cls.model_validate(_cut_to_bounds(data, schema))
                except ValidationError as exc:
                    err = exc.errors()[0]
                    where = ".".join(str(p) for p in err["loc"]) or "the answer"
                    problem = f"{where}: {err['msg']}"
            conversation = [
                *messages,
                {"role": "assistant", "content": completion.text[:2000]},
                {
                    "role": "user",
                    "content": f"That JSON is not valid ({problem}). Answer again with only "
                    "valid JSON.",
                },
            ]
        raise ModelError(
            f"model {self.describe()} gave no valid answer in {attempts} tries ({problem})",
            "try again, or use a stronger model: reef config set model …",
        )


def _without_long_bounds(schema: Any, limit: int = 64) -> Any:
    """``schema`` without string length bounds above ``limit`` (grammar-friendly)."""
    if isinstance(schema, dict):
        return {
            key: _without_long_bounds(value, limit)
            for key, value in schema.items()
            if not (key in ("maxLength", "minLength") and isinstance(value, int) and value > limit)
        }
    if isinstance(schema, list):
        return [_without_long_bounds(item, limit) for item in schema]
    return schema


def _cut_to_bounds(data: Any, schema: dict[str, Any]) -> Any:
    """Cut top-level strings to their ``maxLength`` (a model's overlong prose is still
    usable), at a word boundary where one is near: ``walk-through-a-migration`` cut to 18
    is ``walk-through-a``, not ``walk-through-a-mig``."""
    if not isinstance(data, dict):
        return data
    properties = schema.get("properties", {})
    out = dict(data)
    for key, value in data.items():
        bound = properties.get(key, {}).get("maxLength")
        if isinstance(value, str) and isinstance(bound, int) and len(value) > bound:
            out[key] = cut_at_word(value, bound)
    return out


def cut_at_word(text: str, bound: int) -> str:
    """``text`` cut to at most ``bound`` characters, at the last space or hyphen in its
    second half when there is one (so no word is left half-written)."""
    head = text[:bound]
    if text[bound : bound + 1] in (" ", "-", ""):
        return head.rstrip(" -")
    at = max(head.rfind(" "), head.rfind("-"))
    return (head[:at] if at >= bound // 2 else head).rstrip(" -")


def _json_part(text: str) -> str:
    """The JSON object inside a reply that may wrap it in prose or a code fence.

    Parsed leniently (``strict=False``): llama.cpp's schema grammar lets a string hold raw
    newlines and tabs, which strict JSON forbids, and such a draft is a good one."""
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end <= start:
        return text.strip()
    candidate = text[start : end + 1]
    try:
        json.loads(candidate, strict=False)
    except ValueError:
        try:  # one object followed by more text with braces ("{…} see {x}")
            _, used = json.JSONDecoder(strict=False).raw_decode(text[start:])
        except ValueError:
            return text.strip()
        return text[start : start + used]
    return candidate


def parse_json(text: str) -> Any:
    """The JSON value in a model's reply, parsed leniently (see ``_json_part``)."""
    return json.loads(_json_part(text), strict=False)


__all__ = ["EMBEDDED", "BudgetExceeded", "Completion", "ModelClient", "default_model"]


def missing_key(model: str, api_base: str | None = None) -> str | None:
    """The environment variable a hosted ``model`` needs and lacks (LiteLLM knows which
    each provider reads), or None. A model at ``api_base`` (a local server) or on Ollama
    needs none: Reef sends a placeholder key there."""
    if model == EMBEDDED or api_base:
        return None
    provider = model.partition("/")[0] if "/" in model else "openai"
    if provider in ("ollama", "ollama_chat"):
        return None
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    try:
        found = litellm.validate_environment(model)
    except Exception:  # a provider LiteLLM cannot name: the call itself will say
        return None
    names = [str(n) for n in found.get("missing_keys") or ()]
    return " / ".join(names) if names and not found.get("keys_in_environment") else None


@dataclass(frozen=True)
class Endpoint:
    """Where a LiteLLM model string lives, as an upstream `reef serve` can proxy to."""

    url: str | None  # None: the embedded model (served in-process)
    dialect: str  # openai | anthropic
    model: str
    key_env: str | None = None


def endpoint_for(model: str, api_base: str | None = None) -> Endpoint:
    """``ollama/llama3.2`` -> Ollama's OpenAI endpoint; ``openai/x`` + api_base; ``anthropic/x``…"""
    if model == EMBEDDED:
        return Endpoint(None, "openai", EMBEDDED)
    provider, _, name = model.partition("/")
    if not name:
        provider, name = "openai", model
    if provider in ("ollama", "ollama_chat"):
        return Endpoint(api_base or "http://127.0.0.1:11434/v1", "openai", name)

    def key(env: str) -> str | None:
        # A hosted API needs its key; a custom api_base (a local server) only if one is set.
        return env if api_base is None or os.environ.get(env) else None

    if provider == "anthropic":
        url = api_base or "https://api.anthropic.com"
        return Endpoint(url, "anthropic", name, key("ANTHROPIC_API_KEY"))
    if provider == "openrouter":
        url = api_base or "https://openrouter.ai/api/v1"
        return Endpoint(url, "openai", name, key("OPENROUTER_API_KEY"))
    return Endpoint(api_base or "https://api.openai.com/v1", "openai", name, key("OPENAI_API_KEY"))
