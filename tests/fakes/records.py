"""One builder for the OpenAI-dialect chat records tests write into the real store: a
request holding ``messages`` and a ``chat.completion``-shaped answer, plus whatever fields
the test needs (session, release, state, weight version …)."""

from __future__ import annotations

from typing import Any

from reef_cli.core.records import Record, new_receipt


def chat_answer(text: str, finish: str | None = None) -> dict[str, Any]:
    """A chat answer holding ``text``; with ``finish``, the full ``chat.completion`` shape."""
    if finish is None:
        return {"choices": [{"message": {"role": "assistant", "content": text}}]}
    return {
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
        ],
    }


def chat_record(
    scenario: str,
    request: dict[str, Any],
    response: dict[str, Any] | None,
    **fields: Any,
) -> Record:
    """A record of one chat exchange with a fresh receipt (``fields``: any ``Record``
    field, e.g. ``session_id``, ``release_id``, ``state``, ``created_at``)."""
    return Record(
        id=new_receipt(),
        scenario=scenario,
        client_dialect="openai",
        upstream_dialect="openai",
        request=request,
        response=response,
        **fields,
    )


def scored_exchange(
    store: Any,
    scenario: str,
    sid: str,
    ask: str,
    answer: str,
    *,
    score: float | None = None,
    feedback: str | None = None,
) -> Record:
    """One asked-and-answered exchange of session ``sid`` under release 1, stored, and the
    person's report on it when there is a score or feedback: what a session leaves."""
    from reef_cli.core.reports import ReportIn, save_report

    rec = chat_record(
        scenario,
        {"messages": [{"role": "user", "content": ask}]},
        chat_answer(answer),
        session_id=sid,
        release_id=1,
    )
    store.insert_many([rec])
    if score is not None or feedback is not None:
        save_report(store, ReportIn(score=score, feedback=feedback, references=[rec.id]), None)
    return rec
