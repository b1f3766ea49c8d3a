"""No log line of `reef serve` carries a credential, whatever the route answered."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reef_cli.core.tokens import ScopedToken, TokenSet, digest
from reef_cli.server import log_redaction, run
from reef_cli.server.app import create_app
from reef_cli.server.log_redaction import REDACTED, redact
from reef_cli.server.serve_config import ServeConfig
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream
from tests.server.conftest import LIMITED, TOKEN

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
# Values that look like nothing in particular: only where they stand says what they are.
PLAIN = ["qs-secret-value-1", "qs-secret-value-2", "qs-secret-value-3", "qs-secret-value-4"]
ANTHROPIC_KEY = "sk-ant-api03-" + "Q" * 40
UPSTREAM_KEY = "upstream-key-that-looks-like-nothing-0001"


@pytest.fixture
def uvicorn_streams() -> Iterator[io.StringIO]:
    """Where uvicorn's own handlers (as `reef serve` configures them) write, for reading."""
    out = io.StringIO()
    yield out


def _point_handlers_at(out: io.StringIO) -> None:
    for name in ("uvicorn", "uvicorn.access", "uvicorn.error"):
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(out)


def test_served_logs_redact_tokens(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    uvicorn_streams: io.StringIO,
) -> None:
    monkeypatch.setenv("REEF_UPSTREAM_KEY_TEST", UPSTREAM_KEY)
    fake = FakeUpstream()
    with ServerThread(fake.app) as up:
        config = ServeConfig(
            upstream=up.url + "/v1", access_log=True, upstream_key_env="REEF_UPSTREAM_KEY_TEST"
        )
        scoped = [ScopedToken("limited", digest(LIMITED).hex(), ("team-a",))]
        app = create_app(config, tokens=TokenSet(TOKEN, scoped))
        caplog.set_level(logging.INFO)
        run.configure_logging(app.state.upstream.key)  # what `reef serve` does, in order
        reef = ServerThread(app, **run.uvicorn_options(config))
        _point_handlers_at(uvicorn_streams)
        auth = {"authorization": f"Bearer {TOKEN}"}
        answers = []
        with reef:
            base = reef.url
            for method, path, headers, body in [
                ("GET", f"/reef/scenarios?token={PLAIN[0]}", {}, None),  # 401
                ("GET", f"/no/such/route?api_key={PLAIN[1]}&x=1", {}, None),  # 404
                ("POST", f"/v1/chat/completions?key={PLAIN[2]}", auth, CHAT),  # 200
                ("GET", f"/healthz?access_token={PLAIN[3]}", {}, None),  # 200
                ("GET", f"/reef/harness?scenario=web&token={TOKEN}", auth, None),  # 404
                ("GET", f"/reef/jobs/{LIMITED}", {}, None),  # 401: a token in the path
                ("GET", f"/v1/models?x-api-key={ANTHROPIC_KEY}", {}, None),  # 401
            ]:
                r = httpx.request(method, base + path, headers=headers, json=body)
                answers.append(r.status_code)
            # Reef's own loggers, one made before the filter went on and one made after,
            # and uvicorn's error logger with a traceback.
            logging.getLogger("reef.serve").error("upstream said %s", f"Bearer {TOKEN}")
            logging.getLogger("reef.late.child").warning("key %s", UPSTREAM_KEY)
            try:
                raise ValueError(f"bad header x-api-key: {ANTHROPIC_KEY}")
            except ValueError:
                logging.getLogger("uvicorn.error").exception("upstream failed")
    assert answers == [401, 404, 200, 200, 404, 401, 401], answers

    served = uvicorn_streams.getvalue()
    text = served + caplog.text
    for secret in [*PLAIN, TOKEN, LIMITED, ANTHROPIC_KEY, UPSTREAM_KEY]:
        assert secret not in text, f"{secret} is in the log"
    # The lines are there, with the credential's place marked.
    assert f"GET /reef/scenarios?token={REDACTED} HTTP/1.1" in served
    assert f"/no/such/route?api_key={REDACTED}&x=1" in served and " 404" in served
    assert f"POST /v1/chat/completions?key={REDACTED}" in served
    assert f"/healthz?access_token={REDACTED}" in served
    assert f"/reef/harness?scenario=web&token={REDACTED}" in served
    assert f"/reef/jobs/{REDACTED}" in served
    assert "Traceback" in served and "bad header x-api-key: " + REDACTED in served
    assert f"upstream said Bearer {REDACTED}" in caplog.text
    assert f"key {REDACTED}" in caplog.text


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("GET /x?token=abc&beta=true", f"GET /x?token={REDACTED}&beta=true"),
        ("GET /x?a=1&API_KEY=abc", f"GET /x?a=1&API_KEY={REDACTED}"),
        ("GET /v1/messages?beta=true", "GET /v1/messages?beta=true"),
        ("Authorization: Bearer abcdefgh", f"Authorization: Bearer {REDACTED}"),
        ("{'x-api-key': 'abcdefgh'}", f"{{'x-api-key': '{REDACTED}'}}"),
        ("(b'authorization', b'Basic dXNlcjpw')", f"(b'authorization', b'Basic {REDACTED}')"),
        ("cookie: a=b; c=d", f"cookie: {REDACTED}"),
        ('{"client_secret": "s3cr3t"}', f'{{"client_secret": "{REDACTED}"}}'),
        ("REEF_TOKEN=abc max_tokens=5", f"REEF_TOKEN={REDACTED} max_tokens=5"),
        ("send `Authorization: Bearer <token>`", "send `Authorization: Bearer <token>`"),
        ("key ghp_" + "a" * 36, f"key {REDACTED}"),
        ("module reef_cli.server.api", "module reef_cli.server.api"),
    ],
)
def test_redact(line: str, expected: str) -> None:
    assert redact(line) == expected
    assert redact(expected) == expected  # idempotent: filters may stack


def test_filter_keeps_uvicorn_access_arguments() -> None:
    """uvicorn's access formatter unpacks the record's five arguments: keep their shape."""
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:1", "GET", "/x?token=abc", "1.1", 401),
        None,
    )
    assert log_redaction.RedactingFilter().filter(record)
    assert record.args == ("127.0.0.1:1", "GET", f"/x?token={REDACTED}", "1.1", 401)
    assert record.getMessage() == f'127.0.0.1:1 - "GET /x?token={REDACTED} HTTP/1.1" 401'
