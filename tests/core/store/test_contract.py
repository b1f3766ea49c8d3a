"""The store contract: what every backend must do, run on SQLite and on PostgreSQL.

Records (whole rows, no moving back, paging, sessions), harvested sessions, reports,
the live loop's queries, jobs, marks, locks and retention behave the same on both."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest

from reef_cli.core import jobs, reports
from reef_cli.core.records import HarvestedSession, RawJSON, Record, RecordNotFound, new_receipt
from reef_cli.core.store import ReportRow, Store
from reef_cli.core.store.sql import PAGE


def rec(n: int = 0, **kw) -> Record:
    base = {
        "id": new_receipt(),
        "scenario": "s",
        "client_dialect": "openai",
        "upstream_dialect": "openai",
        "created_at": f"2026-01-01T00:00:{n // 1000:02d}.{n % 1000:03d}000Z",
    }
    return Record(**(base | kw))


def report_row(refs: list[str], *, id: str | None = None, score: float | None = 1.0) -> ReportRow:
    return ReportRow(
        id=id or new_receipt().replace("rec_", "rep_"),
        scenario="s",
        score=score,
        feedback={"text": "ok"},
        references=refs,
        metadata=None,
        content_hash="h-" + ",".join(refs),
        created_at="2026-01-02T00:00:00.000000Z",
    )


# ------------------------------------------------------------------ records


def test_a_record_round_trips_whole(store: Store) -> None:
    r = rec(
        session_id="sess",
        model="m",
        stream=True,
        request={"messages": [{"role": "user", "content": "héllo ✓"}]},
        response=RawJSON('{"choices":[{"message":{"content":"hi"}}]}'),
        usage={"prompt_tokens": 3},
        input_tokens=3,
        output_tokens=1,
        latency_ms=1.5,
        status=200,
        token_ids={"prompt": [1, 2], "response": [3]},
        logprobs=[-0.5],
        weight_version="w2",
        tags={"team": "payments", "ticket": "PAY-12"},
    )
    store.insert(r)
    got = store.get(r.id)
    assert got.to_json() == {
        **r.to_json(),
        "response": {"choices": [{"message": {"content": "hi"}}]},
    }
    with pytest.raises(RecordNotFound):
        store.get(new_receipt())


def test_records_are_filtered_by_their_tags(store: Store) -> None:
    a = rec(1, tags={"team": "payments", "run-id": "r.1"})
    b = rec(2, tags={"team": "payments", "run-id": "r.2"})
    c = rec(3, tags={"team": "search"})
    d = rec(4)
    store.insert_many([a, b, c, d])
    ids = lambda **tags: [r.id for r in store.iter(tags=tags)]  # noqa: E731
    assert ids(team="payments") == [a.id, b.id]
    assert ids(team="payments", **{"run-id": "r.2"}) == [b.id]  # every tag given must match
    assert ids(team="nobody") == [] and ids(**{"a'b\"c": "x"}) == []  # quotes are data
    assert [r.id for r in store.list(tags={"team": "search"})] == [c.id]
    assert [r.id for r in store.iter()] == [a.id, b.id, c.id, d.id]
    assert store.get(d.id).tags is None


def test_rows_never_move_back_even_within_one_batch(store: Store) -> None:
    streaming = rec(state="streaming", stream=True)
    complete = Record(**{**streaming.to_json(), "state": "complete", "status": 200})
    store.insert_many([streaming, complete])  # one batch: the final row wins
    assert store.states([streaming.id]) == {streaming.id: "complete"}
    store.insert(streaming)  # a late streaming row does not replace it
    store.insert(Record(**{**complete.to_json(), "state": "interrupted", "status": 0}))
    assert store.get(streaming.id).status == 200
    other = rec(state="interrupted", error="cut")
    store.insert(other)
    store.insert(Record(**{**other.to_json(), "state": "complete", "error": None}))
    assert store.get(other.id).state == "complete"


def test_a_failed_batch_leaves_no_partial_rows(store: Store) -> None:
    good = rec()
    bad = Record(**{**rec().to_json(), "scenario": None})  # NOT NULL
    with pytest.raises(Exception):  # noqa: B017 - each driver raises its own error
        store.insert_many([good, bad])
    assert store.exists([good.id]) == {}
    store.insert(good)  # the store still works
    assert store.count() == 1


def test_paging_keeps_created_at_order_across_pages(store: Store) -> None:
    rows = [rec(i, scenario="a" if i % 3 else "b") for i in range(PAGE * 2 + 17)]
    rows.append(rec(5, scenario="a"))  # a tie on created_at: insertion order breaks it
    store.insert_many(rows)
    ordered = sorted(rows, key=lambda r: r.created_at)  # stable: ties keep insertion order
    assert [r.id for r in store.iter()] == [r.id for r in ordered]
    newest = [r.id for r in store.iter(oldest_first=False, limit=PAGE + 3)]
    assert newest == [r.id for r in reversed(ordered)][: PAGE + 3]
    only_a = [r.id for r in ordered if r.scenario == "a"]
    assert [r.id for r in store.iter(scenario="a")] == only_a
    since = ordered[100].created_at
    assert [r.id for r in store.iter(since=since)] == [
        r.id for r in ordered if r.created_at >= since
    ]
    assert store.count() == len(rows) and store.count("b") == len(rows) - len(only_a)
    assert store.latest("a").id == only_a[-1]
    assert len(store.list(limit=5)) == 5


def test_states_and_exists_take_many_ids(store: Store) -> None:
    rows = [rec(i, scenario=f"s{i % 2}") for i in range(PAGE + 50)]
    store.insert_many(rows)
    ids = [r.id for r in rows] + [new_receipt()]
    assert store.exists(ids) == {r.id: r.scenario for r in rows}
    assert set(store.states(ids).values()) == {"complete"}


def test_sessions_summarise_records(store: Store) -> None:
    store.insert_many(
        [
            rec(1, session_id="x", input_tokens=5, output_tokens=2),
            rec(2, session_id="x", input_tokens=None, output_tokens=3),
            rec(3, session_id="y"),
            rec(4),
        ]
    )
    summary = {s["session_id"]: s for s in store.sessions()}
    assert set(summary) == {"x", "y"}
    x = summary["x"]
    assert (x["records"], x["input_tokens"], x["output_tokens"]) == (2, 5, 5)
    assert isinstance(x["input_tokens"], int)
    assert store.sessions()[0]["session_id"] == "y"  # the most recent first
    assert [s["session_id"] for s in store.sessions_by_id(["x", "nope"])] == ["x"]


# ------------------------------------------------------------------ harvested sessions


def harvest(**kw) -> HarvestedSession:
    base = {"agent": "pi", "session_id": "a1", "path": "/t.jsonl", "record_session_id": "r1"}
    return HarvestedSession(**(base | kw))


def test_harvested_sessions_replace_by_agent_and_session(store: Store) -> None:
    assert store.upsert_harvested([harvest(turns=[{"role": "user", "text": "x"}])]) == 1
    store.upsert_harvested([harvest(turns=[], skills_used=["tdd"], ended_at="2026-02-01")])
    store.upsert_harvested(
        [harvest(agent="codex", session_id="c1", record_session_id="c", ended_at="2026-01-01")]
    )
    found = store.harvested()
    assert [(h.agent, h.skills_used) for h in found] == [("pi", ["tdd"]), ("codex", [])]
    assert [h.agent for h in store.harvested(session_id="r1")] == ["pi"]
    assert [h.agent for h in store.harvested(agent="codex", limit=1)] == ["codex"]


def test_harvest_writes_all_rows_or_none(store: Store) -> None:
    with pytest.raises(Exception):  # noqa: B017
        store.upsert_harvested([harvest(session_id="ok"), harvest(session_id="bad", path=None)])
    assert store.harvested() == []


# ------------------------------------------------------------------ reports


def test_reports_are_stored_once_by_id(store: Store) -> None:
    a, b = rec(1), rec(2)
    store.insert_many([a, b])
    row = report_row([a.id, b.id], id="rep-1")
    stored, created = store.put_report(row)
    assert created and stored == row
    again, created = store.put_report(report_row([a.id], id="rep-1"))
    assert not created and again == row  # the first one stays, whole
    store.put_report(report_row([b.id]))
    assert [r.id for r in store.reports(record_id=a.id)] == ["rep-1"]
    assert len(store.reports(record_id=b.id)) == 2
    assert store.report_count() == 2 and store.report_count("other") == 0


def test_save_report_checks_references_and_conflicts(store: Store) -> None:
    a = rec()
    store.insert(a)
    body = reports.parse_report({"score": 0.5, "references": [a.id], "id": "r1"})
    first = reports.save_report(store, body, None)
    assert first.created and first.scenario == "s"
    assert not reports.save_report(store, body, None).created
    changed = reports.parse_report({"score": 0.9, "references": [a.id], "id": "r1"})
    with pytest.raises(reports.ReportConflict):
        reports.save_report(store, changed, None)
    unknown = reports.parse_report({"score": 1, "references": [new_receipt()]})
    with pytest.raises(reports.ReportInvalid):
        reports.save_report(store, unknown, None)
    assert [r.score for r in reports.list_reports(store, record_id=a.id)] == [0.5]


# ------------------------------------------------------------------ the live loop's queries


def test_the_live_loop_queries(store: Store) -> None:
    assert not store.has_records("s") and store.records_at_most("s", 3) == 0
    before = store.probe("s")
    a, b, c = rec(1, session_id="x"), rec(2, session_id="x"), rec(3)
    streaming = rec(4, state="streaming")
    store.insert_many([a, b, c, streaming])
    assert store.has_records("s") and store.records_at_most("s", 2) == 3
    after_records = store.probe("s")
    assert after_records != before
    store.put_report(report_row([a.id, b.id]))  # one session
    store.put_report(report_row([c.id, streaming.id]))  # a record; the stream is not counted
    store.put_report(report_row([c.id], score=None))
    assert store.scored_sessions("s") == 2
    assert store.probe("s") != after_records
    store.upsert_harvested([harvest()])
    assert store.probe("s")[2][0] == 1


def test_session_scores_mean_each_sessions_reports_once_in_its_scenario(store: Store) -> None:
    early = rec(0, session_id="x", state="streaming")  # not finished: not the first record
    elsewhere = rec(0, scenario="t", session_id="x")  # the same session id, another scenario
    a, b, c, d = rec(1, session_id="x"), rec(2, session_id="x"), rec(3), rec(4, session_id="y")
    store.insert_many([early, elsewhere, a, b, c, d])
    store.put_report(report_row([a.id, b.id], score=1.0))  # two receipts, one session: once
    store.put_report(report_row([b.id], score=0.0))
    store.put_report(report_row([c.id], score=None))  # text only: no score
    store.put_report(report_row([c.id], score=1.0))
    store.put_report(report_row([early.id], score=0.0))  # on the stream only: not counted
    store.put_report(replace(report_row([d.id], score=0.0), scenario="t"))  # another scenario
    store.put_report(replace(report_row([elsewhere.id], score=0.0), scenario="t"))
    assert store.session_scores("s", limit=10) == [
        {"session": "session:x", "first_at": a.created_at, "score": 0.5, "reports": 2},
        {"session": f"record:{c.id}", "first_at": c.created_at, "score": 1.0, "reports": 1},
    ]
    assert [s["session"] for s in store.session_scores("s", limit=1)] == [f"record:{c.id}"]
    assert store.session_scores("t", limit=10) == [
        {"session": "session:x", "first_at": elsewhere.created_at, "score": 0.0, "reports": 1},
    ]  # y's report names scenario t, but its record is in s: neither shows it


def test_release_scores_count_records_and_each_report_once_per_release(store: Store) -> None:
    a, b = rec(1, release_id=1), rec(2, release_id=1)
    c, d = rec(3, release_id=2), rec(4, release_id=None)
    streaming = rec(5, release_id=2, state="streaming")  # not finished: not counted
    other = rec(6, scenario="t", release_id=1)
    store.insert_many([a, b, c, d, streaming, other])
    store.put_report(report_row([a.id, b.id], score=1.0))  # two records of r1: once
    store.put_report(report_row([a.id], score=0.0))
    store.put_report(report_row([c.id], score=None))  # no score: not a scored report
    store.put_report(report_row([streaming.id], score=0.0))
    store.put_report(replace(report_row([other.id], score=0.0), scenario="t"))
    assert store.release_scores("s") == [
        {"release": 1, "records": 2, "reports": 2, "score": 0.5},
        {"release": 2, "records": 1, "reports": 0, "score": None},
        {"release": None, "records": 1, "reports": 0, "score": None},
    ]
    assert store.release_scores("t") == [{"release": 1, "records": 1, "reports": 1, "score": 0.0}]
    assert store.release_scores("empty") == []


# ------------------------------------------------------------------ jobs, marks, locks


def test_jobs_are_kept_by_the_store(store: Store) -> None:
    store.save_job({"id": "job_1", "scenario": "s", "state": "queued", "created_at": "1"})
    store.save_job({"id": "job_2", "scenario": "s", "state": "published", "created_at": "2"})
    store.save_job({"id": "job_1", "scenario": "s", "state": "running", "created_at": "1"})
    assert store.load_job("job_1")["state"] == "running"
    assert store.load_job("job_9") is None
    assert [j["id"] for j in store.jobs()] == ["job_1", "job_2"]
    assert [j["id"] for j in store.jobs(active_only=True)] == ["job_1"]


def test_the_jobs_module_uses_the_configured_store(store: Store, monkeypatch) -> None:
    if store.kind == "postgresql":
        monkeypatch.setenv("REEF_DATABASE_URL", store.url)
    job = jobs.create("s", "reefine", "an ask")
    assert jobs.get(job.id).owner == jobs.replica_id()
    assert [j.id for j in jobs.active("s")] == [job.id]
    assert [j.id for j in jobs.interrupted()] == [job.id]
    job.owner = "another-host:/state"  # another replica's running job is not ours to fail
    jobs.save(job)
    assert jobs.interrupted() == [] and [j.id for j in jobs.active()] == [job.id]


def test_marks_are_kept_by_the_store(store: Store) -> None:
    assert store.load_mark("s", "skillclaw") is None
    assert store.mark_version("s", "skillclaw") is None
    store.save_mark("s", "skillclaw", {"sessions": {"k": "f"}, "updated_at": "t"})
    first = store.mark_version("s", "skillclaw")
    store.save_mark("s", "skillclaw", {"sessions": {"k": "g"}, "updated_at": "u"})
    assert None is not first != store.mark_version("s", "skillclaw")
    assert store.load_mark("s", "skillclaw") == {"sessions": {"k": "g"}, "updated_at": "u"}
    assert store.marks() == [("s", "skillclaw", {"sessions": {"k": "g"}, "updated_at": "u"})]


def test_exclusive_holds_against_other_holders_and_dies_with_its_process(
    store: Store, request: pytest.FixtureRequest, tmp_path
) -> None:
    from tests.core.store.conftest import open_backend

    other = open_backend(request, store.kind, tmp_path)  # another connection / file handle
    try:
        with store.exclusive("live-loop:s") as held:
            assert held
            with other.exclusive("live-loop:s") as also:
                assert not also
            with other.exclusive("live-loop:t") as different:
                assert different
        with other.exclusive("live-loop:s") as now:
            assert now  # released at the end of the block
        # a holder killed mid-hold leaves nothing behind
        script = textwrap.dedent(
            f"""
            import os, sys, signal
            os.environ["REEF_HOME"] = {str(tmp_path / "reef-home")!r}
            from reef_cli.core.store import open_store
            store = open_store({_url_of(store)!r})
            with store.exclusive("live-loop:s") as held:
                print("held" if held else "busy", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            """
        )
        holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        holder.wait(timeout=30)
        with other.exclusive("live-loop:s") as after_kill:
            assert after_kill
    finally:
        other.close()


def _url_of(store: Store) -> str:
    if store.kind == "sqlite":
        return f"sqlite:///{store.path}"  # type: ignore[attr-defined]
    return store.url


# ------------------------------------------------------------------ retention


def test_sizes_count_bytes_per_scenario(store: Store) -> None:
    a = rec(1, request={"x": "é" * 10}, response={"y": 1})
    b = rec(2, scenario="t", request=None, response=None)
    store.insert_many([a, b])
    store.put_report(report_row([a.id]))
    sizes = {s.scenario: s for s in store.sizes()}
    expected = len(b'{"x":"' + "é".encode() * 10 + b'"}') + len(b'{"y":1}')
    assert (sizes["s"].records, sizes["s"].bytes, sizes["s"].referenced) == (1, expected, 1)
    assert (sizes["t"].bytes, sizes["t"].oldest) == (0, b.created_at)


def test_eviction_takes_the_oldest_and_never_what_is_referenced(store: Store) -> None:
    rows = [rec(i, request={"pad": "x" * 100}) for i in range(10)]
    rows.append(rec(10, state="streaming", request={"pad": "x" * 100}))
    store.insert_many(rows)
    store.put_report(report_row([rows[0].id]))  # referenced by a report
    protected = {rows[1].id}  # cited by a release
    gone = store.evict(before=rows[4].created_at, protected=protected)
    assert gone.records == 2  # rows 2 and 3
    left = {r.id for r in store.iter()}
    assert {rows[0].id, rows[1].id} <= left and not {rows[2].id, rows[3].id} & left
    per_row = store.sizes()[0].bytes // store.count()
    gone = store.evict(max_bytes=per_row * 5, protected=protected)
    left = [r.id for r in store.iter()]
    assert store.sizes()[0].bytes <= per_row * 5
    assert rows[0].id in left and rows[1].id in left and rows[10].id in left
    assert left[-1] == rows[10].id and gone.records == 4 and gone.bytes == per_row * 4
    assert left == [rows[i].id for i in (0, 1, 8, 9, 10)]  # rows 4..7 went, oldest first
    # nothing left to take: the budget cannot be met, and nothing protected goes
    assert store.evict(max_bytes=0, protected=protected).records == 2
    assert sorted(store.iter(), key=lambda r: r.created_at)[0].id == rows[0].id
