"""The recording relay: /v1/chat/completions, /v1/messages, /v1/responses, count_tokens
and /v1/models.

Same dialect as the upstream: the body goes through untouched and the stream is relayed
event by event as it arrives. Other dialect: translated both ways (translate_*.py;
Responses requests go through chat, and so on to Anthropic or the embedded model, with
``previous_response_id`` resolved by conversations.py). Every
exchange that reaches the upstream gets a receipt (header + a final stream event) and a
record. Upstream failures become clean errors in the caller's dialect: connection -> 502,
timeout -> 504; provider errors keep their status.

Durability: nothing a receipt reaches the client in is sent before the recorder has
journaled it (recorder.py, journal.py): a whole answer just before it is returned; a
stream's start before its headers, each chunk before it is yielded, its end before the
last bytes. The record is credited to the client's ``x-reef-release-id`` (the release it
has installed) when that names a release of the scenario, else to the served release.
While the records store lags so far that the recorder's backlog is full, a new inference
request is refused (503, Retry-After) before its body is read: back-pressure, no receipt.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from reef_cli.core import scenarios, tracing
from reef_cli.core.compact_json import unicode_compact
from reef_cli.core.errors import InvalidName, ReefError, ScenarioNotFound
from reef_cli.core.names import is_kebab
from reef_cli.core.records import new_receipt
from reef_cli.core.weight_version import WeightVersion
from reef_cli.server import (
    conversations,
    memory,
    receipts,
    sse,
    translate_request,
    translate_response,
    translate_responses,
)
from reef_cli.server.auth import Authenticator
from reef_cli.server.recorder import RETRY_AFTER_S, Exchange, Recorder
from reef_cli.server.release_cache import ReleaseCache, Releases
from reef_cli.server.responses_stream import Chained, ChatToResponses
from reef_cli.server.serve_config import ServeConfig
from reef_cli.server.tags import TagInvalid, tags_of
from reef_cli.server.translate_stream import AnthropicToOpenAI, OpenAIToAnthropic
from reef_cli.server.upstream import Upstream

if TYPE_CHECKING:
    from reef_cli.server.metrics import Metrics

log = logging.getLogger("reef.serve")
JSON = "application/json"
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
# where a relayed stream's receipt goes: before this line (Responses: after the last event)
MARKERS = {"openai": b"data: [DONE]", "anthropic": b"event: message_stop"}
Translator = OpenAIToAnthropic | AnthropicToOpenAI | ChatToResponses | Chained


class AnswerTooLarge(ReefError):
    """The upstream's answer outgrew ``max_answer_bytes``: one answer may not take the
    server's memory (the caller gets a 502; the record keeps the error)."""

    http_status = 502

    def __init__(self, cap: int) -> None:
        super().__init__(
            f"the upstream's answer is larger than the {cap}-byte limit (max_answer_bytes)",
            "raise max_answer_bytes in serve.yaml (or --max-answer-mb), or ask for less",
        )


class BodyError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_response(
    dialect: str, status: int, message: str, headers: dict[str, str] | None = None
) -> Response:
    body = json.dumps(translate_response.error_body(dialect, status, message)).encode()
    return Response(body, status, headers=headers, media_type=JSON)


def error_event(dialect: str, status: int, message: str) -> bytes:
    if dialect == "anthropic":
        return sse.encode(translate_response.error_body(dialect, status, message), event="error")
    if dialect == "responses":
        data = {"type": "error", "code": str(status), "message": message, "param": None}
        return sse.encode(data, event="error")
    return sse.encode(translate_response.error_body(dialect, status, message))


def previous_not_found(response_id: str) -> Response:
    body = translate_response.error_body(
        "responses",
        404,
        f"Previous response with id {response_id!r} not found: it is unknown to this "
        "scenario, or was sent with `store: false`",
        param="previous_response_id",
        code="previous_response_not_found",
    )
    return Response(json.dumps(body).encode(), 404, media_type=JSON)


class RecordedStream(StreamingResponse):
    """A streaming response that always finishes its exchange, however the stream ends."""

    def __init__(
        self,
        gen: AsyncIterator[bytes],
        exchange: Exchange,
        finish: Callable[[Exchange], None],
        headers: dict[str, str],
    ) -> None:
        super().__init__(gen, media_type="text/event-stream", headers=headers)
        self._gen = gen
        self._exchange = exchange
        self._finish = finish

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except (ClientDisconnect, OSError):
            pass
        finally:
            ex = self._exchange
            try:
                await self._gen.aclose()  # type: ignore[attr-defined]
            except BaseException:
                pass
            finally:
                if ex.status is None:
                    ex.status = 499
                    ex.error = "client disconnected mid-stream"
                self._finish(ex)


