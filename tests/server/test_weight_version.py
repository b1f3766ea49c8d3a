"""reefd's weight version on records: stamped at request start, a note when a request
spans a swap or the engine is inconsistent; none of it without reefd."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.tokens import TokenSet
from reef_cli.core.weight_version import INCONSISTENT, SPANNED_SWAP, WeightVersion
from reef_cli.server.app import create_app
from reef_cli.server.serve_config import ServeConfig
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream, Turn
from tests.server.conftest import TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def served(home: Path) -> Iterator[tuple[FakeUpstream, WeightVersion, str, object]]:
    fake = FakeUpstream()
    weights = WeightVersion("base")
    with ServerThread(fake.app) as up:
        config = ServeConfig(upstream=up.url + "/v1", upstream_dialect="openai")
        app = create_app(config, tokens=TokenSet(TOKEN, []), weights=weights)
        with ServerThread(app) as reef:
            yield fake, weights, reef.url, app


def _record(app: object, receipt: str) -> object:
    assert app.state.recorder.flush(10)  # type: ignore[attr-defined]
    return SQLiteStore(app.state.store.path).get(receipt)  # type: ignore[attr-defined]


def test_records_carry_the_version_served_at_request_start(served) -> None:
    fake, weights, url, app = served
    fake.push(Turn(text="one"))
    first = httpx.post(url + "/v1/chat/completions", json=BODY, headers=AUTH)
    weights.begin_swap()
    weights.end_swap("w1")
    fake.push(Turn(text="two"))
    second = httpx.post(url + "/v1/chat/completions", json=BODY, headers=AUTH)
    a = _record(app, first.headers["x-reef-agent-record-id"])
    b = _record(app, second.headers["x-reef-agent-record-id"])
    assert (a.weight_version, a.weight_note) == ("base", None)
    assert (b.weight_version, b.weight_note) == ("w1", None)


def test_a_stream_that_spans_a_swap_is_noted_and_keeps_its_start_version(served) -> None:
    fake, weights, url, app = served
    fake.push(Turn(text="a slow streamed answer", stall_mid=0.6))

    def swap_midway() -> None:
        time.sleep(0.2)
        weights.begin_swap()
        weights.end_swap("w2")

    swapper = threading.Thread(target=swap_midway)
    swapper.start()
    with httpx.stream(
        "POST", url + "/v1/chat/completions", json={**BODY, "stream": True}, headers=AUTH
    ) as resp:
        receipt = resp.headers["x-reef-agent-record-id"]
        b"".join(resp.iter_bytes())
    swapper.join()
    record = _record(app, receipt)
    assert record.weight_version == "base"
    assert record.weight_note == SPANNED_SWAP


def test_an_inconsistent_engine_notes_every_record_until_reloaded(served) -> None:
    fake, weights, url, app = served
    weights.begin_swap()
    weights.end_swap(None, ok=False)
    fake.push(Turn(text="x"))
    bad = httpx.post(url + "/v1/chat/completions", json=BODY, headers=AUTH)
    weights.begin_swap()
    weights.end_swap("w1")  # the reload from disk
    fake.push(Turn(text="y"))
    good = httpx.post(url + "/v1/chat/completions", json=BODY, headers=AUTH)
    assert _record(app, bad.headers["x-reef-agent-record-id"]).weight_note == INCONSISTENT
    assert _record(app, good.headers["x-reef-agent-record-id"]).weight_note is None


def test_without_reefd_records_have_no_weight_version(make_stack) -> None:
    stack = make_stack()
    stack.fake.push(Turn(text="plain"))
    resp = httpx.post(stack.url + "/v1/chat/completions", json=BODY, headers=AUTH)
    stack.flush()
    record = stack.store().get(resp.headers["x-reef-agent-record-id"])
    assert record.weight_version is None and record.weight_note is None
    assert record.token_ids is None and record.logprobs is None


def test_engine_token_ids_and_logprobs_are_kept_from_a_plain_answer() -> None:
    from reef_cli.server.assemble import tokens_of

    answer = {
        "prompt_token_ids": [1, 2, 3],
        "choices": [
            {
                "message": {"role": "assistant", "content": "ab"},
                "token_ids": [7, 8],
                "logprobs": {
                    "content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -1}]
                },
            }
        ],
    }
    assert tokens_of(answer) == ({"prompt": [1, 2, 3], "response": [7, 8]}, [-0.5, -1.0])
    assert tokens_of({"choices": [{"message": {}}]}) == (None, None)
    assert tokens_of("not json") == (None, None)
