"""`reef serve` on the embedded model stops cleanly: after answering, a SIGTERM leaves no
traceback in its log. llama-cpp-python's teardown, left to ``Llama.__del__`` at
interpreter shutdown, ran after its own module globals were gone and printed a TypeError
traceback into every embedded `reef serve`'s log (and every `reef bench learn` state dir's);
the engine now frees the model at exit (``embedded_engine._close``)."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from reef_cli.core import embedded
from tests.e2e.replicas_rig import Replica

TOKEN = "reef_exit_token_0123456789abcdef"


@pytest.mark.skipif(
    embedded.gguf_path() is None,
    reason="the embedded model is not installed (./install.sh installs it)",
)
@pytest.mark.parametrize("slots", [1, 3])
def test_an_embedded_reef_serve_exits_without_a_traceback(tmp_path: Path, slots: int) -> None:
    """With one slot and with batching (``embedded_slots``: three requests, two streamed,
    decoded together, each answered whole)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REEF_")}
    env.update(REEF_HOME=str(tmp_path / "home"), REEF_TOKEN=TOKEN)
    env["REEF_EMBEDDED_MODEL"] = "smollm2-135m"
    env["REEF_EMBEDDED_SLOTS"] = str(slots)
    replica = Replica._spawn(tmp_path / "home", env, ["--upstream", "embedded"])
    try:
        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(lambda i: _ask(replica.url, i), range(3)))
        for status, text in answers:
            assert status == 200, text
            assert text.strip()
    finally:
        code = replica.stop()
    assert code == 0, replica.log()
    assert "Traceback" not in replica.log(), replica.log()


def _ask(url: str, index: int) -> tuple[int, str]:
    """A question to the served model; odd ones streamed. (status, the answer's text)."""
    stream = index % 2 == 1
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": f"Say hello to person {index}."}],
        "max_tokens": 12,
        "stream": stream,
    }
    headers = {"authorization": f"Bearer {TOKEN}"}
    if not stream:
        answer = httpx.post(url + "/v1/chat/completions", headers=headers, json=body, timeout=120)
        if answer.status_code != 200:
            return answer.status_code, answer.text
        return 200, answer.json()["choices"][0]["message"]["content"]
    parts = []
    with httpx.stream(
        "POST", url + "/v1/chat/completions", headers=headers, json=body, timeout=120
    ) as answer:
        for line in answer.iter_lines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:]).get("choices", []):
                    parts.append(choice.get("delta", {}).get("content") or "")
        return answer.status_code, "".join(parts)
