"""``x-reef-tag-<name>`` headers (issue 27, item 4): kept with the record, through the
journal too, filterable in the store and `reef records`; a bad tag is a 400 naming it,
and nothing is recorded."""

from __future__ import annotations

import json

import httpx

from reef_cli.server import journal
from reef_cli.server.receipts import RECORD_HEADER
from reef_cli.server.recorder import Exchange, _meta, from_journal, to_record
from tests.cli.helpers import reef, reef_fails
from tests.server.conftest import TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _post(stack, **headers: str | bytes) -> httpx.Response:
    return httpx.post(stack.url + "/v1/chat/completions", json=CHAT, headers={**AUTH, **headers})


def test_tags_are_kept_and_filter_records(make_stack):
    stack = make_stack("openai")
    a = _post(stack, **{"x-reef-tag-team": "payments", "X-Reef-Tag-Ticket": "PAY-12"})
    b = _post(stack, **{"x-reef-tag-team": "search"})
    c = _post(stack)
    for r in (a, b, c):
        assert r.status_code == 200, r.text
    stream = httpx.post(
        stack.url + "/v1/chat/completions",
        json={**CHAT, "stream": True},
        headers={**AUTH, "x-reef-tag-team": "payments"},
    )
    assert stream.status_code == 200
    stack.flush()
    store = stack.store()
    got = store.get(a.headers[RECORD_HEADER])
    assert got.tags == {"team": "payments", "ticket": "PAY-12"}  # header names are lower case
    assert store.get(c.headers[RECORD_HEADER]).tags is None
    payments = {r.id for r in store.iter(tags={"team": "payments"})}
    assert payments == {a.headers[RECORD_HEADER], stream.headers[RECORD_HEADER]}
    listed = json.loads(reef("records", "list", "--tag", "team=search", "--json"))
    assert [r["id"] for r in listed] == [b.headers[RECORD_HEADER]]
    assert listed[0]["tags"] == {"team": "search"}
    both = json.loads(
        reef("records", "list", "--tag", "team=payments", "--tag", "ticket=PAY-12", "--json")
    )
    assert [r["id"] for r in both] == [a.headers[RECORD_HEADER]]


def test_a_bad_tag_is_refused_and_nothing_is_recorded(make_stack):
    stack = make_stack("openai")
    bad = [
        {"x-reef-tag-Bad Name": "x"},
        {"x-reef-tag-": "x"},
        {"x-reef-tag-team": "x" * 257},
        {"x-reef-tag-team": "café".encode()},  # not ASCII
        {"x-reef-tag-team": b"a\tb"},  # a control character
        {f"x-reef-tag-t{i}": "x" for i in range(17)},
    ]
    for headers in bad:
        try:
            r = _post(stack, **headers)
        except httpx.LocalProtocolError:  # a name the client itself will not send
            continue
        assert r.status_code == 400, (headers, r.text)
        assert "tag" in r.json()["error"]["message"]
        assert RECORD_HEADER not in r.headers
    stack.flush()
    assert stack.store().count() == 0


def test_tags_survive_the_journal():
    ex = Exchange(
        id="rec_" + "0" * 24,
        scenario="s",
        release_id=1,
        client_dialect="openai",
        upstream_dialect="openai",
        request=b"{}",
        tags={"team": "payments"},
    )
    meta = {**_meta(ex, "X"), "status": 200}
    replayed = from_journal(
        journal.Replayed(meta=meta, request=b"{}", body=b"{}", chunks=[], end=None)
    )
    assert replayed.tags == {"team": "payments"}
    assert to_record(replayed).tags == {"team": "payments"}


def test_a_bad_filter_is_one_line():
    line = reef_fails("records", "list", "--tag", "team", code=2)
    assert "NAME=VALUE" in line
