"""Keep credentials out of `reef serve`'s logs.

A client may put its token where a log line can see it: a query string
(``/v1/models?token=reef_…`` lands verbatim in uvicorn's access log), an
``Authorization`` or ``x-api-key`` header echoed in an error, a provider key in an
upstream's error text. :class:`RedactingFilter` rewrites every record it sees — message,
arguments, traceback — so that such values read ``[redacted]``, whatever the route
answered (200, 401, 404 …). What it replaces:

- query parameters whose name says credential (``token``, ``key``, ``api_key``,
  ``access_token``, ``secret``, ``password``, ``auth``, ``sig`` …);
- credential headers (``Authorization``, ``Proxy-Authorization``, ``x-api-key``,
  ``api-key``, ``Cookie``) and any ``Bearer …`` / ``Basic …`` value;
- Reef tokens (``reef_`` + 20 or more token characters) and the provider key formats of
  :mod:`reef_cli.core.secrets` (OpenAI, Anthropic, GitHub, AWS, …);
- exact values registered with :func:`add_secret` (`reef serve` registers its own token
  and the upstream key, whatever they look like).

:func:`install` puts the filter on uvicorn's loggers, on Reef's loggers and on the
handlers of the root logger (so records propagated from any library pass it too);
:func:`uvicorn_log_config` is uvicorn's logging configuration with the filter on its
loggers and handlers, for ``uvicorn.run(log_config=...)``, which replaces uvicorn's
handlers when it starts.
"""

from __future__ import annotations

import copy
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[redacted]"

# A query parameter whose name says it carries a credential: ?token=, &api_key=, ?key=,
# ?access_token=, ?x-api-key=, ?client_secret=, ?password=, ?auth=, ?sig= …
_QUERY = re.compile(
    r"(?i)([?&;][\w.~%-]*?"
    r"(?:token|key|secret|passw(?:or)?d|pwd|auth|credential|signature|sig)"
    r"[\w.~%-]*=)[^&#;\s\"'<>\[\]]+"
)
# A credential header as text: `Authorization: Bearer x`, `'x-api-key': 'x'`,
# `(b'authorization', b'Basic x')`, `authorization=x`.
_Q = r"(?:(?-i:b)?['\"])"  # a quote, maybe of a bytes literal
_SEP = rf"(?:['\"]?\s*[:=]\s*{_Q}?\s*|['\"]\s*,\s*{_Q}\s*)"
_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key|x-auth-token|x-reef-token)"
    rf"({_SEP})"
    r"(?:(bearer|basic|token|digest)\s+)?(?!(?:bearer|basic|token|digest)\s)"
    r"[^\s'\"`,;&)}<>\[\]]+"
)
_COOKIE = re.compile(rf"(?i)\b((?:set-)?cookie{_SEP})[^'\"\r\n]+")
# name=value and "name": "value" pairs whose name ends in a credential word:
# REEF_TOKEN=…, api_key=…, {"client_secret": "…"} (not max_tokens=, not prose).
_WORD = r"[\w.-]*(?:token|api[_-]?key|apikey|secret|passw(?:or)?d)"
_KV = re.compile(rf"(?i)\b({_WORD}=)[^\s&#,;\"'<>\[\]]+")
_QUOTED = re.compile(rf"(?i)([\"']{_WORD}[\"']\s*:\s*[\"'])[^\"']*")
_SCHEME = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
_REEF_TOKEN = re.compile(r"\breef_[A-Za-z0-9_-]{20,}")


def _provider_patterns() -> tuple[re.Pattern[str], ...]:
    """The provider key formats of the credential scan (one source for both)."""
    try:
        from reef_cli.core.secrets import _RULES
    except ImportError:  # pragma: no cover - the scan's rules are part of core
        return ()
    return tuple(pattern for _rule, pattern in _RULES)


_PROVIDER = _provider_patterns()

_secrets_lock = threading.Lock()
_secrets_by_length: tuple[str, ...] = ()  # longest first, so a value inside another goes last
_MIN_SECRET = 8  # shorter values would redact ordinary words


def add_secret(*values: str | None) -> None:
    """Redact these exact values wherever they appear (the server's token, upstream key)."""
    global _secrets_by_length
    keep = {v.strip() for v in values if v and len(v.strip()) >= _MIN_SECRET}
    if keep:
        with _secrets_lock:
            known = set(_secrets_by_length) | keep
            _secrets_by_length = tuple(sorted(known, key=len, reverse=True))


# Cheap screens, so a line with nothing credential-like (most access-log lines) costs
# two scans: one for the words the rules above key on, one for a run of characters long
# enough to be a provider key (every format in the credential scan has one, but for
# the few whose alphabet includes / + ~ . — those are looked for after a trigger word).
_TRIGGERS = (
    "token", "key", "secret", "passw", "pwd", "auth", "credential", "sig", "cookie",
    "bearer", "basic", "reef_",
)  # fmt: skip
_LONG_RUN = re.compile(r"[A-Za-z0-9_-]{12,}")


