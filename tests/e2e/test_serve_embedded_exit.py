"""`reef serve` on the embedded model stops cleanly: after answering, a SIGTERM leaves no
traceback in its log. llama-cpp-python's teardown, left to ``Llama.__del__`` at
interpreter shutdown, ran after its own module globals were gone and printed a TypeError
traceback into every embedded `reef serve`'s log (and every `reef bench learn` state dir's);
the engine now frees the model at exit (``embedded_engine._close``)."""

from __future__ import annotations

import os
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
def test_an_embedded_reef_serve_exits_without_a_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REEF_")}
    env.update(REEF_HOME=str(tmp_path / "home"), REEF_TOKEN=TOKEN)
    env["REEF_EMBEDDED_MODEL"] = "smollm2-135m"
    replica = Replica._spawn(tmp_path / "home", env, ["--upstream", "embedded"])
    try:
        answer = httpx.post(
            replica.url + "/v1/chat/completions",
            headers={"authorization": f"Bearer {TOKEN}"},
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
            timeout=120,
        )
        assert answer.status_code == 200, answer.text
    finally:
        code = replica.stop()
    assert code == 0, replica.log()
    assert "Traceback" not in replica.log(), replica.log()