class Proxy:
    def __init__(
        self,
        config: ServeConfig,
        upstream: Upstream,
        auth: Authenticator,
        recorder: Recorder | None,
        releases: ReleaseCache,
        weights: WeightVersion | None = None,
    ) -> None:
        self.config = config
        self.weights = weights
        self.upstream = upstream
        self.auth = auth
        self.recorder = recorder
        self.releases = releases
        self.conversations = conversations.Conversations(
            recorder.store if recorder is not None else None
        )
        self.trimmer = memory.Trimmer()  # app.py runs it; the answers feed it
        self.metrics: Metrics | None = None  # app.py sets it unless `metrics: false`
        self.tracer = tracing.tracer()  # None unless OTEL_EXPORTER_OTLP_* names an endpoint
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(
            limit=self.config.pool_size, keepalive_timeout=60, ttl_dns_cache=300
        )
        timeout = aiohttp.ClientTimeout(
            total=None, connect=self.config.connect_timeout, sock_read=self.config.read_timeout
        )
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=timeout, auto_decompress=True, trust_env=False
        )

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("proxy not started")
        return self._session

    # ------------------------------------------------------------ common steps

    async def _read_body(self, request: Request) -> bytes:
        cap = self.config.max_body_bytes
        length = request.headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise BodyError(400, "content-length is not a number")
            if int(length) > cap:
                raise BodyError(413, f"request body is larger than the {cap}-byte limit")
        parts: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.config.body_timeout):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > cap:
                        raise BodyError(413, f"request body is larger than the {cap}-byte limit")
                    parts.append(chunk)
        except TimeoutError as exc:
            raise BodyError(408, "the request body took too long to arrive") from exc
        return b"".join(parts)

    async def _read_answer(self, resp: aiohttp.ClientResponse) -> bytes:
        """A whole upstream body, refused past ``max_answer_bytes`` (AnswerTooLarge)."""
        cap = self.config.max_answer_bytes
        if resp.content_length is not None and resp.content_length > cap:
            raise AnswerTooLarge(cap)
        parts: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_any():
            size = self._count(size, chunk)
            parts.append(chunk)
        return b"".join(parts)

    def _count(self, received: int, chunk: bytes) -> int:
        """A streamed answer's bytes so far, with ``chunk``; past the cap: AnswerTooLarge."""
        received += len(chunk)
        if received > self.config.max_answer_bytes:
            raise AnswerTooLarge(self.config.max_answer_bytes)
        return received

    async def _admit(
        self, request: Request, dialect: str, recorded: bool = False
    ) -> tuple[str, bytes, dict[str, Any], bool] | Response:
        """Auth, scenario, body checks. Returns (scenario, raw body, parsed body, whether
        the caller may create the scenario) or an error. A ``recorded`` request is refused
        (503, Retry-After) before its body is read while the recorder's backlog is full."""
        headers = request.headers
        grant = self.auth.grant(headers, allow_api_key=True)
        if grant is None:
            return error_response(
                dialect,
                401,
                "missing or wrong Reef token: send `Authorization: Bearer <token>` "
                "(or x-api-key); `reef token` prints it",
            )
        scenario = headers.get("x-reef-scenario") or self.config.default_scenario
        if not is_kebab(scenario):
            return error_response(
                dialect, 400, "x-reef-scenario must be a kebab-case scenario name"
            )
        if not grant.allows(scenario):
            return error_response(
                dialect, 403, f"this token is not allowed for scenario {scenario!r}"
            )
        rec = self.recorder
        if recorded and rec is not None and rec.full:
            refused = rec.refusal()
            retry = {"retry-after": str(RETRY_AFTER_S)}
            return error_response(dialect, refused.http_status, refused.one_line(), retry)
        ctype = headers.get("content-type", "")
        if ctype and "json" not in ctype.lower():
            return error_response(
                dialect, 415, f"content-type must be application/json, not {ctype!r}"
            )
        try:
            raw = await self._read_body(request)
        except BodyError as exc:
            return error_response(dialect, exc.status, exc.message)
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return error_response(dialect, 400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return error_response(dialect, 400, "request body must be a JSON object")
        # a scenario token never creates one: a typo in its header must not add scenarios
        create = grant.scenarios is None and self.config.allow_implicit_scenario_creation
        return scenario, raw, body, create

    async def _release(self, scenario: str, dialect: str, create: bool) -> Releases | Response:
        """The scenario's releases. The one rule for a scenario `reef serve` does not know
        (docs/api.md): a request with the main token creates it, empty, while
        ``allow_implicit_scenario_creation`` is on; any other is a 404 naming the setting.
        Only this write path creates; the release cache only reads."""
        try:
            try:
                return await self.releases.releases(scenario)
            except ScenarioNotFound:
                if not create:
                    raise ScenarioNotFound(
                        f"unknown scenario {scenario!r}: reef serve creates a scenario on "
                        "first use only for the main token with "
                        "allow_implicit_scenario_creation on",
                        f"check the name, or create it with `reef scenario create {scenario}`",
                    ) from None
                await asyncio.to_thread(scenarios.get_or_create, scenario)
                log.info("created scenario %s for its first proxied request", scenario)
                return await self.releases.releases(scenario)
        except InvalidName as exc:
            return error_response(dialect, 400, exc.one_line())
        except ScenarioNotFound as exc:
            return error_response(dialect, 404, exc.one_line())
        except ReefError as exc:
            return error_response(dialect, 503, exc.one_line())

    # ------------------------------------------------------------ inference

    async def chat_completions(self, request: Request) -> Response:
        return await self._inference(request, "openai")

    async def messages(self, request: Request) -> Response:
        return await self._inference(request, "anthropic")

    async def responses(self, request: Request) -> Response:
        return await self._inference(request, "responses")

    async def embeddings(self, request: Request) -> Response:
        """OpenAI's embeddings, relayed and recorded like a chat exchange (a receipt, the
        release credited), so an agent that embeds through its base URL keeps working."""
        return await self._inference(request, "embeddings")

    async def _payload(
        self, dialect: str, raw: bytes, body: dict[str, Any], scenario: str, same: bool
    ) -> bytes | Response:
        """The upstream's request body: the client's bytes when the upstream speaks its
        dialect (``same``), else translated (Responses: via chat, its history prepended)."""
        up = self.upstream
        if same:
            # --upstream-model names the chat model: an embedding keeps the client's model
            if up.model and dialect != "embeddings" and body.get("model") != up.model:
                return _dumps({**body, "model": up.model})
            return raw
        if dialect == "anthropic":
            return _dumps(translate_request.anthropic_to_openai(body, up.model))
        chat = body
        if dialect == "responses":
            history: list[dict[str, Any]] = []
            previous = body.get("previous_response_id")
            if isinstance(previous, str) and previous:
                found = await self.conversations.history(scenario, previous)
                if found is None:
                    return previous_not_found(previous)
                history = found
            chat = translate_responses.to_chat(body, history, up.model)
            if up.dialect == "openai":
                return _dumps(chat)
        return _dumps(translate_request.openai_to_anthropic(chat, up.model))

    def _to_client(self, dialect: str, parsed: dict[str, Any], ex: Exchange) -> dict[str, Any]:
        """A whole upstream answer in the client's dialect (the upstream speaks another)."""
        body = ex.request_json
        model = body.get("model")
        if dialect == "anthropic":
            return translate_response.openai_to_anthropic(parsed, model)
        chat = (
            parsed
            if self.upstream.dialect == "openai"
            else translate_response.anthropic_to_openai(parsed, model)
        )
        if dialect == "openai":
            return chat
        answer = translate_responses.from_chat(chat, body, conversations.response_id_of(ex.id))
        self._keep(ex, answer)
        return answer

    def _keep(self, ex: Exchange, answer: dict[str, Any] | None) -> None:
        """Remember a translated Responses answer for a later ``previous_response_id``."""
        body = ex.request_json
        if answer is None or not conversations.keeps(body):
            return
        turn = conversations.Turn(ex.scenario, body, answer)
        self.conversations.remember(str(answer["id"]), turn)

    def _stream_translator(self, dialect: str, ex: Exchange) -> Translator:
        body = ex.request_json
        if dialect == "anthropic":
            return OpenAIToAnthropic(body.get("model"))
        if dialect == "openai":
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            return AnthropicToOpenAI(body.get("model"), include_usage=include)
        answer = ChatToResponses(body, conversations.response_id_of(ex.id))
        if self.upstream.dialect == "openai":
            return answer
        return Chained(AnthropicToOpenAI(body.get("model"), include_usage=True), answer)

    async def _inference(self, request: Request, dialect: str) -> Response:
        started = time.perf_counter()
        admitted = await self._admit(request, dialect, recorded=True)
        if isinstance(admitted, Response):
            return self._refused(dialect, admitted, started)
        scenario, raw, body, create = admitted
        up = self.upstream
        if dialect == "embeddings" and not up.speaks(dialect):
            message = (
                f"the upstream speaks {up.dialect}, which has no embeddings API: point the "
                "client's embeddings at an OpenAI-compatible server"
            )
            return self._refused(dialect, error_response(dialect, 400, message), started)
        try:
            tagged = tags_of(request.headers.raw)
        except TagInvalid as exc:
            return self._refused(dialect, error_response(dialect, 400, exc.message), started)
        chain = await self._release(scenario, dialect, create)
        if isinstance(chain, Response):
            return self._refused(dialect, chain, started)
        release, note = chain.credit(request.headers.get(receipts.RELEASE_HEADER))
        same = up.speaks(dialect)
        payload = await self._payload(dialect, raw, body, scenario, same)
        if isinstance(payload, Response):
            return self._refused(dialect, payload, started)
        query = request.url.query if same and dialect == "anthropic" else ""
        ex = Exchange(
            id=new_receipt(),
            scenario=scenario,
            release_id=release,
            client_dialect=dialect,
            upstream_dialect=up.dialect_for(dialect),
            request=raw,
            session_header=_session_header(request.headers),
            started=started,
            served_release_id=chain.served,
            release_note=note,
            request_json=body,
            tags=tagged,
        )
        weights = self.weights
        if weights is not None:
            ex.weight_version, epoch = weights.at_start()
            ex.weight_epoch = epoch
        out_headers = receipts.headers(ex.id, release, note)
        if self.tracer is not None:
            ex.traceparent = request.headers.get("traceparent")
            ex.upstream_started = time.perf_counter()
        try:
            resp = await self.session.post(
                up.url(up.path_for(dialect), query),
                data=payload,
                headers=up.headers(request.headers),
            )
        except TimeoutError:
            return self._fail(ex, dialect, 504, "the upstream did not answer in time", out_headers)
        except (aiohttp.ClientError, OSError) as exc:
            return self._fail(
                ex, dialect, 502, f"cannot reach the upstream: {_why(exc)}", out_headers
            )

        if resp.status < 400 and resp.content_type == "text/event-stream":
            ex.stream = True
            if self.recorder is not None:
                self.recorder.open_stream(ex)  # journaled + a `streaming` row, before headers
            gen = self._relay(resp, ex, dialect) if same else self._translate(resp, ex, dialect)
            return RecordedStream(gen, ex, self._submit, {**out_headers, **SSE_HEADERS})
        try:
            data = await self._read_answer(resp)
        except AnswerTooLarge as exc:
            resp.close()
            return self._fail(ex, dialect, exc.http_status, exc.one_line(), out_headers)
        except TimeoutError:
            resp.close()
            return self._fail(ex, dialect, 504, "the upstream stalled while answering", out_headers)
        except (aiohttp.ClientError, OSError) as exc:
            resp.close()
            return self._fail(
                ex, dialect, 502, f"the upstream dropped the answer: {_why(exc)}", out_headers
            )
        finally:
            resp.release()
        status = resp.status
        if status >= 400:
            parsed = _maybe_json(data)
            ex.error = translate_response.error_message(
                parsed if parsed is not None else data.decode("utf-8", "replace")
            )[0][:2000]
            if not same or parsed is None:
                data = json.dumps(
                    translate_response.translate_error(
                        dialect,
                        status,
                        parsed if parsed is not None else data.decode("utf-8", "replace"),
                    )
                ).encode()
        elif not same:
            parsed = _maybe_json(data)
            if not isinstance(parsed, dict):
                return self._fail(
                    ex, dialect, 502, "the upstream sent a body that is not JSON", out_headers
                )
            data = _dumps(self._to_client(dialect, parsed, ex))
        ex.status = status
        ex.body = data
        self.trimmer.note(len(data))
        self._submit(ex)
        return Response(data, status, headers=out_headers, media_type=JSON)

    def _fail(
        self, ex: Exchange, dialect: str, status: int, message: str, headers: dict[str, str]
    ) -> Response:
        ex.status = status
        ex.error = message
        ex.body = translate_response.error_body(dialect, status, message)
        self._submit(ex)
        return error_response(dialect, status, message, headers)

    def _refused(self, dialect: str, response: Response, started: float) -> Response:
        """A request answered before an exchange began: counted, never recorded."""
        if self.metrics is not None:
            self.metrics.refused(dialect, response.status_code, time.perf_counter() - started)
        return response

    def _submit(self, ex: Exchange) -> None:
        """The exchange is over (answered, failed, or its client gone): counted and handed
        to the recorder, once however many ends a stream reaches."""
        if ex.submitted:
            return
        if ex.ended is None:
            ex.ended = time.perf_counter()
        if self.weights is not None and ex.weight_epoch is not None:
            ex.weight_note = self.weights.note_since(ex.weight_epoch)
        if self.metrics is not None:
            self.metrics.exchange(ex)
        if self.tracer is not None:
            from reef_cli.server import exchange_spans

            exchange_spans.record(self.tracer, ex)
        if self.recorder is not None:
            self.recorder.submit(ex)
        else:
            ex.submitted = True

    def _chunk(self, ex: Exchange, data: bytes) -> None:
        if self.recorder is not None:
            self.recorder.chunk(ex, data)  # journaled before it is sent
        else:
            ex.chunks.append(data)

    async def _relay(
        self, resp: aiohttp.ClientResponse, ex: Exchange, dialect: str
    ) -> AsyncIterator[bytes]:
        """Same dialect: forward complete events as they arrive; receipt before the end."""
        marker = MARKERS.get(dialect)  # None: the receipt goes after the last event
        tail = receipts.receipt_event(dialect, ex.id, ex.release_id)
        split = sse.Splitter()
        received = 0
        done = False
        last = b""  # the latest events sent (Responses: where the numbering stands)
        try:
            async for chunk in resp.content.iter_any():
                if ex.first_chunk is None:
                    ex.first_chunk = time.perf_counter()
                received = self._count(received, chunk)
                out = split.feed(chunk)
                if not out:
                    continue
                last = out
                self._chunk(ex, out)
                if tail and marker is not None:
                    cut = out.find(marker)
                    if cut >= 0:
                        out = out[:cut] + tail + out[cut:]
                        tail = b""
                yield out
            rest = split.rest()
            if rest:
                self._chunk(ex, rest)
            done = True
            ex.status = resp.status
            self._submit(ex)  # queued before the client sees the end of the stream
            yield rest + _continued(dialect, rest or last, tail)
        except (aiohttp.ClientError, OSError, AnswerTooLarge) as exc:  # TimeoutError: OSError
            ex.status, ex.error = _mid_stream_failure(exc)
            self._submit(ex)
            yield _continued(dialect, last, error_event(dialect, ex.status, ex.error) + tail)
        finally:
            self.trimmer.note(received)
            if done:
                resp.release()
            else:
                resp.close()

    async def _translate(
        self, resp: aiohttp.ClientResponse, ex: Exchange, dialect: str
    ) -> AsyncIterator[bytes]:
        """Other dialect: parse upstream events, emit the caller's dialect."""
        tr = self._stream_translator(dialect, ex)
        tail = receipts.receipt_event(dialect, ex.id, ex.release_id)
        parser = sse.Parser()
        received = 0
        done = False
        try:
            async for chunk in resp.content.iter_any():
                if ex.first_chunk is None:
                    ex.first_chunk = time.perf_counter()
                received = self._count(received, chunk)
                out = b"".join(tr.feed(ev, data) for ev, data in parser.feed(chunk))
                if out:
                    self._chunk(ex, out)
                    yield out
            out = b"".join(tr.feed(ev, data) for ev, data in parser.close())
            out += tr.finish(tail)
            self._chunk(ex, out)
            done = True
            ex.status = resp.status
            if isinstance(tr, OpenAIToAnthropic | AnthropicToOpenAI):
                ex.usage = tr.client_usage()  # the client's stream may not carry it
            final = tr.final if isinstance(tr, ChatToResponses | Chained) else None
            if final is not None and final.get("status") != "failed":
                self._keep(ex, final)
            self._submit(ex)
            yield out
        except (aiohttp.ClientError, OSError, AnswerTooLarge) as exc:  # TimeoutError: OSError
            ex.status, ex.error = _mid_stream_failure(exc)
            out = tr.finish(error_event(dialect, ex.status, ex.error) + tail, complete=False)
            self._chunk(ex, out)
            self._submit(ex)
            yield out
        finally:
            self.trimmer.note(received)
            if done:
                resp.release()
            else:
                resp.close()

    # ------------------------------------------------------------ count_tokens, models

    async def count_tokens(self, request: Request) -> Response:
        admitted = await self._admit(request, "anthropic")
        if isinstance(admitted, Response):
            return admitted
        _scenario, raw, body, _create = admitted
        up = self.upstream
        if up.dialect == "anthropic":
            payload = json.dumps({**body, "model": up.model}).encode() if up.model else raw
            try:
                async with self.session.post(
                    up.url("/v1/messages/count_tokens", request.url.query),
                    data=payload,
                    headers=up.headers(request.headers),
                ) as resp:
                    data = await self._read_answer(resp)
                    return Response(data, resp.status, media_type=JSON)
            except AnswerTooLarge as exc:
                return error_response("anthropic", exc.http_status, exc.one_line())
            except TimeoutError:
                return error_response("anthropic", 504, "the upstream did not answer in time")
            except (aiohttp.ClientError, OSError) as exc:
                return error_response("anthropic", 502, f"cannot reach the upstream: {_why(exc)}")
        # An OpenAI-dialect upstream has no token counter: estimate (~4 characters a token).
        text = json.dumps([body.get("system"), body.get("messages"), body.get("tools")])
        return Response(json.dumps({"input_tokens": max(1, len(text) // 4)}), media_type=JSON)

    async def models(self, request: Request) -> Response:
        dialect = "anthropic" if "anthropic-version" in request.headers else "openai"
        grant = self.auth.grant(request.headers, allow_api_key=True)
        if grant is None:
            return error_response(dialect, 401, "missing or wrong Reef token (`reef token`)")
        up = self.upstream
        body: dict[str, Any] | None = None
        status = 200
        try:
            async with self.session.get(
                up.url("/v1/models"), headers=up.headers(request.headers)
            ) as resp:
                status = resp.status
                parsed = _maybe_json(await self._read_answer(resp))
                body = parsed if isinstance(parsed, dict) else None
        except (TimeoutError, aiohttp.ClientError, OSError, AnswerTooLarge) as exc:
            if not up.model:
                return error_response(dialect, 502, f"cannot list upstream models: {_why(exc)}")
        if body is None or status >= 400:
            if up.model:
                body = {"object": "list", "data": [{"id": up.model, "object": "model"}]}
                if up.dialect == "anthropic":
                    body = translate_response.models_to_anthropic(body)
            else:
                return error_response(dialect, 502, f"the upstream answered {status} to /v1/models")
        if up.dialect != dialect:
            body = (
                translate_response.models_to_anthropic(body)
                if dialect == "anthropic"
                else translate_response.models_to_openai(body)
            )
        return Response(json.dumps(body), media_type=JSON)


# The session a request belongs to: Reef's own header, else the agent's (Claude Code's,
# opencode's ``x-session-id``); the first one present wins.
SESSION_HEADERS = ("x-reef-session", "x-claude-code-session-id", "x-session-id")


def _session_header(headers: Any) -> str | None:
    for name in SESSION_HEADERS:
        value = headers.get(name)
        if value:
            return str(value)
    return None


def _continued(dialect: str, sent: bytes, added: bytes) -> bytes:
    """Events Reef adds after a relayed stream's own; a Responses stream's get the next
    ``sequence_number`` after the last one sent."""
    if dialect != "responses" or not added:
        return added
    last = sse.last_sequence(sent)
    return sse.numbered(added, 0 if last is None else last + 1)


def _dumps(value: Any) -> bytes:
    """A translated body: compact JSON (less to write, and a little faster to make)."""
    return unicode_compact(value).encode()


def _maybe_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


def _mid_stream_failure(exc: BaseException) -> tuple[int, str]:
    """Status and message for an upstream that failed after its stream had begun."""
    if isinstance(exc, AnswerTooLarge):
        return exc.http_status, exc.one_line()
    if isinstance(exc, TimeoutError):
        return 504, "the upstream stalled mid-stream"
    return 502, f"the upstream dropped the stream: {_why(exc)}"


def _why(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:300]
