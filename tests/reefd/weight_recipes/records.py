"""Records and reports for the recipe tests, written through the real store."""

from __future__ import annotations

from typing import Any

from reef_cli.core.records import Record
from reef_cli.core.reports import ReportIn, save_report
from reef_cli.core.store.sqlite import SQLiteStore
from tests.fakes.records import chat_answer, chat_record

SCENARIO = "weights"


def chat(messages: list[dict[str, Any]], *, stream: bool = False) -> dict[str, Any]:
    return {"model": "tiny", "messages": messages, "stream": stream}


def answer(text: str, finish: str = "stop") -> dict[str, Any]:
    return chat_answer(text, finish)


def put(
    store: SQLiteStore,
    *,
    messages: list[dict[str, Any]] | None = None,
    reply: str = "a reply",
    version: str | None = "base",
    at: str = "2026-01-01T00:00:00.000000Z",
    session: str | None = None,
    stream: bool = True,
    note: str | None = None,
    status: int = 200,
    state: str = "complete",
    token_ids: dict[str, Any] | None = None,
    logprobs: list[float] | None = None,
    scenario: str = SCENARIO,
) -> Record:
    record = chat_record(
        scenario,
        chat(messages or [{"role": "user", "content": "hi"}], stream=stream),
        None if state == "streaming" else answer(reply),
        session_id=session,
        stream=stream,
        status=None if state == "streaming" else status,
        created_at=at,
        state=state,
        weight_version=version,
        weight_note=note,
        token_ids=token_ids,
        logprobs=logprobs,
    )
    store.insert(record)
    return record


def score(
    store: SQLiteStore, value: float | None, *records: Record, feedback: str | None = None
) -> None:
    report = ReportIn(score=value, feedback=feedback, references=[r.id for r in records])
    save_report(store, report, SCENARIO)


def at(second: int) -> str:
    return f"2026-01-01T00:00:{second:02d}.000000Z"