def _may_hold(text: str) -> bool:
    """Whether ``text`` passes a screen (a cheap superset of what ``redact`` replaces)."""
    return (
        _has_trigger(text)
        or _LONG_RUN.search(text) is not None
        or any(value in text for value in _secrets_by_length)
    )


def _has_trigger(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in _TRIGGERS)


def redact(text: str) -> str:
    """``text`` with every credential it carries replaced by ``[redacted]``."""
    if not text:
        return text
    for value in _secrets_by_length:
        if value in text:
            text = text.replace(value, REDACTED)
    triggered = _has_trigger(text)
    if triggered:
        text = _QUERY.sub(rf"\1{REDACTED}", text)
        text = _HEADER.sub(_header, text)
        text = _COOKIE.sub(rf"\1{REDACTED}", text)
        text = _KV.sub(rf"\1{REDACTED}", text)
        text = _QUOTED.sub(rf"\1{REDACTED}", text)
        text = _SCHEME.sub(rf"\1 {REDACTED}", text)
        text = _REEF_TOKEN.sub(REDACTED, text)
    if triggered or _LONG_RUN.search(text):
        for pattern in _PROVIDER:
            text = pattern.sub(_provider, text)
    return text


def _provider(match: re.Match[str]) -> str:
    """A rule with a group named ``s`` marks the secret within its match (the rest is
    context, kept); otherwise the whole match is the secret."""
    if "s" in match.re.groupindex and match.start("s") >= 0:
        whole, start = match.group(0), match.start()
        return whole[: match.start("s") - start] + REDACTED + whole[match.end("s") - start :]
    return REDACTED


def _header(match: re.Match[str]) -> str:
    scheme = f"{match.group(3)} " if match.group(3) else ""
    return f"{match.group(1)}{match.group(2)}{scheme}{REDACTED}"


_PLAIN = (int, float, bool, type(None))
_SIMPLE = (str, *_PLAIN)


def _redact_arg(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
        cleaned = redact(text)
        return value if cleaned == text else cleaned
    if isinstance(value, _PLAIN):
        return value
    try:
        text = str(value)
    except Exception:  # a broken __str__ is the formatter's problem, not ours
        return value
    cleaned = redact(text)
    return value if cleaned == text else cleaned


class RedactingFilter(logging.Filter):
    """A filter that never drops a record, only cleans it (idempotent: safe to stack)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_reef_redacted", False):
            return True
        setattr(record, "_reef_redacted", True)  # noqa: B010 - LogRecord has no such field
        args = record.args
        if (
            isinstance(record.msg, str)
            and isinstance(args, tuple)
            and not record.exc_info
            and not record.stack_info
            and all(isinstance(a, _SIMPLE) for a in args)
            and not _may_hold("\n".join([record.msg, *(a for a in args if isinstance(a, str))]))
        ):
            return True  # the common case (an access-log line): nothing to clean
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        elif record.msg is not None and not isinstance(record.msg, _PLAIN):
            text = str(record.msg)
            cleaned = redact(text)
            if cleaned != text:
                record.msg = cleaned
        if isinstance(args, tuple):
            record.args = tuple(_redact_arg(a) for a in args)
        elif isinstance(args, Mapping):
            record.args = {k: _redact_arg(v) for k, v in args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")
REEF_LOGGERS = ("reef",)


def _add(target: logging.Logger | logging.Handler) -> None:
    if not any(isinstance(f, RedactingFilter) for f in target.filters):
        target.addFilter(RedactingFilter())


def install(extra_loggers: Iterable[str] = ()) -> None:
    """Put the filter on uvicorn's and Reef's loggers (every ``reef.*`` one created so far)
    and on their handlers and the root logger's. Idempotent; call it once logging is set up
    (after ``logging.basicConfig``), since a logger filter does not see records that only
    propagate through that logger, while a handler filter sees every record it emits."""
    manager = logging.Logger.manager
    names = set(UVICORN_LOGGERS) | set(REEF_LOGGERS) | set(extra_loggers)
    names |= {n for n in list(manager.loggerDict) if n.startswith(("reef.", "uvicorn."))}
    loggers = [logging.getLogger(n) for n in sorted(names)] + [logging.getLogger()]
    for logger in loggers:
        _add(logger)
        for handler in logger.handlers:
            _add(handler)


FILTER_NAME = "reef_redact"


def uvicorn_log_config(base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Uvicorn's logging configuration (``base``, default uvicorn's own) with the redacting
    filter on every logger and handler it configures."""
    if base is None:
        from uvicorn.config import LOGGING_CONFIG

        base = LOGGING_CONFIG
    config = copy.deepcopy(dict(base))
    config.setdefault("filters", {})[FILTER_NAME] = {"()": RedactingFilter}
    for section in ("handlers", "loggers"):
        for entry in config.get(section, {}).values():
            filters = entry.setdefault("filters", [])
            if FILTER_NAME not in filters:
                filters.append(FILTER_NAME)
    for name in UVICORN_LOGGERS:
        entry = config.setdefault("loggers", {}).setdefault(name, {})
        filters = entry.setdefault("filters", [])
        if FILTER_NAME not in filters:
            filters.append(FILTER_NAME)
    return config
