"""Item 16 (server side): records are credited to the release the client has installed
(``x-reef-release-id``, validated), and the served release follows a publish at once —
also a publish by another process — without waiting out a cache TTL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from reef_cli.core import scenarios
from reef_cli.server.receipts import RECORD_HEADER, RELEASE_HEADER, RELEASE_NOTE_HEADER
from reef_cli.server.release_cache import Releases
from tests.server.conftest import TOKEN

ROOT = Path(__file__).resolve().parents[2]
AUTH = {"authorization": f"Bearer {TOKEN}", "x-reef-scenario": "shop"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
STREAM = {**CHAT, "stream": True}


def _post(stack, body=CHAT, **headers: str) -> httpx.Response:
    return httpx.post(
        stack.url + "/v1/chat/completions", json=body, headers={**AUTH, **headers}, timeout=10
    )


def _publish_elsewhere(home: Path, status: str = "live") -> None:
    """Publish from another process, as the CLI (`reef harness publish|promote`) does."""
    code = (
        "from reef_cli.core import scenarios\n"
        "c = scenarios.get('shop').chain()\n"
        "n = len(c.releases())\n"
        f"c.publish({{'rules/a.md': f'rule {{n}}\\n'}}, status={status!r})\n"
    )
    env = {**os.environ, "REEF_HOME": str(home), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)


def test_credit_rules() -> None:
    chain = Releases(served=2, latest=3)
    assert chain.credit(None) == (2, None)
    assert chain.credit("") == (2, None)
    assert chain.credit("3") == (3, None)
    assert chain.credit(" 1 ") == (1, None)
    for bad in ("0", "4", "r3", "-1", "1.0", "abc", "٣"):
        number, note = chain.credit(bad)
        assert number == 2 and note and "ignored" in note and note.isascii(), (bad, note)
    number, note = Releases(None, None).credit("1")
    assert number is None and note and "no releases yet" in note


def test_records_carry_the_installed_release(make_stack) -> None:
    stack = make_stack("openai")
    _post(stack)  # creates the scenario
    chain = scenarios.get("shop").chain()
    chain.publish({"rules/a.md": "one\n"})
    chain.publish({"rules/a.md": "two\n"})

    ok = _post(stack, **{RELEASE_HEADER: "1"})  # the person pinned r1
    assert ok.headers[RELEASE_HEADER] == "1" and RELEASE_NOTE_HEADER not in ok.headers
    streamed = _post(stack, STREAM, **{RELEASE_HEADER: "1"})
    assert streamed.headers[RELEASE_HEADER] == "1"
    assert '"release_id":1' in streamed.text  # the receipt event says the same
    bad = _post(stack, **{RELEASE_HEADER: "9"})
    assert bad.headers[RELEASE_HEADER] == "2"  # the served one
    assert "ignored" in bad.headers[RELEASE_NOTE_HEADER]
    junk = _post(stack, **{RELEASE_HEADER: "latest"})
    assert junk.headers[RELEASE_HEADER] == "2" and RELEASE_NOTE_HEADER in junk.headers
    plain = _post(stack)
    assert plain.headers[RELEASE_HEADER] == "2"

    stack.flush()
    store = stack.store()
    a = store.get(ok.headers[RECORD_HEADER])
    assert (a.release_id, a.served_release_id, a.release_note) == (1, 2, None)
    s = store.get(streamed.headers[RECORD_HEADER])
    assert (s.release_id, s.served_release_id, s.state) == (1, 2, "complete")
    b = store.get(bad.headers[RECORD_HEADER])
    assert (b.release_id, b.served_release_id) == (2, 2)
    assert b.release_note and "r1..r2" in b.release_note
    c = store.get(plain.headers[RECORD_HEADER])
    assert (c.release_id, c.served_release_id, c.release_note) == (2, 2, None)


def test_a_publish_by_another_process_is_served_at_once(make_stack) -> None:
    # the default cache setting (not 0): the chain ref, not a TTL, decides
    stack = make_stack("openai")
    assert _post(stack).headers[RELEASE_HEADER] == ""
    _publish_elsewhere(stack.home)
    assert _post(stack).headers[RELEASE_HEADER] == "1"  # the very next request
    _publish_elsewhere(stack.home, status="pending")  # r2 waits for promote
    r = _post(stack, **{RELEASE_HEADER: "2"})  # but it exists: a client may have it
    assert r.headers[RELEASE_HEADER] == "2" and RELEASE_NOTE_HEADER not in r.headers
    assert _post(stack).headers[RELEASE_HEADER] == "1"
    _publish_elsewhere(stack.home)  # a promote publishes a new live release: r3
    assert _post(stack).headers[RELEASE_HEADER] == "3"
    # git may pack the chain ref into packed-refs: still seen
    git_dir = scenarios.get("shop").chain_dir
    subprocess.run(["git", "--git-dir", str(git_dir), "pack-refs", "--all"], check=True)
    _publish_elsewhere(stack.home)
    assert _post(stack).headers[RELEASE_HEADER] == "4"
